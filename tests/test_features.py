"""Move features: the board replay from tokens against python-chess, the feature ids of known
moves, and a GPT with move_features giving the same logits with the cache (rows standing still,
rewound, dropped) as without it, and with the features made ahead with the batch."""

import random
import sys

import chess
import numpy as np
import pytest
import torch

import chesscore.model
from chesscore import boards
from chesscore.features import CAPTURED, MOVE_FEATURES, move_feature_ids, replayed
from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.moves import ModelPlayer, Sampler, choose_moves
from chesscore.tokens import CONTRACT_GAMES, PAD, State, encode_game, encode_move
from chesscore.train.batching import TokenList, collate


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
    for width in (1, 2, 3, 4, 5, 6, 7):  # any width: each position sees the board of its ply
        assert boards.game_boards(np.array([encode_game(["e2e4", "e7e5"])[:width]])).shape == (
            1,
            (width - 1) // 3 + 1,
            64,
        )
    with pytest.raises(ValueError, match="start with BOS"):
        boards.game_boards(np.array([[12, 28, 64]]))


@torch.no_grad()
def test_cached_play_sees_the_same_boards_as_a_full_forward():
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, move_features=True)).eval()
    plain = GPT(CONFIGS["tiny"]).eval()
    assert not hasattr(plain, "features") and model.features.moves.weight.shape == (MOVE_FEATURES, 32)
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


def _ids(moves: str) -> list[int]:
    tokens = np.array([encode_game(moves.split())[:-1]])
    places = np.arange(tokens.shape[1])[None]
    seen = boards.game_boards(tokens)[:, places[0] // 3]
    previous = np.concatenate([[[PAD]], tokens[:, :-1]], axis=1)
    return move_feature_ids(seen, tokens, previous, places)[0].tolist()


def test_feature_ids_name_the_moving_and_the_captured_piece():
    P, N, p = chess.PAWN, chess.KNIGHT, chess.PAWN + 6  # codes: White pawn, knight; Black pawn
    none = CAPTURED
    # BOS; e2e4: pawn, nothing taken; d7d5: black pawn; e4d5: pawn takes a black pawn.
    assert _ids("e2e4 d7d5 e4d5") == [0, P, none, 0, p, none, 0, P, CAPTURED + p, 0]
    # en passant: the destination is empty, the captured pawn stands beside it.
    assert _ids("e2e4 a7a6 e4e5 d7d5 e5d6")[-3:] == [P, CAPTURED + p, 0]
    assert _ids("g1f3")[1:3] == [N, none]
    # A token that is no square (EOS, PAD) names nothing.
    tokens = np.array([[encode_game([])[0], 70, PAD]])
    places = np.arange(3)[None]
    seen = np.repeat(boards.START[None, None], 3, axis=1)
    assert move_feature_ids(seen, tokens, tokens, places).tolist() == [[0, 0, 0]]


def test_move_features_change_what_the_model_sees_and_train():
    torch.manual_seed(1)
    model = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=16, move_features=True))
    loss = model(torch.tensor([encode_game("e2e4 d7d5 e4d5".split())[:-1]]))[0, -1].logsumexp(-1)
    loss.backward()
    assert model.features.moves.weight.grad.abs().sum() > 0


@torch.no_grad()
@pytest.mark.parametrize("name", ["demo-moves", "demo-board"])
def test_features_made_with_the_batch_give_forwards_logits_without_a_replay_inside(name, monkeypatch):
    """Training's way (GPT.row_features on the host, then forward(idx, features=...)): the logits
    of forward's own replay, to the bit, and forward replays nothing itself."""
    torch.manual_seed(2)
    model = GPT(CONFIGS[name]).eval()
    if model.config.board_readout:  # a zero readout (a new model's) would hide missing square codes
        torch.nn.init.normal_(model.board.codes.weight, std=0.5)
    games = [encode_game(moves) for moves in _random_games(5, 60, seed=7)]
    inputs, _ = collate(TokenList(games).batch(range(5), pad=PAD))  # rows of different lengths, padded
    features = model.row_features(inputs)
    assert (features.squares is not None) == model.config.board_readout
    expected = model(inputs)
    callers = []

    def counted(*args, **kwargs):
        callers.append(sys._getframe(1).f_code.co_name)
        return replayed(*args, **kwargs)

    monkeypatch.setattr(chesscore.model, "replayed", counted)
    assert torch.equal(model(inputs, features=features), expected)
    assert callers == []
    model(inputs)
    assert callers == ["forward"]  # without them forward replays (what the patch sees)
    assert GPT(CONFIGS["tiny"]).row_features(inputs) is None
    with pytest.raises(ValueError, match="whole rows"):
        model(inputs[:, :1], cache=model.new_cache(len(inputs)), features=features)
