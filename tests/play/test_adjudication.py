"""Adjudication: the resign, draw and cap rules on constructed positions, with real Stockfish as
the judge, and the rules' counting on their own."""

from dataclasses import replace

import chess
import pytest

from chesscore.play.adjudication import MATE_CP, Adjudication, GameAdjudicator, Judge, score_text
from chesscore.play.endings import Ending, decided_by, termination

# The Italian Game after 4.O-O-less development, with one side's queen taken off the board.
NO_BLACK_QUEEN = "r1b1kb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
NO_WHITE_QUEEN = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNB1K2R w KQkq - 4 4"
KNIGHT_SHUFFLE = ["f3g1", "f6g8", "g1f3", "g8f6"] * 3  # quiet moves: the material stays as it is
# A rook each, no pawns, far into the game and long without a capture: a dead draw.
ROOK_ENDING = "8/3k4/8/2r5/8/5R2/4K3/8 w - - 30 60"
KING_SHUFFLE = ["e2e1", "d7d8", "e1e2", "d8d7"] * 3


@pytest.fixture(scope="module")
def judge(stockfish):
    with Judge(stockfish, Adjudication(judge_nodes=1000)) as judge:
        yield judge


def _verdicts(fen: str, moves: list[str], rules: Adjudication, judge: Judge) -> list[Ending | None]:
    board, adjudicator, verdicts = chess.Board(fen), GameAdjudicator(rules, judge), []
    for uci in moves:
        board.push_uci(uci)
        verdicts.append(adjudicator.after_ply(board))
        if verdicts[-1] is not None:
            break
    return verdicts


@pytest.mark.parametrize(("fen", "winner"), [(NO_BLACK_QUEEN, "1-0"), (NO_WHITE_QUEEN, "0-1")])
def test_a_queen_up_for_three_moves_wins_for_the_side_ahead_and_not_sooner(judge, fen, winner):
    rules = Adjudication(every_plies=1, resign_moves=3, resign_score_cp=500, draw_moves=0)
    verdicts = _verdicts(fen, KNIGHT_SHUFFLE, rules, judge)
    assert verdicts[:5] == [None] * 5  # 3 moves of both sides: 6 judgements
    assert len(verdicts) == 6 and verdicts[5].result == winner and verdicts[5].termination == "resign_rule"
    assert abs(verdicts[5].judge_score) >= 500
    # Judged every third ply, the same span takes 2 judgements (one with each side to move).
    sparse = _verdicts(fen, KNIGHT_SHUFFLE, Adjudication(every_plies=3, draw_moves=0), judge)
    assert len(sparse) == 6 and sparse[-1].result == winner


def test_an_equal_dead_position_inside_the_band_is_a_draw_and_one_a_queen_up_never(judge):
    rules = Adjudication(every_plies=1, draw_moves=2, draw_score_cp=20, draw_from_move=40)
    verdicts = _verdicts(ROOK_ENDING, KING_SHUFFLE, rules, judge)
    assert verdicts[:3] == [None] * 3 and verdicts[3] == Ending("1/2-1/2", "draw_rule", verdicts[3].judge_score)
    assert abs(verdicts[3].judge_score) <= 20
    early = ROOK_ENDING.replace(" 60", " 20")  # move 20: before draw_from_move
    assert _verdicts(early, KING_SHUFFLE[:8], rules, judge) == [None] * 8
    queen_up = _verdicts(NO_BLACK_QUEEN.replace(" 4 4", " 4 45"), KNIGHT_SHUFFLE, replace(rules, resign_moves=0), judge)
    assert queen_up == [None] * len(KNIGHT_SHUFFLE)


