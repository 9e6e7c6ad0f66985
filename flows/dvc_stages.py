"""Run one DVC stage at a time and say what happened: the orchestrator's view of `dvc repro`.

No Prefect here (flows/pipeline.py adds it), so the same helpers serve any orchestrator:

    order = stage_order(root)                                # DAG order from dvc.yaml
    result = repro(root, "train", on_line=print)             # dvc repro --single-item train
    result.skipped, result.restored                          # up to date; restored from the run-cache
    if result.failure: print(result.failure.kind, result.failure.retryable, result.failure.message)
    rows = locked_outputs(root, "train")                     # the stage's outs from dvc.lock

A failure is classified by the stage's exit status (the convention in chesscore.failures), or
by DVC's own message when another run holds the lock.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chesscore import failures
from chesscore.fileio import load_yaml

# DVC's wording (dvc/lock.py, dvc/rwlock.py) when another dvc process holds the repo or an output.
LOCK_MESSAGES = ("Unable to acquire lock", "is busy, it is being blocked by")
EXITED = re.compile(r"failed to reproduce '(?P<stage>[^']+)'.*exited with (?P<code>-?\d+)")
SKIPPED = re.compile(r"Stage '(?P<stage>[^']+)' didn't change, skipping")
# DVC found this stage's deps and params in its run-cache and checked the outputs out from there.
RESTORED = re.compile(r"Stage '(?P<stage>[^']+)' is cached - skipping run, checking out outputs")
TAIL_LINES = 40  # lines of output kept to explain a failure


@dataclass(frozen=True)
class Failure:
    """Why `dvc repro` of a stage failed, and whether another attempt could pass."""

    kind: str  # bad_input, refused, temporary, killed, lock, bug, usage, dvc
    retryable: bool
    message: str
    exit_code: int | None  # the stage command's exit status, when DVC reported one


@dataclass
class StageResult:
    stage: str
    returncode: int  # of dvc itself
    seconds: float
    skipped: bool  # DVC found the stage up to date and did not run its command
    tail: list[str] = field(default_factory=list)
    restored: bool = False  # DVC restored the outputs from its run-cache instead of running it
    failure: Failure | None = None


def stage_order(root: str | os.PathLike) -> list[str]:
    """The pipeline's stages (those with a command) in an order DVC would run them: the
    dependency graph of dvc.yaml, ties broken by the order the stages are written in. Stages of
    other dvc.yaml files (scale/dvc.yaml) are in it only when a stage of the root's depends on
    them, as `dvc repro` at the root runs them."""
    import networkx as nx
    from dvc.repo import Repo

    root = os.path.abspath(root)

    def address(stage: Any) -> str:  # as `dvc repro` takes it from the repo root
        dvcfile = os.path.relpath(stage.path, root)
        return stage.name if dvcfile == "dvc.yaml" else f"{dvcfile}:{stage.name}"

    with Repo(root) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        root_stages = [stage for stage in graph.nodes if address(stage) == stage.name]
        needed = set(root_stages).union(*(nx.descendants(graph, stage) for stage in root_stages))
        stages = [stage for stage in graph.nodes if getattr(stage, "cmd", None) and stage in needed]
        written = {address(stage): i for i, stage in enumerate(repo.index.stages)}
        run_first = graph.subgraph(stages).reverse(copy=True)
        ordered = nx.lexicographical_topological_sort(
            run_first, key=lambda stage: (written.get(address(stage), len(written)), address(stage))
        )
        return [address(stage) for stage in ordered]


def stage_env() -> dict[str, str]:
    """The environment for stage commands: this interpreter's bin folder first on PATH (the
    stages run `python -m stages...`), Debian's games folder (stockfish), unbuffered output,
    and progress bars that refresh every few seconds instead of flooding a log."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/games", env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TQDM_MININTERVAL", "5")
    return env


def repro(
    root: str | os.PathLike, stage: str, on_line: Callable[[str], Any] = print, force: bool = False, pull: bool = False
) -> StageResult:
    """`dvc repro --single-item <stage>` in `root`, each output line passed to on_line as it comes;
    pull: with --pull (missing run-cache outputs come from the default remote)."""
    command = [sys.executable, "-m", "dvc", "repro", "--single-item", stage] + (["--force"] if force else [])
    command += ["--pull"] if pull else []
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    skipped = restored = False
    started = time.monotonic()
    with subprocess.Popen(
        command,
        cwd=root,
        env=stage_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
    ) as process:
        try:
            for line in process.stdout:  # universal newlines: a progress bar's \r ends a line too
                line = line.rstrip()
                if not line:
                    continue
                tail.append(line)
                skipped = skipped or bool(SKIPPED.search(line))
                restored = restored or bool(RESTORED.search(line))
                on_line(line)
            process.wait()
        finally:
            if process.poll() is None:  # our caller gave up (cancelled, interrupted)
                process.terminate()
                process.wait()
    result = StageResult(stage, process.returncode, time.monotonic() - started, skipped, list(tail), restored)
    if process.returncode != 0:
        result.failure = classify(process.returncode, result.tail)
    return result


def classify(dvc_returncode: int, tail: list[str]) -> Failure:
    """Why `dvc repro` failed, from its exit status and the last lines of output."""
    text = "\n".join(tail)
    # "chesscore-failure: <kind>: <message>": the stage's own words
    marker = [line.split(failures.MARKER, 1)[1].split(":", 1)[-1].strip() for line in tail if failures.MARKER in line]
    errors = [line for line in tail if line.startswith("ERROR")]
    exited = EXITED.search(text)
    code = int(exited["code"]) if exited else None
    # Without a marker the stage's last line before DVC's ERROR says most (a traceback's last line).
    own = [line for line in tail[: tail.index(errors[-1])] if not line.startswith(">")] if errors else []
    message = (
        marker[-1]
        if marker
        else (own[-1] if exited and own else errors[-1] if errors else tail[-1] if tail else "no output")
    )
    if any(phrase in text for phrase in LOCK_MESSAGES):
        return Failure("lock", True, "another DVC run holds the lock: " + (errors[-1] if errors else message), code)
    if code is None:
        if dvc_returncode < 0:  # dvc itself was killed
            return Failure("killed", True, f"dvc was killed by signal {-dvc_returncode}", None)
        return Failure("dvc", False, message, None)
    if code == failures.BAD_INPUT:
        return Failure("bad_input", False, message, code)
    if code == failures.REFUSED:
        return Failure("refused", False, message, code)
    if code == failures.TEMPORARY:
        return Failure("temporary", True, message, code)
    if failures.is_retryable_exit(code):
        signal_number = -code if code < 0 else code - 128
        return Failure("killed", True, f"the stage was killed by signal {signal_number}", code)
    if code == 2:
        return Failure("usage", False, message, code)
    return Failure("bug", False, message, code)


def read_lock(root: str | os.PathLike) -> dict[str, Any]:
    path = Path(root) / "dvc.lock"
    if not path.is_file():
        return {}
    return (load_yaml(path) or {}).get("stages", {}) or {}


def locked_outputs(root: str | os.PathLike, stage: str) -> list[dict[str, Any]]:
    """One row per output of `stage` as dvc.lock records it: path, hash, bytes, files."""
    entry = read_lock(root).get(stage, {})
    return [
        {"path": out["path"], "md5": out.get("md5", ""), "bytes": out.get("size"), "files": out.get("nfiles", 1)}
        for out in entry.get("outs", [])
    ]
