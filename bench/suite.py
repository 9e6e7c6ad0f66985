"""The test suite's wall time on this machine against a named baseline commit (issue 13: it must not grow).

    python bench/suite.py                                  # HEAD against ce92e5a, 2 rounds (about 40 min)
    python bench/suite.py --baseline ce92e5a --rounds 3 --workdir /tmp/suite-bench

Each contender is a clean clone of this repository at its commit (HEAD's clone holds what is
committed, not the working tree) in --workdir, set up by its own `make setup` (not timed; a clone
already there at the right commit is reused, set-up and all), with nothing beside it, as a new
user has it. Then each round runs every contender's README test command, `make test`, and the
order alternates from round to round (A B, then B A), so that a slow stretch of a shared machine
falls on both. `CI` is removed from the environment: the baseline fails by design with it set.

Per run: wall seconds, CPU seconds (user + sys of every waited-for process of the run) and
pytest's last line. The headline is the best wall time of each contender (noise on a shared
machine only ever slows a run, so the least disturbed run is the most informative: timeit's rule)
and their ratio; beside it the ratio of each round's pair, which shows how far the machine moved.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chesscore.pipeline.curve import cpu_seconds  # noqa: E402

BASELINE = "ce92e5a"  # the suite issue 13 measured: 220 passed, 81 skipped, 6:20 on a clean clone
PYTEST_LINE = re.compile(r"=+ (.*\b(?:passed|failed|error)\b.*) =+\s*$")


@dataclass(frozen=True)
class Run:
    contender: str
    round: int
    wall: float  # seconds of `make test`
    cpu: float  # user + sys seconds of every process it waited for
    summary: str  # pytest's last line, e.g. "721 passed, 210 warnings in 354.0s"
    returncode: int


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def resolve(commit: str) -> str:
    """The full hash of `commit`, or a clear exit where this clone does not have it."""
    try:
        return git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        sys.exit(f"bench/suite.py: {commit} is not a commit of {ROOT} (a shallow clone? `git fetch --unshallow`)")


def clone(full: str, workdir: Path) -> Path:
    """A clean clone of this repository at commit `full`, set up by its own `make setup` (reused
    when already there at that commit)."""
    path = workdir / full[:12]
    if not (path / ".git").is_dir() or git("rev-parse", "HEAD", cwd=path) != full:
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(path)], check=True)
        subprocess.run(["git", "-c", "advice.detachedHead=false", "checkout", "-q", full], cwd=path, check=True)
    print(f"set-up of {full[:12]} in {path} ...", flush=True)
    subprocess.run(["make", "setup"], cwd=path, env=environment(), check=True, stdout=subprocess.DEVNULL)
    return path


def environment() -> dict[str, str]:
    """This one without what would make a clone's run differ from a new user's: CI, and anything
    that would import another tree's code (each clone's Makefile puts its own .venv first on PATH)."""
    dropped = {"CI", "PYTHONPATH", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("PYTEST_")}


def time_suite(contender: str, round_: int, path: Path, log: Path) -> Run:
    """`make test` in the clone, its output to `log`."""
    cpu, start = cpu_seconds(), time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(["make", "test"], cwd=path, env=environment(), stdout=out, stderr=subprocess.STDOUT)
    wall, cpu = time.monotonic() - start, cpu_seconds() - cpu
    lines = [m.group(1) for line in log.read_text(errors="replace").splitlines() if (m := PYTEST_LINE.match(line))]
    summary = lines[-1] if lines else "(no pytest summary: see the log)"
    return Run(contender, round_, wall, cpu, summary, done.returncode)


def report(runs: list[Run], names: tuple[str, str]) -> None:
    current, baseline = names
    print(f"\n{'contender':<28} {'round':>5} {'wall s':>8} {'CPU s':>8}  pytest")
    for run in runs:
        print(f"{run.contender:<28} {run.round:>5} {run.wall:>8.1f} {run.cpu:>8.1f}  {run.summary}")
    walls = {name: [r.wall for r in runs if r.contender == name] for name in names}
    best = {name: min(walls[name]) for name in names}
    pairs = [c / b for c, b in zip(walls[current], walls[baseline])]
    print(
        f"\nbest wall: {current} {best[current]:.0f} s ({best[current] / 60:.1f} min), "
        f"{baseline} {best[baseline]:.0f} s ({best[baseline] / 60:.1f} min): "
        f"ratio {best[current] / best[baseline]:.2f}x (below 1: the suite got faster)"
    )
    print(f"each round's ratio: {', '.join(f'{p:.2f}' for p in pairs)} (median {statistics.median(pairs):.2f})")
    if any(r.returncode for r in runs):
        print("some runs failed: see their logs", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--current", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--baseline", default=BASELINE, help=f"the commit it is measured against (default {BASELINE})")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of one run each, the order alternating")
    parser.add_argument(
        "--workdir", type=Path, help="where the clones and logs go (a new temp folder by default; give one to reuse)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    commits = [resolve(args.current), resolve(args.baseline)]  # both before the first set-up
    if git("status", "--porcelain", "--untracked-files=no"):
        print("note: the working tree has uncommitted changes; they are not measured", file=sys.stderr)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="suite-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    names = (f"current {args.current}", f"baseline {args.baseline}")
    paths = {name: clone(full, workdir) for name, full in zip(names, commits)}
    runs = []
    for round_ in range(1, args.rounds + 1):
        order = names if round_ % 2 == 1 else names[::-1]
        timed = {}
        for name in order:
            log = workdir / f"round{round_}-{name.split()[0]}.log"
            print(f"round {round_}: {name}: make test (log: {log}) ...", flush=True)
            timed[name] = time_suite(name, round_, paths[name], log)
            print(f"  {timed[name].wall:.0f} s wall, {timed[name].cpu:.0f} CPU s: {timed[name].summary}", flush=True)
        runs += [timed[name] for name in names]  # current first in each round, whichever ran first
    report(runs, names)
    return 1 if any(r.returncode for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
