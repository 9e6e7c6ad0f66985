"""Evaluate: the test-split sample, the dataset check, breakdowns that partition the metrics,
the teacher-forced metrics shared with training, and the stage on a dataset made by the real
validate and convert stages from the embedded sample (Lichess dump format)."""

import json
import subprocess
from pathlib import Path

import pytest

from chesscore import checkpoint, failures
from chesscore.data import dataset
from chesscore.eval.evaluate import (
    DatasetMismatch,
    EvalConfig,
    check_dataset,
    evaluate,
    rating_bucket,
    sample_test_games,
)
from chesscore.fileio import sha256_bytes
from chesscore.train import metrics
from chesscore.train.batching import TokenList
from tests.inprocess import run_module
from tests.sample import SAMPLE
from tests.tiny_models import trained_tiny


@pytest.fixture(scope="module")
def lichess_dataset(tmp_path_factory) -> Path:
    """The embedded sample's 3,515 games through the real validate and convert stages, with a
    test split of about a fifth."""
    source = SAMPLE
    root = tmp_path_factory.mktemp("evaluate")
    params = root / "params.yaml"
    params.write_text("convert:\n  train: 0.7\n  validation: 0.1\n  test: 0.2\n")
    for args in (
        (
            "stages.validate",
            "--params",
            str(params),
            "--raw",
            str(source),
            "--out",
            str(root / "validated"),
            "--no-progress",
        ),
        (
            "stages.convert",
            "--params",
            str(params),
            "--validated",
            str(root / "validated"),
            "--out",
            str(root / "dataset"),
            "--no-progress",
        ),
    ):
        done = run_module(*args)
        assert done.returncode == 0, done.stderr
    return root / "dataset"


@pytest.fixture(scope="module")
def model():
    return trained_tiny()


def test_sample_is_the_bottom_k_of_a_keyed_hash_and_stable(lichess_dataset):
    everything, size = sample_test_games(lichess_dataset, None, seed=0)
    assert size == len(everything) == dataset.manifest(lichess_dataset)["splits"]["test"]["games"] > 100
    keys = sorted(sha256_bytes(f"0:{meta['game_id']}".encode()) for _, meta in everything)
    ten, _ = sample_test_games(lichess_dataset, 10, seed=0)
    twenty, _ = sample_test_games(lichess_dataset, 20, seed=0)
    assert [sha256_bytes(f"0:{m['game_id']}".encode()) for _, m in ten] == keys[:10]
    assert [m["game_id"] for _, m in twenty[:10]] == [m["game_id"] for _, m in ten]
    other, _ = sample_test_games(lichess_dataset, 10, seed=1)
    assert {m["game_id"] for _, m in other} != {m["game_id"] for _, m in ten}
    assert all(tokens[0] == 69 and tokens[-1] == 70 and len(tokens) == 2 + 3 * meta["plies"] for tokens, meta in ten)


def test_a_checkpoint_of_another_dataset_is_refused():
    manifest = {"fingerprint": "a" * 64}
    assert check_dataset({"identity": {"dataset_fingerprint": "a" * 64}}, manifest) == "match"
    nested = {"identity": {"reference": {"identity": {"dataset_fingerprint": "a" * 64}}}}  # self-play
    assert check_dataset(nested, manifest) == "match"
    with pytest.raises(DatasetMismatch, match=f"{'b' * 64}, not {'a' * 64}"):
        check_dataset({"identity": {"dataset_fingerprint": "b" * 64}}, manifest, name="x.pt")
    with pytest.raises(DatasetMismatch, match="names no dataset_fingerprint"):
        check_dataset({"identity": {"seed": 1}}, manifest)
    assert check_dataset({"identity": {"dataset_fingerprint": "b" * 64}}, manifest, allow_other=True) == "overridden"
    with pytest.raises(DatasetMismatch, match="tokenizer"):
        check_dataset({"identity": {"tokenizer": {"version": "pairs-v0"}, "dataset_fingerprint": "a" * 64}}, manifest)


