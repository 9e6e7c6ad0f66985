"""Shared fixtures of the orchestration tests: tiny DVC repos, the whole pipeline once per session
(pipeline_run) and a real Prefect server on loopback (running_prefect_server, which
tests/flows/conftest.py holds for the flow tests only, so that it does not idle beside the rest).
tests/conftest.py loads this module as a plugin, so each fixture here is defined once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# The stages in the order the pipeline runs them.
STAGES = ["validate", "convert", "train", "evaluate", "selfplay", "arena"]

# Server services no test needs, turned off: each costs CPU at start and on every loop while the
# server idles. Kept on: task_run_recorder (task run states, which the tests read,
# come from events) and event_persister. db_vacuum stays: "false" still means its hourly events
# vacuum, and nothing else turns it off.
SERVICES_OFF = {
    "CANCELLATION_CLEANUP": "no test cancels a run",
    "FOREMAN": "marks silent workers and deployments not ready; the served test polls every second",
    "LATE_RUNS": "marks unstarted runs Late; the runner picks up Scheduled runs either way",
    "SCHEDULER": "creates runs from schedules; the tests start their runs through the API",
    "PAUSE_EXPIRATIONS": "no flow pauses",
    "REPOSSESSOR": "reclaims concurrency-limit leases; no flow takes one",
    "CLEANUP_RECONCILER": "expires workers' cleanup leases; no worker runs here",
    "TRIGGERS": "runs automations; there are none",
    "EVENT_LOGGER": "prints events to the server's log (off by default; pinned off)",
}

# The smallest params that still run every code path of every stage (a tiny model, a few updates,
# a handful of games per opponent, one self-play iteration in-process). Applied to a copy only.
TINY = {
    "train.model": "tiny",
    "train.micro": 8,
    "train.max_updates": 4,
    "train.validation_every_steps": 4,
    "train.legality_eval_games": 4,
    "evaluate.games": 2,
    # The two test games this seed samples are short (62 and 48 plies; seed 0's: 106 and 39), yet
    # one reaches the endgame and the batch outlives the shorter one: evaluate's every path at
    # less than half the forwards (it runs five times in the suite: 17 -> 10 CPU s each).
    "evaluate.seed": 18,
    "evaluate.batch_size": 4,
    "evaluate.conditioning_ratings": [1000, 2000],  # the matrix's four passes, not six
    "evaluate.human_games": 2,  # real games: the model, Stockfish depth 1 and random on their positions
    "arena.games": 2,
    "arena.max_plies": 24,
    "arena.conditioning_games": 2,  # told 1000 and 2000 (params.yaml), vs random only
    "arena.opponents": [
        {"name": "random", "kind": "random"},  # one opponent of each kind
        {"name": "stockfish-skill0", "kind": "stockfish", "skill": 0},
        {"name": "selfplay-rl", "kind": "checkpoint", "path": "data/selfplay/rl.pt"},
    ],
    "selfplay.iterations": 1,
    "selfplay.games": 2,
    "selfplay.max_plies": 16,
    "selfplay.shard_games": 1,
    "selfplay.eval_games": 2,
    "selfplay.workers": 0,
    "selfplay.batch_games": 2,
}

# A toy stage for flow tests: appends its name to its input, under chesscore's failure
# convention (so CHESSCORE_FAULT reaches it) and with an atomic write. With TOY_GATE set it
# waits (up to 2 minutes) until that file exists: a test opens the gate when it is ready.
TOY_STAGE = """\
import os, sys, time
from pathlib import Path
from chesscore.cli.runner import run_stage
from chesscore.fileio import atomic_write_text

def main():
    name, source, target = sys.argv[1:4]
    gate, deadline = os.environ.get("TOY_GATE"), time.monotonic() + 120
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.05)
    text = Path(source).read_text() if source != "-" else ""
    atomic_write_text(target, text + name + "\\n")

if __name__ == "__main__":
    run_stage(sys.argv[1], main)
