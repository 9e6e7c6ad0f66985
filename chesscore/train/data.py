"""What training reads: the train and validation splits of a verified dataset (never test),
or any two GameSources (in-memory games in tests and benchmarks).

    data = open_dataset("data/dataset")                         # hashes the shards once
    data = open_dataset("data/dataset", "receipt.json")         # trusts a verify() receipt
    data = TrainData(TokenList(games), TokenList(held_out), fingerprint="...")
    data = conditioned(data, unknown_fraction=0.1, field_unknown_fraction=0.2, seed=2026)  # triples-v2 rows
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from chesscore.conditioning import ConditionedSource, drop_fields, drop_prefixes, table_prefixes
from chesscore.data import dataset
from chesscore.fileio import sha256_file
from chesscore.train.batching import GameSource
from chesscore.train.distributed import DistEnv


@dataclass
class TrainData:
    train: GameSource
    validation: GameSource
    fingerprint: str  # the dataset manifest's: part of the identity
    receipt_sha256: str | None = None  # of the integrity receipt the tables were opened with


def open_dataset(
    dataset_dir: str | Path, receipt_path: str | Path | None = None, env: DistEnv | None = None
) -> TrainData:
    """Train and validation tables (never test). Without a receipt the shards are hashed
    once (by rank 0 under torchrun, which hands its receipt to the other ranks)."""
    if receipt_path is None:
        mine = dataset.verify(dataset_dir) if env is None or env.is_main else None
        receipt_or_path = env.gather(mine)[0] if env is not None else mine
    else:
        receipt_or_path = receipt_path
    tables = dataset.load(dataset_dir, receipt_or_path)
    for split, table in tables.items():
        if len(table) == 0:
            raise ValueError(f"{dataset_dir}: the {split} split holds no games")
    return TrainData(
        tables["train"],
        tables["validation"],
        tables["train"].fingerprint,
        sha256_file(receipt_path) if receipt_path is not None else None,
    )


def conditioned(data: TrainData, unknown_fraction: float, seed: int, field_unknown_fraction: float = 0.0) -> TrainData:
    """The same games as triples-v2 rows: each with its true prefix (from the dataset's columns, or
    a ConditionedSource's own), the train split's seeded `unknown_fraction` of games with the
    "unknown" one, and `field_unknown_fraction` of them per field with that field alone unknown.
    Validation keeps the true prefixes: it measures the conditioned use."""

    def true_prefixes(source: GameSource) -> ConditionedSource:
        if isinstance(source, ConditionedSource):
            return source
        if not hasattr(source, "column"):
            raise ValueError("triples-v2 training needs games with ratings: a dataset split or a ConditionedSource")
        return ConditionedSource(source, table_prefixes(source))

    train, validation = true_prefixes(data.train), true_prefixes(data.validation)
    dropped = drop_fields(drop_prefixes(train.prefixes, unknown_fraction, seed), field_unknown_fraction, seed)
    train = ConditionedSource(train.base, dropped)
    return replace(data, train=train, validation=validation)
