"""The merge stage's engine: validated parts (one raw file each) in, one validated folder out,
the same bytes as one validate run over the same files in the same order.

    report = merge_parts([Path("data/parts/2024-01"), Path("data/parts/2024-02")], Path("data/merged"))

A part is the output of `python -m stages.validate --raw FILE --out PART --part`: the games that
pass the rules (not yet deduplicated), the rejects, the manifest and keys/ (chesscore.ingest.runs).
The merge writes games.arrow, rejects.arrow, inputs.json, report.json and metrics.json exactly as
chesscore.ingest.validate_run would (the first occurrence in the parts' order wins; a duplicate's
reject names the first occurrence the same way), in three passes whose memory does not grow with
the games (the window, then tens of bytes per duplicate, all in numpy and Arrow arrays):

1. the parts' sorted key runs are merged a window at a time, keeping only keys that repeat;
2. the games holding such keys are replayed in input order: the first occurrence wins
   (1 and 2: chesscore.ingest.duplicates);
3. each part's games and rejects are streamed out, the duplicates moved from games to rejects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chesscore import failures
from chesscore.data.shards import SCHEMA, RowWriter, filter_rows
from chesscore.fileio import atomic_write_json, atomic_write_text, metrics_text, replace_dir, staging_dir
from chesscore.ingest import validate_run
from chesscore.ingest.convert import _validated_games as validated_games
from chesscore.ingest.duplicates import ROW_MASK, find_duplicates
from chesscore.ingest.runs import INDEX, WINDOW
from chesscore.ingest.validate_run import GAMES, INPUTS, KEYS, METRICS, REJECT_SCHEMA, REJECTS, REPORT


class NotAPart(failures.BadInput):
    """A folder that is not one raw file validated with --part."""


class MixedRules(failures.Refused):
    """Parts validated under different rules: merged, they would be no single dataset."""


def read_part(part: Path) -> dict[str, Any]:
    """A part's inputs.json, checked: one input, validated with --part (keys/ beside it)."""
    try:
        manifest = json.loads((part / INPUTS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotAPart(
            f"{part}: no {INPUTS} (run `python -m stages.validate --raw FILE --out {part} --part`)"
        ) from None
    if manifest.get("format") != validate_run.FORMAT or len(manifest.get("inputs", [])) != 1:
        raise NotAPart(f"{part}/{INPUTS}: not one validated raw file ({validate_run.FORMAT}, one input)")
    if not (part / KEYS / INDEX).is_file():
        raise NotAPart(f"{part}: no {KEYS}/ (validated without --part, so already deduplicated alone)")
    return manifest


def merge_parts(
    parts: list[Path], out: Path, window: int = WINDOW, progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Merge the parts, in this order, into `out`; return the report (out/report.json).
    progress(games) is called as each part's games are written."""
    if not parts:
        raise failures.BadInput("no parts to merge (list the raw files' names in params.yaml's merge.months)")
    manifests = [read_part(part) for part in parts]
    params = manifests[0]["params"]
    for part, manifest in zip(parts, manifests):
        if manifest["params"] != params:
            raise MixedRules(f"{part}: validated with other rules than {parts[0]}; rerun its part stage")
    inputs = [manifest["inputs"][0] for manifest in manifests]
    duplicates = find_duplicates(parts, inputs, window)
    errors = [e for part in parts for e in json.loads((part / REPORT).read_text(encoding="utf-8"))["file_errors"]]
    with staging_dir(out) as tmp:
        with RowWriter(tmp / GAMES, SCHEMA) as games_out, RowWriter(tmp / REJECTS, REJECT_SCHEMA) as rejects_out:
            for number, part in enumerate(parts):
                mine = duplicates.of_part(number)
                rows = (duplicates.tags[mine] & np.uint64(ROW_MASK)).astype(np.int64)

                def details(lo: int, hi: int, base: int = mine.start) -> list[str]:
                    return duplicates.details(slice(base + lo, base + hi), inputs)

                removed = _write_games(part, rows, details, games_out, progress)
                _write_rejects(part, inputs[number], removed, rejects_out)
                _count(inputs[number], len(rows))
        atomic_write_json(tmp / INPUTS, {"format": validate_run.FORMAT, "params": params, "inputs": inputs})
        report = validate_run._report(inputs, errors)
        atomic_write_json(tmp / REPORT, report)
        atomic_write_text(tmp / METRICS, metrics_text({"accepted": report["accepted"]}))
        replace_dir(tmp, out)
    return report


@dataclass
class _Removed:
    """A part's duplicates as its games are streamed: game index, byte offset and game id, and
    details(lo, hi), the rejects' details of duplicates lo..hi."""

    index: np.ndarray
    offset: np.ndarray
    game_ids: pa.Array
    details: Callable[[int, int], list[str]]


def _write_games(
    part: Path, rows: np.ndarray, details: Callable[[int, int], list[str]], games_out: RowWriter, progress
) -> _Removed:
    """Stream the part's games without the rows given (sorted); what the rejects need of them."""
    index, offset, game_ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [pa.array([], pa.string())]
    start = 0
    for batch in validated_games(part / GAMES):
        size = batch.num_rows
        lo, hi = np.searchsorted(rows, [start, start + size]).tolist()
        if hi > lo:
            local = rows[lo:hi] - start
            index.append(batch["source_index"].to_numpy()[local])
            offset.append(batch["source_offset"].to_numpy()[local])
            game_ids.append(batch["game_id"].take(pa.array(local)).cast(pa.string()))
            keep = np.ones(size, bool)
            keep[local] = False
            batch = filter_rows(batch, keep)
        start += size
        if batch.num_rows:
            games_out.write_batch(batch)
            if progress:
                progress(batch.num_rows)
    return _Removed(np.concatenate(index), np.concatenate(offset), pa.concat_arrays(game_ids), details)


def _write_rejects(part: Path, entry: dict, removed: _Removed, rejects_out: RowWriter) -> None:
    """The part's rejects with the duplicates' among them, in game order (as validate_run)."""
    at = 0
    with pa.OSFile(str(part / REJECTS)) as source:  # read, not mapped: RSS stays bounded
        reader = pa.ipc.open_file(source)
        for b in range(reader.num_record_batches):
            batch = reader.get_batch(b)
            if not batch.num_rows:
                continue
            last = batch["game_index"][batch.num_rows - 1].as_py()
            upto = int(np.searchsorted(removed.index, last, "right"))
            if upto > at:
                both = pa.Table.from_batches([batch, _reject_batch(entry, removed, at, upto)])
                batch = both.take(pc.sort_indices(both, [("game_index", "ascending")])).combine_chunks()
                batch = batch.to_batches()[0]
                at = upto
            rejects_out.write_batch(batch)
    if at < len(removed.index):
        rejects_out.write_batch(_reject_batch(entry, removed, at, len(removed.index)))


def _reject_batch(entry: dict, removed: _Removed, lo: int, hi: int) -> pa.RecordBatch:
    n = hi - lo
    return pa.RecordBatch.from_arrays(
        [
            pa.array([entry["path"]] * n, pa.string()),
            pa.array([entry["sha256"]] * n, pa.string()),
            pa.array(removed.index[lo:hi], pa.int64()),
            pa.array(removed.offset[lo:hi], pa.int64()),
            removed.game_ids.slice(lo, n),
            pa.array(["duplicate"] * n, pa.string()),
            pa.array(removed.details(lo, hi), pa.string()),
        ],
        schema=REJECT_SCHEMA,
    )


def _count(entry: dict, duplicates: int) -> None:
    """The input's counts after the merge: its duplicates moved from accepted to rejected."""
    if duplicates:
        entry["accepted"] -= duplicates
        entry["rejected"] = dict(sorted({**entry["rejected"], "duplicate": duplicates}.items()))
    rejected = sum(entry["rejected"].values())
    if entry["games_seen"] != entry["accepted"] + rejected:
        raise validate_run.AccountingError(
            f"{entry['path']}: {entry['games_seen']} games seen but {entry['accepted']} accepted + {rejected} rejected"
        )
