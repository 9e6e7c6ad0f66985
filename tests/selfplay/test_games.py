"""play_games: game endings, records, colours, determinism, and the batch compaction."""

from dataclasses import asdict

import chess
import pytest
import torch

from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.adjudication import Adjudication
from chesscore.play.endings import termination
from chesscore.play.moves import ModelPlayer, Sampler, choose_moves
from chesscore.selfplay.games import MODEL, OPPONENT, GameRecord, SelfPlayConfig, play_games
from chesscore.tokens import State, decode_move, encode_game
from tests.full_forwards import best_legal_move

OFF = Adjudication(enabled=False)


def _model(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(CONFIGS["tiny"]).eval()


def _end(board: chess.Board, max_plies: int = 1000):
    end = termination(board, list(board.legal_moves), max_plies)
    return None if end is None else end[:2]


def _board(moves: str) -> chess.Board:
    board = chess.Board()
    for uci in moves.split():
        board.push_uci(uci)
    return board


def test_each_rule_ends_the_game_with_its_result():
    assert _end(_board("f2f3 e7e5 g2g4 d8h4")) == ("0-1", "checkmate")
    assert _end(_board("e2e4 e7e5 f1c4 b8c6 d1h5 g8f6 h5f7")) == ("1-0", "checkmate")
    assert _end(chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")) == ("1/2-1/2", "stalemate")
    assert _end(chess.Board("8/8/4k3/8/8/3NK3/8/8 w - - 0 1")) == ("1/2-1/2", "insufficient_material")
    assert _end(chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 100 80")) == ("1/2-1/2", "fifty_moves")
    assert _end(chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 99 80")) is None
    shuffle = "g1f3 g8f6 f3g1 f6g8 " * 2  # the start position for the third time
    assert _end(_board(shuffle.strip())) == ("1/2-1/2", "threefold_repetition")
    assert _end(_board(" ".join(shuffle.split()[:-1]))) is None  # only twice so far
    assert _end(_board("e2e4 e7e5 g1f3"), max_plies=3) == ("1/2-1/2", "ply_cap")
    assert _end(_board("e2e4 e7e5 g1f3"), max_plies=4) is None


def test_mate_on_the_hundredth_halfmove_is_mate_not_a_fifty_move_draw():
    board = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 99 80")
    board.push_uci("a1a8")
    assert board.halfmove_clock == 100
    assert _end(board) == ("1-0", "checkmate")


def _replay(record: GameRecord, max_plies: int) -> chess.Board:
    """The final board; every move legal, and no earlier position was already the end."""
    board = chess.Board()
    for uci in record.moves:
        assert _end(board, max_plies) is None
        assert chess.Move.from_uci(uci) in board.legal_moves
        board.push_uci(uci)
    return board


def test_records_are_legal_complete_games_in_plain_values():
    records, stats = play_games(_model(0), None, SelfPlayConfig(games=24, max_plies=120, seed=4, adjudication=OFF))
    assert [r.index for r in records] == list(range(24))
    for record in records:
        board = _replay(record, 120)
        assert record.plies == len(record.moves) <= 120
        assert (record.result, record.termination) == _end(board, 120)
        for name, value in asdict(record).items():  # plain values only: cheap, safe to pickle
            assert type(value) in (str, int, tuple) or (name == "judge_score" and value is None), name
            assert all(type(v) is str for v in value) if type(value) is tuple else True
        assert record.white == record.black == MODEL
        assert 0 <= record.illegal_white <= (record.plies + 1) // 2
    assert stats["games"] == stats["white_wins"] + stats["draws"] + stats["black_wins"] == 24
    assert sum(stats["terminations"].values()) == 24
    assert stats["plies"]["total"] == stats["model_moves"] == sum(r.plies for r in records)
    # An untrained model puts most of its mass on illegal tokens: the mask catches it.
    assert stats["illegal_attempts"] == sum(r.illegal_attempts for r in records) > 0
    assert all(r.illegal_attempts == r.illegal_white + r.illegal_black for r in records)
    assert stats["moves_per_second"] > 0 and "model" not in stats


def test_without_a_judge_the_ply_cap_is_a_draw():
    records, stats = play_games(_model(0), None, SelfPlayConfig(games=6, max_plies=7, seed=0, adjudication=OFF))
    assert all(r.plies == 7 and r.result == "1/2-1/2" and r.termination == "ply_cap" for r in records)
    assert stats["terminations"]["ply_cap"] == stats["draws"] == 6 == stats["decided_by"]["draw"]
    assert stats["judged_positions"] == 0 and stats["judge_seconds"] == 0.0


@pytest.mark.slow
def test_the_judge_ends_games_by_its_rules_and_decides_at_the_cap(stockfish):
    rules = Adjudication(every_plies=3, judge_nodes=500)
    cfg = SelfPlayConfig(games=12, max_plies=100, seed=1, adjudication=rules, stockfish=stockfish)
    records, stats = play_games(_model(0), None, cfg)
    assert records == play_games(_model(0), None, cfg)[0]  # the judge's verdicts repeat
    kinds = {r.termination for r in records}
    assert "resign_rule" in kinds  # two random players: someone falls a piece behind
    for record in records:
        board = _replay(record, 100)
        if record.termination == "resign_rule":
            assert abs(record.judge_score) >= rules.resign_score_cp and record.plies % 3 == 0
            assert record.result == ("1-0" if record.judge_score > 0 else "0-1")
        elif record.termination == "ply_cap":
            assert record.plies == 100 and record.judge_score is not None
            ahead = abs(record.judge_score) >= rules.cap_score_cp
            assert record.result == (("1-0" if record.judge_score > 0 else "0-1") if ahead else "1/2-1/2")
        else:
            assert record.judge_score is None and (record.result, record.termination) == _end(board, 100)
        assert 0 < record.judged <= record.plies // 3 + 1
    assert stats["judged_positions"] == sum(r.judged for r in records) and stats["judge_seconds"] > 0
    assert sum(stats["decided_by"].values()) == 12 and stats["decided_by"]["adjudication"] > 0


def test_same_seed_same_games_other_seed_other_games():
    model = _model(1)
    a, _ = play_games(model, None, SelfPlayConfig(games=8, max_plies=30, seed=9))
    b, _ = play_games(model, None, SelfPlayConfig(games=8, max_plies=30, seed=9))
    c, _ = play_games(model, None, SelfPlayConfig(games=8, max_plies=30, seed=10))
    assert a == b and [r.moves for r in a] != [r.moves for r in c]


@pytest.mark.slow
def test_against_an_opponent_each_side_plays_its_own_moves_and_colours_alternate():
    model, opponent = _model(2), _model(3)
    records, stats = play_games(model, opponent, SelfPlayConfig(games=4, temperature=0.0, max_plies=16))
    assert [(r.white, r.black) for r in records] == [(MODEL, OPPONENT), (OPPONENT, MODEL)] * 2
    for record in records:
        for ply, uci in enumerate(record.moves):
            side = record.white if ply % 2 == 0 else record.black
            best = best_legal_move(model if side == MODEL else opponent, record.moves[:ply])
            assert uci == decode_move(list(best)).uci()
    assert records[0].moves != records[1].moves
    model_stats = stats["model"]
    assert model_stats["wins"] + model_stats["draws"] + model_stats["losses"] == 4
    assert stats["model_moves"] == sum((r.plies + (r.white == MODEL)) // 2 for r in records)


@torch.no_grad()
def test_dropping_finished_rows_keeps_the_others_in_step():
    model = _model(4)
    games = [["e2e4"], ["d2d4", "d7d5"], ["g1f3"]]
    states = [State.from_moves(g) for g in games]
    player = ModelPlayer(model, 3, max_len=40)
    player.prefill([encode_game(g)[:-1] for g in games])
    player.keep([2, 0])
    states = [states[2], states[0]]
    moves, _ = choose_moves(states, [player], [0, 0], Sampler(1.0, seed=5))
    for row, (game, move) in enumerate(zip([games[2], games[0]], moves)):
        game.append(move.uci())
        expected = model(torch.tensor([encode_game(game)[:-1]]))[0, -1]
        torch.testing.assert_close(player.logits[row], expected, atol=1e-5, rtol=1e-5)


def test_a_ply_cap_beyond_the_context_is_lowered_to_it():
    # 32 positions: BOS, 3 tokens for each of 9 plies, and 3 to spare (chesscore.play.moves.context_plies)
    small = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=8, block_size=32)).eval()
    records, _ = play_games(small, None, SelfPlayConfig(games=2, max_plies=20, adjudication=OFF))
    assert all(r.plies <= 9 for r in records)
    assert any(r.termination == "ply_cap" and r.plies == 9 for r in records)


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="games must be >= 1"):
        SelfPlayConfig(games=0)
    with pytest.raises(ValueError, match="max_plies must be >= 1"):
        SelfPlayConfig(max_plies=0)
