"""Suite-wide test settings, the corpus tier's switch, how pytest-xdist shares out the tests,
and the fixtures many test files share."""

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The corpus tier reads files outside the checkout: deselected unless it runs."""
    if corpus.ENABLED:
        return
    tier = [item for item in items if item.get_closest_marker("corpus")]
    if tier:
        items[:] = [item for item in items if not item.get_closest_marker("corpus")]
        config.hook.pytest_deselected(items=tier)


# Session fixtures of tests/pipeline_fixtures.py that take a minute to set up (the whole pipeline,
# a Prefect server): a worker sets up each one it needs, so the modules using them share a worker.
SHARED_SESSION_FIXTURES = re.compile(r"\b(pipeline_run|prefect_server)\b")


@functools.cache
def uses_shared_session_fixtures(module: Path) -> bool:
    return bool(SHARED_SESSION_FIXTURES.search(module.read_text(encoding="utf-8")))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadscope` (.ci/test): each module's tests in one worker, so that its module
    fixtures are set up once; and one scope for all the modules that use the shared session
    fixtures. (xdist's own `loadgroup` marks are ignored under pytest 9.2: pytest-xdist#1386.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "shared-session-fixtures" if uses_shared_session_fixtures(config.rootpath / module) else module

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
    make a step several times slower). Stages started as subprocesses choose their own."""
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def stockfish() -> str:
    """The path of Stockfish (Debian's package, installed by `make test`'s set-up)."""
    try:
        return find_stockfish()
    except StockfishMissing as error:
        missing(str(error))
