"""Conditioned training end to end: a tiny model trained by the real trainer on two synthetic
"ratings" that play different fixed openings plays each opening when told its rating, and a
mixture when told "unknown"; the identity records triples-v2 and the unknown fraction. Trained
twice: reading the ratings from the prefix alone, and with Maia-2's skill inputs too."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import chess
import pytest
import torch

from chesscore import checkpoint
from chesscore.conditioning import ConditionedSource
from chesscore.model import GPT
from chesscore.tokens import BOS, CONDITIONED_VERSION, UNKNOWN_PREFIX, State, conditioning_prefix, encode_game
from chesscore.train.batching import TokenList
from chesscore.train.config import TrainConfig
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.optim import OptimConfig
from chesscore.train.trainer import train

LOW, HIGH = 1000, 2000
OPENINGS = {LOW: "e2e4 e7e5 g1f3 b8c6 f1c4 f8c5", HIGH: "d2d4 d7d5 c2c4 e7e6 b1c3 g8f6"}
CONFIG = TrainConfig(
    model="tiny",
    tokens=CONDITIONED_VERSION,
    unknown_fraction=0.25,
    micro=16,
    epochs=60,
    seed=5,
    optim=OptimConfig(lr=5e-3),
    max_updates=240,
    patience=100,
    legality_eval_games=4,
    log_every_steps=20,
    device="cpu",
)


def synthetic(games_each: int) -> ConditionedSource:
    """Games of the two 'ratings': each side's rating says which opening the game is."""
    games, prefixes = [], []
    for rating, line in OPENINGS.items():
        for _ in range(games_each):
            games.append(encode_game(line.split()))
            prefixes.append(conditioning_prefix(rating, rating, "blitz"))
    return ConditionedSource(TokenList(games), prefixes)


def greedy_line(model: GPT, prefix: tuple[int, int, int], plies: int) -> list[str]:
    """The model's most likely legal moves from the start, told `prefix`."""
    state, tokens = State.from_moves([], prefix), [BOS, *prefix]
    with torch.no_grad():
        for _ in range(3 * plies):
            logits = model(torch.tensor([tokens]))[0, -1]
            token = int(torch.where(torch.from_numpy(state.mask().copy()), logits, -torch.inf).argmax())
            state.feed(token)
            tokens.append(token)
    return [move.uci() for move in state.board.move_stack]


def first_source_probability(model: GPT, prefix: tuple[int, int, int]) -> dict[str, float]:
    with torch.no_grad():
        probs = model(torch.tensor([[BOS, *prefix]]))[0, -1].softmax(-1)
    return {name: float(probs[getattr(chess, name.upper())]) for name in ("e2", "d2")}


class Trained(NamedTuple):
    output: Path
    skill_inputs: bool


@pytest.fixture(scope="module", params=[False, True], ids=["prefix-only", "skill-inputs"])
def trained(request, tmp_path_factory) -> Trained:
    """Trained once reading the ratings from the prefix alone, once with them at every position too."""
    output = tmp_path_factory.mktemp("conditioned")
    data = TrainData(synthetic(32), synthetic(4), fingerprint="synthetic-openings")
    results = train(replace(CONFIG, skill_inputs=request.param), data, output, setup("cpu"))
    assert results["step"] > 0
    return Trained(output, request.param)


@pytest.mark.slow
def test_the_model_plays_the_opening_of_the_rating_it_is_told(trained):
    model, payload = checkpoint.load_model(trained.output / "best.pt")
    assert model.config.conditioning and model.config.skill_inputs is trained.skill_inputs
    for rating, line in OPENINGS.items():
        assert greedy_line(model, conditioning_prefix(rating, rating, "blitz"), 6) == line.split(), rating
    low, high = (first_source_probability(model, conditioning_prefix(r, r, "blitz")) for r in (LOW, HIGH))
    assert low["e2"] > 0.8 and high["d2"] > 0.8, (low, high)
    # Told nothing, it has learned the mixture of the two (a quarter of the games were "unknown").
    unknown = first_source_probability(model, UNKNOWN_PREFIX)
    assert unknown["e2"] > 0.15 and unknown["d2"] > 0.15, unknown


def test_the_identity_records_the_tokens_version_and_the_conditioning(trained):
    identity = json.loads((trained.output / "identity.json").read_text())
    assert identity["tokenizer"]["version"] == CONDITIONED_VERSION
    assert identity["conditioning"]["unknown_fraction"] == 0.25
    assert identity["model"]["config"]["conditioning"] is True
    assert (
        identity["conditioning"]["skill_inputs"] is identity["model"]["config"]["skill_inputs"] is trained.skill_inputs
    )
    payload = checkpoint.load(trained.output / "last.pt")
    assert payload["identity"]["tokenizer"] == identity["tokenizer"]
