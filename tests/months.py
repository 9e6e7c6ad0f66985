"""Synthetic monthly dumps cut from the embedded sample, for the per-file validation tests.

    paths = write_months(folder, count=12, games=40)     # folder/m01.pgn.zst ... m12.pgn.zst

Month k holds `games` sample games under new Lichess ids (k and the game's place make the id, so
no two months share one by chance), then copies of the month before's games: an exact copy (same
id, same moves), a copy of the moves under a new id, and an old id over other moves; all must be
found as duplicates across files, the first occurrence winning. It starts with an old id over
moves the month has again later, the case where deduplicating each file alone goes wrong. The
sample's own broken games and in-file duplicates come along.
"""

from __future__ import annotations

import re
from pathlib import Path

import zstandard

from tests.sample import sample_pgn

_SITE = re.compile(rb'\[Site "https://lichess\.org/[A-Za-z0-9]{8}"\]')


def sample_texts() -> list[bytes]:
    """The sample's games, each its own bytes (tags, moves, blank line)."""
    text = sample_pgn()
    starts = [m.start() for m in re.finditer(rb"^\[Event ", text, re.M)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def with_id(game: bytes, game_id: str) -> bytes:
    return _SITE.sub(f'[Site "https://lichess.org/{game_id}"]'.encode(), game, count=1)


def month_games(texts: list[bytes], month: int, games: int) -> list[bytes]:
    """Month `month` (1-based): its own games, then copies of the month before's."""
    own = [with_id(game, f"m{month:02d}g{i:04d}") for i, game in enumerate(texts[(month - 1) * games : month * games])]
    if month == 1:
        return own
    earlier = month_games(texts, month - 1, games)[1 : games + 1] if month > 2 else month_games(texts, 1, games)
    # First an old id over moves this month has again later: that game is dropped (its id), so the
    # later one is kept (its moves match no game kept before): dedup one file alone would drop it.
    return (
        [with_id(own[5], f"m{month - 1:02d}g0006")]
        + own
        + [
            earlier[1],  # the same game again: the same id and the same moves
            with_id(earlier[2], f"m{month:02d}x0001"),  # the same moves under a new id
            with_id(own[3], f"m{month - 1:02d}g0004"),  # an id of last month over this month's moves
        ]
    )


def write_months(folder: Path, count: int = 12, games: int = 40, first: int = 1) -> list[Path]:
    """Months first..first+count-1 as folder/mNN.pgn.zst (zstd, as Lichess ships them)."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = sample_texts()
    texts = texts * (1 + (first + count - 1) * games // len(texts))  # past the sample: its games again
    paths = []
    for month in range(first, first + count):
        path = folder / f"m{month:02d}.pgn.zst"
        path.write_bytes(zstandard.ZstdCompressor(level=3).compress(b"".join(month_games(texts, month, games))))
        paths.append(path)
    return paths
