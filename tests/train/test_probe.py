"""Probe mode: timings and memory per microbatch size on the longest game, weights discarded."""

from __future__ import annotations

import json

import torch

from chesscore.model import CONFIGS, GPT
from chesscore.tokens import PREFIX_LENGTH
from chesscore.train.batching import TokenList
from chesscore.train.distributed import setup
from chesscore.train.probe import probe
from tests.inprocess import run_module
from tests.training_data import sample_tokens, write_dataset


def test_probe_reports_each_microbatch_size_and_writes_no_checkpoint(tmp_path):
    games = TokenList(sample_tokens()[:40])
    longest = int(games.lengths().max())
    report = probe(CONFIGS["tiny"], games, setup("cpu"), [1, 3], tmp_path, repeats=2)
    assert json.loads((tmp_path / "probe.json").read_text()) == report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.json"]
    assert [r["micro_per_rank"] for r in report["results"]] == [1, 3]
    for r in report["results"]:
        assert r["sequence_length"] == longest - 1 and len(r["step_seconds"]) == 2
        # Copies of one game: no padding, so useful and padded rates agree.
        assert r["useful_tokens_per_second"] == r["padded_tokens_per_second"] > 0
        assert r["mfu"] is None and r["memory"][0]["cpu_max_rss_bytes"] > 0  # no GPU here


def test_the_stage_probes_the_rows_its_tokens_setting_trains_on(tmp_path):
    """A triples-v2 probe times rows with the 3-token prefix after BOS, as training reads them."""
    games = list(sample_tokens()[:12])
    write_dataset(tmp_path / "dataset", games[:8], games[8:])
    longest = {}
    for version in ("triples-v1", "triples-v2"):
        out = tmp_path / version
        done = run_module(
            "stages.train",
            *("--params", tmp_path / "absent.yaml", "--dataset", tmp_path / "dataset", "--output", out),
            *("--mode", "probe", "--model", "tiny", "--probe-micro", "2", "--tokens", version, "--device", "cpu"),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        longest[version] = json.loads((out / "probe.json").read_text())["results"][0]["sequence_length"]
    assert longest["triples-v2"] == longest["triples-v1"] + PREFIX_LENGTH


def test_a_size_that_runs_out_of_memory_is_reported_and_larger_ones_not_tried(tmp_path, monkeypatch, capsys):
    """The CPU never raises CUDA's out-of-memory error, so the model raises it for batches of 3 or
    more, as a GPU too small for them would."""
    forward = GPT.forward

    def too_big_from_3(self, idx, *args, **kwargs):
        if idx.shape[0] >= 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (raised by the test)")
        return forward(self, idx, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", too_big_from_3)
    report = probe(CONFIGS["tiny"], TokenList(sample_tokens()[:10]), setup("cpu"), [1, 2, 3, 4], tmp_path, repeats=1)
    assert [r["micro_per_rank"] for r in report["results"]] == [1, 2, 3]
    assert [r.get("out_of_memory", False) for r in report["results"]] == [False, False, True]
    assert report["results"][1]["useful_tokens_per_second"] > 0
    assert "micro 3 x" in capsys.readouterr().out.split("out of memory")[0].splitlines()[-1]
