"""The train stage as users run it: `python -m stages.train` and `torchrun -m stages.train`
over a converted dataset folder. Two gloo processes match one process with the same global
batch; a run killed with SIGKILL leaves a loadable last.pt and its rerun resumes to the same
bytes as an uninterrupted run; SIGTERM is a soft stop that saves and exits 75."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from chesscore import checkpoint
from tests.inprocess import run_module
from tests.training_data import sample_tokens, write_dataset

ROOT = Path(__file__).resolve().parents[2]
# 121 train games: with 8 games per global microbatch the last one holds a single game, so
# under two ranks rank 1 has no game there and trains on the zero-target dummy.
COMMON = [
    "--model",
    "tiny",
    "--epochs",
    "2",
    "--seed",
    "3",
    "--lr",
    "0.002",
    "--accum",
    "1",
    "--validation-every-steps",
    "4",
    "--legality-eval-games",
    "4",
    "--log-every-steps",
    "2",
    "--threads",
    "1",
]
# Summation order differs between one process and two (gloo's all-reduce, the split batch):
# float32 round-off, amplified a little by Adam over 32 updates.
ATOL, RTOL = 1e-5, 1e-4


def arguments(dataset: Path, output: Path, *flags: str) -> list[str]:
    """stages.train's arguments: no params file, the dataset, the output, COMMON, then `flags`."""
    paths = ["--params", str(output.parent / "absent.yaml"), "--dataset", str(dataset), "--output", str(output)]
    return [*paths, *COMMON, *flags]


def stage(dataset: Path, output: Path, *flags: str, ranks: int = 0, wait: bool = True):
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
        if ranks
        else [sys.executable]
    )
    command = [*launcher, "-m", "stages.train", *arguments(dataset, output, *flags)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if not wait:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def events(output: Path) -> list[dict]:
    path = output / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    games = sample_tokens()
    root = tmp_path_factory.mktemp("dataset")
    write_dataset(root, list(games[:121]), list(games[121:145]), list(games[145:150]))
    return root


@pytest.fixture(scope="module")
def single(dataset, tmp_path_factory) -> Path:
    """The uninterrupted run, the one the others are compared with: the stage's entry point in
    this process (tests/inprocess.py), so the runs that must end with its bytes are real
    processes that also show that a process of its own changes nothing."""
    output = tmp_path_factory.mktemp("single") / "train"
    done = run_module("stages.train", *arguments(dataset, output, "--micro", "8"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "max_epochs after 32 updates" in done.stdout  # the one-screen summary
    for shown in ("tok_s=", "lr=", "gnorm=", "pad=", "validation @ step 32"):  # progress on stderr
        assert shown in done.stderr, shown
    return output


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process_with_the_same_global_batch(dataset, single, tmp_path):
    output = tmp_path / "train"
    stage(dataset, output, "--micro", "4", ranks=2)
    one, two = (json.loads((o / "results.json").read_text()) for o in (single, output))
    assert (two["status"], two["step"], two["world_size"], one["world_size"]) == ("max_epochs", 32, 2, 1)
    a, b = (checkpoint.load(o / "last.pt")["model"] for o in (single, output))
    for name in a:
        torch.testing.assert_close(b[name], a[name], atol=ATOL, rtol=RTOL, msg=name)
    assert checkpoint.load_model(output / "best.pt")[1]["step"] == two["best_step"] == one["best_step"]
    nll = lambda r: [h["validation"]["nll"] for h in r["history"]]  # noqa: E731
    assert nll(two) == pytest.approx(nll(one), rel=1e-5)
    assert two["history"][0]["validation"]["games"] == 24  # every validation game, once, over both ranks
    assert not list(output.glob("failure-rank*.json"))


@pytest.mark.slow
def test_two_gloo_ranks_compiled_break_the_graph_only_at_ddps_own_wrapper(dataset, tmp_path):
    """The GPU profile under torchrun: DistributedDataParallel compiled, the model seeing the
    board (its features made with the batch, by a loader worker per rank, go through DDP's
    forward as a dataclass)."""
    output = tmp_path / "train"
    flags = ("--model", "demo-board", "--micro", "4", "--accum", "2", "--max-updates", "3", "--loader-workers", "1")
    done = stage(dataset, output, *flags, "--compile", "--pad-to-multiple", "64", ranks=2)
    report = json.loads((output / "run.json").read_text())["compile"]
    assert json.loads((output / "results.json").read_text())["status"] == "max_updates"
    # DDP's forward is left untraced around the compiled model: explained, and nothing else breaks.
    assert report["graph_breaks"] > 0 and report["unexplained_graph_breaks"] == {}
    assert report["explained_graph_breaks"] == {"DistributedDataParallel's wrapper": report["graph_breaks"]}
    assert 1 <= report["graphs"] <= report["max_widths"] == 16  # a context of 1024 in widths of 64
    assert "at DistributedDataParallel's wrapper" in done.stderr and "not explained" not in done.stderr


def run_until_validation(process: subprocess.Popen, output: Path, step: int) -> None:
    deadline = time.monotonic() + 120
    while not any(e["event"] == "validation" and e["step"] >= step for e in events(output)):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no validation at step {step} within 2 minutes"
        time.sleep(0.02)


@pytest.mark.slow
def test_sigterm_is_a_soft_stop_that_saves_and_asks_for_a_rerun(dataset, tmp_path):
    output = tmp_path / "train"
    # With loader workers, forked with the stage's SIGTERM handler: the stop is still the parent's.
    process = stage(dataset, output, "--micro", "8", "--loader-workers", "2", wait=False)
    try:
        run_until_validation(process, output, 4)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 75, stderr[-3000:]  # chesscore.failures.TEMPORARY: retry
    assert "chesscore-failure: temporary: stopped for the job deadline" in stderr
    results = json.loads((output / "results.json").read_text())
    assert results["status"] == "deadline_soft_stop" and 4 <= results["step"] < 32
    assert checkpoint.load(output / "last.pt")["train_state"]["step"] == results["step"]
    # That a soft stop's rerun ends with the uninterrupted run's bytes: tests/train/test_stop.py.


@pytest.mark.slow
def test_sigkill_leaves_a_loadable_checkpoint_and_the_rerun_resumes(dataset, single, tmp_path):
    output = tmp_path / "train"
    process = stage(dataset, output, "--micro", "8", wait=False)
    try:
        # The validation event comes before its last.pt is saved: once step 8's is logged, step
        # 4's save is done, and the kill lands at any moment after (mid-step, mid-save).
        run_until_validation(process, output, 8)
        time.sleep(random.Random(os.getpid()).uniform(0, 0.3))
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL, "the run ended before the kill: make it longer"
    model, payload = checkpoint.load_model(output / "last.pt")
    killed_at = payload["train_state"]["step"]
    assert 4 <= killed_at < 32
    done = stage(dataset, output, "--micro", "8")
    start = [e for e in events(output) if e["event"] == "start"][-1]
    assert start["note"].startswith("resuming from") and start["step"] == killed_at
    assert json.loads((output / "run.json").read_text())["resumed_from_step"] == killed_at
    for name in ("last.pt", "best.pt", "results.json", "metrics.json", "plots/train_loss.csv", "plots/validation.csv"):
        assert (output / name).read_bytes() == (single / name).read_bytes(), name
    assert not list(output.glob(".*.tmp")), "a half-written file was left behind"
    assert "max_epochs" in done.stdout  # (a finished run's rerun, a no-op: tests/train/test_resume.py)
