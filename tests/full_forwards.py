"""The tests' oracle for what a model plays: every legal move's log-probability from full forwards
(no key/value cache, no search), against which the players' cached, best-first code is checked.

    scores = legal_log_probs(model, ["e2e4", "e7e5"])   # {(source, destination, promotion): log p}
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from chesscore.model import GPT
from chesscore.play.moves import play_mask
from chesscore.tokens import State, encode_game, encode_move


@torch.no_grad()
def legal_log_probs(model: GPT, moves: Sequence[str]) -> dict[tuple[int, int, int], float]:
    """log p(move) = the sum over its three tokens of log softmax(logits) under play_mask, for
    every legal move after `moves`, in legal-move order. One batched forward over BOS, the moves
    and each candidate's first two tokens: its last three logits predict the candidate's tokens."""
    prefix, position = encode_game(list(moves))[:-1], State.from_moves(list(moves))
    legal = [tuple(encode_move(move)) for move in position.legal_moves()]
    logits = model(torch.tensor([prefix + list(tokens[:2]) for tokens in legal]))[:, -3:]
    scores = {}
    for row, tokens in enumerate(legal):
        state, lp = position.copy(), 0.0
        for i, token in enumerate(tokens):
            masked = logits[row, i].masked_fill(~torch.tensor(play_mask(state)), float("-inf"))
            lp += float(torch.log_softmax(masked, -1)[token])
            state.feed(token)
        scores[tokens] = lp
    return scores


def best_legal_move(model: GPT, moves: Sequence[str]) -> tuple[int, int, int]:
    """The legal move of highest probability (the first of equals, in legal-move order)."""
    scores = legal_log_probs(model, moves)
    return max(scores, key=scores.get)
