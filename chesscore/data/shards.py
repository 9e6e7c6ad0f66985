"""The game table and the files that hold it: Arrow schema, content-addressed shards, manifest.

One row per game: `tokens` (list<uint8>, triples-v1) plus metadata. The validate stage streams
rows with SCHEMA; the convert stage writes them into shards, one Arrow IPC file per shard named
by its own sha256, with low-cardinality strings dictionary-encoded:

    dataset/manifest.json
    dataset/shards/train-<sha256>.arrow      (also validation-..., test-...)

    entry = write_shard(table, Path("data/dataset"), "train")   # {"path": "shards/train-...", ...}
    manifest = build_manifest(params, inputs, [entry, ...])       # adds "splits" and "fingerprint"

Readers live in chesscore.dataset.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from chesscore import tokens
from chesscore.fileio import atomic_write, sha256_json

FORMAT = "chesscore-dataset/1"
MANIFEST = "manifest.json"
SHARDS = "shards"
SPLITS = ("train", "validation", "test")

# Every column of a game row. Nullable metadata is null where the PGN has no such tag.
SCHEMA = pa.schema(
    [
        pa.field("tokens", pa.list_(pa.uint8()), nullable=False),  # BOS, (src, dst, promo) per ply, EOS
        pa.field("game_id", pa.string(), nullable=False),  # Lichess id, else "moves:<16 hex of the moves' hash>"
        pa.field("source_sha256", pa.string(), nullable=False),  # sha256 of the raw input file
        pa.field("source_index", pa.int64(), nullable=False),  # 0-based game number within that file
        pa.field("source_offset", pa.int64(), nullable=False),  # byte offset of the game (decompressed)
        pa.field("event", pa.string()),
        pa.field("white", pa.string()),
        pa.field("black", pa.string()),
        pa.field("white_elo", pa.int16()),
        pa.field("black_elo", pa.int16()),
        pa.field("white_title", pa.string()),
        pa.field("black_title", pa.string()),
        pa.field("result", pa.string(), nullable=False),  # "1-0", "0-1" or "1/2-1/2"
        pa.field("termination", pa.string()),
        pa.field("time_control", pa.string()),  # as in the PGN: "180+2", "-" (correspondence)
        pa.field("base_seconds", pa.int32()),
        pa.field("increment_seconds", pa.int32()),
        pa.field("time_control_class", pa.string(), nullable=False),  # Lichess class, or "unknown"
        pa.field("rated", pa.bool_()),  # from Event ("Rated ..." / "Casual ..."); null when it says neither
        pa.field("utc_datetime", pa.timestamp("s", tz="UTC")),
        pa.field("eco", pa.string()),
        pa.field("opening", pa.string()),
        pa.field("plies", pa.int16(), nullable=False),
        pa.field("clocks", pa.list_(pa.float32())),  # seconds left after each ply; NaN where a ply has none
    ]
)

# Few distinct values per shard: stored as dictionaries (an int32 per row instead of a string).
DICTIONARY_COLUMNS = (
    "source_sha256",
    "event",
    "white_title",
    "black_title",
    "result",
    "termination",
    "time_control",
    "time_control_class",
    "eco",
    "opening",
)


def tokens_array(values: np.ndarray, offsets: np.ndarray) -> pa.ListArray:
    """A list<uint8> column from flat token values and int32 row offsets (len(rows) + 1)."""
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.uint8()))


def move_hashes(games: pa.ListArray) -> np.ndarray:
    """A 64-bit hash (xxh3) of each game's token sequence: the key validate dedups moves on and
    convert's leakage check counts; it names a game that has no Lichess id."""
    values = memoryview(games.values.to_numpy(zero_copy_only=True))
    offsets = games.offsets.to_numpy()  # into values, a slice's offset included
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter(
        (digest(values[s:e]) for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist())), np.uint64, len(games)
    )


def filter_rows(batch: pa.RecordBatch, keep: np.ndarray) -> pa.RecordBatch:
    """The rows where `keep` is true. Arrow's filter moves list columns (tokens, clocks) element
    by element; here their values are copied a run of kept rows at a time, several times faster
    when the kept rows come in runs (a few duplicates dropped, or one split of a batch)."""
    keep = np.asarray(keep, bool)
    runs = kept_runs(keep)
    mask = pa.array(keep)
    return pa.RecordBatch.from_arrays(
        [
            _filter_list(column, keep, runs) if pa.types.is_list(column.type) else column.filter(mask)
            for column in batch.columns
        ],
        schema=batch.schema,
    )


