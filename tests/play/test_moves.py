"""Batched move choice under the legal mask, with the key/value cache."""

import chess
import torch
from torch.overrides import TorchFunctionMode

from chesscore.model import CONFIGS, GPT
from chesscore.play.moves import ModelPlayer, Sampler, choose_moves
from chesscore.tokens import State, encode_game


def _model(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(CONFIGS["tiny"]).eval()


def _play(players, n_games, plies, seed, temperature=1.0):
    states = [State.from_moves([]) for _ in range(n_games)]
    sampler = Sampler(temperature, seed)
    played, illegal = [[] for _ in range(n_games)], 0
    for ply in range(plies):
        live = [s if not s.board.is_game_over() else None for s in states]
        movers = [(g + ply) % len(players) for g in range(n_games)]
        moves, flags = choose_moves(live, players, movers, sampler)
        for g, move in enumerate(moves):
            if move is not None:
                played[g].append(move.uci())
        illegal += sum(flags)
    return played, states, illegal


def test_every_move_is_legal_and_random_models_try_illegal_ones():
    played, states, illegal = _play([ModelPlayer(_model(0), 8)], 8, 40, seed=1)
    for moves, state in zip(played, states):
        board = chess.Board()
        for uci in moves:
            assert chess.Move.from_uci(uci) in board.legal_moves
            board.push_uci(uci)
        assert board == state.board
    assert illegal > 0  # an untrained model puts mass on illegal tokens; the mask catches it


def test_same_seed_same_games_different_seed_different_games():
    a, _, _ = _play([ModelPlayer(_model(0), 4)], 4, 20, seed=5)
    b, _, _ = _play([ModelPlayer(_model(0), 4)], 4, 20, seed=5)
    c, _, _ = _play([ModelPlayer(_model(0), 4)], 4, 20, seed=6)
    assert a == b and a != c


@torch.no_grad()
def test_two_players_each_see_the_whole_game():
    white, black = _model(0), _model(1)
    players = [ModelPlayer(white, 2), ModelPlayer(black, 2)]
    played, _, _ = _play(players, 2, 12, seed=3, temperature=0.0)
    for g, moves in enumerate(played):
        tokens = torch.tensor([encode_game(moves)[:-1]])  # without EOS
        for player, model in zip(players, (white, black)):
            torch.testing.assert_close(player.logits[g], model(tokens)[0, -1], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_prefill_and_feed_move_match_a_full_forward():
    model = _model(2)
    games = [["e2e4", "e7e5", "g1f3"], ["d2d4"], []]
    player = ModelPlayer(model, 3)
    player.prefill([encode_game(g)[:-1] for g in games])
    player.feed_move(chess.Move.from_uci("b8c6"), row=0)
    games[0].append("b8c6")
    for g, moves in enumerate(games):
        expected = model(torch.tensor([encode_game(moves)[:-1]]))[0, -1]
        torch.testing.assert_close(player.logits[g], expected, atol=1e-5, rtol=1e-5)


def test_greedy_sampler_picks_best_legal_token():
    logits = torch.tensor([[5.0, 1.0, 3.0], [0.0, 2.0, 1.0]])
    legal = torch.tensor([[False, True, True], [True, True, True]])
    chosen, illegal = Sampler(0.0).pick(logits, legal)
    assert chosen.tolist() == [2, 1] and illegal.tolist() == [True, False]


class _CountCalls(TorchFunctionMode):
    """Counts torch calls (functions, methods, indexing) made while active."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _calls_for_one_move(n_games: int) -> int:
    torch.manual_seed(0)
    players = [ModelPlayer(GPT(CONFIGS["tiny"]).eval(), n_games) for _ in range(2)]
    states = [State.from_moves([]) for _ in range(n_games)]
    states[1] = None  # a finished game among them
    with _CountCalls() as count:
        choose_moves(states, players, [g % 2 for g in range(n_games)], Sampler(1.0, seed=0))
    return count.calls


def test_torch_calls_per_move_do_not_grow_with_the_number_of_games():
    # On a GPU each call on the players' tensors is a kernel launch or a sync: a batch of 32
    # games must move with the calls of a batch of 4 (it took 1,294 against 706 when each
    # game's logits were indexed on their own).
    assert _calls_for_one_move(32) == _calls_for_one_move(4)
