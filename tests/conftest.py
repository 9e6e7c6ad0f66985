"""Suite-wide test settings, the corpus tier's switch, and the fixtures many test files share."""

import os

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


# Session fixtures of tests/pipeline_fixtures.py that cost a minute to set up (a whole pipeline
# run, a Prefect server): the tests that use them share one worker, so each is set up once.
SHARED_SESSION_FIXTURES = {"pipeline_run", "prefect_server"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The corpus tier reads files outside the checkout: deselected unless it runs. Each test
    gets an xdist group (`.ci/test` runs `--dist loadgroup`): its module, whose module-scoped
    fixtures are then set up once, or one group for the shared session fixtures."""
    if not corpus.ENABLED:
        tier = [item for item in items if item.get_closest_marker("corpus")]
        if tier:
            items[:] = [item for item in items if not item.get_closest_marker("corpus")]
            config.hook.pytest_deselected(items=tier)
    for item in items:
        shared = SHARED_SESSION_FIXTURES & set(getattr(item, "fixturenames", ()))
        item.add_marker(pytest.mark.xdist_group("session-services" if shared else item.nodeid.split("::")[0]))


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
