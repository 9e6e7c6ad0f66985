"""The whole pipeline under DVC, on a snapshot of the project with the smallest params that run
every stage (tests/pipeline_fixtures.py runs it once per session): a second `dvc repro` does
nothing, a train param reruns train and what follows only (through `dvc exp run -S`), push and
pull round-trip every artifact, and two `dvc repro` at once cannot corrupt anything."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.pipeline_fixtures import BIN, STAGES, PipelineRun, copy_tree, dvc, output_files, run

pytestmark = pytest.mark.slow


def ran_and_skipped(output: str) -> tuple[set[str], set[str]]:
    ran = set(re.findall(r"Running stage '([^']+)'", output))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change, skipping", output))
    return ran, skipped


def test_every_stage_ran_and_the_summary_has_every_line(pipeline_run: PipelineRun) -> None:
    assert list(pipeline_run.seconds) == ["validate", "convert", "train", "evaluate", "selfplay", "arena"]
    done = run([str(BIN / "python"), "-m", "chesscore.pipeline.summary"], pipeline_run.repo)
    assert "not run yet" not in done.stdout
    for stage in STAGES:
        assert re.search(rf"^  {stage}\s+\S", done.stdout, re.M), f"no line for {stage}:\n{done.stdout}"
    assert "data/evaluate/report.md" in done.stdout  # where to look next


def test_second_repro_is_a_noop(pipeline_run: PipelineRun) -> None:
    done = dvc(pipeline_run.repo, "repro")
    ran, skipped = ran_and_skipped(done.stdout + done.stderr)
    assert ran == set() and skipped == set(STAGES)
    assert "Data and pipelines are up to date" in done.stdout + done.stderr
    assert output_files(pipeline_run.repo) == pipeline_run.outputs
    assert "up to date" in dvc(pipeline_run.repo, "status").stdout


def test_exp_run_with_a_train_param_reruns_train_and_what_follows_only(
    pipeline_run: PipelineRun, tmp_path: Path
) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    done = dvc(repo, "exp", "run", "-n", "lr-test", "-S", "train.lr=0.005")
    ran, skipped = ran_and_skipped(done.stdout + done.stderr)
    assert ran == {"train", "evaluate", "selfplay", "arena"}
    assert skipped == {"validate", "convert"}
    assert yaml.safe_load((repo / "params.yaml").read_text())["train"]["lr"] == 0.005
    shown = json.loads(dvc(repo, "exp", "show", "--json").stdout)
    names = [exp.get("name") for commit in shown for exp in (commit.get("experiments") or [])]
    assert "lr-test" in names, shown
    after = output_files(repo)
    for path, digest in pipeline_run.outputs.items():
        if path.startswith(("data/validated/", "data/dataset/")):
            assert after[path] == digest, path
    assert after["data/train/best.pt"] != pipeline_run.outputs["data/train/best.pt"]


def test_push_and_pull_round_trip_every_artifact(pipeline_run: PipelineRun, tmp_path: Path) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    dvc(repo, "remote", "add", "-d", "store", str(tmp_path / "remote"))
    run(["git", "commit", "-qam", "a local-folder DVC remote"], repo)
    pushed = dvc(repo, "push")
    assert re.search(r"\d+ files? pushed", pushed.stdout), pushed.stdout
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(repo), str(clone)], tmp_path)
    assert not (clone / "data/train/best.pt").exists()
    dvc(clone, "pull")
    assert output_files(clone) == pipeline_run.outputs  # every output, byte for byte
    status = dvc(clone, "status")
    assert "up to date" in status.stdout, status.stdout


def test_two_repros_at_once_the_second_fails_clearly_and_nothing_is_corrupted(
    pipeline_run: PipelineRun, tmp_path: Path
) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    first = subprocess.Popen(
        [str(BIN / "dvc"), "repro", "--force", "--single-item", "evaluate"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": f"{BIN}:/usr/games:/usr/bin:/bin"},
    )
    rwlock, deadline = repo / ".dvc/tmp/rwlock", time.monotonic() + 60
    while not (rwlock.exists() and '"pid"' in rwlock.read_text(errors="replace")):
        assert first.poll() is None and time.monotonic() < deadline, "the first repro never took its lock"
        time.sleep(0.05)
    second = dvc(repo, "repro", check=False)
    first_output, _ = first.communicate(timeout=600)
    assert second.returncode != 0
    assert re.search(r"is busy, it is being blocked by|Unable to acquire lock", second.stderr + second.stdout)
    assert first.returncode == 0, first_output
    assert output_files(repo) == pipeline_run.outputs
    assert "up to date" in dvc(repo, "status").stdout