"""
TOY_DVC = """\
stages:
  first:
    cmd: python step.py first - work/a.txt
    deps: [step.py]
    outs: [work/a.txt]
  second:
    cmd: python step.py second work/a.txt work/b.txt
    deps: [step.py, work/a.txt]
    outs: [work/b.txt]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(
    command: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    """A command with the venv's bin folder first on PATH; output captured, shown on failure."""
    env = {**os.environ, **(env or {})}
    env["PATH"] = os.pathsep.join([str(BIN), "/usr/games", env.get("PATH", "")])
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def init_repo(path: Path) -> Path:
    """An empty git + DVC repository with DVC's analytics off."""
    path.mkdir(parents=True, exist_ok=True)
    run(["git", "init", "-q"], path)
    run(["git", "config", "user.email", "tests@example.invalid"], path)
    run(["git", "config", "user.name", "tests"], path)
    run([str(BIN / "dvc"), "init", "-q"], path)
    run([str(BIN / "dvc"), "config", "core.analytics", "false"], path)
    return path


@pytest.fixture(scope="session")
def toy_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed two-stage DVC pipeline whose stages take a fraction of a second."""
    path = init_repo(tmp_path_factory.mktemp("toy") / "repo")
    (path / "step.py").write_text(TOY_STAGE)
    (path / "dvc.yaml").write_text(TOY_DVC)
    (path / "params.yaml").write_text(
        "validate:\n  raw: data/raw\nconvert:\n  split_key: chesscore-split-v1\n"
        "profiles:\n  other:\n    convert.split_key: other-key\n"
    )
    run(["git", "add", "-A"], path)
    run(["git", "commit", "-qm", "toy pipeline"], path)
    return path


@pytest.fixture
def toy_repo(toy_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the toy pipeline for one test."""
    return copy_tree(toy_template, tmp_path / "repo")


def wait_until_healthy(api: str, server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Wait until the server's /health answers 200; a RuntimeError with its log's tail if it exits first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"prefect server did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)


@contextlib.contextmanager
def running_prefect_server(home: Path) -> Iterator[dict[str, str]]:
    """`prefect server start` on a free loopback port with PREFECT_HOME `home`; yields the
    environment a client needs (PREFECT_API_URL, PREFECT_HOME) and stops the server on exit.
    (tests/flows/conftest.py holds it for the flow tests.)"""
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_API_URL": "",
        **{f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in SERVICES_OFF},
    }
    with open(home / "server.log", "w") as log:
        server = subprocess.Popen(
            [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        api = f"http://127.0.0.1:{port}/api"
        try:
            wait_until_healthy(api, server, home / "server.log")
            yield {"PREFECT_API_URL": api, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        finally:  # the whole process group; it may be gone already (a server that died at start)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


class Api:
    """The few Prefect REST calls the tests make (the documented /api endpoints)."""

    RETRY = (429, 502, 503)  # what the server means as "try again" (503: SQLite busy), as Prefect's client retries

    def __init__(self, env: dict[str, str]):
        self.url = env["PREFECT_API_URL"]

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(6):
            response = httpx.request(method, f"{self.url}{path}", timeout=30, **kwargs)
            if response.status_code not in self.RETRY:
                break
            time.sleep(0.2 * 2**attempt)
        return response

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self._send("POST", path, json=body or {})
        response.raise_for_status()
        return response.json()

    def get(self, path: str) -> httpx.Response:
        return self._send("GET", path)

    def flow_run(self, run_id: str) -> dict[str, Any]:
        response = self.get(f"/flow_runs/{run_id}")
        response.raise_for_status()
        return response.json()

    def task_runs(
        self, run_id: str, settled: tuple[str, ...] = ("COMPLETED", "FAILED", "CRASHED"), timeout: float = 30
    ) -> dict[str, dict[str, Any]]:
        """The flow run's task runs by name (the stage name), once all are in a final state: the
        server records task run states from events, a moment after the client sends them."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.post("/task_runs/filter", {"flow_runs": {"id": {"any_": [run_id]}}})
            if rows and all(row["state"]["type"] in settled for row in rows) or time.monotonic() > deadline:
                return {row["name"]: row for row in rows}
            time.sleep(0.3)

    def artifacts(self, run_id: str) -> dict[str, dict[str, Any]]:
        rows = self.post("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})
        return {row["key"]: row for row in rows}

    def logs(self, run_id: str) -> str:
        rows = self.post("/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "sort": "TIMESTAMP_ASC"})
        return "\n".join(row["message"] for row in rows)


def flow_run_id(stdout: str) -> str:
    """The id `python -m flows.pipeline` prints last: `flow run <id>: <state>`."""
    lines = [line for line in stdout.splitlines() if line.startswith("flow run ")]
    assert lines, f"no flow run line in:\n{stdout}"
    return lines[-1].split()[2].rstrip(":")


def copy_tree(source: Path, target: Path) -> Path:
    """A copy of a repo (git history, DVC cache and outputs included), symlinks kept as links."""
    shutil.copytree(source, target, symlinks=True)
    return target


def snapshot(target: Path) -> Path:
    """A copy of the project's working tree (tracked and untracked files git does not ignore, no
    data/ but the embedded samples), committed as a fresh git repository: a clean clone's twin."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=PROJECT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        if name.startswith("data/") and not name.startswith(("data/raw/", "data/real/")):
            continue  # outputs of someone's run in the shared checkout
        source = PROJECT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    run(["git", "init", "-q"], target)
    run(["git", "config", "user.email", "tests@example.invalid"], target)
    run(["git", "config", "user.name", "tests"], target)
    commit(target, "snapshot of the working tree")
    return target


def commit(repo: Path, message: str) -> None:
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", message, "--allow-empty"], repo)


def output_files(repo: Path) -> dict[str, str]:
    """sha256 of every file under every output dvc.lock records, by path."""
    from chesscore.fileio import sha256_file

    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    hashes = {}
    for stage in lock.values():
        for out in stage.get("outs", []):
            path = repo / out["path"]
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            hashes.update({p.relative_to(repo).as_posix(): sha256_file(p) for p in files})
    return hashes


@dataclass(frozen=True)
class PipelineRun:
    repo: Path  # a committed repo after one full `dvc repro` with TINY params: treat as read-only
    seconds: dict[str, float]  # wall seconds of each stage, in DAG order
    outputs: dict[str, str]  # sha256 of every output file


@pytest.fixture(scope="session")
def pipeline_run(tmp_path_factory: pytest.TempPathFactory) -> PipelineRun:
    """The whole pipeline once per test session on a snapshot of the project with TINY params,
    stage by stage (timed); dvc.lock and the metrics are committed afterwards."""
    from chesscore.pipeline import profile
    from flows import dvc_stages

    repo = snapshot(tmp_path_factory.mktemp("pipeline") / "repo")
    profile.apply(TINY, repo / "params.yaml")
    commit(repo, "tiny params for the tests")
    seconds = {}
    for stage in dvc_stages.stage_order(repo):
        log: list[str] = []
        result = dvc_stages.repro(repo, stage, on_line=log.append)
        assert result.failure is None, f"stage {stage} failed: {result.failure}\n" + "\n".join(log[-40:])
        seconds[stage] = result.seconds
    commit(repo, "pipeline run")
    return PipelineRun(repo, seconds, output_files(repo))


def dvc(repo: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run([str(BIN / "dvc"), *args], repo, env=env, check=check)
