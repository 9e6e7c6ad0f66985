"""Length-bucketed epoch plans, rank shares, collate with ignored padding targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore.model import CONFIGS, GPT
from chesscore.tokens import BOS, PAD
from chesscore.train.batching import (
    IGNORE,
    TokenList,
    check_context,
    collate,
    dummy_batch,
    epoch_plan,
    padding_fraction,
    rank_share,
    steps_per_epoch,
)
from tests.training_data import sample_tokens


def _flat(plan):
    return [np.asarray(batch).tolist() for step in plan for batch in step]


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(5, 400), min_size=1, max_size=300),
    micro=st.integers(1, 9),
    world=st.integers(1, 4),
    accum=st.integers(1, 4),
    pool=st.integers(0, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_plan_covers_every_game_once_with_only_the_last_batch_partial(lengths, micro, world, accum, pool, seed):
    lengths = np.array(lengths, dtype=np.int64)
    plan = epoch_plan(lengths, seed=seed, epoch=3, micro=micro, world_size=world, accum=accum, pool_batches=pool)
    batches = _flat(plan)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) == micro * world for b in batches[:-1]) and 0 < len(batches[-1]) <= micro * world
    assert all(len(step) == accum for step in plan[:-1]) and 1 <= len(plan[-1]) <= accum
    assert len(plan) == steps_per_epoch(len(lengths), micro, world, accum)
    for batch in map(np.array, batches):  # the ranks' shares partition the global batch
        shares = [rank_share(batch, r, world) for r in range(world)]
        assert sorted(np.concatenate(shares).tolist()) == sorted(batch.tolist())
        assert max(map(len, shares)) <= micro


def test_plan_is_a_pure_function_of_seed_epoch_lengths_and_world():
    lengths = np.array([len(g) for g in sample_tokens()])
    args = dict(seed=7, epoch=2, micro=4, world_size=2, accum=3)
    first = _flat(epoch_plan(lengths, **args))
    np.random.seed(123)  # global generators must not matter
    torch.manual_seed(123)
    np.random.rand(10)
    assert _flat(epoch_plan(lengths.copy(), **args)) == first
    assert _flat(epoch_plan(lengths, **{**args, "epoch": 3})) != first
    assert _flat(epoch_plan(lengths, **{**args, "seed": 8})) != first
    # One process with twice the microbatch trains on the very same games in each step.
    single = epoch_plan(lengths, **{**args, "micro": 8, "world_size": 1})
    assert [sorted(b) for b in _flat(single)] == [sorted(b) for b in first]


def test_length_buckets_pad_far_less_than_random_batches():
    lengths = np.array([len(g) for g in sample_tokens()])
    bucketed = padding_fraction(epoch_plan(lengths, seed=1, epoch=0, micro=8, world_size=2, accum=1), lengths, 2)
    random = padding_fraction(
        epoch_plan(lengths, seed=1, epoch=0, micro=8, world_size=2, accum=1, pool_batches=0), lengths, 2
    )
    assert bucketed <= 0.05 < 0.3 < random


def test_partial_batch_leaves_a_rank_without_games_and_it_gets_a_zero_target_dummy():
    lengths = np.array([30, 40, 50, 60, 70])  # micro 2 x world 2: the last batch holds 1 game
    last = epoch_plan(lengths, seed=0, epoch=0, micro=2, world_size=2, accum=1)[-1][-1]
    assert len(last) == 1 and len(rank_share(last, 1, 2)) == 0
    inputs, targets = dummy_batch()
    assert inputs.tolist() == [[BOS]] and (targets == IGNORE).all()
    model = GPT(CONFIGS["tiny"])
    loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum")
    loss.backward()  # reaches every parameter (so DDP's hooks fire), with zero gradient
    assert float(loss.detach()) == 0.0
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())


def test_collate_shifts_targets_and_ignores_padding():
    games = TokenList([[BOS, 12, 28, 64, 70], [BOS, 6, 21, 64, 52, 36, 64, 70]])
    rows = games.batch([0, 1])
    inputs, targets = collate(rows)
    # A short game reads its own EOS as an input; what follows it is never a target.
    assert inputs.tolist() == [[BOS, 12, 28, 64, 70, PAD, PAD], [BOS, 6, 21, 64, 52, 36, 64]]
    assert targets.tolist() == [[12, 28, 64, 70, IGNORE, IGNORE, IGNORE], [6, 21, 64, 52, 36, 64, 70]]
    assert inputs.dtype == targets.dtype == torch.int64


def test_padded_batch_has_the_loss_of_its_games_alone():
    """Padding targets are ignored and padding inputs never reach a real position."""
    torch.manual_seed(0)
    model = GPT(CONFIGS["tiny"]).eval()
    games = TokenList(sample_tokens()[:6])
    inputs, targets = collate(games.batch(range(6)))
    with torch.no_grad():
        batched = F.cross_entropy(model(inputs).transpose(1, 2), targets, ignore_index=IGNORE, reduction="sum")
        alone = sum(
            F.cross_entropy(model(x)[0], y[0], reduction="sum")
            for x, y in (collate(games.batch([i])) for i in range(6))
        )
    assert int((targets != IGNORE).sum()) == int(games.lengths().sum()) - 6
    torch.testing.assert_close(batched, alone, rtol=1e-5, atol=1e-3)


def test_games_longer_than_the_context_are_refused_by_name():
    with pytest.raises(ValueError, match=r"validation split: 1 games exceed the context of 32 .*game 2 with 40"):
        check_context(np.array([10, 33, 40]), 32, "validation")
