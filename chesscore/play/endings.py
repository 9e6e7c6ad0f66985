"""How a game ends: by the rules of chess, by adjudication (a Stockfish judge), or at the ply cap.

    end = termination(board, list(board.legal_moves), max_plies=300)   # Ending("1-0", "checkmate", None) or None
    end = termination(board, legal, 300, GameAdjudicator(rules, judge))  # the judge's rules too

Shared by the arena and self-play, so both end games by the same rules and name the endings
the same way (TERMINATIONS). Without an adjudicator the ply cap is a draw; with one, the judge
may end a game earlier (chesscore.play.adjudication: resign and draw rules) and decides a game
still running at the cap by its score of the final position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import chess

if TYPE_CHECKING:
    from chesscore.play.adjudication import GameAdjudicator

RULES = ("checkmate", "stalemate", "threefold_repetition", "fifty_moves", "insufficient_material")
ADJUDICATIONS = ("resign_rule", "draw_rule", "ply_cap")  # the judge's endings (the cap even without one)
TERMINATIONS = RULES + ADJUDICATIONS


class Ending(NamedTuple):
    result: str  # "1-0", "0-1", "1/2-1/2"
    termination: str  # one of TERMINATIONS
    judge_score: int | None = None  # the judge's score that decided (centipawns, White's view)


def rule_ending(board: chess.Board, legal_moves: list[chess.Move]) -> Ending | None:
    """The ending the rules of chess give after the last move, if any.

    Draws that FIDE lets a player claim (threefold, fifty moves) end the game at once, as
    engines adjudicate them; `legal_moves` are the board's, passed in because the caller
    has generated them already."""
    if not legal_moves:
        if board.is_check():
            return Ending("0-1" if board.turn == chess.WHITE else "1-0", "checkmate")
        return Ending("1/2-1/2", "stalemate")
    if board.is_insufficient_material():
        return Ending("1/2-1/2", "insufficient_material")
    if board.halfmove_clock >= 100:
        return Ending("1/2-1/2", "fifty_moves")
    if board.is_repetition(3):
        return Ending("1/2-1/2", "threefold_repetition")
    return None


def termination(
    board: chess.Board, legal_moves: list[chess.Move], max_plies: int, adjudicator: GameAdjudicator | None = None
) -> Ending | None:
    """The game's ending after the last move, or None while it goes on: the rules first, then
    the adjudicator's resign and draw rules, then the ply cap (the judge's verdict, or a draw)."""
    end = rule_ending(board, legal_moves)
    if end is not None:
        return end
    if adjudicator is not None:
        end = adjudicator.after_ply(board)
        if end is not None:
            return end
    if len(board.move_stack) >= max_plies:
        return adjudicator.at_cap(board) if adjudicator is not None else Ending("1/2-1/2", "ply_cap")
    return None


def decided_by(result: str, kind: str) -> str:
    """How a game was decided, for the shares a summary shows: "rules" (checkmate), "adjudication"
    (a win the judge gave), or "draw" (by the rules or by the judge)."""
    if result == "1/2-1/2":
        return "draw"
    return "rules" if kind in RULES else "adjudication"
