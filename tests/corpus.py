"""The optional corpus tier: real PGN files from the shared corpus beside the checkout
(../shared/pgn-corpus, or the folder $PGN_CORPUS names), and its standard games as move lists.

    make test-corpus                        # pytest --corpus -m corpus: the tier alone
    PGN_CORPUS=/data/pgn-corpus make test-corpus

Only tests marked `@pytest.mark.corpus` may read it. They are deselected (not skipped) unless
pytest runs with --corpus, and deselected there too when the folder is absent, with a line that
says so (tests/conftest.py). This is the one module that knows where the corpus lies.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import chess.pgn

CORPUS = Path(os.environ.get("PGN_CORPUS") or Path(__file__).resolve().parents[2] / "shared" / "pgn-corpus")
# Set by tests/conftest.py when the tier runs (--corpus given and the folder there).
ENABLED = False


def available() -> bool:
    return CORPUS.is_dir()


def corpus_dir() -> Path:
    """The corpus folder; an error in a test outside the tier, which must not read it."""
    if not ENABLED:
        raise RuntimeError(
            f"this test reads the shared corpus ({CORPUS}) but is not in the corpus tier: "
            "mark it @pytest.mark.corpus, or use the embedded sample / tests/fixtures (tests/sample.py)"
        )
    return CORPUS


@functools.cache
def standard_games() -> list[list[chess.Move]]:
    """Mainline moves of every corpus game that starts from the standard position."""
    games = []
    for path in sorted(corpus_dir().glob("*.pgn")):
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            while (game := chess.pgn.read_game(f)) is not None:
                variant = game.headers.get("Variant", "Standard").lower()
                if game.errors or "FEN" in game.headers or variant not in ("standard", "chess"):
                    continue
                moves = list(game.mainline_moves())
                if moves:
                    games.append(moves)
    return games
