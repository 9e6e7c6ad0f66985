"""Stopping: the job deadline (between steps, in the middle of a validation, and validating
provisionally in its margin), the time budget, and early stopping; a stopped run resumes to the
bytes of an uninterrupted one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from chesscore import checkpoint, failures
from chesscore.train.data import TrainData
from chesscore.train.deadline import Deadline, parse_time
from chesscore.train.distributed import setup
from chesscore.train.run import open_run
from chesscore.train.state import TrainState
from chesscore.train.trainer import SCHEDULED_BEST, Trainer
from stages import train as train_stage
from tests.training_data import CONFIG, MODEL, run, same_artifacts, small_data


@pytest.fixture(scope="module")
def data() -> TrainData:
    return small_data()


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("uninterrupted")
    run(data, output)
    return output


class LateClock:
    """Time for Deadline(at=1, margin=0): on time until the run reaches `step`, then on time
    for `grace` more readings, then past the deadline. Real time would make the point at
    which the deadline falls a matter of luck."""

    def __init__(self, step: int, grace: int = 0, late: float = 2.0) -> None:
        self.step, self.grace, self.late, self.trainer = step, grace, late, None

    def __call__(self) -> float:
        if self.trainer is not None and self.trainer.state.step >= self.step:
            if self.grace == 0:
                return self.late
            self.grace -= 1
        return 0.0


def run_until_deadline(
    data: TrainData, output: Path, clock: LateClock, deadline: float = 1.0, margin: float = 0.0
) -> dict:
    trainer = Trainer(
        *open_run(CONFIG, data, output, setup("cpu"), model_config=MODEL),
        deadline=Deadline(at=deadline, margin=margin, clock=clock),
    )
    clock.trainer = trainer
    return trainer.run()


@pytest.mark.slow
def test_validation_cut_short_changes_neither_best_nor_patience(data, uninterrupted, tmp_path):
    # The validation owed at step 6 reads one of its two batches, then the deadline falls.
    results = run_until_deadline(data, tmp_path, LateClock(step=6, grace=1))
    assert results["status"] == "deadline_soft_stop" and results["step"] == 6
    reference = json.loads((uninterrupted / "results.json").read_text())["history"]
    assert results["history"] == reference[:2]  # steps 0 and 3: nothing of the cut validation
    saved = TrainState.from_dict(checkpoint.load(tmp_path / "last.pt")["train_state"])
    assert saved.validation_due
    assert (saved.best_nll, saved.bad_checks) == (reference[1]["best_nll"], reference[1]["bad_checks"])
    assert saved.best_step == max(h["step"] for h in reference[:2] if h["improved"])
    assert checkpoint.load(tmp_path / "best.pt")["step"] == saved.best_step <= 3
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "validation_cut_short"] == [6]
    # The resumed run first does the owed validation, then goes on as if never stopped.
    assert run(data, tmp_path)["resumed_from_step"] == 6
    same_artifacts(uninterrupted, tmp_path)


@pytest.mark.slow
def test_deadline_between_steps_is_a_resumable_soft_stop(data, uninterrupted, tmp_path):
    results = run_until_deadline(data, tmp_path, LateClock(step=4))
    assert results["status"] == "deadline_soft_stop" and results["step"] == 4
    assert not checkpoint.load(tmp_path / "last.pt")["train_state"]["validation_due"]
    run(data, tmp_path)
    same_artifacts(uninterrupted, tmp_path)


@pytest.mark.slow
def test_deadline_validates_provisionally_and_the_resumed_run_undoes_it(data, uninterrupted, tmp_path):
    # Deadline at 10 s with a margin of 4: the soft stop falls after step 4 (the clock reads 7),
    # inside the first half of the margin, so the weights of step 4 are validated before saving.
    results = run_until_deadline(data, tmp_path, LateClock(step=4, late=7.0), deadline=10.0, margin=4.0)
    assert results["status"] == "deadline_soft_stop" and results["step"] == 4
    assert results["deadline_validation"]["step"] == 4 and results["deadline_validation"]["improved"]
    assert checkpoint.load(tmp_path / "best.pt")["step"] == 4  # the best validated model while it waits
    assert checkpoint.load(tmp_path / SCHEDULED_BEST)["step"] <= 3
    saved = TrainState.from_dict(checkpoint.load(tmp_path / "last.pt")["train_state"])
    assert [h["step"] for h in saved.history] == [0, 3]  # not in the state the resumed run continues from
    run(data, tmp_path)
    assert not (tmp_path / SCHEDULED_BEST).exists()
    same_artifacts(uninterrupted, tmp_path)


@pytest.mark.slow
def test_time_budget_pauses_and_resumes(data, uninterrupted, tmp_path):
    results = run(data, tmp_path, replace(CONFIG, max_seconds=1e-6))
    assert results["status"] == "time_budget" and results["step"] == 0 and len(results["history"]) == 1
    run(data, tmp_path)  # not part of the identity: a new budget resumes the run
    same_artifacts(uninterrupted, tmp_path)


def test_deadline_spellings():
    assert parse_time("2026-11-30T18:00:00+00:00") == parse_time("2026-11-30T18:00:00Z") == 1796061600.0
    assert parse_time("1796061600") == parse_time(1796061600) == 1796061600.0
    with pytest.raises(ValueError, match="no time zone"):
        parse_time("2026-11-30T18:00:00")
    with pytest.raises(ValueError, match="neither"):
        parse_time("tomorrow")
    assert Deadline.parse(None).seconds_left() == float("inf")
    assert Deadline(at=100.0, margin=10.0, clock=lambda: 89.0).soft_stop() is False
    assert Deadline(at=100.0, margin=10.0, clock=lambda: 90.0).soft_stop() is True


def test_stage_refuses_to_start_past_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setenv("CHESS_JOB_DEADLINE", "2000-01-01T00:00:00Z")
    with pytest.raises(failures.Refused, match="deadline 2000-01-01T00:00:00Z .* has passed"):
        train_stage.main(
            ["--params", str(tmp_path / "none.yaml"), "--dataset", str(tmp_path), "--output", str(tmp_path / "out")]
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stop", ["max_updates", "time_budget"])
def test_a_stop_between_validations_validates_the_weights_it_stops_with(data, tmp_path, stop):
    # max_updates 2 < validation_every_steps 3: without the stop's own validation, best.pt would
    # be the untrained step-0 weights. The time budget is spent after one update (a fake clock).
    config = replace(CONFIG, max_updates=2) if stop == "max_updates" else replace(CONFIG, max_seconds=1.0)
    trainer = Trainer(*open_run(config, data, tmp_path, setup("cpu"), model_config=MODEL))
    if stop == "time_budget":
        trainer.budget.spent = lambda: trainer.state.step >= 1
    results = trainer.run()
    steps = [h["step"] for h in results["history"]]
    assert results["status"] == stop and steps == [0, results["step"]] and results["step"] in (1, 2)
    assert results["best_step"] == results["step"] > 0  # it learned: the stop's validation is the best
    best, last = checkpoint.load(tmp_path / "best.pt"), checkpoint.load(tmp_path / "last.pt")
    assert best["step"] == results["step"]
    assert all(torch.equal(best["model"][k], last["model"][k]) for k in best["model"])
    metrics = json.loads((tmp_path / "metrics.json").read_text())  # the DVC metric says so too
    assert metrics == {"best_nll": round(results["best_validation_nll"], 4), "best_step": results["step"]}
    assert results["best_validation_nll"] < results["history"][0]["validation"]["nll"]


def test_a_stop_at_a_validated_step_adds_no_validation(data, tmp_path):
    results = run(data, tmp_path, replace(CONFIG, max_updates=3))
    assert [h["step"] for h in results["history"]] == [0, 3]
