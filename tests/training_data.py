"""Real games for the training tests: the shared corpus's standard games as triples-v1 tokens,
and a converted dataset folder (shards + manifest, written by chesscore.shards) made of them."""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa

from chesscore import shards
from chesscore.fileio import atomic_write_json
from chesscore.tokens import encode_game
from corpus import standard_games


@functools.cache
def corpus_tokens() -> tuple[tuple[int, ...], ...]:
    """Every standard corpus game (about 1000) that fits a 1024-token context, as tokens."""
    games = (tuple(encode_game(moves)) for moves in standard_games())
    return tuple(g for g in games if len(g) <= 1024)


def _rows(games: list[tuple[int, ...]], first: int) -> pa.Table:
    records = [{"tokens": list(tokens), "game_id": f"g{first + n:05d}", "source_sha256": "ab" * 32,
                "source_index": first + n, "source_offset": 0, "result": "1-0",
                "time_control_class": "blitz", "plies": (len(tokens) - 2) // 3}
               for n, tokens in enumerate(games)]
    return pa.Table.from_pylist(records, schema=shards.SCHEMA)


def write_dataset(root: Path, train: list, validation: list, test: list = ()) -> dict:
    """A dataset folder as the convert stage writes it; returns the manifest."""
    parts = {"train": train, "validation": validation, "test": list(test) or validation[:1]}
    entries, first = [], 0
    for split, games in parts.items():
        entries.append(shards.write_shard(_rows(games, first), root, split))
        first += len(games)
    manifest = shards.build_manifest({"source": "tests/training_data.py"}, [], entries)
    atomic_write_json(root / shards.MANIFEST, manifest)
    return manifest
