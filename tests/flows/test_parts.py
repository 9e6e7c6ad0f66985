"""The part stages on a Ray cluster of two nodes (`ray start` twice on loopback): each part is
validated in its own clone on some node, carried back by a local DVC remote, and restored here
from the run-cache without running; the merge then gives the single stage's bytes."""

from __future__ import annotations

import filecmp
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from chesscore import failures
from chesscore.pipeline import profile
from flows import dvc_stages, parts
from tests.months import write_months
from tests.pipeline_fixtures import BIN, Api, commit, free_port, run, snapshot

pytestmark = pytest.mark.slow

# Two parts: one for each node of the Ray cluster, two tasks at once in the Prefect flow.
MONTHS = ["m01", "m02"]


@pytest.fixture
def months_repo(tmp_path: Path) -> Path:
    """A snapshot of the project whose merge.months are 2 months in a folder outside it (the
    shared path every node sees), committed."""
    repo = snapshot(tmp_path / "repo")
    write_months(tmp_path / "shared-months", count=len(MONTHS), games=20)
    values = {
        "merge.months": MONTHS,
        "merge.raw": str(tmp_path / "shared-months"),
        "merge.into": ["data/merged"],
        "convert.validated": "data/merged",
    }
    profile.apply(values, repo / "params.yaml")
    commit(repo, "two months on a shared path")
    return repo


# Waits (in a process of its own: Ray reads its auth settings once) until both nodes are alive.
TWO_NODES = """
import time, ray
ray.init(log_to_driver=False)
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    time.sleep(0.5)
"""


def start_node(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """`ray start ... --block` in its own process group, so that only our nodes are stopped
    (`ray stop` would stop every Ray process of the machine, other people's too)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [*command, "--block"], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_node(node: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(node.pid, sig)
            node.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def ray_cluster(tmp_path: Path):
    """A head and a second node, one CPU each, on loopback, with a token of this test's own
    (Ray refuses a node without one); yields the environment a driver needs (RAY_ADDRESS, the
    token); each node is stopped by its process group afterwards."""
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ADDRESS": f"127.0.0.1:{port}",
        # On SIGTERM a node first asks the GCS to drain it, for up to 30 s (Ray's default); the
        # head's own GCS, in the same process group, is gone by then: the head waited out 30 s.
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
    }
    temp = Path("/tmp") / f"ray-{port}"  # Ray's socket paths must stay short: not under tmp_path
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats"]
    head = [str(BIN / "ray"), "start", "--head", "--port", str(port), "--include-dashboard", "false"]
    nodes = [start_node([*head, *common, "--temp-dir", str(temp)], env, tmp_path / "head.log")]
    try:
        deadline = time.monotonic() + 300
        while True:  # the second node needs the head's GCS up
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert nodes[0].poll() is None and time.monotonic() < deadline, (tmp_path / "head.log").read_text()
                time.sleep(0.5)
        second = [str(BIN / "ray"), "start", "--address", f"127.0.0.1:{port}", *common]
        nodes.append(start_node(second, env, tmp_path / "node.log"))
        run([sys.executable, "-c", TWO_NODES], tmp_path, env=env, timeout=300)
        yield env
    finally:
        for node in reversed(nodes):
            stop_node(node)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.timeout(900)
def test_parts_on_two_ray_nodes_restore_here_and_merge_to_one_runs_bytes(months_repo: Path, ray_cluster, tmp_path):
    remote = tmp_path / "dvc-remote"
    command = [sys.executable, "-m", "flows.parts", "--backend", "ray", "--repo", str(months_repo)]
    done = run([*command, "--remote", str(remote)], tmp_path, env=ray_cluster, timeout=800)
    lines = [line for line in done.stdout.splitlines() if line.startswith(parts.PART_PREFIX)]
    assert [line.split(":")[1] for line in lines] == [f"part@{m}" for m in MONTHS], done.stdout
    assert all(": ok on " in line for line in lines), done.stdout
    assert len({line.rsplit("ray node ", 1)[1].split()[0] for line in lines}) == 2, (
        done.stdout
    )  # one CPU a node: both took parts
    assert f"restored here from the run-cache: {len(MONTHS)} of {len(MONTHS)}" in done.stdout, done.stdout

    lock = yaml.safe_load((months_repo / "scale" / "dvc.lock").read_text())["stages"]
    assert sorted(lock) == [f"part@{m}" for m in MONTHS]  # recorded here as if run here
    merged = dvc_stages.repro(months_repo, "scale/dvc.yaml:merge@data/merged", on_line=lambda line: None)
    assert merged.failure is None and not merged.skipped
    single = [sys.executable, "-m", "stages.validate", "--raw", str(tmp_path / "shared-months"), "--out", "single"]
    run([*single, "--no-progress"], months_repo)
    for name in ("games.arrow", "rejects.arrow", "inputs.json", "report.json"):
        assert filecmp.cmp(months_repo / "data/merged" / name, months_repo / "single" / name, shallow=False), name


def test_uncommitted_code_is_refused_before_any_job(months_repo: Path) -> None:
    (months_repo / "stages" / "merge.py").write_text("# changed\n", encoding="utf-8")
    with pytest.raises(parts.DirtyCheckout, match="stages/merge.py"):
        parts.checkout_state(months_repo)
    assert issubclass(parts.DirtyCheckout, failures.Refused)
    (months_repo / "params.yaml").write_text((months_repo / "params.yaml").read_text() + "\n", encoding="utf-8")
    subprocess.run(["git", "checkout", "stages/merge.py"], cwd=months_repo, check=True)
    assert parts.checkout_state(months_repo)[1].endswith("\n\n")  # params.yaml travels as text: allowed


@pytest.mark.timeout(900)
def test_the_prefect_flow_runs_the_parts_at_once_then_the_merge(months_repo: Path, prefect_server, tmp_path) -> None:
    """The pipeline flow (a real Prefect server on loopback) with --months-dir and a remote: the
    two parts as concurrent tasks in scratch clones, restored here, then the merge."""
    from prefect.logging.handlers import APILogHandler
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.pipeline import pipeline

    stages = [f"scale/dvc.yaml:part@{m}" for m in MONTHS] + ["scale/dvc.yaml:merge@data/merged"]
    with temporary_settings({PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        state = pipeline(
            repo=str(months_repo),
            stages=stages,
            months_dir=str(tmp_path / "shared-months"),
            parts_remote=str(tmp_path / "dvc-remote"),
            retry_delay_seconds=0.5,
            return_state=True,
        )
        APILogHandler().flush()
        logs = Api(prefect_server).logs(str(state.state_details.flow_run_id))
    assert state.type.value == "COMPLETED", state.message
    assert f"parts: {len(MONTHS)} ran on process, {len(MONTHS)} restored here from the run-cache" in logs, logs
    assert all(f"part@{m}: ran on " in logs for m in MONTHS), logs
    assert (months_repo / "data/merged/games.arrow").is_file()
