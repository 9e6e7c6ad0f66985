"""The 85,940,736-parameter `baseline` config (the GPU profile's model) trains on the CPU: real
optimizer steps on short games lower the loss, its checkpoint resumes to the bytes of an
uninterrupted run, and probe mode measures it.

    .venv/bin/python -m pytest -p no:xdist tests/train/test_baseline.py -q -s

Kept small for 2 cores: 4 games of 10 plies (31 tokens), microbatches of 2, 3 updates.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tqdm import tqdm

from chesscore import checkpoint
from chesscore.model import CONFIGS
from chesscore.train.batching import TokenList
from chesscore.train.config import TrainConfig
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.optim import OptimConfig
from chesscore.train.probe import probe
from chesscore.train.run import open_run
from chesscore.train.trainer import Trainer
from tests.training_data import sample_tokens

PARAMETERS = 85_940_736
# schedule_steps fixed, so extending max_updates from 2 to 3 keeps the identity (a resume).
CONFIG = TrainConfig(
    model="baseline",
    tokens="triples-v1",
    micro=2,
    epochs=10,
    schedule_steps=3,
    warmup_steps=0,
    max_updates=2,
    log_every_steps=1,
    legality_eval_games=1,
    optim=OptimConfig(lr=1e-4),
    seed=7,
)


@pytest.mark.slow
def test_the_baseline_trains_resumes_bit_identical_and_probes_on_the_cpu(tmp_path: Path) -> None:
    games = TokenList([game[:31] for game in sample_tokens()[:4]])
    data = TrainData(games, TokenList([games[0], games[1]]), "baseline-test")
    env = setup("cpu")
    output = tmp_path / "run"

    # First, so the process's peak RSS (what probe reports on the CPU) is the probe's own step.
    report = probe(CONFIGS["baseline"], games, env, [1, 2], tmp_path / "probe", repeats=1)
    assert report["parameters"] == PARAMETERS and report["precision"] == "fp32"
    for r in report["results"]:
        assert r["sequence_length"] == 30 and r["useful_tokens_per_second"] > 0
        assert r["memory"][0]["cpu_max_rss_bytes"] > 4 * PARAMETERS  # at least the fp32 weights

    first = Trainer(*open_run(CONFIG, data, output, env)).run()  # 2 updates (one epoch), then stops
    assert first["status"] == "max_updates" and first["parameters"] == PARAMETERS
    extended = replace(CONFIG, max_updates=3)
    resumed = Trainer(*open_run(extended, data, output, env))
    assert resumed.spec.resumed_from == 2
    second = resumed.run()
    assert second["resumed_from_step"] == 2 and second["step"] == 3
    nll = [h["validation"]["nll"] for h in second["history"]]
    assert [h["step"] for h in second["history"]] == [0, 2, 3]
    print(f"baseline validation NLL at steps 0, 2, 3: {[round(v, 4) for v in nll]}")
    assert nll[-1] < nll[0] - 0.3, nll  # real steps: the loss falls
    del resumed

    # The same 3 updates in one go (no checkpoint in between) give the very same weights.
    straight = Trainer(*open_run(extended, data, tmp_path / "straight", env, resume="none"))
    bar = tqdm(disable=True)
    for _ in range(3):
        straight.train_step(bar)
    saved = checkpoint.load(output / "last.pt")["model"]
    assert saved.keys() == straight.model.state_dict().keys()
    assert all(torch.equal(saved[k], v) for k, v in straight.model.state_dict().items())
    del straight, saved
