"""The Prefect flow against a real Prefect server on loopback (temporary PREFECT_HOME), running a
real two-stage DVC pipeline whose stages are cheap: retries for what a retry can fix, none for
what it cannot, artifacts, and the served (scheduled) deployment triggered through the API.

The flow runs in this process (as `python -m flows.pipeline` would run it), pointed at the test
server; the stages run as real processes under `dvc repro`, so faults reach them through the
environment (CHESSCORE_FAULT, see chesscore/cli/faults.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.pipeline_fixtures import BIN, PROJECT, Api, PipelineRun, copy_tree

pytestmark = pytest.mark.slow


@pytest.fixture
def api(prefect_server: dict[str, str]):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        yield Api(prefect_server)


def run_flow(repo: Path, **parameters: Any) -> tuple[str, str]:
    """Run the flow against the test server; (flow run id, final state type)."""
    from prefect.logging.handlers import APILogHandler

    from flows.pipeline import pipeline

    options = {"retries": 3, "retry_delay_seconds": 0.5, **parameters}
    state = pipeline(repo=str(repo), return_state=True, **options)
    APILogHandler().flush()  # the logs reach the server before the test reads them
    return str(state.state_details.flow_run_id), state.type.value


def test_killed_stage_is_retried_and_the_run_publishes_artifacts(
    toy_repo: Path, api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dvc.yaml lists the stages in reverse: the dependency graph decides the order, not the text.
    text = (toy_repo / "dvc.yaml").read_text()
    first, second = text.split("  second:\n")
    (toy_repo / "dvc.yaml").write_text("stages:\n  second:\n" + second + first.removeprefix("stages:\n"))
    monkeypatch.setenv("CHESSCORE_FAULT", "second:kill")
    monkeypatch.setenv("CHESSCORE_FAULT_ONCE", str(tmp_path / "once"))

    run_id, state = run_flow(toy_repo)

    assert state == "COMPLETED"
    tasks = api.task_runs(run_id)
    assert tasks["first"]["run_count"] == 1
    assert tasks["second"]["run_count"] == 2  # SIGKILLed once, then passed
    logs = api.logs(run_id)
    assert "stages in order: first -> second" in logs
    assert "second: injected fault kill" in logs  # the stage's own output reached the Prefect log
    assert re.search(r"\(killed, exit (-9|137)\)", logs) and "Retry 1/3" in logs  # 137: the shell waited
    assert (toy_repo / "work/b.txt").read_text() == "first\nsecond\n"

    lock = yaml.safe_load((toy_repo / "dvc.lock").read_text())["stages"]
    artifacts = api.artifacts(run_id)
    for stage, path in (("first", "work/a.txt"), ("second", "work/b.txt")):
        table = artifacts[f"{stage}-outputs"]
        assert table["type"] == "table"
        rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
        out = lock[stage]["outs"][0]
        assert rows == [{"path": path, "md5": out["md5"], "bytes": out["size"], "files": 1}]
    summary = artifacts["pipeline-summary"]
    assert summary["type"] == "markdown"
    assert "| first | ran |" in summary["data"] and "| second | ran |" in summary["data"]


def test_bad_input_fails_at_once_with_the_stages_message(
    toy_repo: Path, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHESSCORE_FAULT", "second:bad-input")
    (toy_repo / "incoming").mkdir()
    run_id, state = run_flow(toy_repo, retry_delay_seconds=30, profile="other", input_dir=str(toy_repo / "incoming"))
    # The profile and the input folder were written into params.yaml before any stage ran.
    assert yaml.safe_load((toy_repo / "params.yaml").read_text())["convert"]["split_key"] == "other-key"
    assert yaml.safe_load((toy_repo / "params.yaml").read_text())["validate"]["raw"] == "incoming"

    assert state == "FAILED"
    tasks = api.task_runs(run_id)
    assert tasks["second"]["run_count"] == 1
    assert tasks["second"]["state"]["type"] == "FAILED"
    logs = api.logs(run_id)
    # The stage's message once per run (the task's final state, then the run's), no traceback.
    failed = "Finished in state Failed('stage second failed (bad_input, exit 65): second: bad input"
    assert logs.count("stage second failed") == 2 and logs.count(failed) == 2, logs
    assert "Retry" not in logs and "Traceback" not in logs, logs
    message = api.flow_run(run_id)["state"]["message"]
    assert "stage second failed (bad_input, exit 65): second: bad input (injected by CHESSCORE_FAULT)" in message
    assert not (toy_repo / "work/b.txt").exists()
    assert "pipeline-summary" not in api.artifacts(run_id)


def test_lock_held_by_another_run_is_retried(
    toy_repo: Path, api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other run's stages wait at a gate that opens only once the flow has met the lock, so
    # that on any machine, however loaded, the flow finds the lock held, then free on a retry.
    gate = tmp_path / "gate"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "TOY_GATE": str(gate)}
    other = subprocess.Popen(
        [str(BIN / "dvc"), "repro"], cwd=toy_repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    from flows import dvc_stages

    repro = dvc_stages.repro

    def repro_then_open_the_gate(*args: Any, **kwargs: Any) -> dvc_stages.StageResult:
        result = repro(*args, **kwargs)
        if result.failure is not None and result.failure.kind == "lock":
            gate.touch()
        return result

    monkeypatch.setattr(dvc_stages, "repro", repro_then_open_the_gate)
    try:
        rwlock, deadline = toy_repo / ".dvc/tmp/rwlock", time.monotonic() + 60
        while not (rwlock.exists() and '"pid"' in rwlock.read_text(errors="replace")):
            assert time.monotonic() < deadline, "the other dvc repro never took its lock"
            time.sleep(0.05)
        run_id, state = run_flow(toy_repo, retries=6)
    finally:
        gate.touch()
        assert other.wait(timeout=120) == 0
    assert state == "COMPLETED"
    assert "another DVC run holds the lock" in api.logs(run_id)
    assert api.task_runs(run_id)["first"]["run_count"] >= 2
    # By the time the lock was free the other run had done the work: both stages were skipped.
    assert "| first | skipped (up to date) |" in api.artifacts(run_id)["pipeline-summary"]["data"]


def test_a_stage_restored_from_the_run_cache_is_reported_as_restored(toy_repo: Path, api: Api) -> None:
    run_flow(toy_repo)
    step = toy_repo / "step.py"
    original = step.read_text()
    step.write_text(original + "# an edit, undone below\n")
    run_flow(toy_repo)  # both stages ran again for the edit
    step.write_text(original)  # DVC has run this very code before: its run-cache has the outputs
    run_id, state = run_flow(toy_repo)
    assert state == "COMPLETED"
    logs = api.logs(run_id)
    assert "first: restored from DVC's run-cache" in logs and "ran in" not in logs, logs
    artifacts = api.artifacts(run_id)
    assert "restored from DVC's run-cache" in artifacts["first-outputs"]["description"]
    assert "| first | restored (DVC run-cache) |" in artifacts["pipeline-summary"]["data"]


def test_served_deployment_runs_when_triggered_through_the_api(toy_repo: Path, prefect_server: dict[str, str]) -> None:
    env = {
        **os.environ,
        **prefect_server,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
    }
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flows.serve",
            "--name",
            "test-nightly",
            "--repo",
            str(toy_repo),
            "--cron",
            "0 2 * * *",
            "--retry-delay-seconds",
            "0.5",
        ],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    api = Api(prefect_server)
    try:
        deadline = time.monotonic() + 90
        while (response := api.get("/deployments/name/chess-pipeline/test-nightly")).status_code != 200:
            assert serve.poll() is None and time.monotonic() < deadline, "the deployment never appeared"
            time.sleep(0.5)
        deployment = response.json()
        assert deployment["schedules"][0]["schedule"]["cron"] == "0 2 * * *"
        assert deployment["parameters"]["repo"] == str(toy_repo)
        flow_run = api.post(f"/deployments/{deployment['id']}/create_flow_run", {})
        deadline = time.monotonic() + 120
        while (state := api.flow_run(flow_run["id"])["state"]["type"]) not in ("COMPLETED", "FAILED", "CRASHED"):
            assert serve.poll() is None and time.monotonic() < deadline, f"run stuck in {state}"
            time.sleep(0.5)
        assert state == "COMPLETED"
        assert (toy_repo / "work/b.txt").read_text() == "first\nsecond\n"
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def test_a_real_pipeline_run_publishes_each_stages_outputs_and_the_key_metrics(
    pipeline_run: PipelineRun, api: Api, tmp_path: Path
) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")  # every stage up to date: the flow skips them
    run_id, state = run_flow(repo)
    assert state == "COMPLETED"
    tasks = api.task_runs(run_id)
    assert set(tasks) == {"validate", "convert", "train", "evaluate", "selfplay", "arena"}
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    artifacts = api.artifacts(run_id)
    for stage, entry in lock.items():
        table = artifacts[f"{stage}-outputs"]["data"]
        rows = json.loads(table) if isinstance(table, str) else table
        assert {row["path"]: row["md5"] for row in rows} == {out["path"]: out["md5"] for out in entry["outs"]}
    summary = artifacts["pipeline-summary"]["data"]
    for words in (
        "| validate |",
        "games seen",
        "validation NLL",
        "move accuracy top-1",
        "own move legal",
        "| arena | rating",
        "| selfplay |",
        "skipped (up to date)",
    ):
        assert words in summary, words
    assert "file://" not in summary and "`evaluation-report` artifact" in summary
    report = artifacts["evaluation-report"]  # the report itself, which the UI renders
    assert report["type"] == "markdown" and report["data"] == (repo / "data/evaluate/report.md").read_text()

    # A chosen subset runs in DAG order, whatever order it was given in.
    run_id, state = run_flow(repo, stages=["arena", "validate"])
    assert state == "COMPLETED"
    tasks = sorted(api.task_runs(run_id).values(), key=lambda task: task["start_time"])
    assert [task["name"] for task in tasks] == ["validate", "arena"]


def test_telemetry_is_off_wherever_the_flow_is_started(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DVC_"))}
    probe = (
        "import flows.pipeline, os; from prefect.settings import get_current_settings; "
        "print(get_current_settings().server.analytics_enabled, os.environ['DVC_NO_ANALYTICS'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )  # outside the checkout: pyproject.toml's setting does not apply here
    assert done.stdout.split() == ["False", "true"], done.stderr
    assert "analytics = false" in (PROJECT / ".dvc/config").read_text()


def test_the_flow_checks_every_stages_params_before_the_first_runs(tmp_path: Path) -> None:
    from chesscore.config import ConfigError
    from flows.pipeline import check_params

    params = tmp_path / "params.yaml"
    params.write_text("validate:\n  min_plies: 3\ntrain:\n  learning_rate: 0.1\n")
    check_params(params, ["validate", "convert", "toy"])  # a stage without a CLI of ours is left alone
    with pytest.raises(ConfigError, match=r"train\.learning_rate: unknown key \(did you mean `lr`\?\)"):
        check_params(params, ["validate", "convert", "train"])


def test_months_values_read_merge_suffix_and_into_from_the_repos_params(tmp_path: Path) -> None:
    """The flow's months_dir lists the files params.yaml's merge.suffix names (not the stage's
    default), and points convert at merge.into."""
    from flows.pipeline import months_values

    repo, folder = tmp_path / "repo", tmp_path / "months"
    repo.mkdir()
    folder.mkdir()
    for name in ("2024-02.pgn", "2024-01.pgn", "2024-03.pgn.zst", "notes.txt"):
        (folder / name).write_text("", encoding="utf-8")
    (repo / "params.yaml").write_text("merge:\n  suffix: .pgn\n  into: [data/all]\n", encoding="utf-8")
    values = months_values(str(folder), str(repo))
    assert values["merge.months"] == ["2024-01", "2024-02"] and values["merge.raw"] == str(folder.resolve())
    assert values["merge.into"] == ["data/all"] and values["convert.validated"] == "data/all"
    (repo / "params.yaml").write_text("merge:\n  into: []\n", encoding="utf-8")  # the default suffix
    assert months_values(str(folder), str(repo))["merge.months"] == ["2024-03"]
    (repo / "params.yaml").write_text("merge:\n  suffix: .pgn.bz2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no \*\.pgn\.bz2 file"):
        months_values(str(folder), str(repo))
