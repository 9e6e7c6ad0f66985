"""The merge stage's engine: validated parts (one raw file each) in, one validated folder out,
the same bytes as one validate run over the same files in the same order.

    report = merge_parts([Path("data/parts/2024-01"), Path("data/parts/2024-02")], Path("data/merged"))

A part is the output of `python -m stages.validate --raw FILE --out PART --part`: the games that
pass the rules (not yet deduplicated), the rejects, the manifest and keys/ (chesscore.ingest.runs).
The merge writes games.arrow, rejects.arrow, inputs.json, report.json and metrics.json exactly as
chesscore.ingest.validate_run would (the first occurrence in the parts' order wins; a duplicate's
reject names the first occurrence the same way), in three passes whose memory does not grow with
the games, only with the duplicates:

1. the parts' sorted key runs are merged a window at a time, keeping only keys that repeat;
2. the games holding such keys are replayed in input order: the first occurrence wins;
3. each part's games and rejects are streamed out, the duplicates moved from games to rejects.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
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
from chesscore.ingest.runs import INDEX, KINDS, ROW_BITS, WINDOW, Run, game_indexes, shared_keys
from chesscore.ingest.validate_run import GAMES, INPUTS, KEYS, METRICS, REJECT_SCHEMA, REJECTS, REPORT

_ROW_MASK = (1 << ROW_BITS) - 1


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
                dups = _write_games(part, duplicates.get(number, {}), games_out, progress)
                _write_rejects(part, inputs[number], dups, rejects_out)
                _count(inputs[number], len(dups))
        atomic_write_json(tmp / INPUTS, {"format": validate_run.FORMAT, "params": params, "inputs": inputs})
        report = validate_run._report(inputs, errors)
        atomic_write_json(tmp / REPORT, report)
        atomic_write_text(tmp / METRICS, metrics_text({"accepted": report["accepted"]}))
        replace_dir(tmp, out)
    return report


def find_duplicates(parts: list[Path], inputs: list[dict], window: int = WINDOW) -> dict[int, dict[int, str]]:
    """{part: {row: reject detail}} of every game an earlier game repeats, by the rule of
    validate_run: a game is dropped when its id or its moves equal a game kept before it."""
    found = [list(shared_keys([Run(part / KEYS, kind) for part in parts], window)) for kind in KINDS]
    keys = np.concatenate([keys for pieces in found for keys, _ in pieces] or [np.zeros(0, np.uint64)])
    tags = np.concatenate([tags for pieces in found for _, tags in pieces] or [np.zeros(0, np.uint64)])
    kinds = np.concatenate([np.full(len(k), n, np.uint8) for n, pieces in enumerate(found) for k, _ in pieces] or [[]])
    order = np.lexsort((kinds, tags))  # input order, the id before the moves
    tags_in, kinds_in, keys_in = tags[order].tolist(), kinds[order].tolist(), keys[order].tolist()
    kept: tuple[dict[int, int], dict[int, int]] = ({}, {})  # key -> tag of the game kept with it
    found_by: dict[int, list[tuple[int, str, int]]] = {}  # part -> [(row, what, tag of the first)]
    at = 0
    while at < len(tags_in):
        tag, mine = tags_in[at], [None, None]
        while at < len(tags_in) and tags_in[at] == tag:
            mine[kinds_in[at]] = keys_in[at]
            at += 1
        first = [kept[kind].get(key, -1) if key is not None else -1 for kind, key in enumerate(mine)]
        if max(first) < 0:
            for kind, key in enumerate(mine):
                if key is not None:
                    kept[kind][key] = tag
            continue
        what, by = ("game id", first[0]) if first[0] >= 0 else ("moves", first[1])
        found_by.setdefault(tag >> ROW_BITS, []).append((tag & _ROW_MASK, what, by))
    where = _first_places(parts, inputs, {by for dups in found_by.values() for _, _, by in dups}, window)
    duplicates = {
        part: {row: f"same {what} as {where[by]}" for row, what, by in dups} for part, dups in found_by.items()
    }
    return duplicates


def _first_places(parts: list[Path], inputs: list[dict], tags: set[int], window: int) -> dict[int, str]:
    """'game N of PATH' of each tag, as validate_run names a duplicate's first occurrence."""
    places = {}
    ordered = np.array(sorted(tags), np.uint64)
    for number, part in enumerate(parts):
        mine = ordered[(ordered >> np.uint64(ROW_BITS)) == number]
        rows = (mine & np.uint64(_ROW_MASK)).astype(np.int64)
        for tag, index in zip(mine.tolist(), game_indexes(part / KEYS, rows, window).tolist()):
            places[tag] = f"game {index} of {inputs[number]['path']}"
    return places


def _write_games(part: Path, removed: dict[int, str], games_out: RowWriter, progress) -> list[tuple]:
    """Stream the part's games without the duplicates; their rejects, in game order."""
    rows = sorted(removed)
    dups: list[tuple] = []
    start = 0
    for batch in validated_games(part / GAMES):
        size = batch.num_rows
        lo, hi = bisect.bisect_left(rows, start), bisect.bisect_left(rows, start + size)
        if hi > lo:
            local = np.array(rows[lo:hi]) - start
            index, offset = batch["source_index"].to_numpy(), batch["source_offset"].to_numpy()
            game_ids = batch["game_id"]
            for r, i in zip(rows[lo:hi], local.tolist()):
                dups.append((int(index[i]), int(offset[i]), game_ids[i].as_py(), "duplicate", removed[r]))
            keep = np.ones(batch.num_rows, bool)
            keep[local] = False
            batch = filter_rows(batch, keep)
        start += size
        if batch.num_rows:
            games_out.write_batch(batch)
            if progress:
                progress(batch.num_rows)
    return dups


def _write_rejects(part: Path, entry: dict, dups: list[tuple], rejects_out: RowWriter) -> None:
    """The part's rejects with the duplicates' among them, in game order (as validate_run)."""
    at, indexes = 0, [dup[0] for dup in dups]
    with pa.OSFile(str(part / REJECTS)) as source:  # read, not mapped: RSS stays bounded
        reader = pa.ipc.open_file(source)
        for b in range(reader.num_record_batches):
            batch = reader.get_batch(b)
            if not batch.num_rows:
                continue
            last = batch["game_index"][batch.num_rows - 1].as_py()
            upto = bisect.bisect_right(indexes, last, lo=at)
            if upto > at:
                both = pa.Table.from_batches([batch, _reject_batch(entry, dups[at:upto])])
                batch = both.take(pc.sort_indices(both, [("game_index", "ascending")])).combine_chunks()
                batch = batch.to_batches()[0]
                at = upto
            rejects_out.write_batch(batch)
    if at < len(dups):
        rejects_out.write_batch(_reject_batch(entry, dups[at:]))


def _reject_batch(entry: dict, rejects: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rejects))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([entry["path"]] * len(rejects), pa.string()),
            pa.array([entry["sha256"]] * len(rejects), pa.string()),
            pa.array(columns[0], pa.int64()),
            pa.array(columns[1], pa.int64()),
            pa.array(columns[2], pa.string()),
            pa.array(columns[3], pa.string()),
            pa.array(columns[4], pa.string()),
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
