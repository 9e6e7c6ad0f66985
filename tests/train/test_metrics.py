"""Teacher-forced metrics: batched and padded sums equal a plain per-game computation, and the
legality metrics mean what they say on hand-made logits."""

from __future__ import annotations

import chess
import numpy as np
import pytest
import torch

from chesscore.model import CONFIGS, GPT
from chesscore.tokens import BOS, EOS, RESERVED_START, State, decode_move, encode_game
from chesscore.train.batching import IGNORE, TokenList, collate, eval_batches
from chesscore.train.metrics import Totals, accumulate, add_batch, evaluate, legal_masks, legality_subset
from tests.training_data import sample_tokens


def _model() -> GPT:
    torch.manual_seed(3)
    return GPT(CONFIGS["tiny"]).eval()


@torch.no_grad()
def _one_game_at_a_time(model: GPT, games) -> dict:
    """The metrics written the slow, obvious way: one unpadded game per forward."""
    sums = dict(nll=0.0, n=0, reserved=0.0, illegal=0.0, moves=0, legal=0)
    phase_n, phase_ok = {}, {}
    for tokens in games:
        log_probs = model(torch.tensor([tokens[:-1]]))[0].log_softmax(-1).double()
        probs, pred = log_probs.exp(), log_probs.argmax(-1)
        state = State()
        state.feed(BOS)
        for i, target in enumerate(tokens[1:]):
            phase = "eos" if target == EOS else ("source", "destination", "promotion")[i % 3]
            phase_n[phase] = phase_n.get(phase, 0) + 1
            phase_ok[phase] = phase_ok.get(phase, 0) + int(pred[i] == target)
            sums["nll"] -= float(log_probs[i, target])
            sums["n"] += 1
            sums["reserved"] += float(probs[i, RESERVED_START:].sum())
            sums["illegal"] += float(probs[i][~torch.from_numpy(state.mask().copy())].sum())
            if i % 3 == 0 and target != EOS:
                sums["moves"] += 1
                try:
                    sums["legal"] += decode_move(pred[i : i + 3].tolist()) in state.board.legal_moves
                except ValueError:
                    pass
            state.feed(target)
    return {
        "nll": sums["nll"] / sums["n"],
        "targets": sums["n"],
        "phase_accuracy": {p: phase_ok[p] / phase_n[p] for p in phase_n},
        "teacher_forced_triple_legality": sums["legal"] / sums["moves"],
        "reserved_probability": sums["reserved"] / sums["n"],
        "illegal_probability": sums["illegal"] / sums["n"],
    }


def test_batched_metrics_equal_the_per_game_computation():
    model = _model()
    games = sample_tokens()[:24]
    got = evaluate(model, TokenList(games), micro=5)  # padded batches of mixed lengths
    want = _one_game_at_a_time(model, games)
    assert got["targets"] == want["targets"] == sum(len(g) - 1 for g in games)
    assert got["games"] == got["legality_games"] == 24 and got["legality_targets"] == want["targets"]
    for key in ("nll", "teacher_forced_triple_legality", "reserved_probability", "illegal_probability"):
        assert got[key] == pytest.approx(want[key], rel=1e-5), key
    assert got["phase_accuracy"] == pytest.approx(want["phase_accuracy"], rel=1e-9)
    assert sum(got["phase_counts"].values()) == got["targets"]
    assert got["phase_counts"]["eos"] == 24


def test_shards_of_the_batches_sum_to_the_whole():
    """What DDP validation does: each rank a share of the batches, totals all-reduced."""
    model, games = _model(), TokenList(sample_tokens()[:20])
    batches = eval_batches(games.lengths(), 3)
    subset = legality_subset(len(games), 7)
    whole = accumulate(model, games, batches, legality=subset)
    parts = [accumulate(model, games, batches[r::2], legality=subset) for r in range(2)]
    torch.testing.assert_close(parts[0].tensor() + parts[1].tensor(), whole.tensor(), rtol=1e-9, atol=1e-6)
    assert whole.result()["legality_games"] == 7


