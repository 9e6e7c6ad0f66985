"""Stage `validate`: raw PGN dumps -> accepted games, rejects with reasons, raw-input manifest.

    python -m stages.validate                                  # every option from params.yaml
    python -m stages.validate --raw data/raw --out data/validated --workers 4
    python -m stages.validate --raw /data/lichess_db_standard_rated_2024-0{1,2}.pgn.zst --workers 0
    python -m stages.validate --raw data/months/2024-01.pgn.zst --out data/parts/2024-01 --part

Inputs are .pgn, .pgn.zst (also .gz, .bz2) files or folders of them, read as streams. The rules
(chesscore.ingest.validate.ValidateConfig) come from params.yaml's `validate:` section. Writes
OUT/games.arrow, OUT/rejects.arrow, OUT/inputs.json and OUT/report.json (the DVC metric), then
prints a one-screen summary. A file that cannot be read to its end is recorded as a reject
(`not_pgn` or `unreadable`, with the byte offset); with --strict the stage then fails (exit 65)
after writing everything it could read. No PGN file in the inputs, or not one game accepted,
fails the stage (exit 65, naming the inputs) so that no later stage sees an empty dataset.
With --part (one raw file of many, the `part` stages of dvc.yaml) nothing is deduplicated: the
dedup keys go to OUT/keys/ and the merge stage (stages/merge.py) dedups over every part.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

# Nothing here uses BLAS: numpy need not start OpenBLAS's thread pool, whose spin-up costs a
# tenth of a CPU second per process (set before numpy is first imported).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from chesscore import failures
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings, worker_count
from chesscore.cli.runner import run_stage
from chesscore.config import flat
from chesscore.ingest.runs import KeyLog
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import input_files, require_accepted, run_validate
from chesscore.runtime.progress import progress_bar


@dataclass(frozen=True)
class Settings:
    """params.yaml's `validate:` section; every key is also a flag (`--batch-games 2000`)."""

    OUTPUT_NEUTRAL: ClassVar[tuple[str, ...]] = ("workers",)  # not DVC params: the same bytes for any value

    raw: tuple[Path, ...] = (Path("data/raw"),)  # PGN files (.pgn, .pgn.zst, .gz, .bz2) or folders of them
    out: Path = Path("data/validated")  # output folder
    workers: int = 1  # parsing processes; 0: one per core (the output is the same for any count)
    batch_games: int = 4000  # games per work unit (the output is the same for any size)
    strict: bool = False  # fail (exit 65, after writing) when a file cannot be read to its end
    rules: ValidateConfig = flat(ValidateConfig)  # what makes a game acceptable (recorded in the manifest)

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0 (0: one per core), got {self.workers}")
        if self.batch_games < 1:
            raise ValueError(f"batch_games must be >= 1, got {self.batch_games}")


def no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def flags(parser: argparse.ArgumentParser) -> None:
    no_progress(parser)
    parser.add_argument(
        "--part",
        action="store_true",
        help="one file of many: write the dedup keys to OUT/keys/ and leave dedup to the merge stage",
    )


def summary(report: dict[str, Any], out: Path, seconds: float, workers: int) -> str:
    seen = report["games_seen"]
    lines = [
        f"validate: {len(report['by_file'])} file(s), {seen:,} games in {seconds:.1f} s "
        f"({seen / max(seconds, 1e-9):,.0f} games/s, {workers} worker(s))",
        f"  accepted  {report['accepted']:>12,}",
        f"  rejected  {report['rejected']:>12,}",
    ]
    lines += [f"    {reason:<24}{count:>10,}" for reason, count in report["by_reason"].items()]
    lines.append(f"  read by python-chess after the fast parser gave up: {report['reference_reads']:,}")
    files = list(report["by_file"].items())
    lines.append("  per file (seen / accepted / rejected):")
    for path, entry in files[:10]:
        lines.append(
            f"    {path}  {entry['games_seen']:,} / {entry['accepted']:,} / {sum(entry['rejected'].values()):,}"
        )
    if len(files) > 10:
        lines.append(f"    ... and {len(files) - 10} more (see {out / 'report.json'})")
    for error in report["file_errors"]:
        lines.append(f"  FILE PROBLEM {error['path']}: {error['error']}")
    lines.append(f"  wrote {out}/ (games.arrow, rejects.arrow, inputs.json, report.json)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    settings, args = stage_settings(argv, "validate", Settings, __doc__, extra=flags)
    workers = worker_count(settings.workers)
    hold_output(settings.out, "validate")
    files = input_files(list(settings.raw))
    if args.part and len(files) != 1:
        where = ", ".join(path.as_posix() for path in settings.raw)
        raise failures.BadInput(f"--part: {where} holds {len(files)} PGN files; a part is one file")
    total = sum(path.stat().st_size for path in files)
    bar = progress_bar(not args.no_progress, total=total, unit="B", unit_scale=True, desc="validate")
    last = {"games": 0}

    def progress(nbytes: int, games: int) -> None:
        bar.update(nbytes)
        if games - last["games"] >= 10_000:
            last["games"] = games
            bar.set_postfix(games=f"{games:,}", refresh=False)

    start = time.perf_counter()
    try:
        report = run_validate(
            files,
            settings.out,
            settings.rules,
            workers=workers,
            batch_games=settings.batch_games,
            progress=progress,
            keys=KeyLog() if args.part else None,
        )
    finally:
        bar.close()
    print(summary(report, settings.out, time.perf_counter() - start, workers))
    require_accepted(list(settings.raw), report, settings.out)  # after writing: the rejects say why
    if settings.strict and report["file_errors"]:
        problems = "; ".join(f"{e['path']}: {e['error']}" for e in report["file_errors"])
        raise failures.BadInput(f"--strict: {problems}")
    return 0


if __name__ == "__main__":
    run_stage("validate", main)
