"""How validate's wall rate grows with --workers, and the ceiling the main process sets.

    python bench/validate_scaling.py                      # ~50k games, 1, 2, 4, ... workers up to the cores
    python bench/validate_scaling.py --copies 4 --max-workers 4 --rounds 1      # a quick look

Input: the embedded sample (3,515 games in the Lichess dump format, 3.5% broken) copied
`copies` times, copy k without its last k plies and with new Lichess ids (bench/convert.py's
`truncated`), so no game repeats; written once as .pgn and .pgn.zst under --input-dir (a temp
folder by default: the input is not part of the checkout).

Each run is a fresh process calling chesscore.ingest.validate_run.run_validate with N workers,
measuring wall seconds, the CPU seconds of the main process's main thread (time.thread_time) and
of its other threads (the input's sha256, chesscore.ingest.hashes: process_time less the main
thread's), and its workers' (getrusage of the reaped children, their start-up included). For
each N it prints wall games/s, the ratio to the 1-worker rate of the same run, the main thread's
CPU per game, its share of all CPU spent (start-up included), the hash thread's CPU per game, and
the ceiling: the 1-worker run's CPU per game (all the work, in one process) over the main
thread's CPU per game at N (or the hash thread's, if higher: each is a serial path of its own, on
a core of its own). That is 1 / share in steady state, without the workers' start-up (about a CPU
second each), which on an input this small would flatter the share. For the .zst, with 2 or
more workers a reader process inflates and cuts the stream (chesscore.ingest.spool): its CPU per
game, measured alone, gives a third ceiling the same way; the lowest ceiling is the result. Target (issue 17): wall rate
>= 0.7 x N x the 1-worker rate up to 16 workers, i.e. a ceiling >= 11.2x.
On a machine with fewer idle cores than N the wall ratio shows the load, not the code: the CPU
per game is the figure that carries over.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import zstandard
from convert import truncated  # bench/convert.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "raw" / "lichess_sample.pgn.zst"

ONE_RUN = """
import json, os, resource, sys, tempfile, time
from pathlib import Path
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import run_validate
raw, workers = Path(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as out:
    wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    report = run_validate([raw], Path(out) / "v", ValidateConfig(), workers=workers)
    wall, cpu, main = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - main
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"games": report["games_seen"], "accepted": report["accepted"], "wall": wall, "main": main,
                  "threads": cpu - main, "workers": children.ru_utime + children.ru_stime}))
"""


READER = """
import sys, tempfile, time
from pathlib import Path
from chesscore.ingest.spool import spool_ranges
from chesscore.pgn.inputs import read_blocks
cpu = time.process_time()
with tempfile.TemporaryDirectory() as spool:
    for chunk in spool_ranges(read_blocks(Path(sys.argv[1])), Path(spool), int(sys.argv[2]), 8 << 20):
        Path(chunk.spool).unlink()  # as the worker that reads it does
print(time.process_time() - cpu)
"""


def reader_seconds(raw: Path) -> float:
    """CPU seconds of what the reader process does for a compressed input: inflate, cut, spool."""
    command = [sys.executable, "-c", READER, str(raw), str(4000 << 10)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def sample_games() -> list[str]:
    with open(SAMPLE, "rb") as f:
        text = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read().decode("utf-8", "replace")
    games = [g for g in text.split("\n\n[Event ") if g.strip()]
    return [("" if g.startswith("[Event ") else "[Event ") + g.rstrip("\n") + "\n" for g in games]


def build_input(folder: Path, copies: int) -> tuple[Path, Path]:
    """The sample, `copies` times over (copy k without its last k plies, new ids), as .pgn and .pgn.zst."""
    pgn, zst = folder / f"sample-x{copies}.pgn", folder / f"sample-x{copies}.pgn.zst"
    if pgn.is_file() and zst.is_file():
        return pgn, zst
    folder.mkdir(parents=True, exist_ok=True)
    games = sample_games()
    text = "".join(t for copy in range(copies) for n, g in enumerate(games) if (t := truncated(g, copy, copy, n)))
    pgn.write_text(text, encoding="utf-8")
    zst.write_bytes(zstandard.ZstdCompressor(level=3).compress(text.encode()))
    return pgn, zst


def one_run(raw: Path, workers: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(raw), str(workers)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"validate with {workers} workers failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def worker_counts(limit: int) -> list[int]:
    counts, n = [], 1
    while n < limit:
        counts.append(n)
        n *= 2
    return [*counts, limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=15, help="copies of the 3,515 sample games (15: ~50k games)")
    parser.add_argument("--max-workers", type=int, default=os.cpu_count() or 1, help="largest worker count")
    parser.add_argument("--rounds", type=int, default=2, help="runs per worker count (the fastest is kept)")
    parser.add_argument(
        "--input-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chesscore-validate-scaling",
        help="where the input goes",
    )
    args = parser.parse_args(argv)
    pgn, zst = build_input(args.input_dir, args.copies)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    worst, base_run = float("inf"), {}
    for raw in (pgn, zst):
        print(f"\n{raw.name} ({raw.stat().st_size / 1e6:.1f} MB)")
        print(
            f"{'workers':>8}{'games':>9}{'wall s':>8}{'games/s':>10}{'x 1-worker':>11}"
            f"{'main us/game':>13}{'main share':>12}{'hash us/game':>13}{'ceiling':>10}"
        )
        base = None
        for workers in worker_counts(args.max_workers):
            runs = [one_run(raw, workers) for _ in range(args.rounds)]
            run = min(runs, key=lambda r: r["wall"])
            rate = run["games"] / run["wall"]
            if base is None:
                base, base_run = rate, run
            one = (base_run["main"] + base_run["threads"]) / base_run["games"]  # all the work, in one process
            share = run["main"] / (run["main"] + run["threads"] + run["workers"])
            ceiling = one / (max(run["main"], run["threads"]) / run["games"]) if workers > 1 else None
            if ceiling is not None:
                worst = min(worst, ceiling)
            print(
                f"{workers:>8}{run['games']:>9,}{run['wall']:>8.2f}{rate:>10,.0f}{rate / base:>10.2f}x"
                f"{run['main'] / run['games'] * 1e6:>13.1f}{share:>12.3f}{run['threads'] / run['games'] * 1e6:>13.1f}"
                + (f"{ceiling:>9.1f}x" if ceiling else f"{'':>10}")
            )
        if raw is zst:  # with 2+ workers a reader process inflates the stream: a serial path of its own
            reader = min(reader_seconds(raw) for _ in range(args.rounds)) / run["games"]
            worst = min(worst, one / reader)
            print(f"reader process: {reader * 1e6:.1f} us/game, a ceiling of {one / reader:.1f}x the 1-worker rate")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    print(f"lowest ceiling (1-worker CPU per game / serial CPU per game): {worst:.1f}x (target >= 11.2x)")
    return 0 if worst >= 11.2 else 1


if __name__ == "__main__":
    sys.exit(main())
