"""Stage `convert`: validated games -> dataset/ (content-addressed Arrow shards + manifest.json).

    python -m stages.convert                                   # every option from params.yaml
    python -m stages.convert --validated data/validated --out data/dataset --workers 4

Splits are a keyed hash of each game id (fractions and key in params.yaml's `convert:`), so a
game keeps its split when more input arrives. Shards are named shards/<split>-<sha256>.arrow;
manifest.json lists them with the inputs and params and carries a fingerprint. Prints a
one-screen summary; fails (exit 65) if a move sequence would land in two splits.
"""

from __future__ import annotations

import argparse
import json
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
from chesscore.ingest import validate_run
from chesscore.ingest.convert import ConvertConfig, run_convert
from chesscore.runtime.progress import progress_bar


@dataclass(frozen=True)
class Settings:
    """params.yaml's `convert:` section; every key is also a flag (`--shard-games 50000`)."""

    OUTPUT_NEUTRAL: ClassVar[tuple[str, ...]] = ("workers",)  # not DVC params: the same bytes for any value

    validated: Path = Path("data/validated")  # the validate stage's output folder
    out: Path = Path("data/dataset")  # the dataset folder to write (shards/ and manifest.json)
    workers: int = 1  # shard-writing threads; 0: one per core (the output is the same for any count)
    dataset: ConvertConfig = flat(ConvertConfig)  # splits and shards (recorded in the manifest)

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0 (0: one per core), got {self.workers}")


def no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def summary(manifest: dict[str, Any], out: Path, seconds: float) -> str:
    games = sum(split["games"] for split in manifest["splits"].values())
    lines = [
        f"convert: {games:,} games into {len(manifest['shards'])} shard(s) in {seconds:.1f} s "
        f"({games / max(seconds, 1e-9):,.0f} games/s)"
    ]
    for name, split in manifest["splits"].items():
        lines.append(
            f"  {name:<11}{split['games']:>12,} games {split['tokens']:>14,} tokens {split['shards']:>5} shard(s)"
        )
    lines.append(f"  leakage (same moves in two splits): {manifest['leakage']['cross_split_identical_moves']}")
    lines.append(f"  inputs: {len(manifest['inputs'])} file(s); fingerprint {manifest['fingerprint']}")
    lines.append(f"  wrote {out}/manifest.json and {out}/shards/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    settings, args = stage_settings(argv, "convert", Settings, __doc__, extra=no_progress)
    validated = settings.validated
    if not all((validated / name).is_file() for name in (validate_run.GAMES, validate_run.INPUTS, validate_run.REPORT)):
        raise failures.BadInput(
            f"{validated}: no {validate_run.GAMES}, {validate_run.INPUTS} and "
            f"{validate_run.REPORT} (run the validate stage first)"
        )
    hold_output(settings.out, "convert")
    total = json.loads((validated / validate_run.REPORT).read_text(encoding="utf-8"))["accepted"]
    bar = progress_bar(not args.no_progress, total=total, unit="game", desc="convert")
    start = time.perf_counter()
    try:
        manifest = run_convert(
            validated, settings.out, settings.dataset, workers=worker_count(settings.workers), progress=bar.update
        )
    finally:
        bar.close()
    print(summary(manifest, settings.out, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    run_stage("convert", main)
