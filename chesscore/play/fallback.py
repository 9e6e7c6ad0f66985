"""What the UCI engine plays where the model cannot: positions it never saw (a FEN that is not
the start position) and games longer than its context.

    move = fallback_move(board, random.Random(0))   # mate in one, else the biggest capture, else random
    is_start_position(board)                        # the only root the model knows
"""

from __future__ import annotations

import random

import chess

PIECE_VALUE = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


def fallback_move(board: chess.Board, rng: random.Random) -> chess.Move | None:
    """A legal move chosen without the model: mate in one, else the capture of the most
    valuable piece, else a random move. None when there is no legal move."""
    moves = list(board.legal_moves)
    if not moves:
        return None
    for move in moves:
        board.push(move)
        mate = board.is_checkmate()
        board.pop()
        if mate:
            return move
    captures = [m for m in moves if board.is_capture(m)]
    if captures:

        def gain(m: chess.Move) -> int:
            victim = board.piece_type_at(m.to_square) or chess.PAWN  # en passant
            return 10 * PIECE_VALUE[victim] - PIECE_VALUE[board.piece_type_at(m.from_square)]

        return max(captures, key=gain)
    return rng.choice(moves)


def is_start_position(board: chess.Board) -> bool:
    """The standard start (move counters aside): the only root the model knows."""
    start = chess.Board()
    return (
        board.board_fen() == start.board_fen()
        and board.turn == start.turn
        and board.castling_rights == start.castling_rights
        and board.ep_square is None
    )
