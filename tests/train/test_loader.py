"""Microbatches assembled ahead by worker processes (chesscore.train.loader): the same bytes as
those the training process makes itself, in the plan's order from any step, and a run trained
(and resumed) with workers is the very run trained without them."""

from __future__ import annotations

import multiprocessing
from dataclasses import replace

import numpy as np
import pytest
import torch

from chesscore.model import CONFIGS, GPT
from chesscore.tokens import BOS
from chesscore.train.batching import IGNORE, TokenList, collate, epoch_plan
from chesscore.train.loader import Assembly, Microbatch, microbatches
from tests.training_data import CONFIG, run, same_artifacts, sample_tokens, small_data


def _assembly(games: TokenList, rank: int, world_size: int, pad_to_multiple: int) -> Assembly:
    return Assembly(
        games, games.lengths(), CONFIGS["demo-board"], rank, world_size, micro=4, pad_to_multiple=pad_to_multiple
    )


def _tensors(m: Microbatch) -> list[torch.Tensor]:
    return [m.inputs, m.targets] + ([] if m.features is None else [m.features.moves, m.features.squares])


def _same(a: Microbatch, b: Microbatch) -> bool:
    if (a.features is None) != (b.features is None):
        return False
    return (a.useful, a.padded) == (b.useful, b.padded) and all(map(torch.equal, _tensors(a), _tensors(b)))


@pytest.mark.parametrize("rank", [0, 1])
def test_workers_make_the_plans_microbatches_in_order_from_any_step(rank):
    games = TokenList(sample_tokens()[:37])  # 37 games, 8 a global batch: the last rank share of 5 is 2 or 3
    plan = epoch_plan(games.lengths(), seed=3, epoch=1, micro=4, world_size=2, accum=2)
    assembly = _assembly(games, rank, world_size=2, pad_to_multiple=64)
    made_here = list(microbatches(assembly, plan, from_step=1, workers=0, pin=False))
    made_ahead = list(microbatches(assembly, plan, from_step=1, workers=2, pin=False))
    expected = [assembly(batch) for step in plan[1:] for batch in step]
    assert len(made_here) == len(made_ahead) == len(expected) == sum(map(len, plan[1:]))
    assert all(_same(a, b) for a, b in zip(made_ahead, expected, strict=True))
    assert all(_same(a, b) for a, b in zip(made_here, expected, strict=True))
    assert not multiprocessing.active_children()  # a finished loader's workers are gone


def test_an_assembled_microbatch_is_what_the_model_reads():
    games = TokenList(sample_tokens()[:8])
    batch = np.array([5, 2, 7])
    for world_size, rank in ((1, 0), (4, 3)):  # rank 3 of 4 has no game of 3: a dummy batch
        made = _assembly(games, rank, world_size, pad_to_multiple=64)(batch)
        share = batch[rank::world_size]
        if len(share):
            inputs, targets = collate(games.batch(share))
            assert made.inputs.shape == (4, 64 * -(-inputs.shape[1] // 64))  # micro rows, a width of 64s
            assert torch.equal(made.inputs[:3, : inputs.shape[1]], inputs)
            assert torch.equal(made.targets[:3, : targets.shape[1]], targets)
            assert made.useful == int((games.lengths()[share] - 1).sum()) and made.padded == made.targets.numel()
        else:
            assert made.useful == made.padded == 0 and (made.targets == IGNORE).all()
        assert (made.inputs[:, 0] == BOS).all()
        expected = GPT(CONFIGS["demo-board"]).row_features(made.inputs)
        assert torch.equal(made.features.moves, expected.moves) and torch.equal(made.features.squares, expected.squares)
    assert _assembly(games, 0, 1, 0)(batch).inputs.shape[0] == 3  # no padding asked: the batch as it is


@pytest.mark.slow
def test_a_run_with_workers_resumed_midway_is_the_run_without_them(tmp_path):
    data = small_data()
    plain = run(data, tmp_path / "plain")
    first = run(data, tmp_path / "ahead", replace(CONFIG, max_updates=6, loader_workers=2))
    assert first["status"] == "max_updates" and first["step"] == 6
    second = run(data, tmp_path / "ahead", replace(CONFIG, loader_workers=2))  # across an epoch end
    assert second["resumed_from_step"] == 6 and second["step"] == plain["step"] == 13
    same_artifacts(tmp_path / "plain", tmp_path / "ahead")
    assert not multiprocessing.active_children()
