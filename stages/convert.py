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
from pathlib import Path
from typing import Any

# Nothing here uses BLAS: numpy need not start OpenBLAS's thread pool, whose spin-up costs a
# tenth of a CPU second per process (set before numpy is first imported).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from chesscore import failures
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import PARAMS, config_from, params_section, worker_count
from chesscore.cli.progress import progress_bar
from chesscore.cli.runner import run_stage
from chesscore.ingest import validate_run
from chesscore.ingest.convert import ConvertConfig, LeakageError, run_convert


def parser(defaults: dict[str, Any]) -> argparse.ArgumentParser:
    d = defaults.get
    p = argparse.ArgumentParser(
        prog="python -m stages.convert",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--params", type=Path, default=PARAMS, help="params file (its `convert:` section)")
    p.add_argument(
        "--validated",
        type=Path,
        default=Path(d("validated", "data/validated")),
        help="the validate stage's output folder",
    )
    p.add_argument("--out", type=Path, default=Path(d("out", "data/dataset")), help="dataset folder to write")
    p.add_argument("--workers", type=int, default=d("workers", 1), help="shard-writing threads (0: one per core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


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
    params_path, values = params_section(argv, "convert")
    args = parser(values).parse_args(argv)
    config = config_from(values, ConvertConfig, params_path, "convert")
    if not all(
        (args.validated / name).is_file() for name in (validate_run.GAMES, validate_run.INPUTS, validate_run.REPORT)
    ):
        raise failures.BadInput(
            f"{args.validated}: no {validate_run.GAMES}, {validate_run.INPUTS} and "
            f"{validate_run.REPORT} (run the validate stage first)"
        )
    hold_output(args.out, "convert")
    total = json.loads((args.validated / validate_run.REPORT).read_text(encoding="utf-8"))["accepted"]
    bar = progress_bar(not args.no_progress, total=total, unit="game", desc="convert")
    start = time.perf_counter()
    try:
        manifest = run_convert(
            args.validated, args.out, config, workers=worker_count(args.workers), progress=bar.update
        )
    except LeakageError as error:
        raise failures.BadInput(str(error)) from None
    finally:
        bar.close()
    print(summary(manifest, args.out, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    run_stage("convert", main)
