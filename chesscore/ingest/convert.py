"""The convert stage's engine: validated games in, content-addressed shards and manifest out.

    manifest = run_convert(Path("data/validated"), Path("data/dataset"), ConvertConfig())

Each game's split is a keyed hash of its game id (so a game keeps its split when more input
arrives), rows keep their input order within a split, and every `shard_games` rows of a split
become one shard (chesscore.data.shards). A leakage check counts identical move sequences in two
splits; it must be zero (validate dedups them), else nothing is written. The output folder is
built aside and swapped in whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from chesscore import ranges
from chesscore.data.shards import MANIFEST, SCHEMA, SPLITS, build_manifest, filter_rows, move_hashes, write_shard
from chesscore.data.splits import SplitRule, assign_splits
from chesscore.failures import BadInput
from chesscore.fileio import atomic_write_json, replace_dir, staging_dir
from chesscore.ingest import validate_run
from chesscore.ingest.dedup import SeenKeys, repeated


class LeakageError(BadInput):
    """The same move sequence landed in two splits."""


class EmptySplit(BadInput):
    """A split with no game: train, validation (training's) and test (evaluate's) all need some."""


@dataclass(frozen=True)
class ConvertConfig:
    """How games become a dataset; all of it is recorded in the manifest."""

    train: float = 0.90  # fraction of the games in the train split (by a keyed hash of the game id)
    validation: float = 0.05  # fraction in the validation split
    test: float = 0.05  # fraction in the test split (only the evaluate stage reads it)
    split_key: str = "chesscore-split-v1"  # the hash key: change it to draw a new split
    shard_games: int = 100_000  # rows per shard (the last shard of a split may be smaller)

    def __post_init__(self) -> None:
        SplitRule(self.train, self.validation, self.test, self.split_key)  # raises if the fractions are wrong
        ranges.check(self, counts=("shard_games",))

    @property
    def split_rule(self) -> SplitRule:
        return SplitRule(self.train, self.validation, self.test, self.split_key)


def _check_splits(validated: Path, entries: list[dict[str, Any]], config: ConvertConfig) -> None:
    """Every split holds a game, else EmptySplit naming the split and what to do (nothing is written)."""
    games = {split: sum(e["rows"] for e in entries if e["split"] == split) for split in SPLITS}
    empty = [split for split in SPLITS if not games[split]]
    if not empty:
        return
    total = sum(games.values())
    if not total:
        raise EmptySplit(
            f"{validated}: no accepted game to convert (its report.json says why each was rejected); "
            "point validate.raw at Lichess PGN dumps or loosen validate's filters in params.yaml"
        )
    fractions = {split: getattr(config, split) for split in SPLITS}
    raise EmptySplit(
        f"{validated}: the {' and '.join(empty)} split{'s' if len(empty) > 1 else ''} would hold no game "
        f"({total:,} games accepted, split fractions {fractions}); give validate more games, or raise "
        + " and ".join(f"convert.{split}" for split in empty)
        + " in params.yaml"
    )


def _count_leaks(seen: SeenKeys, hashes: np.ndarray, splits: np.ndarray) -> int:
    """Games whose moves were already seen in another split (earlier batches or this one).
    Keys unseen and unique in the batch (all of them, after validate) are remembered at once;
    only the others are checked one by one, in order."""
    earlier = seen.lookup(hashes)
    suspect = (earlier >= 0) | repeated(hashes)
    seen.add_new(hashes[~suspect], splits[~suspect])
    local, leaks = {}, 0
    for i in np.flatnonzero(suspect).tolist():
        key, split = int(hashes[i]), int(splits[i])
        first = int(earlier[i]) if earlier[i] >= 0 else local.get(key, -1)
        if first >= 0:
            leaks += first != split
            continue
        local[key] = split
        seen.add(key, split)
    return leaks


def _validated_inputs(path: Path) -> dict[str, Any]:
    """The validate stage's inputs.json; a damaged one is BadInput naming it."""
    try:
        source = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(source.get("inputs"), list) or not isinstance(source.get("params"), dict):
            raise ValueError("no `inputs` list or `params` mapping")
    except (OSError, ValueError, AttributeError) as error:
        raise BadInput(f"{path}: not a validate stage's inputs.json ({error})") from None
    return source


def _validated_games(path: Path) -> Iterator[pa.RecordBatch]:
    """The validated games a record batch at a time (read, not memory-mapped: pages of a map stay
    resident, so RSS would grow with the input). A damaged file is BadInput naming it."""
    with pa.OSFile(str(path)) as f:
        try:
            reader = pa.ipc.open_file(f)
        except pa.ArrowInvalid as error:
            raise BadInput(f"{path}: not an Arrow IPC file ({error})") from None
        if not reader.schema.equals(SCHEMA):
            raise BadInput(f"{path}: its columns are not the game table's (chesscore.data.shards.SCHEMA)")
        for number in range(reader.num_record_batches):
            try:
                batch = reader.get_batch(number)
                batch.validate(full=True)
            except pa.ArrowInvalid as error:
                raise BadInput(f"{path}: record batch {number} is damaged ({error})") from None
            yield batch


def run_convert(
    validated: Path, out: Path, config: ConvertConfig, workers: int = 1, progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Write out/manifest.json and out/shards/*.arrow; return the manifest."""
    validated, out = Path(validated), Path(out)
    source = _validated_inputs(validated / validate_run.INPUTS)
    with staging_dir(out) as tmp:
        pending: dict[int, list[pa.RecordBatch]] = {s: [] for s in range(len(SPLITS))}
        counts = dict.fromkeys(range(len(SPLITS)), 0)
        shards: list[Future] = []
        seen, leaks = SeenKeys(), 0
        with ThreadPoolExecutor(max(1, workers)) as pool:

            def flush(split: int, final: bool) -> None:
                table = pa.Table.from_batches(pending[split]) if pending[split] else None
                while table is not None and (table.num_rows >= config.shard_games or (final and table.num_rows)):
                    rows = table.slice(0, config.shard_games)
                    shards.append(pool.submit(write_shard, rows, tmp, SPLITS[split]))
                    table = table.slice(rows.num_rows)
                pending[split] = table.to_batches() if table is not None else []
                counts[split] = table.num_rows if table is not None else 0

            for batch in _validated_games(validated / validate_run.GAMES):
                splits = assign_splits(batch["game_id"].to_pylist(), config.split_rule)
                hashes = move_hashes(batch["tokens"])
                leaks += _count_leaks(seen, hashes, splits)
                for split in range(len(SPLITS)):
                    part = filter_rows(batch, splits == split)
                    if part.num_rows:
                        pending[split].append(part)
                        counts[split] += part.num_rows
                        if counts[split] >= config.shard_games:
                            flush(split, final=False)
                if progress:
                    progress(batch.num_rows)
            for split in range(len(SPLITS)):
                flush(split, final=True)
            entries = [future.result() for future in shards]
        if leaks:
            raise LeakageError(f"{leaks} games have the same moves as a game in another split")
        _check_splits(validated, entries, config)
        inputs = [
            {key: entry[key] for key in ("path", "sha256", "bytes", "games_seen", "accepted", "rejected")}
            for entry in source["inputs"]
        ]
        params = {"validate": source["params"], "convert": asdict(config)}
        manifest = build_manifest(params, inputs, entries, leakage={"cross_split_identical_moves": leaks})
        atomic_write_json(tmp / MANIFEST, manifest)
        replace_dir(tmp, out)
    return manifest
