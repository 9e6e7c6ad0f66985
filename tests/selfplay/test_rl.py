"""REINFORCE with a baseline and a KL penalty: the log-probabilities are those of the policy
that played, the KL is exact, the baseline cancels a constant reward, and an update raises
the expected reward of a toy task (computed exactly, not sampled)."""

import copy

import chess
import pytest
import torch

from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.adjudication import Adjudication
from chesscore.play.moves import play_mask
from chesscore.selfplay.games import GameRecord, SelfPlayConfig, play_games
from chesscore.selfplay.rl import (
    PGConfig,
    _masked_log_probs,
    game_batch,
    kl_to_reference,
    make_reward,
    model_colours,
    outcome_reward,
    policy_gradient_step,
    shaped_reward,
    token_log_probs,
)
from chesscore.tokens import BOS, State, encode_game

OFF = Adjudication(enabled=False)  # these games need no judge: their rewards are set by hand


def _model(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(CONFIGS["tiny"]).eval()


@torch.no_grad()
def _log_prob_by_hand(model: GPT, moves: tuple[str, ...], white: bool, temperature: float) -> float:
    """Sum over the side's move tokens of log softmax(logits / T) under play_mask, one full
    forward per token: the distribution Sampler draws from."""
    total, state, tokens = 0.0, State.from_moves([]), encode_game(moves)[:-1]
    for i, token in enumerate(tokens[1:]):
        if ((i // 3) % 2 == 0) == white:
            logits = model(torch.tensor([tokens[: i + 1]]))[0, -1] / temperature
            masked = logits.masked_fill(~torch.tensor(play_mask(state)), float("-inf"))
            total += float(torch.log_softmax(masked, -1)[token])
        state.feed(token)
    return total


def test_log_probs_are_those_of_the_policy_that_played():
    model, opponent = _model(0), _model(1)
    records, _ = play_games(
        model, opponent, SelfPlayConfig(games=3, max_plies=9, seed=2, temperature=1.3, adjudication=OFF)
    )
    itself, _ = play_games(model, None, SelfPlayConfig(games=1, max_plies=8, seed=2, temperature=1.3, adjudication=OFF))
    records += itself  # a self-play game: both colours in one row
    assert [model_colours(r) for r in records] == [[True], [False], [True], [True, False]]
    batch = game_batch(records, model.config.vocab_size)
    assert int(batch.own.sum()) == 3 * (5 + 4 + 5 + 8)
    taken = token_log_probs(model, batch, temperature=1.3)[0].detach()
    by_colour = [
        [float(taken[row][batch.white[row] == white].sum()) for white in colours]
        for row, colours in enumerate(model_colours(r) for r in records)
    ]
    expected = [[_log_prob_by_hand(model, r.moves, white, 1.3) for white in model_colours(r)] for r in records]
    torch.testing.assert_close(torch.tensor(sum(by_colour, [])), torch.tensor(sum(expected, [])), atol=1e-4, rtol=1e-4)


def test_kl_is_zero_against_itself_positive_against_another_and_never_nan():
    model = _model(0)
    records, _ = play_games(model, None, SelfPlayConfig(games=4, max_plies=12, seed=1, adjudication=OFF))
    batch = game_batch(records, model.config.vocab_size)
    _, log_probs = token_log_probs(model, batch, 1.0)
    same = kl_to_reference(log_probs, _masked_log_probs(model, batch, 1.0).detach(), batch)
    other = kl_to_reference(log_probs, _masked_log_probs(_model(5), batch, 1.0).detach(), batch)
    assert same.abs().max() < 1e-5 and (other[batch.own] >= 0).all() and (other.sum(1) > 1e-4).all()
    assert (other[~batch.own] == 0).all()
    other.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_the_baseline_cancels_a_reward_every_game_shares():
    model = _model(0)
    before = copy.deepcopy(model.state_dict())
    records, _ = play_games(model, None, SelfPlayConfig(games=6, max_plies=10, seed=3, adjudication=OFF))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.0)
    metrics = policy_gradient_step(
        model, _model(0), optimizer, records, PGConfig(kl_coef=0.0), reward=lambda record, white: 1.0
    )
    assert metrics["mean_reward"] == 1.0 and metrics["grad_norm"] == 0.0
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


KNIGHTS = (chess.B1, chess.G1)


def _knight_reward(record, white: bool) -> float:
    """Toy task: 1 when white's first move is a knight's."""
    return float(white and chess.Move.from_uci(record.moves[0]).from_square in KNIGHTS)


@torch.no_grad()
def _first_move_sources(model: GPT) -> torch.Tensor:
    """The exact distribution of white's first source square (what the toy reward depends on)."""
    logits = model(torch.tensor([[BOS]]))[0, -1]
    return torch.softmax(logits.masked_fill(~torch.tensor(play_mask(State.from_moves([]))), float("-inf")), -1)


def _train_on_toy(kl_coef: float, iterations: int = 6) -> tuple[float, float, float]:
    """(expected reward before, after, KL to the start model after)."""
    model, reference = _model(7), _model(7)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    start = _first_move_sources(model)
    for iteration in range(iterations):
        records, _ = play_games(model, None, SelfPlayConfig(games=64, max_plies=1, seed=iteration, adjudication=OFF))
        before = _first_move_sources(model)
        metrics = policy_gradient_step(
            model, reference, optimizer, records, PGConfig(kl_coef=kl_coef), reward=_knight_reward
        )
        # entropy_per_move: of the whole move (source, destination, promotion) the policy played
        assert metrics["entropy_per_move"] >= float(-(before[before > 0] * before[before > 0].log()).sum()) - 1e-4
    end = _first_move_sources(model)
    legal = start > 0
    kl = float((end[legal] * (end[legal].log() - start[legal].log())).sum())
    return float(start[list(KNIGHTS)].sum()), float(end[list(KNIGHTS)].sum()), kl


def test_an_update_raises_the_expected_toy_reward_and_the_kl_penalty_holds_it_back():
    before, free, kl_free = _train_on_toy(kl_coef=0.0)
    _, held, kl_held = _train_on_toy(kl_coef=1.0)
    assert free > before + 0.2, (before, free)  # P(knight first) rose, exactly computed
    assert before < held < free and kl_held < kl_free
    # The optimum of E[reward] - beta * KL(pi || pi_ref) is pi_ref tilted by exp(reward / beta).
    tilted = before * torch.e / (before * torch.e + 1 - before)
    assert abs(held - tilted) < 0.05, (held, tilted)


def test_no_model_moves_is_an_error_not_a_silent_no_op():
    records, _ = play_games(_model(0), _model(1), SelfPlayConfig(games=2, max_plies=1, adjudication=OFF))
    black_only = [r for r in records if r.black == "model"]
    with pytest.raises(ValueError, match="nothing to learn from"):
        policy_gradient_step(_model(0), _model(0), torch.optim.AdamW(_model(0).parameters()), black_only, PGConfig())


def test_a_reference_that_reads_other_board_features_is_refused():
    """One replay of each batch serves the model and its reference, so both must read the same."""
    records, _ = play_games(_model(0), None, SelfPlayConfig(games=2, max_plies=4, adjudication=OFF))
    torch.manual_seed(1)
    moves = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, move_features=True))
    for model, reference in ((moves, _model(0)), (_model(0), moves)):
        with pytest.raises(ValueError, match="same board features"):
            policy_gradient_step(model, reference, torch.optim.AdamW(model.parameters()), records, PGConfig())
    metrics = policy_gradient_step(
        moves, copy.deepcopy(moves), torch.optim.AdamW(moves.parameters()), records, PGConfig()
    )
    assert metrics["games"] == 2 and metrics["grad_norm"] > 0


