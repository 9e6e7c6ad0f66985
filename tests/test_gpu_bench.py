"""bench/gpu.py, the device check, runs to its end on a CPU-only machine at tiny sizes, so it is
ready the day a device is at hand.

    .venv/bin/python -m pytest -p no:xdist tests/test_gpu_bench.py -q
"""

from __future__ import annotations

import json

import pytest

from bench import gpu
from bench.train import ROOT, load
from chesscore.conditioning import table_prefixes
from chesscore.failures import Refused
from chesscore.tokens import RATING_UNKNOWN
from tests.training_data import sample_tokens, write_dataset

TINY = (
    *("--device", "cpu", "--model", "tiny", "--micro", "1", "2", "--probe-tokens", "64", "--repeats", "1"),
    *("--board-model", "demo-board"),
    *("--train-model", "tiny", "--train-steps", "4", "--train-micro", "4", "--no-compile", "--loader-workers", "1"),
    *("--eval-games", "2"),
    *("--selfplay-games", "2", "--selfplay-workers", "2", "--max-plies", "8", "--uci-moves", "3"),
)


def dataset(tmp_path):
    games = list(sample_tokens()[:30])
    write_dataset(tmp_path / "dataset", games[:24], games[24:])
    return str(tmp_path / "dataset")


@pytest.mark.slow  # inductor compiles the tiny model for the probe: about 15 s
def test_the_device_check_runs_to_its_end_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert gpu.main([*TINY, "--dataset", dataset(tmp_path), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["machine"]["device"] == "cpu" and "(train split, 24 games)" in report["input"]
    assert set(report["section_seconds"]) == {"data", "probe", "train", "play"}
    probe = report["probe"]
    assert [r["micro_per_rank"] for r in probe["device"]["results"]] == [1, 2]
    assert [r["micro_per_rank"] for r in probe["cpu"]["results"]] == [1]
    assert all(r["mfu"] is None and r["sequence_length"] == 63 for r in probe["device"]["results"])
    # The compiled probe runs once, at the eager size with the most useful tokens/s.
    best = max(probe["device"]["results"], key=lambda r: r["useful_tokens_per_second"])["micro_per_rank"]
    compiled = probe["device-compiled"]
    assert compiled["compile"] is True and [r["micro_per_rank"] for r in compiled["results"]] == [best]
    # The board-reading config at the same size, and the host's time to make its features.
    (board,) = probe["device-board"]["results"]
    assert board["micro_per_rank"] == best and probe["device-board"]["parameters"] > probe["device"]["parameters"]
    step = sum(board["step_seconds"]) / board["timed_steps"]
    assert board["host_feature_seconds"] > 0 and board["host_to_device"] == board["host_feature_seconds"] / step
    train = report["train"]
    for side in ("device", "cpu"):
        assert [step for step, _ in train[side]["loss_curve"]] == [1, 2, 3, 4]
        assert train[side]["precision"] == "bf16-autocast, fp32 weights" and train[side]["compile"] is None
        assert train[side]["gpu_telemetry"] is None  # no GPU: nothing sampled (tests/train/test_telemetry.py)
    # Both sides on the CPU, eager: the same work gives the same losses, to the bit, though the
    # device side's batches come from a loader worker and the CPU side's from the process itself.
    assert (train["device"]["loader_workers"], train["cpu"]["loader_workers"]) == (1, 0)
    assert train["max_loss_difference"] == 0.0
    assert report["evaluate"]["device"]["positions"] == report["evaluate"]["cpu"]["positions"] > 0
    selfplay = report["selfplay"]
    assert [selfplay[way]["processes"] for way in ("device", "device_workers", "cpu")] == [1, 2, 2]
    # Both sides on the CPU: the same 4 games whichever way they are played.
    assert selfplay["same_games_in_process_and_over_workers"] is True
    assert selfplay["device"]["plies"] == selfplay["device_workers"]["plies"] == selfplay["cpu"]["plies"] > 0
    assert selfplay["device_bf16"]["processes"] == 1 and selfplay["device_bf16"]["plies"] > 0
    assert report["uci"]["device"]["moves"] == 3 and report["uci"]["cpu"]["ms_per_move"] > 0
    printed = capsys.readouterr().out
    assert "MFU n/a" in printed and "loss curve (step:nll)" in printed and "ms per move" in printed
    headline = printed.split("== headline")[1]
    assert "probe device-compiled" in headline and "2 workers: " in headline and "on 2 CPU workers" in headline
    assert "probe device-board" in headline and "its features on the host: " in headline
    assert "of the step time, GPU utilisation n/a" in headline
    assert "1 process, bf16 weights: " in headline


def test_a_run_cut_short_keeps_the_sections_it_finished(tmp_path, monkeypatch):
    """Without --dataset's folder (a GPU node's copy of a fresh checkout) the run reads the dataset
    `dvc repro convert` writes, ratings and all, which the triples-v2 training run needs."""

    def cut(*args):
        raise KeyboardInterrupt  # the machine's time ran out during evaluate

    monkeypatch.setattr(gpu, "play_sections", cut)
    out = tmp_path / "gpu.json"
    with pytest.raises(KeyboardInterrupt):
        gpu.main([*TINY, "--no-probe-compile", "--dataset", str(tmp_path / "absent"), "--out", str(out)])
    report = json.loads(out.read_text())
    assert "converted as `dvc repro convert` does" in report["input"]
    assert set(report["section_seconds"]) == {"data", "probe", "train"} and "evaluate" not in report
    assert "device-compiled" not in report["probe"] and report["train"]["max_loss_difference"] == 0.0
    assert [step for step, _ in report["train"]["device"]["loss_curve"]] == [1, 2, 3, 4]


def test_without_a_dataset_it_reads_the_one_the_committed_demo_run_was_evaluated_on(tmp_path):
    data, source = load(tmp_path / "absent", tmp_path / "scratch")
    evaluated = json.loads((ROOT / "data" / "evaluate" / "evaluation.json").read_text())["dataset"]
    assert data.fingerprint == evaluated["fingerprint"] and f"{len(data.train)} games" in source
    ratings = table_prefixes(data.train)[:, :2]
    assert (ratings != RATING_UNKNOWN).mean() > 0.9  # the sample's games are rated: the prefix is true


def test_a_failing_part_is_recorded_and_the_parts_after_it_still_run(tmp_path, monkeypatch, capsys):
    """A lent device is one short call: training that fails (say, inductor on a new card) and
    self-play workers that fail leave their errors in the results, the play sections measure an
    untrained model, and the exit status says something failed."""

    def compile_error(*args):
        raise RuntimeError("inductor: no kernel for this card")

    def worker_error(*args):
        raise OSError("a worker died")

    probe = gpu.probe

    def probe_but_not_compiled(*args):  # probe(config, games, env, micro, out, repeats, compile, precision)
        return compile_error() if args[6] else probe(*args)

    monkeypatch.setattr(gpu, "probe", probe_but_not_compiled)
    monkeypatch.setattr(gpu, "train_section", compile_error)
    monkeypatch.setattr(gpu, "selfplay_sides", worker_error)
    out = tmp_path / "gpu.json"
    assert gpu.main([*TINY, "--dataset", dataset(tmp_path), "--out", str(out)]) == 1
    report = json.loads(out.read_text())
    assert report["probe"]["device-compiled"]["error"].startswith("RuntimeError: inductor")
    assert report["probe"]["cpu"]["results"][0]["micro_per_rank"] == 1  # the CPU probe after it still ran
    assert report["train"]["error"] == "RuntimeError: inductor: no kernel for this card"
    assert "compile_error" in report["train"]["traceback"]
    assert report["play_model"] == "untrained tiny (the train section failed)"
    assert report["evaluate"]["device"]["positions"] > 0 and report["uci"]["cpu"]["moves"] == 3
    assert report["selfplay"]["error"] == "OSError: a worker died"
    assert [r["micro_per_rank"] for r in report["probe"]["device"]["results"]] == [1, 2]
    printed = capsys.readouterr().out
    assert "train: FAILED, RuntimeError" in printed and "selfplay: FAILED, OSError" in printed
    assert "3 part(s) failed: train, selfplay, probe device-compiled" in printed


def test_it_refuses_cuda_where_there_is_none_and_has_help(capsys):
    with pytest.raises(SystemExit) as done:
        gpu.main(["--help"])
    assert done.value.code == 0 and "--pad-to-multiple" in capsys.readouterr().out
    if not gpu.torch.cuda.is_available():
        with pytest.raises(Refused, match="no CUDA device"):
            gpu.main(["--device", "cuda"])