def test_the_cap_is_a_draw_near_zero_and_a_win_beyond_the_threshold(judge):
    rules = Adjudication(cap_score_cp=300)
    level = GameAdjudicator(rules, judge).at_cap(chess.Board(ROOK_ENDING))
    assert level.result == "1/2-1/2" and level.termination == "ply_cap" and abs(level.judge_score) < 300
    assert GameAdjudicator(rules, judge).at_cap(chess.Board(NO_BLACK_QUEEN)).result == "1-0"
    assert GameAdjudicator(rules, judge).at_cap(chess.Board(NO_WHITE_QUEEN)).result == "0-1"
    # Through termination: the cap reached (here 2 plies after the set-up) asks the judge.
    board = chess.Board(NO_BLACK_QUEEN)
    board.push_uci("f3g1")
    adjudicator = GameAdjudicator(Adjudication(every_plies=0, resign_moves=0, draw_moves=0), judge)
    assert termination(board, list(board.legal_moves), 10, adjudicator) is None
    board.push_uci("f6g8")
    assert termination(board, list(board.legal_moves), 2, adjudicator).result == "1-0"
    assert adjudicator.judged == 1


def test_the_rules_of_chess_come_before_the_judge(judge):
    board = chess.Board("7k/5Q2/6K1/8/8/8/8/8 w - - 0 1")
    board.push_uci("f7g7")  # mate
    adjudicator = GameAdjudicator(Adjudication(every_plies=1), judge)
    assert termination(board, list(board.legal_moves), 1, adjudicator) == Ending("1-0", "checkmate")
    assert adjudicator.judged == 0


def test_the_same_positions_get_the_same_scores_from_a_new_judge(stockfish, judge):
    boards = [chess.Board(fen) for fen in (NO_BLACK_QUEEN, NO_WHITE_QUEEN, ROOK_ENDING, chess.STARTING_FEN)]
    first = [judge.score(board) for board in reversed(boards)][::-1]
    with Judge(stockfish, Adjudication(judge_nodes=1000)) as again:
        assert [again.score(board) for board in boards] == first
    assert judge.positions >= len(boards) and judge.seconds > 0


def test_rule_counting_without_an_engine():
    rules = Adjudication(every_plies=5, resign_moves=3, resign_score_cp=500, draw_moves=4, draw_from_move=10)
    assert rules.judgements(3) == 2 and rules.judgements(4) == 2 and Adjudication(every_plies=1).judgements(3) == 6
    game = GameAdjudicator(rules, object())  # rule_verdict counts given scores: no engine is asked
    assert game.rule_verdict(-600, 40, 10) is None
    assert game.rule_verdict(600, 45, 10) is None  # the other side now: the run starts again
    assert game.rule_verdict(700, 50, 10) == Ending("1-0", "resign_rule", 700)
    draw = GameAdjudicator(rules, object())
    assert draw.rule_verdict(5, 40, 30) is None
    assert draw.rule_verdict(-5, 45, 2) is None  # a pawn move or capture in between: counts afresh
    assert draw.rule_verdict(0, 50, 7) == Ending("1/2-1/2", "draw_rule", 0)
    assert GameAdjudicator(Adjudication(enabled=False), None).at_cap(chess.Board()) == Ending("1/2-1/2", "ply_cap")
    with pytest.raises(ValueError, match="give a Judge"):
        GameAdjudicator(rules, None)


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="judge_nodes"):
        Adjudication(judge_nodes=0)
    with pytest.raises(ValueError, match="draw_score_cp"):
        Adjudication(draw_score_cp=600, resign_score_cp=500)
    with pytest.raises(ValueError, match="every_plies"):
        Adjudication(every_plies=0)
    with pytest.raises(ValueError, match="every_plies must be odd"):
        Adjudication(every_plies=4)
    assert Adjudication(every_plies=0, resign_moves=0, draw_moves=0).describe().endswith("cap score=300")


def test_scores_and_shares_as_reports_write_them():
    assert score_text(612) == "+612" and score_text(-5) == "-5" and score_text(0) == "+0"
    assert score_text(MATE_CP - 3) == "#+3" and score_text(-(MATE_CP - 2)) == "#-2"
    assert decided_by("1-0", "checkmate") == "rules" and decided_by("0-1", "resign_rule") == "adjudication"
    assert decided_by("1-0", "ply_cap") == "adjudication" and decided_by("1/2-1/2", "stalemate") == "draw"
