"""Stage `merge`: the validated parts (one raw file each, the `part@NAME` stages) -> one validated
folder, the same bytes as the validate stage over the same files in the same order.

    python -m stages.merge                                     # every option from params.yaml
    python -m stages.merge --months 2024-01 2024-02 --parts data/parts --into data/merged

Reads PARTS/NAME/ for each name of `months`, in that order (the first occurrence of a game wins,
as in one validate run), and writes INTO/games.arrow, rejects.arrow, inputs.json, report.json and
metrics.json for the convert stage (convert.validated: data/merged). Its memory is bounded by
`window` and the duplicates, not by the games (docs/scaling.md). Fails (exit 65) when a part is
missing or was validated without --part, or when not one game is accepted; exit 78 when the parts
were validated under different rules.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # nothing here uses BLAS (see stages/validate.py)

from chesscore import failures
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings
from chesscore.cli.runner import run_stage
from chesscore.ingest.merge import merge_parts
from chesscore.ingest.runs import WINDOW
from chesscore.ingest.validate_run import require_accepted
from chesscore.runtime.progress import progress_bar


@dataclass(frozen=True)
class Settings:
    """params.yaml's `merge:` section; every key is also a flag (`--window 100000`)."""

    months: tuple[str, ...] = ()  # raw files' names without suffix, in merge order (the first occurrence wins)
    raw: Path = Path("data/months")  # the folder of the raw files RAW/NAME+suffix (one part stage each)
    suffix: str = ".pgn.zst"  # the raw files' suffix
    parts: Path = Path("data/parts")  # the part folders, PARTS/NAME
    # scale/dvc.yaml's merge stage is a `foreach` over this list: none until it names the folder.
    into: tuple[Path, ...] = ()  # the merged validated folder as a list of one ([data/merged]); convert.validated
    window: int = WINDOW  # key entries read at a time over all parts (~50 bytes each): the memory bound

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")
        if len(self.into) > 1:
            raise ValueError(f"into must name one merged folder (or none), got {[str(p) for p in self.into]}")
        if len(set(self.months)) != len(self.months):
            raise ValueError(f"months must not repeat a name, got {list(self.months)}")


def no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(argv: list[str] | None = None) -> int:
    settings, args = stage_settings(argv, "merge", Settings, __doc__, extra=no_progress)
    if not settings.into:
        raise failures.Refused("merge.into: no merged folder named; set it to [data/merged] (docs/scaling.md)")
    out = settings.into[0]
    hold_output(out, "merge")
    parts = [settings.parts / name for name in settings.months]
    start = time.perf_counter()
    with progress_bar(not args.no_progress, unit="game", desc="merge") as bar:
        report = merge_parts(parts, out, settings.window, progress=bar.update)
    seconds = time.perf_counter() - start
    duplicates = report["by_reason"].get("duplicate", 0)
    print(
        f"merge: {len(parts)} part(s), {report['games_seen']:,} games seen, {report['accepted']:,} accepted, "
        f"{duplicates:,} duplicates in {seconds:.1f} s ({report['games_seen'] / max(seconds, 1e-9):,.0f} games/s)\n"
        f"  wrote {out}/ (games.arrow, rejects.arrow, inputs.json, report.json)"
    )
    require_accepted(parts, report, out)
    return 0


if __name__ == "__main__":
    run_stage("merge", main)