def _record(result: str, termination: str, judge_score: int | None) -> GameRecord:
    return GameRecord(("e2e4", "e7e5"), result, termination, 2, "model", "model", 0, 0, 0, 0, judge_score)


def test_rewards_follow_the_verdicts_and_the_shaped_one_the_judges_score():
    shaped = shaped_reward(400.0)
    won = _record("1-0", "resign_rule", 650)
    assert outcome_reward(won, True) == shaped(won, True) == 1.0 and shaped(won, False) == -1.0
    capped = _record("1/2-1/2", "ply_cap", 250)  # a draw at the cap, White 2.5 pawns up
    expected = 2 / (1 + 10 ** (-250 / 400)) - 1
    assert outcome_reward(capped, True) == 0.0
    assert shaped(capped, True) == pytest.approx(expected) and shaped(capped, False) == pytest.approx(-expected)
    assert shaped(_record("1/2-1/2", "threefold_repetition", None), True) == 0.0  # no judge saw it
    assert make_reward("outcome", 400.0) is outcome_reward
    with pytest.raises(ValueError, match="not one of"):
        make_reward("material", 400.0)
    model = _model(0)
    records = [won, capped, _record("1/2-1/2", "stalemate", None)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    metrics = policy_gradient_step(model, _model(0), optimizer, records, PGConfig(), reward=shaped)
    assert metrics["sides"] == 6 and metrics["nonzero_reward_share"] == pytest.approx(4 / 6)
