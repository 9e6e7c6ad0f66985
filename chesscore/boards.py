"""Piece placement along a game, replayed from its triples-v1 tokens: what chesscore.features
reads the moving and the captured piece from. The token contract stays as it is; this is a
feature derived from the tokens, as a chess GUI would derive it from the moves.

    boards = game_boards(tokens)          # (B, (T - 1) // 3 + 1, 64) uint8: the board after 0, 1, ... plies
    boards[:, i // 3]                     # the board the input token at position i sees

A square's code is 0 (empty), 1..6 (White pawn, knight, bishop, rook, queen, king: python-chess's
piece types) or 7..12 (the same for Black). Moves are applied without checking legality (the
tokens come from legal games): the piece on the source goes to the destination, with castling's
rook, en passant's captured pawn and promotions. A move whose tokens are not squares (padding,
EOS, the scratch tokens of a row standing still) or whose source square is empty leaves the board
as it is, so garbage never raises; real tokens fed later at the same positions overwrite it.
"""

from __future__ import annotations

import chess
import numpy as np

from chesscore.tokens import BOS, KNIGHT, QUEEN

SQUARES, CODES = 64, 13
PAWN, KING = chess.PAWN, chess.KING


def start_board() -> np.ndarray:
    board = np.zeros(SQUARES, dtype=np.uint8)
    for square, piece in chess.Board().piece_map().items():
        board[square] = piece.piece_type + (0 if piece.color == chess.WHITE else 6)
    return board


START = start_board()


def apply_moves(
    boards: np.ndarray, sources: np.ndarray, destinations: np.ndarray, promotions: np.ndarray
) -> np.ndarray:
    """Each row's board (N, 64) after its move (source, destination, promotion token per row)."""
    out = boards.copy()
    sources, destinations, promotions = (np.asarray(a, dtype=np.int64) for a in (sources, destinations, promotions))
    rows = np.flatnonzero((sources < SQUARES) & (destinations < SQUARES))
    s, d, p = sources[rows], destinations[rows], promotions[rows]
    piece = boards[rows, s].astype(np.int64)
    moving = piece > 0
    rows, s, d, p, piece = rows[moving], s[moving], d[moving], p[moving], piece[moving]
    white = piece <= 6
    kind = np.where(white, piece, piece - 6)
    captured = boards[rows, d]
    out[rows, s] = 0
    en_passant = (kind == PAWN) & (s % 8 != d % 8) & (captured == 0)
    out[rows[en_passant], np.where(white[en_passant], d[en_passant] - 8, d[en_passant] + 8)] = 0
    castle = (kind == KING) & (np.abs(s - d) == 2)
    rook_from = np.where(d > s, s + 3, s - 4)[castle]
    rook_to = np.where(d > s, s + 1, s - 1)[castle]
    out[rows[castle], rook_to] = out[rows[castle], rook_from]
    out[rows[castle], rook_from] = 0
    promoted = (kind == PAWN) & (p >= KNIGHT) & (p <= QUEEN)
    out[rows, d] = np.where(promoted, p - KNIGHT + chess.KNIGHT + np.where(white, 0, 6), piece)
    return out


def game_boards(tokens: np.ndarray) -> np.ndarray:
    """The boards after 0, 1, ... plies of every row of `tokens` (B, T), each row starting with BOS:
    (B, (T - 1) // 3 + 1, 64); the input at position i sees boards[:, i // 3]."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 2 or (tokens.shape[1] and (tokens[:, 0] != BOS).any()):
        raise ValueError("board input needs rows of tokens that start with BOS")
    batch, length = tokens.shape
    plies = max(0, length - 1) // 3  # the last position, length - 1, sees the board after this many
    boards = np.empty((batch, plies + 1, SQUARES), dtype=np.uint8)
    boards[:, 0] = START
    for k in range(1, plies + 1):
        boards[:, k] = apply_moves(boards[:, k - 1], tokens[:, 3 * k - 2], tokens[:, 3 * k - 1], tokens[:, 3 * k])
    return boards


def codes(boards: np.ndarray) -> np.ndarray:
    """Embedding indices of (..., 64) boards: square * 13 + code, one per square."""
    return boards.astype(np.int64) + CODES * np.arange(SQUARES)
