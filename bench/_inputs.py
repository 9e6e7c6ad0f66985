"""The real games the benchmarks read: the embedded sample, in every checkout (3,515 games in the
Lichess dump format, some broken on purpose), after the shared corpus's Lichess head (999 real
games with clocks) where the corpus lies beside the checkout (tests/corpus.py says where). Each
benchmark prints `describe()`, so a figure says what it was measured on.

    from bench._inputs import describe, game_texts, mainlines
    games = mainlines(64, max_plies=40, min_plies=10)    # standard games' moves, in file order
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import chess
import chess.pgn
import zstandard

from tests import corpus  # the one module that knows where the corpus lies

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "raw" / "lichess_sample.pgn.zst"
CORPUS = corpus.CORPUS / "kdave__pgn-toys__lichess.pgn"


def _inputs() -> list[tuple[str, Path]]:
    """(name, path) of each input present, the corpus's first."""
    inputs = [(f"{CORPUS.name} (the shared corpus)", CORPUS)] if CORPUS.is_file() else []
    return [*inputs, (f"{SAMPLE.relative_to(ROOT)} (the embedded sample)", SAMPLE)]


def _texts() -> list[str]:
    texts = []
    for _, path in _inputs():
        with open(path, "rb") as f:
            data = (
                zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
                if path.suffix == ".zst"
                else f.read()
            )
        texts.append(data.decode("utf-8", errors="replace"))
    return texts


def describe() -> str:
    return " + ".join(name for name, _ in _inputs())


def game_texts() -> list[str]:
    """Every game's text, each ending in a newline (a dump puts a blank line between games)."""
    games = [g for text in _texts() for g in re.split(r"\n\n(?=\[Event )", text) if g.strip()]
    return [g if g.endswith("\n") else g + "\n" for g in games]


def mainlines(n: int, max_plies: int | None = None, min_plies: int = 1) -> list[list[chess.Move]]:
    """The moves of the first `n` standard games that python-chess reads without an error (no
    variant, no set-up position), each cut at `max_plies`; those shorter than `min_plies` left out."""
    games: list[list[chess.Move]] = []
    logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)  # the sample's broken games, on purpose
    for text in _texts():
        handle = io.StringIO(text)
        while len(games) < n and (game := chess.pgn.read_game(handle)) is not None:
            if game.errors or "FEN" in game.headers or game.headers.get("Variant", "Standard") != "Standard":
                continue
            moves = list(game.mainline_moves())[:max_plies]
            if len(moves) >= min_plies and chess.Move.null() not in moves:
                games.append(moves)
    return games