def _peaked_logits(rows: list[list[int]], length: int) -> torch.Tensor:
    """Logits (1, length, 128) with all the mass on the given token of each position."""
    logits = torch.full((1, length, 128), -30.0)
    for i, token in enumerate(rows):
        logits[0, i, token] = 30.0
    return logits


def test_legality_metrics_on_hand_made_predictions():
    moves = ["e2e4", "e7e5", "g1f3"]
    tokens = np.array(encode_game(moves), dtype=np.uint8)
    _, targets = collate(tokens[None])
    gold = targets[0].tolist()

    perfect = Totals()
    add_batch(perfect, _peaked_logits(gold, len(gold)), targets, [tokens])
    result = perfect.result()
    assert result["nll"] < 1e-6 and result["illegal_probability"] < 1e-6
    assert result["teacher_forced_triple_legality"] == 1.0
    assert set(result["phase_accuracy"].values()) == {1.0}

    # Legal but wrong moves (a2a3 each time for white, a7a6 for black): still all legal.
    # The last one (a2a3 instead of g1f3) is a legal white move too.
    wrong = []
    for source, destination in [("a2", "a3"), ("a7", "a6"), ("a2", "a3")]:
        wrong += [chess.parse_square(source), chess.parse_square(destination), 64]
    legal_wrong = Totals()
    add_batch(legal_wrong, _peaked_logits(wrong + [EOS], len(gold)), targets, [tokens])
    result = legal_wrong.result()
    assert result["teacher_forced_triple_legality"] == 1.0
    assert result["phase_accuracy"]["source"] == 0.0 and result["phase_accuracy"]["promotion"] == 1.0

    # e1f3 (e1 has no legal move; f3 is no destination of the gold source e2), then a
    # reserved token as a source: two illegal triples of three, three illegal positions.
    bad = [chess.E1, chess.F3, 64, 100, chess.E5, 64, chess.G1, chess.F3, 64, EOS]
    illegal = Totals()
    add_batch(illegal, _peaked_logits(bad, len(gold)), targets, [tokens])
    result = illegal.result()
    assert result["teacher_forced_triple_legality"] == pytest.approx(1 / 3)
    assert result["illegal_probability"] == pytest.approx(3 / 10, abs=1e-6)
    assert result["reserved_probability"] == pytest.approx(1 / 10, abs=1e-6)


def test_legal_masks_follow_the_game():
    tokens = encode_game(["e2e4", "e7e5"])
    masks = legal_masks(tokens)
    assert masks.shape == (len(tokens) - 1, 128)
    assert masks[0][chess.E2] and not masks[0][chess.E1] and masks[0][EOS]
    assert sorted(np.flatnonzero(masks[1])) == [chess.E3, chess.E4]


def test_stop_request_gives_no_partial_result_and_keeps_training_mode():
    model = _model().train()
    calls = []
    result = evaluate(
        model, TokenList(sample_tokens()[:12]), micro=4, should_stop=lambda: calls.append(1) or len(calls) > 2
    )
    assert result is None and len(calls) == 3 and model.training


def test_legality_subset_is_evenly_spread():
    assert legality_subset(10, None) == set(range(10))
    assert legality_subset(10, 4) == {0, 2, 5, 7}
    assert legality_subset(3, 10) == {0, 1, 2}
    with pytest.raises(ValueError, match="positive"):
        legality_subset(10, 0)


def test_ignore_targets_carry_no_weight():
    tokens = np.array(encode_game(["d2d4"]), dtype=np.uint8)
    padded = np.concatenate([tokens, np.full(6, 71, np.uint8)])
    _, targets = collate(padded[None])
    assert (targets[0, len(tokens) - 1 :] == IGNORE).all()
    totals = Totals()
    add_batch(totals, torch.randn(1, targets.shape[1], 128), targets, [tokens])
    assert totals.result()["targets"] == len(tokens) - 1
