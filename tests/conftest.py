"""Suite-wide test settings, the corpus tier's switch, how pytest-xdist shares out the tests,
and the fixtures many test files share."""

import ast
import functools
import os
import re
from pathlib import Path

import pytest
import torch

from chesscore.play.engine import StockfishMissing, find_stockfish
from tests import corpus

# Fixtures of real DVC repos and a real Prefect server, for every test file that asks for them.
pytest_plugins = ["tests.pipeline_fixtures"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--corpus",
        action="store_true",
        help="also run the corpus tier (tests marked corpus) on the real PGN files of tests/corpus.py",
    )


def pytest_configure(config: pytest.Config) -> None:
    corpus.ENABLED = config.getoption("corpus") and corpus.available()
    # One OpenMP thread in every process the tests start (stages under DVC, UCI engines,
    # self-play workers), as in the workers themselves (one_torch_thread): two xdist workers
    # already keep 2 cores busy, so a second thread per process only spins (measured in
    # bench/README.md, under bench/suite.py). A value the caller exported wins.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The corpus tier reads files outside the checkout: deselected unless it runs."""
    if corpus.ENABLED:
        return
    tier = [item for item in items if item.get_closest_marker("corpus")]
    if tier:
        items[:] = [item for item in items if not item.get_closest_marker("corpus")]
        config.hook.pytest_deselected(items=tier)


# Work done once per worker that asks for it, by name: the modules naming one share a worker (one
# xdist scope), so that it is done once in the run. The whole pipeline (tests/pipeline_fixtures.py)
# and the Prefect server (tests/flows/conftest.py) take a minute to set up; tests/tiny_models.py's
# trained model 11 CPU s.
SHARED_WORK = {
    "shared-session-fixtures": re.compile(r"\b(pipeline_run|prefect_server)\b"),
    "shared-trained-tiny": re.compile(r"\btrained_tiny\b"),
}


@functools.cache
def shared_scope(module: Path) -> str | None:
    """The scope of the first shared work `module` names, or None."""
    text = module.read_text(encoding="utf-8")
    return next((scope for scope, names in SHARED_WORK.items() if names.search(text)), None)


# What a slow test costs against a quick one, for the order in which the scopes are handed out.
SLOW_WEIGHT = 30


@functools.cache
def slow_tests(module: Path) -> frozenset[str] | None:
    """The names of a module's tests marked slow, or None when its `pytestmark` marks them all."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    slow = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            if "mark.slow" in ast.unparse(node.value):
                return None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any("mark.slow" in ast.unparse(decorator) for decorator in node.decorator_list):
                slow.add(node.name)
    return frozenset(slow)


def expected_cost(rootpath: Path, nodeid: str) -> int:
    """A test's rough cost for scheduling: SLOW_WEIGHT if it is marked slow, else 1."""
    module, _, name = nodeid.partition("::")
    slow = slow_tests(rootpath / module)
    return SLOW_WEIGHT if slow is None or name.split("::")[-1].split("[")[0] in slow else 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadscope` (.ci/test): each module's tests in one worker, so that its module
    fixtures are set up once; one scope for all the modules that name one piece of SHARED_WORK;
    and the costliest scopes handed out first, so that the run does not end with one worker on a
    long module while the other idles (xdist orders them by their number of tests, which puts a
    module of one minute-long test last). (xdist's own `loadgroup` marks are ignored under
    pytest 9.2: pytest-xdist#1386.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return shared_scope(config.rootpath / module) or module

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is whole on the first call (schedule())
                cost = {
                    scope: sum(expected_cost(config.rootpath, n) for n in unit)
                    for scope, unit in self.workqueue.items()
                }
                queue = sorted(self.workqueue.items(), key=lambda item: -cost[item[0]])
                self.workqueue.clear()
                self.workqueue.update(queue)
                self.ordered = True
            super()._assign_work_unit(node)

    return Scheduling(config, log)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if not config.getoption("corpus"):
        return
    if corpus.ENABLED:
        terminalreporter.write_line(f"corpus tier: ran on {corpus.CORPUS}")
    else:
        terminalreporter.write_line(
            f"corpus tier: no corpus at {corpus.CORPUS}, so its tests were deselected and not run "
            "(set PGN_CORPUS to the folder to run them)"
        )


def missing(reason: str) -> None:
    """Skip a test whose outside requirement is absent on a developer's machine; in CI (CI set),
    where the set-up installs everything, fail instead, so a green run cannot hide it."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI: the set-up should have provided it)")
    pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """The tests run tiny models: a second OpenMP thread on 2 shared cores only spins (and can
    make a step several times slower). The processes the tests start get OMP_NUM_THREADS=1
    (pytest_configure)."""
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def stockfish() -> str:
    """The path of Stockfish (Debian's package, installed by `make test`'s set-up)."""
    try:
        return find_stockfish()
    except StockfishMissing as error:
        missing(str(error))
