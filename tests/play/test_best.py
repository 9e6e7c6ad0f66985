"""Temperature 0 plays the most likely legal move: the best-first search against every legal move
scored by full forwards (tests/full_forwards.py), promotions included, with the players left as
they were."""

import random

import torch

from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.best import best_moves, ranked_moves
from chesscore.play.moves import ModelPlayer, Sampler, choose_moves
from chesscore.tokens import NO_PROMOTION, State, encode_game, encode_move
from tests.full_forwards import best_legal_move, legal_log_probs

PROMOTING = "b2b4 b8c6 b4b5 a7a6 b5a6 c6e5 a6b7 e5c4".split()  # White's b7 pawn may promote three ways


def _games(count: int, seed: int) -> list[list[str]]:
    rng, games = random.Random(seed), [PROMOTING]
    for _ in range(count):
        state, moves = State.from_moves([]), []
        for _ in range(rng.randrange(0, 30)):
            move = rng.choice(state.legal_moves())
            for token in encode_move(move):
                state.feed(token)
            moves.append(move.uci())
        games.append(moves)
    return games


@torch.no_grad()
def test_best_first_finds_the_most_likely_legal_move_and_leaves_the_players_alone():
    torch.manual_seed(3)
    for model in (GPT(CONFIGS["tiny"]).eval(), GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, move_features=True))):
        model.eval()
        games = _games(7, seed=2)
        player = ModelPlayer(model, len(games), max_len=200)
        player.prefill([encode_game(moves)[:-1] for moves in games])
        lengths, logits = player.cache.lengths.clone(), player.logits.clone()
        states = [State.from_moves(moves) for moves in games]
        found = best_moves([state.legal_moves() for state in states], [player], [0] * len(games))
        assert found == [best_legal_move(model, moves) for moves in games]
        # The promotions' own probabilities, though no model here likes a promotion best.
        exact = legal_log_probs(model, PROMOTING)
        candidates = [states[0].legal_moves()] + [None] * (len(games) - 1)
        ranked = dict(ranked_moves(candidates, [player], [0] * len(games), len(exact))[0])
        assert ranked.keys() == exact.keys() and sum(move[2] != NO_PROMOTION for move in exact) == 12
        assert all(abs(ranked[move] - exact[move]) < 1e-4 for move in exact)
        assert torch.equal(player.cache.lengths, lengths) and torch.equal(player.logits, logits)
        # choose_moves at temperature 0 plays exactly these moves, and stays in step afterwards.
        played, _ = choose_moves(states, [player], [0] * len(games), Sampler(0.0))
        assert [tuple(encode_move(move)) for move in played] == found
        for row, moves in enumerate(games):
            after = moves + [played[row].uci()]
            expected = model(torch.tensor([encode_game(after)[:-1]]))[0, -1]
            torch.testing.assert_close(player.logits[row], expected, atol=1e-5, rtol=1e-5)
