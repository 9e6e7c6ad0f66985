"""The project's real `train` stage under `dvc repro` in a temporary DVC repo: killed with
SIGKILL mid-run (dvc and its command), a second `dvc repro` resumes from last.pt, because the
outs persist (DVC would otherwise delete them before running the command)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.training_data import sample_tokens, write_dataset

ROOT = Path(__file__).resolve().parents[2]
DVC = [sys.executable, "-m", "dvc"]


def dvc(repo: Path, *args: str, **kwargs):
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.Popen(
        [*DVC, *args],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def events(repo: Path) -> list[dict]:
    path = repo / "data" / "train" / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.endswith("}")]


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for package in ("chesscore", "stages"):
        shutil.copytree(ROOT / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": stages["train"]}}, sort_keys=False))
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["train"].update(
        model="tiny",
        micro=8,
        epochs=2,
        lr=0.002,
        validation_every_steps=2,
        legality_eval_games=4,
        threads=1,
        max_seconds=None,
    )
    (repo / "params.yaml").write_text(yaml.safe_dump({"train": params["train"]}, sort_keys=False))
    games = sample_tokens()
    write_dataset(repo / params["train"]["dataset"], list(games[:121]), list(games[121:145]))
    init = subprocess.run([*DVC, "init", "--no-scm", "-q"], cwd=repo, capture_output=True, text=True)
    assert init.returncode == 0, init.stdout + init.stderr
    return repo


@pytest.mark.slow
def test_dvc_repro_after_a_kill_resumes_the_run(repo):
    first = dvc(repo, "repro", "train")
    deadline = time.monotonic() + 180
    while not any(e["event"] == "validation" and e["step"] >= 4 for e in events(repo)):
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no validation at step 4 within 3 minutes"
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # dvc and the training process under it
    first.communicate()
    killed_at = max(e.get("step", 0) for e in events(repo))
    assert not (repo / "dvc.lock").exists()  # the stage never finished

    second = dvc(repo, "repro", "train")
    out = second.communicate(timeout=300)[0]
    assert second.returncode == 0, out[-3000:]
    start = [e for e in events(repo) if e["event"] == "start"]
    # The kill may fall while the step-4 checkpoint is being written: then step 2's is resumed.
    assert len(start) == 2 and start[1]["note"].startswith("resuming from")
    assert 2 <= start[1]["step"] <= killed_at
    results = json.loads((repo / "data" / "train" / "results.json").read_text())
    record = json.loads((repo / "data" / "train" / "run.json").read_text())
    assert results["status"] == "max_epochs" and record["resumed_from_step"] == start[1]["step"]
    status = dvc(repo, "status", "train")
    assert "up to date" in status.communicate(timeout=120)[0]
