"""How a game ends: by the rules of chess, or at the ply cap.

    end = termination(board, list(board.legal_moves), max_plies=300)   # ("1-0", "checkmate") or None

Shared by the arena and self-play, so both end games by the same rules and name the endings
the same way (TERMINATIONS).
"""

from __future__ import annotations

import chess

TERMINATIONS = ("checkmate", "stalemate", "threefold_repetition", "fifty_moves", "insufficient_material", "ply_cap")


def termination(board: chess.Board, legal_moves: list[chess.Move], max_plies: int) -> tuple[str, str] | None:
    """(result, termination) if the game is over after the last move, else None.

    Draws that FIDE lets a player claim (threefold, fifty moves) end the game at once, as
    engines adjudicate them; `legal_moves` are the board's, passed in because the caller
    has generated them already."""
    if not legal_moves:
        if board.is_check():
            return ("0-1" if board.turn == chess.WHITE else "1-0"), "checkmate"
        return "1/2-1/2", "stalemate"
    if board.is_insufficient_material():
        return "1/2-1/2", "insufficient_material"
    if board.halfmove_clock >= 100:
        return "1/2-1/2", "fifty_moves"
    if board.is_repetition(3):
        return "1/2-1/2", "threefold_repetition"
    if len(board.move_stack) >= max_plies:
        return "1/2-1/2", "ply_cap"
    return None
