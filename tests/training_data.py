"""Real games for the training tests: the embedded sample's standard games as triples-v1 tokens,
a converted dataset folder (shards + manifest, written by chesscore.data.shards) made of them, and
the small in-process training run the resume and stop tests share."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from chesscore.data import shards
from chesscore.fileio import atomic_write_json
from chesscore.model import CONFIGS
from chesscore.tokens import encode_game
from chesscore.train.batching import TokenList
from chesscore.train.config import TrainConfig
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.optim import OptimConfig
from chesscore.train.trainer import train
from tests.sample import sample_games


@functools.cache
def sample_tokens() -> tuple[tuple[int, ...], ...]:
    """Every standard sample game (about 3,400) that fits a 1024-token context, as tokens."""
    games = (tuple(encode_game(moves)) for moves in sample_games())
    return tuple(g for g in games if len(g) <= 1024)


def _rows(games: list[tuple[int, ...]], first: int, metas: list[dict] | None = None) -> pa.Table:
    records = [
        {
            "tokens": list(tokens),
            "game_id": f"g{first + n:05d}",
            "source_sha256": "ab" * 32,
            "source_index": first + n,
            "source_offset": 0,
            "result": "1-0",
            "time_control_class": "blitz",
            "plies": (len(tokens) - 2) // 3,
            **(metas[n] if metas else {}),
        }
        for n, tokens in enumerate(games)
    ]
    return pa.Table.from_pylist(records, schema=shards.SCHEMA)


def write_dataset(
    root: Path, train: list, validation: list, test: list = (), metas: dict[str, list[dict]] | None = None
) -> dict:
    """A dataset folder as the convert stage writes it; returns the manifest. `metas` gives a
    split's games their own columns (ratings, result), one dict a game."""
    parts = {"train": train, "validation": validation, "test": list(test) or validation[:1]}
    entries, first = [], 0
    for split, games in parts.items():
        entries.append(shards.write_shard(_rows(games, first, (metas or {}).get(split)), root, split))
        first += len(games)
    manifest = shards.build_manifest({"source": "tests/training_data.py"}, [], entries)
    atomic_write_json(root / shards.MANIFEST, manifest)
    return manifest


# Dropout on, so the per-rank RNG state is part of what a resume must restore.
MODEL = replace(CONFIGS["tiny"], dropout=0.1)
# 60 games, 4 per microbatch, 2 microbatches per update: 8 updates per epoch (the last one a
# single microbatch), validation every 3 updates and at epoch ends, 13 updates in all.
CONFIG = TrainConfig(
    model="tiny",
    tokens="triples-v1",
    optim=OptimConfig(lr=3e-4),
    micro=4,
    accum=2,
    epochs=5,
    seed=11,
    schedule_steps=16,
    warmup_steps=2,
    max_updates=13,
    validation_every_steps=3,
    legality_eval_games=4,
    log_every_steps=2,
)
# What must come out byte for byte the same however the run was interrupted: every output (the
# run's own record, run.json and events.jsonl, holds its times and how it resumed).
ARTIFACTS = (
    "last.pt",
    "best.pt",
    "identity.json",
    "results.json",
    "metrics.json",
    "plots/train_loss.csv",
    "plots/validation.csv",
)


def small_data() -> TrainData:
    games = sample_tokens()
    return TrainData(TokenList(games[:60]), TokenList(games[60:76]), fingerprint="test-dataset")


def run(data: TrainData, output: Path, config: TrainConfig = CONFIG, **options) -> dict:
    return train(config, data, output, setup("cpu"), model_config=MODEL, **options)


def same_artifacts(a: Path, b: Path) -> None:
    for name in ARTIFACTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
