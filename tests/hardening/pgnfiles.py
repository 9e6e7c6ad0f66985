"""Small generated PGN files for the hardening tests: seeded random legal games in the Lichess
layout (distinct ids and moves, so none is a duplicate), and a way to run a stage CLI as a
subprocess and measure it (exit code, stderr, peak RSS, CPU seconds)."""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import chess

from tests.imports import PROJECT

SAMPLE = PROJECT / "data" / "raw" / "lichess_sample.pgn.zst"


def random_game(seed: int, plies: int = 24, **tags: str) -> str:
    """One legal game from the start, its result taken from the final position or `*` made 1/2."""
    rng = random.Random(seed)
    board = chess.Board()
    sans = []
    while len(sans) < plies and not board.is_game_over():
        move = rng.choice(list(board.legal_moves))
        number = f"{board.fullmove_number}. " if board.turn == chess.WHITE else ""
        sans.append(number + board.san(move) + f" {{ [%clk 0:0{rng.randint(1, 9)}:00] }}")
        board.push(move)
    outcome = board.outcome()
    result = outcome.result() if outcome else "1/2-1/2"
    headers = {
        "Event": "Rated Blitz game",
        "Site": f"https://lichess.org/{seed:08d}",
        "White": f"white{seed}",
        "Black": f"black{seed}",
        "Result": result,
        "WhiteElo": "1500",
        "BlackElo": "1600",
        "TimeControl": "180+2",
        "Termination": "Normal",
        **tags,
    }
    head = "\n".join(f'[{name} "{value}"]' for name, value in headers.items())
    return f"{head}\n\n{' '.join(sans)} {result}\n\n"


def random_games(n: int, seed: int = 0, **tags: str) -> str:
    return "".join(random_game(seed * 100_000 + i, **tags) for i in range(n))


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    peak_rss_mib: float  # the largest high-water mark of the stage process and its children
    cpu_seconds: float  # user + system of the stage process and the children it waited for
    peak_vm_mib: float = 0.0  # the largest virtual size (VmPeak) of any of them


def run_stage(module: str, *args, cwd: Path | None = None, env: dict | None = None, limits=None, timeout=900) -> Run:
    """python -m <module> args... in a fresh process. Its peak RSS is each process's own VmHWM
    (read from /proc while it runs: wait4's ru_maxrss would count the test process's pages that
    the child held between fork and exec); its CPU time comes from wait4."""
    command = [sys.executable, "-m", module, *map(str, args)]
    full_env = {**os.environ, "PYTHONPATH": str(PROJECT), **(env or {})}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=cwd or PROJECT, env=full_env, stdout=out, stderr=err, preexec_fn=limits)
        deadline, peak, peak_vm = time.monotonic() + timeout, 0, 0
        while True:
            tree = process_tree(process.pid)
            peak = max([peak, *(_status_kib(pid, "VmHWM") for pid in tree)])
            peak_vm = max([peak_vm, *(_status_kib(pid, "VmPeak") for pid in tree)])
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                _, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return Run(process.returncode, out.read(), err.read(), peak / 1024, cpu, peak_vm / 1024)


def process_tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc/<pid>/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except OSError:
                pass
    return found


def _status_kib(pid: int, field: str) -> int:
    """A /proc/<pid>/status field in KiB (VmHWM, VmPeak) of a live process, 0 once it is gone.
    (Popen returns only after the child's exec, so the mark is never the test process's own.)"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((x for x in status.splitlines() if x.startswith(f"{field}:")), None)
    return int(line.split()[1]) if line else 0


def limit_file_size(nbytes: int):
    """A preexec_fn: writes past nbytes fail with EFBIG (Python ignores SIGXFSZ), as a full disk."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return apply
