"""Probe mode: timings and memory per microbatch size on the longest game, weights discarded."""

from __future__ import annotations

import json

from chesscore.model import CONFIGS
from chesscore.train.batching import TokenList
from chesscore.train.distributed import setup
from chesscore.train.probe import probe
from tests.training_data import sample_tokens


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
