"""The merge stage's memory and cost per game, against today's single-stage dedup (SeenKeys).

    python bench/merge.py                          # 10x ... 10,000x the test's keys; about a minute
    python bench/merge.py --scales 10 100          # the two the README quotes

Keys: 12 parts of random 64-bit id and move keys, 1% of each part's games copied from an earlier
part (both keys), at `scale` times the 408 games of tests/pipeline/test_parts.py. Measured, each
in a fresh process (peak RSS: VmHWM, minus the same process's RSS after its imports):
  merge      the merge's key passes (chesscore.ingest.merge.find_duplicates: the parts' sorted
             runs read a window at a time, the repeated keys replayed in order)
  SeenKeys   the baseline: every key in one process's RAM, looked up and added a batch of 4,000
             at a time, as chesscore.ingest.validate_run dedups today
Then the whole merge (games and rejects streamed too) on 12 synthetic months cut from the
embedded sample (tests/months.py) at 10x and 100x the test's games: CPU seconds per game, the
cost the projections in docs/scaling.md use. Past about 10x the sample's games repeat, so most
of those are duplicates: the slow path, an upper bound. Last, the sample validated once and copied
--stream times as parts with fresh keys (1% copied across parts): the whole merge at a realistic
duplicate rate.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

TEST_GAMES = 408  # the rule-accepted games of 12 of tests/months.py's months of 30 games
PARTS = 12
DUPLICATES = 0.01


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def rss_mb() -> float:
    """Peak RSS of this process since its exec (VmHWM; getrusage's ru_maxrss would count the
    forked parent's pages before the exec)."""
    return _status_mb("VmHWM")


def current_mb() -> float:
    return _status_mb("VmRSS")


def write_parts(folder: Path, games: int, seed: int = 0, duplicates: float = DUPLICATES) -> list[Path]:
    from chesscore.ingest.runs import KeyLog

    rng = np.random.default_rng(seed)
    per = games // PARTS
    parts, earlier = [], []
    for k in range(PARTS):
        ids, moves = rng.integers(1, 2**63, per, dtype=np.uint64), rng.integers(1, 2**63, per, dtype=np.uint64)
        if earlier:
            copies = rng.choice(per, int(per * duplicates), replace=False)
            source = rng.integers(0, len(earlier[0]), len(copies))
            ids[copies], moves[copies] = earlier[0][source], earlier[1][source]
        earlier = [np.concatenate([earlier[0], ids]), np.concatenate([earlier[1], moves])] if earlier else [ids, moves]
        log = KeyLog()
        log.add(ids, moves, np.arange(per))
        log.write(folder / f"p{k:02d}" / "keys")
        parts.append(folder / f"p{k:02d}")
    return parts


def child(kind: str, folder: Path, window: int) -> dict:
    """One measurement in this (fresh) process."""
    from chesscore.ingest.dedup import SeenKeys
    from chesscore.ingest.merge import find_duplicates
    from chesscore.ingest.runs import Run

    parts = sorted(p for p in folder.iterdir() if p.is_dir())
    started_mb = current_mb()
    cpu = time.process_time()
    if kind == "merge":
        found = find_duplicates(parts, [{"path": p.name} for p in parts], window)
        duplicates = len(found)
        games = sum(len(Run(p / "keys", "move")) for p in parts)
    else:  # the baseline: SeenKeys over the same keys, in input order, a batch at a time
        seen_ids, seen_moves, duplicates, games = SeenKeys(), SeenKeys(), 0, 0
        for part in parts:
            index = np.load(part / "keys" / "index.npy")
            ids, moves = np.zeros(len(index), np.uint64), np.zeros(len(index), np.uint64)
            for key_kind, target in (("id", ids), ("move", moves)):
                run = Run(part / "keys", key_kind)
                target[run.rows(0, len(run)).astype(np.int64)] = run.keys(0, len(run))
            for start in range(0, len(index), 4000):
                i, m = ids[start : start + 4000], moves[start : start + 4000]
                new = (seen_ids.lookup(i) < 0) & (seen_moves.lookup(m) < 0)
                seen_ids.add_new(i[new], np.arange(new.sum()))
                seen_moves.add_new(m[new], np.arange(new.sum()))
                duplicates += int((~new).sum())
            games += len(index)
    return {
        "games": games,
        "duplicates": duplicates,
        "cpu_s": time.process_time() - cpu,
        "rss_mb": rss_mb(),
        "above_start_mb": rss_mb() - started_mb,
    }


def measure(kind: str, folder: Path, window: int) -> dict:
    command = [sys.executable, __file__, "--child", kind, str(folder), "--window", str(window)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def whole_merge(scale: int, folder: Path) -> dict:
    """The whole merge on months cut from the sample: CPU seconds per game (in this process)."""
    from chesscore.ingest.merge import merge_parts
    from chesscore.ingest.runs import KeyLog
    from chesscore.ingest.validate import ValidateConfig
    from chesscore.ingest.validate_run import run_validate
    from tests.months import write_months

    paths = write_months(folder / "raw", count=PARTS, games=TEST_GAMES * scale // PARTS)
    parts = []
    for path in paths:
        parts.append(folder / "parts" / path.name.split(".")[0])
        run_validate([path], parts[-1], ValidateConfig(), keys=KeyLog())
    cpu = time.process_time()
    report = merge_parts(parts, folder / "merged")
    seconds = time.process_time() - cpu
    return {"games": report["games_seen"], "duplicates": report["by_reason"].get("duplicate", 0), "cpu_s": seconds}


def stream_cost(copies: int, folder: Path) -> dict:
    """The whole merge at a realistic duplicate rate: the sample validated once as a part, copied
    `copies` times with fresh random keys (1% copied across parts, as above), so the games and
    rejects stream through at the real cost per game without the sample's own repeats."""
    import shutil

    from chesscore.ingest.merge import merge_parts
    from chesscore.ingest.runs import KeyLog
    from chesscore.ingest.validate import ValidateConfig
    from chesscore.ingest.validate_run import run_validate

    run_validate([ROOT / "data" / "raw" / "lichess_sample.pgn.zst"], folder / "one", ValidateConfig(), keys=KeyLog())
    rows = len(np.load(folder / "one" / "keys" / "index.npy"))
    global PARTS
    saved, PARTS = PARTS, copies
    try:
        keyed = write_parts(folder / "keys", rows * copies)
    finally:
        PARTS = saved
    parts = []
    for k, keys in enumerate(keyed):
        part = folder / "parts" / f"p{k:03d}"
        shutil.copytree(folder / "one", part)
        shutil.rmtree(part / "keys")
        shutil.copytree(keys / "keys", part / "keys")
        np.save(part / "keys" / "index.npy", np.load(folder / "one" / "keys" / "index.npy"))
        parts.append(part)
    cpu = time.process_time()
    report = merge_parts(parts, folder / "merged")
    seconds = time.process_time() - cpu
    return {"games": report["games_seen"], "duplicates": report["by_reason"].get("duplicate", 0), "cpu_s": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/merge.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", type=int, nargs="*", default=[10, 100, 1000, 10000], help="x the test's keys")
    parser.add_argument("--window", type=int, default=1 << 20, help="the merge's window (merge.window)")
    parser.add_argument(
        "--duplicates", type=float, default=DUPLICATES, help="share of each part's games copied from earlier parts"
    )
    parser.add_argument("--whole", type=int, nargs="*", default=[10, 100], help="scales of the whole merge")
    parser.add_argument("--stream", type=int, default=48, help="copies of the sample for the streaming cost (0: none)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]), args.window)))
        return 0
    print(f"keys: {PARTS} parts, {args.duplicates:.0%} copied across parts; window {args.window:,}; RSS above the")
    print("process's own after imports (peak RSS in brackets); baseline: SeenKeys, all keys in RAM")
    head = ("scale", 7), ("games", 12), ("duplicates", 11), ("merge MB", 16), ("SeenKeys MB", 18), ("ratio", 7)
    print(" ".join(f"{name:>{width}}" for name, width in head), f"{'us/game':>8}")
    for scale in args.scales:
        with tempfile.TemporaryDirectory() as tmp:
            parts = write_parts(Path(tmp), TEST_GAMES * scale, duplicates=args.duplicates)
            merged, baseline = measure("merge", Path(tmp), args.window), measure("seen", Path(tmp), args.window)
        assert merged["duplicates"] == baseline["duplicates"], (merged, baseline)
        print(
            f"{scale:>6}x {merged['games']:>12,} {merged['duplicates']:>11,}"
            f" {merged['above_start_mb']:>7.1f} ({merged['rss_mb']:>5.0f})"
            f" {baseline['above_start_mb']:>9.1f} ({baseline['rss_mb']:>5.0f})"
            f" {merged['above_start_mb'] / max(baseline['above_start_mb'], 0.1):>6.2f}x"
            f" {merged['cpu_s'] / merged['games'] * 1e6:>8.2f}"
        )
        del parts
    for scale in args.whole:
        with tempfile.TemporaryDirectory() as tmp:
            whole = whole_merge(scale, Path(tmp))
        print(
            f"whole merge at {scale}x: {whole['games']:,} games ({whole['duplicates']:,} duplicates) in "
            f"{whole['cpu_s']:.2f} CPU s: {whole['cpu_s'] / whole['games'] * 1e6:.1f} us/game "
            f"({whole['games'] / max(whole['cpu_s'], 1e-9):,.0f} games/s per core)"
        )
    if args.stream:
        with tempfile.TemporaryDirectory() as tmp:
            whole = stream_cost(args.stream, Path(tmp))
        print(
            f"whole merge, {args.stream} copies of the sample with fresh keys: {whole['games']:,} games "
            f"({whole['duplicates']:,} duplicates) in {whole['cpu_s']:.2f} CPU s: "
            f"{whole['cpu_s'] / whole['games'] * 1e6:.1f} us/game "
            f"({whole['games'] / whole['cpu_s']:,.0f} games/s per core)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
