"""The GPU profile's code paths on the CPU: torch.compile (inductor) over length-bucketed batches
padded to a bounded set of widths, and bf16 autocast, each against the eager fp32 steps.

    .venv/bin/python -m pytest -p no:xdist tests/train/test_compile.py -q
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch._dynamo

import chesscore.model
from chesscore import checkpoint
from chesscore.features import replayed
from chesscore.model import CONFIGS, GPT
from chesscore.tokens import BOS, PAD
from chesscore.train.batching import IGNORE, TokenList, collate, epoch_plan, pad_to_width, padded_width
from chesscore.train.compiled import width_count
from chesscore.train.config import TrainConfig
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.optim import OptimConfig
from chesscore.train.run import open_run
from chesscore.train.trainer import Trainer
from tests.training_data import sample_tokens


def many_lengths(n_games: int) -> TrainData:
    """Real game openings of 6..42 plies (BOS + 3 tokens a ply, 19..127 tokens): every batch its
    own length, and two padded widths (64 and 128) between them."""
    games = sample_tokens()
    train = [games[i][: 1 + 3 * (6 + (i * 5) % 37)] for i in range(n_games)]
    validation = [games[n_games + i][:61] for i in range(4)]
    return TrainData(TokenList(train), TokenList(validation), "compile-test")


def run(data: TrainData, output: Path, config: TrainConfig) -> tuple[Trainer, dict]:
    trainer = Trainer(*open_run(config, data, output, setup("cpu"), resume="none"))
    return trainer, trainer.run()


def nll_by_step(trainer: Trainer) -> np.ndarray:
    return np.array([record["nll"] for record in trainer.state.train_log])


def test_padding_to_a_width_keeps_every_target_and_the_loss():
    rows = TokenList([sample_tokens()[0][:40], sample_tokens()[1][:25]]).batch([0, 1])
    inputs, targets = collate(rows)
    padded_inputs, padded_targets = pad_to_width(inputs, targets, 64, 1024, rows=4)
    assert padded_inputs.shape == padded_targets.shape == (4, 64)
    assert torch.equal(padded_inputs[:2, :39], inputs) and torch.equal(padded_targets[:2, :39], targets)
    assert bool((padded_inputs[:, 39:] == PAD).all()) and bool((padded_targets[:, 39:] == IGNORE).all())
    assert bool((padded_inputs[2:, 0] == BOS).all()) and bool((padded_inputs[2:, 1:] == PAD).all())
    assert bool((padded_targets[2:] == IGNORE).all())
    assert [padded_width(n, 64, 1000) for n in (1, 64, 65, 999)] == [64, 64, 128, 1000]  # capped at the context
    assert width_count(64, 1024) == 16 and width_count(0, 1024) is None
    torch.manual_seed(0)
    model = GPT(replace(CONFIGS["tiny"], move_features=True))

    @torch.no_grad()
    def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(
            model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="sum"
        )

    assert float(loss(padded_inputs, padded_targets)) == pytest.approx(float(loss(inputs, targets)), rel=1e-5)
    dummy = pad_to_width(torch.tensor([[BOS]]), torch.tensor([[IGNORE]]), 64, 1024, rows=4)
    assert dummy[0].shape == (4, 64) and bool((dummy[1] == IGNORE).all())  # an empty rank's batch, same shape


@pytest.mark.slow
@pytest.mark.parametrize("model", ["demo-moves", "demo-board"])
def test_compiled_training_over_many_lengths_compiles_once_per_width_and_matches_eager(tmp_path, model):
    """The demo profile's model (demo-moves: the numpy move features, made with each batch on the
    host, enter forward as tensors) and demo-board (the same replay also gives the readout's square
    codes), 24 steps over 38 lengths, micro 4 with a partial last batch (padded to 4 rows),
    inductor on the CPU."""
    torch._dynamo.reset()  # as in a fresh process: no GPT.forward compiled by another test serves these shapes
    data = many_lengths(46)
    config = TrainConfig(
        model=model,
        tokens="triples-v1",
        optim=OptimConfig(lr=3e-4),  # the tolerances below were measured at this lr
        micro=4,
        epochs=2,
        max_updates=24,
        log_every_steps=1,
        legality_eval_games=2,
        pad_to_multiple=64,
        seed=5,
    )
    lengths = data.train.lengths()
    plan = [
        batch
        for epoch in range(2)
        for step in epoch_plan(lengths, seed=5, epoch=epoch, micro=4, world_size=1, accum=1)
        for batch in step
    ]
    assert len(plan) == 24 and len({int(lengths[b].max()) for b in plan}) >= 10  # many shapes unpadded
    widths = {padded_width(int(lengths[b].max()) - 1, 64, 1024) for b in plan}
    assert widths == {64, 128}

    eager_unpadded, _ = run(data, tmp_path / "eager-unpadded", replace(config, pad_to_multiple=0))
    eager, _ = run(data, tmp_path / "eager", config)
    compiled, results = run(data, tmp_path / "compiled", replace(config, compile=True))

    # One compilation of GPT.forward per width met, each one whole graph: the replay that used to
    # break it (a torch.compiler.disable'd numpy call inside forward) runs with the batch instead.
    report = results["compile"]
    assert report["frames"] == len(widths) and report["graphs"] == len(widths)
    assert report["graph_breaks"] == 0 and report["graph_break_reasons"] == {}
    assert report["max_widths"] == 16 and report["pad_to_multiple"] == 64
    assert len(nll_by_step(compiled)) == 24
    # Padding changes no loss; compiled steps follow eager ones (fp32; inductor's fused kernels
    # round differently, and 24 AdamW steps carry it along).
    assert np.abs(nll_by_step(eager) - nll_by_step(eager_unpadded)).max() < 1e-5
    drift = np.abs(nll_by_step(compiled) - nll_by_step(eager)).max()
    print(f"compiled - eager train NLL over 24 steps: max |difference| {drift:.2e}; compile {report}")
    assert drift < 1e-4  # measured 4.5e-7 (demo-moves), 5.2e-7 (demo-board)
    assert nll_by_step(compiled)[-4:].mean() < nll_by_step(compiled)[:4].mean() - 0.3  # it learns
    padding = [record["padding_fraction"] for record in compiled.state.train_log]
    unpadded = [record["padding_fraction"] for record in eager_unpadded.state.train_log]
    assert min(p - u for p, u in zip(padding, unpadded)) >= 0 and max(padding) > 0.3  # padding is reported
    assert json.loads((tmp_path / "compiled" / "identity.json").read_text())["hyperparameters"]["compile"] is True


def test_training_and_validation_make_the_features_with_the_batch_never_inside_forward(tmp_path, monkeypatch):
    """On a GPU a replay inside forward reads the tokens back from the device, which waits for all
    the work queued before: the trainer and its validation make them on the host instead."""
    callers = []

    def counted(*args, **kwargs):
        callers.append(sys._getframe(1).f_code.co_name)
        return replayed(*args, **kwargs)

    monkeypatch.setattr(chesscore.model, "replayed", counted)
    config = TrainConfig(model="demo-board", tokens="triples-v1", micro=4, accum=2, max_updates=3, seed=5)
    trainer, results = run(many_lengths(12), tmp_path, replace(config, legality_eval_games=2, log_every_steps=1))
    assert results["status"] == "max_updates" and len(trainer.state.history) >= 2  # step 0 and the last
    assert len(callers) > 3 * 2 and set(callers) == {"row_features"}  # 6 microbatches, then validation's
    assert len(nll_by_step(trainer)) == 3 and np.isfinite(nll_by_step(trainer)).all()


def test_bf16_autocast_on_the_cpu_follows_fp32_and_keeps_fp32_weights(tmp_path):
    data = many_lengths(24)
    config = TrainConfig(
        model="demo",
        tokens="triples-v1",
        optim=OptimConfig(lr=3e-4),  # the tolerances below were measured at this lr
        micro=4,
        max_updates=8,
        log_every_steps=1,
        legality_eval_games=2,
        seed=3,
    )
    fp32, fp32_results = run(data, tmp_path / "fp32", replace(config, precision="fp32"))
    bf16, bf16_results = run(data, tmp_path / "bf16", replace(config, precision="bf16"))
    assert bf16.spec.bf16 and not fp32.spec.bf16
    difference = np.abs(nll_by_step(bf16) - nll_by_step(fp32))
    assert len(difference) == 8 and difference.max() < 0.01  # bf16 keeps 8 mantissa bits; measured 6e-4
    assert difference.max() > 0  # it did run in bf16
    print(f"bf16 - fp32 train NLL over 8 steps: max |difference| {difference.max():.5f}")
    validation = [h["validation"]["nll"] for h in bf16_results["history"]]
    reference = [h["validation"]["nll"] for h in fp32_results["history"]]
    assert np.abs(np.array(validation) - np.array(reference)).max() < 0.02
    identity = json.loads((tmp_path / "bf16" / "identity.json").read_text())
    assert identity["precision"] == "bf16-autocast, fp32 weights"
    assert json.loads((tmp_path / "fp32" / "identity.json").read_text())["precision"] == "fp32"
    payload = checkpoint.load(tmp_path / "bf16" / "last.pt")
    assert {t.dtype for t in payload["model"].values()} == {torch.float32}
    moments = [v for state in payload["optimizer"]["state"].values() for v in state.values() if v.numel() > 1]
    assert moments and {t.dtype for t in moments} == {torch.float32}


@pytest.mark.slow
def test_compiled_without_padding_marks_the_shapes_dynamic_and_compiles_once(tmp_path):
    """pad_to_multiple 0: no padding, one compilation for 12 batch lengths and a partial batch."""
    torch._dynamo.reset()
    data = many_lengths(46)
    config = TrainConfig(
        model="tiny",
        tokens="triples-v1",
        optim=OptimConfig(lr=3e-4),  # the tolerances below were measured at this lr
        micro=4,
        max_updates=12,
        log_every_steps=1,
        legality_eval_games=2,
        seed=5,
    )
    eager, _ = run(data, tmp_path / "eager", config)
    compiled, results = run(data, tmp_path / "compiled", replace(config, compile=True))
    report = results["compile"]
    print(f"dynamic shapes: {report}")
    assert report["frames"] == report["graphs"] == 1 and report["graph_breaks"] == 0
    assert report["max_widths"] is None
    assert np.abs(nll_by_step(compiled) - nll_by_step(eager)).max() < 1e-4
