"""Checkpoints and resume, in one process on the CPU with the tiny model: an interrupted run
resumes to the very bytes of an uninterrupted one; identities that differ are refused by
name; a finished run is a no-op."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from chesscore import checkpoint
from chesscore.model import GPT
from chesscore.resume import ResumeRefused
from chesscore.train import trainer
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.report import RUN_KEYS
from chesscore.train.run import finished_run, open_run
from tests.training_data import CONFIG, MODEL, run, same_artifacts, small_data


@pytest.fixture(scope="module")
def data() -> TrainData:
    return small_data()


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("uninterrupted")
    results = run(data, output)
    assert results["status"] == "max_updates" and results["step"] == 13
    return output


@pytest.mark.slow
def test_n_steps_then_resume_then_m_steps_is_bit_identical(data, uninterrupted, tmp_path):
    # Stopped mid-epoch at a step the run validates anyway (a stop elsewhere adds a validation:
    # tests/train/test_stop.py), then extended.
    first = run(data, tmp_path, replace(CONFIG, max_updates=6))
    assert first["status"] == "max_updates" and first["step"] == 6
    paused = checkpoint.load(tmp_path / "last.pt")["train_state"]
    assert (paused["epoch"], paused["next_step"]) == (0, 6)
    second = run(data, tmp_path)  # resumes (auto) and goes on to 13, across an epoch end
    assert second["resumed_from_step"] == 6 and second["updates_this_run"] == 7
    same_artifacts(uninterrupted, tmp_path)
    history = json.loads((uninterrupted / "results.json").read_text())["history"]
    # every 3 steps, the epoch end at 8, and the stop at 13 (validated before it ends the run)
    assert [h["step"] for h in history] == [0, 3, 6, 8, 9, 12, 13]


def test_checkpoints_load_with_weights_only_and_carry_the_identity(uninterrupted):
    model, payload = checkpoint.load_model(uninterrupted / "best.pt")
    assert isinstance(model, GPT) and not model.training
    identity = json.loads((uninterrupted / "identity.json").read_text())
    assert payload["identity"] == identity and identity["dataset_fingerprint"] == "test-dataset"
    assert identity["model"]["parameters"] == model.num_parameters()
    assert {
        "tokenizer",
        "training_code",
        "hyperparameters",
        "schedule",
        "world_size",
        "seed",
        "microbatch",
        "accumulation",
        "torch",
    } <= set(identity)
    last = checkpoint.load(uninterrupted / "last.pt")
    assert {"optimizer", "scheduler", "rng", "train_state"} <= set(last)
    assert payload["step"] == last["train_state"]["best_step"]


def test_results_metrics_and_plots_tell_the_same_story(uninterrupted):
    results = json.loads((uninterrupted / "results.json").read_text())
    metrics = json.loads((uninterrupted / "metrics.json").read_text())
    assert results["best_validation_nll"] == min(h["validation"]["nll"] for h in results["history"])
    assert metrics == {"best_nll": round(results["best_validation_nll"], 4), "best_step": results["best_step"]}
    assert results["history"][0]["validation"]["nll"] > results["best_validation_nll"]  # it learned something
    validation = list(csv.DictReader((uninterrupted / "plots" / "validation.csv").open()))
    assert [int(r["step"]) for r in validation] == [h["step"] for h in results["history"]]
    train_loss = list(csv.DictReader((uninterrupted / "plots" / "train_loss.csv").open()))
    assert [int(r["step"]) for r in train_loss] == [2, 4, 6, 8, 10, 12]  # log_every_steps 2
    assert all(float(r["grad_norm"]) > 0 and 0 < float(r["lr"]) <= 3e-4 for r in train_loss)
    assert results["test_evaluated"] is False
    # What the process and machine decide is the run's record, beside the outputs, not in them.
    record = json.loads((uninterrupted / "run.json").read_text())
    assert set(record) == set(RUN_KEYS) - {"compile", "gpu_telemetry"} and not set(results) & set(RUN_KEYS)
    throughput = record["throughput"]
    assert throughput["useful_tokens_per_second"] > 0 and 0 <= throughput["padding_fraction"] < 0.5
    # The host's batch assembly is part of every step's time (on the CPU nothing overlaps it).
    assert 0 < throughput["assembly_seconds"] < throughput["train_seconds"]
    assert throughput["assembly_fraction"] == throughput["assembly_seconds"] / throughput["train_seconds"]
    assert record["peak_memory"][0]["cpu_max_rss_bytes"] > 0 and record["updates_this_run"] == 13
    events = [json.loads(line)["event"] for line in (uninterrupted / "events.jsonl").read_text().splitlines()]
    assert events[0] == "start" and events[-1] == "stop" and events.count("validation") == 7


def test_identity_mismatch_is_refused_naming_the_keys(data, uninterrupted, tmp_path):
    other = replace(CONFIG, seed=12, optim=replace(CONFIG.optim, lr=1e-3))
    with pytest.raises(ResumeRefused) as refused:
        open_run(other, data, tmp_path, setup("cpu"), model_config=MODEL, resume=str(uninterrupted / "last.pt"))
    message = str(refused.value)
    assert "hyperparameters.lr" in message and "seed" in message and "2 key(s)" in message
    assert "0.0003" in message and "0.001" in message
    changed_data = TrainData(data.train, data.validation, fingerprint="another-dataset")
    with pytest.raises(ResumeRefused, match="dataset_fingerprint"):
        open_run(
            CONFIG, changed_data, tmp_path, setup("cpu"), model_config=MODEL, resume=str(uninterrupted / "last.pt")
        )
    with pytest.raises(ResumeRefused, match="not a last checkpoint"):
        open_run(CONFIG, data, tmp_path, setup("cpu"), model_config=MODEL, resume=str(uninterrupted / "best.pt"))


@pytest.mark.slow
def test_auto_resume_starts_afresh_when_the_experiment_changed(data, tmp_path):
    run(data, tmp_path, replace(CONFIG, max_updates=3))
    old_identity = (tmp_path / "identity.json").read_text()
    results = run(data, tmp_path, replace(CONFIG, max_updates=3, seed=5))
    assert results["resumed_from_step"] is None and "identity differs in 1 key(s): seed" in results["note"]
    assert results["updates_this_run"] == 3 and (tmp_path / "identity.json").read_text() != old_identity
    assert checkpoint.load(tmp_path / "best.pt")["identity"]["seed"] == 5


@pytest.mark.slow
def test_finished_run_resumes_as_a_no_op_with_a_receipt(data, tmp_path, capsys):
    # lr 1e-12 (0 is refused): validation never improves by min_delta, so patience 2 ends the run
    # at the second check after step 0.
    config = replace(CONFIG, optim=replace(CONFIG.optim, lr=1e-12), patience=2, max_updates=None)
    results = run(data, tmp_path, config)
    assert results["status"] == "early_stop" and results["step"] == 6 and results["best_step"] == 0
    assert [h["bad_checks"] for h in results["history"]] == [0, 1, 2]
    capsys.readouterr()
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}
    receipt = run(data, tmp_path, config)
    assert receipt["status"] == "early_stop" and receipt["resume_action"] == "no_op_terminal"
    assert receipt["optimizer_updates"] == 0 and receipt["checkpoint_written"] is False
    assert json.loads(capsys.readouterr().out) == receipt
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before
    # Raising max_updates does not revive an early-stopped run either.
    assert run(data, tmp_path, replace(config, max_updates=100))["resume_action"] == "no_op_terminal"
    # DVC deletes changed or missing uncached outputs' siblings before a rerun: the no-op puts
    # the metrics and plots back, the same bytes.
    for name in ("metrics.json", "plots/train_loss.csv", "plots/validation.csv"):
        (tmp_path / name).unlink()
    assert run(data, tmp_path, config)["resume_action"] == "no_op_terminal"
    assert {p: after[p][0] for p in after} == {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # A kill between the final last.pt and results.json (a DVC out): the no-op writes it from
    # last.pt, the bytes the run wrote; run.json says what it cannot know.
    written = (tmp_path / "results.json").read_bytes()
    (tmp_path / "results.json").unlink()
    assert run(data, tmp_path, config)["resume_action"] == "no_op_terminal"
    assert (tmp_path / "results.json").read_bytes() == written
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["throughput"] is None and "rebuilt from last.pt" in record["note"]


def test_a_finished_run_is_confirmed_before_any_training_state_is_built(data, tmp_path, capsys, monkeypatch):
    config = replace(CONFIG, max_updates=3)
    run(data, tmp_path, config)
    capsys.readouterr()
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()}

    def no_trainer(*args, **kwargs):
        raise AssertionError("a finished run built a Trainer (weights, optimizer, batches)")

    monkeypatch.setattr(trainer, "Trainer", no_trainer)
    receipt = run(data, tmp_path, config)
    assert (receipt["status"], receipt["resume_action"], receipt["step"]) == ("max_updates", "no_op_terminal", 3)
    assert (receipt["optimizer_updates"], receipt["validation_checks"], receipt["checkpoint_written"]) == (0, 0, False)
    assert json.loads(capsys.readouterr().out) == receipt  # reported: one JSON line
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()} == before
    # finished_run itself: the same receipt for the finished run, None (nothing printed or
    # written) for one with steps left.
    assert finished_run(*open_run(config, data, tmp_path, setup("cpu"), model_config=MODEL)) == receipt
    capsys.readouterr()
    more = open_run(replace(CONFIG, max_updates=4), data, tmp_path, setup("cpu"), model_config=MODEL)
    assert more[0].resumed_from == 3 and finished_run(*more) is None
    assert capsys.readouterr().out == ""
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.rglob("*") if p.is_file()} == before


def test_max_updates_extends_a_run_whose_schedule_is_unchanged(data, tmp_path):
    done = run(data, tmp_path, replace(CONFIG, max_updates=3))
    assert run(data, tmp_path, replace(CONFIG, max_updates=3))["resume_action"] == "no_op_terminal"
    more = run(data, tmp_path, replace(CONFIG, max_updates=4))
    assert (done["step"], more["step"], more["resumed_from_step"]) == (3, 4, 3)


def test_non_finite_gradient_norm_fails_loudly_and_keeps_the_last_checkpoint(data, tmp_path):
    config = replace(CONFIG, optim=replace(CONFIG.optim, lr=1e30), validation_every_steps=None)
    with pytest.raises(FloatingPointError, match=r"gradient norm is (nan|inf) at step 2"):
        run(data, tmp_path, config)
    model, payload = checkpoint.load_model(tmp_path / "last.pt")  # the step-0 checkpoint, intact
    assert payload["train_state"]["step"] == 0
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_every_train_setting_is_in_the_identity_or_named_as_left_out() -> None:
    """The identity's hyperparameters are derived from TrainConfig: a new setting joins them
    unless it is named as held elsewhere or left out, so no resume ignores it by omission."""
    from chesscore.config import from_mapping, setting_names
    from chesscore.train.config import IDENTITY_ELSEWHERE, NOT_IN_IDENTITY, TrainConfig, hyperparameters, identity

    names, hyper = set(setting_names(TrainConfig)), set(hyperparameters(TrainConfig()))
    assert hyper | IDENTITY_ELSEWHERE | NOT_IN_IDENTITY == names
    assert not (hyper & IDENTITY_ELSEWHERE or hyper & NOT_IN_IDENTITY or IDENTITY_ELSEWHERE & NOT_IN_IDENTITY)

    def identity_of(change: dict) -> dict:
        config = from_mapping(TrainConfig, change, "test")
        return identity(
            config, config.model_config(), 1, dataset_fingerprint="x", world_size=1, precision="fp32", n_train_games=100
        )

    base = identity_of({})
    for change in (
        {"lr": 0.01},
        {"patience": 2},
        {"pad_to_multiple": 64},
        {"micro": 8},
        {"seed": 1},
        {"tokens": "triples-v1"},
    ):
        assert identity_of(change) != base, change
    for change in ({"max_seconds": 10.0}, {"log_every_steps": 3}, {"deadline_margin_seconds": 5.0}):
        assert identity_of(change) == base, change