def kept_runs(keep: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of each run of true values in `keep`."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], np.asarray(keep, bool).view(np.int8), [0]])))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist()))


def _filter_list(column: pa.ListArray, keep: np.ndarray, runs: list[tuple[int, int]]) -> pa.ListArray:
    offsets = column.offsets.to_numpy()  # into column.values, the slice offset included
    values = column.values.to_numpy(zero_copy_only=False)
    new_offsets = np.zeros(int(keep.sum()) + 1, np.int32)
    np.cumsum(np.diff(offsets)[keep], out=new_offsets[1:])
    kept = np.concatenate([values[offsets[start] : offsets[stop]] for start, stop in runs] or [values[:0]])
    nulls = pa.array(~column.is_valid().to_numpy(zero_copy_only=False)[keep]) if column.null_count else None
    return pa.ListArray.from_arrays(pa.array(new_offsets), pa.array(kept, column.type.value_type), mask=nulls)


def shard_table(rows: pa.Table) -> pa.Table:
    """The rows as stored in a shard: one record batch, dictionary-encoded string columns."""
    rows = rows.combine_chunks()
    columns = [
        pc.dictionary_encode(rows[name]) if name in DICTIONARY_COLUMNS else rows[name] for name in rows.column_names
    ]
    return pa.Table.from_arrays(columns, names=rows.column_names).combine_chunks()


def ipc_bytes(table: pa.Table) -> pa.Buffer:
    """The Arrow IPC file of a table (uncompressed, so readers can memory-map it zero-copy)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def write_shard(rows: pa.Table, dataset_dir: Path, split: str) -> dict[str, Any]:
    """Write rows as shards/<split>-<sha256>.arrow under dataset_dir; return its manifest entry."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {SPLITS}")
    table = shard_table(rows)
    data = ipc_bytes(table)
    sha = hashlib.sha256(data).hexdigest()
    relative = f"{SHARDS}/{split}-{sha}.arrow"
    atomic_write(Path(dataset_dir) / relative, lambda f: f.write(data))
    token_count = int(pc.sum(pc.list_value_length(table["tokens"])).as_py() or 0)
    return {
        "path": relative,
        "sha256": sha,
        "split": split,
        "rows": table.num_rows,
        "tokens": token_count,
        "bytes": data.size,
    }


def split_summary(shards: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    summary = {split: {"games": 0, "tokens": 0, "shards": 0} for split in SPLITS}
    for shard in shards:
        entry = summary[shard["split"]]
        entry["games"] += shard["rows"]
        entry["tokens"] += shard["tokens"]
        entry["shards"] += 1
    return summary


def fingerprint(manifest: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of everything in the manifest except the fingerprint."""
    return sha256_json({key: value for key, value in manifest.items() if key != "fingerprint"})


def build_manifest(
    params: dict[str, Any], inputs: Sequence[dict[str, Any]], shards: Sequence[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """The manifest.json content (ARCHITECTURE.md), fingerprint included; `extra` adds fields
    (e.g. the leakage check) that the fingerprint then covers too."""
    manifest = {
        "format": FORMAT,
        "tokenizer": {"version": tokens.VERSION, "sha256": tokens.tokenizer_sha256()},
        "params": params,
        "inputs": list(inputs),
        "shards": list(shards),
        "splits": split_summary(shards),
        **extra,
    }
    manifest["fingerprint"] = fingerprint(manifest)
    return manifest


class RowWriter:
    """An Arrow IPC file written in record batches of exactly `rows` rows (the last may be
    shorter), so the bytes depend on the rows alone, not on how the work was batched."""

    def __init__(self, path: Path, schema: pa.Schema, rows: int = 1 << 13) -> None:
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = pa.ipc.new_file(self.sink, schema)
        self.schema, self.rows = schema, rows
        self.pending: list[pa.RecordBatch] = []
        self.count = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.count += batch.num_rows
        if self.count >= self.rows:
            table = pa.Table.from_batches(self.pending, self.schema).combine_chunks()
            whole = self.count - self.count % self.rows
            for start in range(0, whole, self.rows):
                self.writer.write_batch(table.slice(start, self.rows).to_batches()[0])
            self.pending = table.slice(whole).to_batches()
            self.count -= whole

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc) -> None:
        if self.pending and exc[0] is None:
            table = pa.Table.from_batches(self.pending, self.schema).combine_chunks()
            for batch in table.to_batches():
                self.writer.write_batch(batch)
        self.writer.close()
        self.sink.close()
