"""The validate stage's engine: raw PGN files in, a folder of accepted games and rejects out.

    report = run_validate([Path("data/raw")], Path("data/validated"), ValidateConfig(), workers=4)

    data/validated/games.arrow     accepted games (Arrow IPC file, chesscore.data.shards.SCHEMA), in input order
    data/validated/rejects.arrow   one row per reject: file, sha256, game index, byte offset, game id,
                                   reason, detail
    data/validated/inputs.json     the raw-input manifest: per file sha256, bytes, games seen, accepted,
                                   rejected by reason, and the validation params
    data/validated/report.json     the counts: by reason, by file, file-level errors
    data/validated/metrics.json    the DVC metric: the games accepted

The main process reads the files and cuts them into byte ranges at game starts; worker processes
split, parse and judge the ranges (chesscore.ingest.validate_feed); results are merged in input
order and deduplicated there (first occurrence wins), so the output is byte-identical for any
number of workers. Everything is written to a temporary folder that replaces
`out` only after the accounting check (per file: seen == accepted + rejected) has passed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from chesscore import failures
from chesscore.data.shards import SCHEMA, RowWriter, kept_runs
from chesscore.fileio import atomic_write_json, atomic_write_text, metrics_text, replace_dir, staging_dir
from chesscore.ingest.dedup import SeenKeys, repeated
from chesscore.ingest.hashes import InputHashes
from chesscore.ingest.runs import KeyLog
from chesscore.ingest.validate import BatchResult, ValidateConfig
from chesscore.ingest.validate_feed import Feed, results, worker_pool
from chesscore.pgn import inputs as pgn_input
from chesscore.pgn.split import MAX_GAME_BYTES

FORMAT = "chesscore-validated/1"
GAMES, REJECTS, INPUTS, REPORT = "games.arrow", "rejects.arrow", "inputs.json", "report.json"
METRICS = "metrics.json"  # the DVC metric: the games accepted (report.json holds every count)
KEYS = "keys"  # a part's dedup keys (chesscore.ingest.runs), written only when dedup is left to the merge
REJECT_SCHEMA = pa.schema(
    [
        ("source_path", pa.string()),
        ("source_sha256", pa.string()),
        ("game_index", pa.int64()),
        ("byte_offset", pa.int64()),
        ("game_id", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
_INDEX_BITS = 40  # a dedup tag is (file number << 40) | game index


class NoInput(failures.BadInput):
    """No PGN file where the inputs were expected, or no game accepted from them."""


def input_files(raw: list[Path]) -> list[Path]:
    """The PGN files of `raw` (files, or folders of them); BadInput naming the place when a path is
    missing or a folder holds none."""
    try:
        files = pgn_input.find_inputs(raw)
    except FileNotFoundError as error:
        raise failures.BadInput(str(error)) from None
    if not files:
        where = ", ".join(Path(path).as_posix() for path in raw)
        raise NoInput(
            f"{where}: no PGN file ({', '.join('*' + suffix for suffix in pgn_input.SUFFIXES)}) in it; "
            "point validate.raw (or --raw) at Lichess PGN dumps"
        )
    return files


def require_accepted(raw: list[Path], report: dict[str, Any], out: Path) -> None:
    """NoInput when not one game was accepted: training on nothing is no result."""
    if report["accepted"]:
        return
    where = ", ".join(Path(path).as_posix() for path in raw)
    reasons = ", ".join(f"{reason} {n:,}" for reason, n in report["by_reason"].items()) or "no game found"
    raise NoInput(
        f"{where}: no game accepted of {report['games_seen']:,} seen ({reasons}); {out}/rejects.arrow "
        "holds each reject with its reason: fix the input or loosen validate's filters in params.yaml"
    )


class AccountingError(RuntimeError):
    """Games seen != accepted + rejected for some input: nothing is written."""


def run_validate(
    raw: list[Path],
    out: Path,
    config: ValidateConfig,
    workers: int = 1,
    batch_games: int = 4000,
    max_game_bytes: int = MAX_GAME_BYTES,
    progress: Callable[[int, int], None] | None = None,
    keys: KeyLog | None = None,
) -> dict[str, Any]:
    """Validate every input; return the report (out/report.json).
    progress(raw_bytes_read, games_seen) is called as the inputs are read. With `keys`, nothing
    is deduplicated: the keys go to out/keys/ for the merge stage (chesscore.ingest.merge)."""
    files = input_files(raw)
    inputs = [_describe(path) for path in files]
    out = Path(out)
    errors: list[dict[str, Any]] = []
    with staging_dir(out) as tmp:
        feed = Feed(config, batch_games, max_game_bytes)
        with (
            RowWriter(tmp / GAMES, SCHEMA) as games_out,
            RowWriter(tmp / REJECTS, REJECT_SCHEMA) as rejects_out,
            InputHashes(files) as hashes,
            worker_pool(workers) as pool,
        ):
            merge = _Merger(inputs, hashes, games_out, rejects_out, keys)
            for number, result in results(pool, files, inputs, feed, errors, progress):
                merge.add(number, result)
            for number in range(len(inputs)):  # the inputs no row or reject came from
                merge.sha256(number)
        for entry in inputs:
            rejected = sum(entry["rejected"].values())
            if entry["games_seen"] != entry["accepted"] + rejected:
                raise AccountingError(
                    f"{entry['path']}: {entry['games_seen']} games seen but {entry['accepted']} "
                    f"accepted + {rejected} rejected"
                )
            entry["rejected"] = dict(sorted(entry["rejected"].items()))
        atomic_write_json(tmp / INPUTS, {"format": FORMAT, "params": asdict(config), "inputs": inputs})
        report = _report(inputs, errors)
        atomic_write_json(tmp / REPORT, report)
        atomic_write_text(tmp / METRICS, metrics_text({"accepted": report["accepted"]}))
        if keys is not None:
            keys.write(tmp / KEYS)
        replace_dir(tmp, out)
    return report


def _describe(path: Path) -> dict[str, Any]:
    """An input's manifest entry (its counts still zero, its sha256 still to come: InputHashes).
    An input that cannot be read is refused by name before anything is written: its games would
    have no true sha256."""
    try:
        entry = {
            "path": path.as_posix(),
            "sha256": None,
            "bytes": path.stat().st_size,
            "compression": pgn_input.compression(path),
        }
        with open(path, "rb"):
            pass
    except PermissionError as error:
        raise failures.Refused(f"{path}: cannot read this input ({error.strerror}); fix its permissions") from None
    except OSError as error:
        raise failures.BadInput(f"{path}: cannot read this input ({error.strerror or error})") from None
    return {**entry, "games_seen": 0, "accepted": 0, "rejected": Counter(), "reference_reads": 0}


class _Merger:
    """Dedup in input order and write each batch's accepted rows and rejects."""

    def __init__(
        self, inputs: list[dict], hashes: InputHashes, games_out, rejects_out, keys: KeyLog | None = None
    ) -> None:
        self.inputs, self.hashes, self.keys = inputs, hashes, keys
        self.games_out, self.rejects_out = games_out, rejects_out
        self.ids, self.moves = SeenKeys(), SeenKeys()
        self._sha_column: tuple[int, pa.Array] = (-1, pa.array([], pa.string()))

    def sha256(self, number: int) -> str:
        """Input `number`'s sha256, in its manifest entry once known."""
        entry = self.inputs[number]
        if entry["sha256"] is None:
            entry["sha256"] = self.hashes.get(number)
        return entry["sha256"]

    def _with_sha256(self, number: int, rows: pa.RecordBatch) -> pa.RecordBatch:
        """The rows with their input's sha256 (the workers leave it empty): a slice of one column
        kept per input, so no batch builds its own."""
        held, column = self._sha_column
        if held != number or len(column) < rows.num_rows:
            column = pa.array([self.sha256(number)] * max(rows.num_rows, 4096), pa.string())
            self._sha_column = (number, column)
        at = SCHEMA.get_field_index("source_sha256")
        return rows.set_column(at, SCHEMA.field(at), column.slice(0, rows.num_rows))

    def add(self, number: int, result: BatchResult) -> None:
        entry = self.inputs[number]
        rows, rejects = result.rows, list(result.rejects)
        if rows.num_rows:
            rows = self._with_sha256(number, rows)
        keep = np.ones(rows.num_rows, bool)
        if rows.num_rows and self.keys is not None:  # a part: the merge stage dedups over all parts
            self.keys.add(result.id_keys, result.move_keys, rows["source_index"].to_numpy())
        elif rows.num_rows:
            self._dedup(number, rows, result, keep, rejects)
        if keep.all():
            if rows.num_rows:
                self.games_out.write_batch(rows)
        else:  # zero-copy slices between the duplicates: the writer copies the rows once anyway
            for start, stop in kept_runs(keep):
                self.games_out.write_batch(rows.slice(start, stop - start))
        if rejects:
            columns = list(zip(*rejects))
            self.rejects_out.write_batch(
                pa.RecordBatch.from_arrays(
                    [
                        pa.array([entry["path"]] * len(rejects)),
                        pa.array([self.sha256(number)] * len(rejects)),
                        pa.array(columns[0], pa.int64()),
                        pa.array(columns[1], pa.int64()),
                        pa.array(columns[2], pa.string()),
                        pa.array(columns[3]),
                        pa.array(columns[4]),
                    ],
                    schema=REJECT_SCHEMA,
                )
            )
        entry["games_seen"] += result.seen
        entry["accepted"] += int(keep.sum())
        entry["rejected"].update(reject[3] for reject in rejects)
        entry["reference_reads"] += result.reference_reads

    def _dedup(self, number: int, rows: pa.RecordBatch, result: BatchResult, keep: np.ndarray, rejects: list) -> None:
        """In input order, the first occurrence wins. Rows whose keys are unseen and unique in the
        batch are remembered at once (vectorised); only the others are checked one by one."""
        ids, moves = result.id_keys, result.move_keys
        has_id = ids != 0
        found_ids, found_moves = self.ids.lookup(ids), self.moves.lookup(moves)
        suspect = (has_id & ((found_ids >= 0) | repeated(ids))) | (found_moves >= 0) | repeated(moves)
        index = rows["source_index"].to_numpy()
        tags = (number << _INDEX_BITS) | index
        clear = ~suspect
        self.ids.add_new(ids[clear & has_id], tags[clear & has_id])
        self.moves.add_new(moves[clear], tags[clear])
        if not suspect.any():
            return
        offset, game_ids = rows["source_offset"].to_numpy(), rows["game_id"].to_pylist()
        local_ids: dict[int, int] = {}
        local_moves: dict[int, int] = {}
        for i in np.flatnonzero(suspect).tolist():
            id_key, move_key = int(ids[i]), int(moves[i])
            first_id = (found_ids[i] if found_ids[i] >= 0 else local_ids.get(id_key, -1)) if id_key else -1
            first_moves = found_moves[i] if found_moves[i] >= 0 else local_moves.get(move_key, -1)
            if first_id >= 0 or first_moves >= 0:
                keep[i] = False
                what, tag = ("game id", first_id) if first_id >= 0 else ("moves", first_moves)
                rejects.append(
                    (int(index[i]), int(offset[i]), game_ids[i], "duplicate", f"same {what} as {self._where(int(tag))}")
                )
                continue
            if id_key:
                local_ids[id_key] = int(tags[i])
                self.ids.add(id_key, int(tags[i]))
            local_moves[move_key] = int(tags[i])
            self.moves.add(move_key, int(tags[i]))
        rejects.sort()

    def _where(self, tag: int) -> str:
        return f"game {tag & ((1 << _INDEX_BITS) - 1)} of {self.inputs[tag >> _INDEX_BITS]['path']}"


def _report(inputs: list[dict], errors: list[dict]) -> dict[str, Any]:
    by_reason: Counter = Counter()
    for entry in inputs:
        by_reason.update(entry["rejected"])
    return {
        "games_seen": sum(e["games_seen"] for e in inputs),
        "accepted": sum(e["accepted"] for e in inputs),
        "rejected": sum(by_reason.values()),
        "by_reason": dict(sorted(by_reason.items())),
        "reference_reads": sum(e["reference_reads"] for e in inputs),
        "by_file": {e["path"]: {key: e[key] for key in ("games_seen", "accepted", "rejected")} for e in inputs},
        "file_errors": errors,
    }
