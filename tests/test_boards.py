"""The board input: the replay from tokens against python-chess, and a GPT with board_input giving
the same logits with the cache (rows standing still, rewound, dropped) as without it."""

import random

import chess
import numpy as np
import pytest
import torch

from chesscore import boards
from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.moves import ModelPlayer, Sampler, choose_moves
from chesscore.tokens import CONTRACT_GAMES, PAD, State, encode_game, encode_move


def _codes(board: chess.Board) -> np.ndarray:
    expected = np.zeros(64, dtype=np.uint8)
    for square, piece in board.piece_map().items():
        expected[square] = piece.piece_type + (0 if piece.color == chess.WHITE else 6)
    return expected


def _random_games(count: int, plies: int, seed: int) -> list[list[str]]:
    rng, games = random.Random(seed), []
    for _ in range(count):
        board, moves = chess.Board(), []
        while not board.is_game_over() and len(moves) < plies:
            move = rng.choice(list(board.legal_moves))
            board.push(move)
            moves.append(move.uci())
        games.append(moves)
    return games


def test_the_replay_is_python_chess_board_for_board():
    # The contract games castle both ways, take en passant and promote to every piece.
    games = [game.split() for game in CONTRACT_GAMES] + _random_games(60, 250, seed=1)
    for moves in games:
        replayed = boards.game_boards(np.array([encode_game(moves)[:-1]]))[0]
        board = chess.Board()
        assert (replayed[0] == _codes(board)).all()
        for ply, uci in enumerate(moves, start=1):
            board.push_uci(uci)
            assert (replayed[ply] == _codes(board)).all(), (moves[:ply], board.fen())


def test_garbage_moves_leave_the_board_and_rows_must_start_with_bos():
    before = np.stack([boards.START, boards.START])
    after = boards.apply_moves(before, np.array([PAD, 27]), np.array([PAD, 35]), np.array([PAD, 64]))
    assert (after == before).all()  # padding, and an empty source square (d4)
    with pytest.raises(ValueError, match="start with BOS"):
        boards.game_boards(np.array([[12, 28, 64]]))


@torch.no_grad()
def test_cached_play_sees_the_same_boards_as_a_full_forward():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, board_input=True)).eval()
    plain = GPT(CONFIGS["tiny"]).eval()
    assert not hasattr(plain, "board") and model.board.weight.shape == (64 * 13, 32)
    starts = [["e2e4"], ["d2d4", "d7d5"], [], ["g1f3", "g8f6", "e2e4"]]
    states = [State.from_moves(moves) for moves in starts]
    player = ModelPlayer(model, len(starts), max_len=200)
    player.prefill([encode_game(moves)[:-1] for moves in starts])  # different lengths: right padding
    sampler, rng = Sampler(1.0, seed=3), random.Random(4)
    for step in range(24):
        # Rows 0 and 2 stand still on odd steps while an "engine" moves for them (the arena's way).
        model_rows = [g for g in range(len(states)) if step % 2 == 0 or g % 2]
        chosen = [states[g] if g in model_rows else None for g in range(len(states))]
        choose_moves(chosen, [player], [0] * len(states), sampler)
        if len(model_rows) < len(states):
            tokens = torch.full((len(states), 3), PAD, dtype=torch.long)
            for g in set(range(len(states))) - set(model_rows):
                move = rng.choice(states[g].legal_moves())
                tokens[g] = torch.tensor(encode_move(move))
                for token in tokens[g]:
                    states[g].feed(int(token))
            player.feed(tokens, torch.tensor([g not in model_rows for g in range(len(states))]))
        if step == 15:  # a finished game leaves the batch
            player.keep([3, 1, 0])
            states = [states[3], states[1], states[0]]
    for row, state in enumerate(states):
        moves = [move.uci() for move in state.board.move_stack]
        full = model(torch.tensor([encode_game(moves)[:-1]]))[0, -1]
        torch.testing.assert_close(player.logits[row], full, atol=1e-5, rtol=1e-5)


def test_the_board_input_changes_what_the_model_sees_and_trains():
    torch.manual_seed(1)
    model = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=16, board_input=True))
    # Two move orders into the same position: equal boards at the end, different token histories.
    a = torch.tensor([encode_game("g1f3 g8f6 b1c3".split())[:-1]])
    b = torch.tensor([encode_game("b1c3 g8f6 g1f3".split())[:-1]])
    seen_a = boards.game_boards(a.numpy())[0, -1]
    assert (seen_a == boards.game_boards(b.numpy())[0, -1]).all()
    loss = model(a)[0, -1].logsumexp(-1)
    loss.backward()
    assert model.board.weight.grad.abs().sum() > 0  # the board embedding learns
