"""Suite-wide test settings and the fixtures many test files share."""

import os

import pytest
import torch

from chesscore.play.engine import StockfishMissing, find_stockfish

# Fixtures of real DVC repos and a real Prefect server, for every test file that asks for them.
pytest_plugins = ["tests.pipeline_fixtures"]


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