@pytest.mark.slow
def test_breakdowns_partition_every_metric_and_teacher_forcing_is_trainings(model, lichess_dataset):
    games, _ = sample_test_games(lichess_dataset, 12, seed=0)  # two batches: 8 games, then 4
    config = EvalConfig(games=12, batch_size=8, opening_until_ply=10, middlegame_until_ply=40)
    results = evaluate(model, games, config)
    free, tf = results["free_running"], results["teacher_forced"]
    plies = [meta["plies"] for _, meta in games]
    assert free["positions"] == sum(plies) and tf["games"] == 12
    for dim, rows in results["breakdowns"].items():
        assert sum(r["positions"] for r in rows) == free["positions"], dim
        assert sum(r["targets"] for r in rows) == tf["targets"], dim
        for key in ("top1", "top3", "move_legal", "source_legal"):
            assert sum(r[key] * r["positions"] for r in rows) == pytest.approx(free[key] * free["positions"])
        assert sum(r["nll"] * r["targets"] for r in rows) == pytest.approx(tf["nll"] * tf["targets"])
    phase = {r["bucket"]: r["positions"] for r in results["breakdowns"]["phase"]}
    assert phase["opening"] == sum(min(p, 10) for p in plies)
    assert phase.get("endgame", 0) == sum(max(p - 40, 0) for p in plies)
    expected_rating: dict[str, int] = {}
    for _, meta in games:
        for ply in range(meta["plies"]):
            label = rating_bucket(meta["white_elo"] if ply % 2 == 0 else meta["black_elo"], 100)
            expected_rating[label] = expected_rating.get(label, 0) + 1
    assert {r["bucket"]: r["positions"] for r in results["breakdowns"]["rating"]} == expected_rating
    assert len(expected_rating) > 3
    classes = {meta["time_control_class"] for _, meta in games}
    assert {r["bucket"] for r in results["breakdowns"]["time_control"]} == classes
    assert all(r["illegal_probability"] is not None for r in results["breakdowns"]["time_control"])
    # The teacher-forced numbers are training's own validation metrics on these games.
    trained = metrics.evaluate(model, TokenList([tokens for tokens, _ in games]), micro=8)
    for key in ("nll", "reserved_probability", "illegal_probability", "teacher_forced_triple_legality"):
        assert tf[key] == pytest.approx(trained[key], rel=1e-6), key
    assert tf["phase_accuracy"] == trained["phase_accuracy"] and tf["targets"] == trained["targets"]
    assert 0 < free["top1"] < free["top3"] < 1 and 0 < free["move_legal"] < 1


@pytest.mark.slow
def test_stage_writes_its_outputs_once_per_checkpoint_and_refuses_a_foreign_one(model, lichess_dataset, tmp_path):
    fingerprint = dataset.manifest(lichess_dataset)["fingerprint"]
    checkpoint.save(checkpoint.model_payload(model, {"dataset_fingerprint": fingerprint}), tmp_path / "best.pt")
    checkpoint.save(checkpoint.model_payload(model, {"dataset_fingerprint": "f" * 64}), tmp_path / "foreign.pt")
    (tmp_path / "params.yaml").write_text("evaluate:\n  games: 4\n  batch_size: 2\n  threads: 1\n  human_games: 3\n")

    def run(name: str, out: str, *extra: str) -> subprocess.CompletedProcess:
        return run_module(
            "stages.evaluate",
            "--params",
            str(tmp_path / "params.yaml"),
            "--checkpoint",
            str(tmp_path / name),
            "--dataset",
            str(lichess_dataset),
            "--out",
            str(tmp_path / out),
            *extra,
        )

    done = run("best.pt", "a")
    assert done.returncode == 0, done.stderr
    assert "move matching (legal-masked): top-1" in done.stdout
    out = tmp_path / "a"
    record = json.loads((out / "evaluation.json").read_text())
    human = record["human"]["overall"]  # on real games, beside Stockfish depth 1 and random (tests/eval/test_human.py)
    assert json.loads((out / "metrics.json").read_text()) == {  # the DVC metric: 4 decimals
        "top1": round(record["free_running"]["top1"], 4),
        "legal": round(record["free_running"]["move_legal"], 4),
        **{f"human_top1_{who}": round(human[who]["top1"], 4) for who in ("model", "stockfish", "random")},
    }
    assert record["human"]["source"]["games_measured"] == 3 and "Stockfish depth 1" in done.stdout
    assert record["test_split"]["read_by"] == "evaluate" and record["test_split"]["games_evaluated"] == 4
    assert record["test_split"]["games_in_split"] == dataset.manifest(lichess_dataset)["splits"]["test"]["games"]
    assert record["dataset"] == {"path": str(lichess_dataset), "fingerprint": fingerprint, "check": "match"}
    assert 0 <= record["free_running"]["top1"] <= record["free_running"]["top3"] <= 1
    names = [
        "evaluation.json",
        "metrics.json",
        "report.md",
        "by_rating.csv",
        "by_time_control.csv",
        "by_phase.csv",
        "plots/accuracy_by_rating.csv",
        "plots/accuracy_by_phase.csv",
    ]
    rating_plot = (out / "plots/accuracy_by_rating.csv").read_text().splitlines()
    assert rating_plot[0] == "rating,top1,top3,positions" and all(r.split(",")[0].isdigit() for r in rating_plot[1:])
    assert "| opening |" in (out / "report.md").read_text()
    assert "## Human moves on real Lichess games" in (out / "report.md").read_text()

    again = run("best.pt", "a")
    assert again.returncode == 0 and "already holds this evaluation" in again.stdout
    # What DVC removes before a rerun (its uncached metrics and plots) comes back, the same bytes.
    kept = {name: (out / name).read_bytes() for name in names}
    for name in ("metrics.json", "plots/accuracy_by_rating.csv", "plots/accuracy_by_phase.csv"):
        (out / name).unlink()
    restored = run("best.pt", "a")
    assert restored.returncode == 0 and "already holds this evaluation" in restored.stdout
    assert {name: (out / name).read_bytes() for name in names} == kept
    forced = run("best.pt", "b", "--force")
    assert forced.returncode == 0, forced.stderr
    for name in names:  # deterministic: byte-identical outputs
        assert (out / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name

    refused = run("foreign.pt", "c")
    assert refused.returncode == failures.REFUSED and "not " + fingerprint in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "c").exists()
