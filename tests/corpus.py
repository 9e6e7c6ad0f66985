"""Where the shared real-PGN corpus lives (../shared/pgn-corpus beside the checkout), and its
standard-chess games as move lists. Tests that need it skip with the reason where absent."""

from __future__ import annotations

import functools
from pathlib import Path

import chess.pgn

from tests.conftest import missing

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "pgn-corpus"


def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        missing(f"the shared PGN corpus is not at {CORPUS} (it lies beside the checkout)")
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
