"""A tiny GPT trained for a few seconds on the openings of the embedded sample's games, so
that tests of evaluate and arena see a model that is neither uniform nor always illegal.
Trained once per test session (cached) on one thread; deterministic for a seed."""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

from chesscore.model import CONFIGS, GPT
from chesscore.train.batching import IGNORE, TokenList, collate
from tests.training_data import sample_tokens


@functools.cache
def trained_tiny(seed: int = 0, steps: int = 80, batch: int = 16, tokens: int = 121) -> GPT:
    """CONFIGS["tiny"] after `steps` AdamW steps on the first `tokens` tokens of real games."""
    torch.manual_seed(seed)
    games = TokenList([game[:tokens] for game in sample_tokens()])
    model = GPT(CONFIGS["tiny"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        inputs, targets = collate(games.batch(rng.choice(len(games), batch, replace=False)))
        loss = F.cross_entropy(model(inputs).transpose(1, 2), targets, ignore_index=IGNORE)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()
