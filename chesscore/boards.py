"""The position along a game, replayed from its triples-v1 tokens: what chesscore.features reads
the moving and the captured piece and the board readout from. The token contract stays as it is;
this is a feature derived from the tokens, as a chess GUI would derive it from the moves.

    boards = game_boards(tokens)          # (B, (T - 1) // 3 + 1, 64) uint8: the board after 0, 1, ... plies
    boards[:, i // 3]                     # the board the input token at position i sees
    positions = game_positions(tokens)    # the same with two more columns (WIDTH = 66): FLAGS, EN_PASSANT

A square's code is 0 (empty), 1..6 (White pawn, knight, bishop, rook, queen, king: python-chess's
piece types) or 7..12 (the same for Black). Moves are applied without checking legality (the
tokens come from legal games): the piece on the source goes to the destination, with castling's
rook, en passant's captured pawn and promotions. A move whose tokens are not squares (padding,
EOS, the scratch tokens of a row standing still) or whose source square is empty leaves the board
as it is, so garbage never raises; real tokens fed later at the same positions overwrite it.

A position is the board and the rest of what a FEN says of the game's state, as uint8 columns:
column FLAGS holds bit 0, Black to move, and bits 1..4, the castling rights K, Q, k, q (a right
is lost when anything moves from or to its king's or its rook's home square: the king or rook
moved, or the rook was captured there); column EN_PASSANT holds the file (0..7) of the square a
pawn skipped with a double push on the last ply, FEN-style (python-chess's `Board.ep_square`,
whether or not a capture there is legal), or NO_FILE. Only a move that moves a piece toggles the
side to move, so triples-v2's prefix (read as a move whose tokens are no squares) leaves White to
move, and the plies are counted as they are played.
"""

from __future__ import annotations

import chess
import numpy as np

from chesscore.tokens import BOS, KNIGHT, QUEEN

SQUARES, CODES = 64, 13
PAWN, KING = chess.PAWN, chess.KING
FLAGS, EN_PASSANT, WIDTH = SQUARES, SQUARES + 1, SQUARES + 2  # a position's columns after the board
BLACK_TO_MOVE = 1
CASTLING_SHIFT = 1  # castling rights K, Q, k, q: bits 1, 2, 3, 4 of FLAGS
ALL_CASTLING = 0b1111 << CASTLING_SHIFT
NO_FILE = 8  # EN_PASSANT when the last ply was no double pawn push


def _castling_lost() -> np.ndarray:
    """Per square, the FLAGS bits that a move from or to it clears."""
    lost = np.zeros(SQUARES, dtype=np.uint8)
    for square, rights in ((chess.H1, 0b0001), (chess.A1, 0b0010), (chess.E1, 0b0011)):
        lost[square] = rights << CASTLING_SHIFT
        lost[chess.square_mirror(square)] = (rights << 2) << CASTLING_SHIFT
    return lost


CASTLING_LOST = _castling_lost()


def start_board() -> np.ndarray:
    board = np.zeros(SQUARES, dtype=np.uint8)
    for square, piece in chess.Board().piece_map().items():
        board[square] = piece.piece_type + (0 if piece.color == chess.WHITE else 6)
    return board


START = start_board()
START_POSITION = np.concatenate([START, np.array([ALL_CASTLING, NO_FILE], dtype=np.uint8)])


def apply_moves(
    boards: np.ndarray, sources: np.ndarray, destinations: np.ndarray, promotions: np.ndarray
) -> np.ndarray:
    """Each row's board (N, 64) after its move (source, destination, promotion token per row);
    with positions (N, WIDTH), each row's position: side to move, castling, en passant too."""
    out, rows, s, d, kind = _move_pieces(boards, sources, destinations, promotions)
    if boards.shape[-1] == WIDTH:
        flags = out[rows, FLAGS] ^ BLACK_TO_MOVE
        out[rows, FLAGS] = flags & ~(CASTLING_LOST[s] | CASTLING_LOST[d])
        out[rows, EN_PASSANT] = NO_FILE  # a ply that moves nothing (garbage) keeps it all as it was
        double = (kind == PAWN) & (np.abs(d - s) == 16)
        out[rows[double], EN_PASSANT] = s[double] % 8
    return out


def _move_pieces(
    boards: np.ndarray, sources: np.ndarray, destinations: np.ndarray, promotions: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The boards after the moves, and the rows that moved a piece with their source,
    destination and piece type."""
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
    return out, rows, s, d, kind


def game_boards(tokens: np.ndarray) -> np.ndarray:
    """The boards after 0, 1, ... plies of every row of `tokens` (B, T), each row starting with BOS:
    (B, (T - 1) // 3 + 1, 64); the input at position i sees boards[:, i // 3]."""
    return game_positions(tokens)[..., :SQUARES]


def game_positions(tokens: np.ndarray) -> np.ndarray:
    """As game_boards, with the FLAGS and EN_PASSANT columns: (B, (T - 1) // 3 + 1, WIDTH)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 2 or (tokens.shape[1] and (tokens[:, 0] != BOS).any()):
        raise ValueError("board input needs rows of tokens that start with BOS")
    batch, length = tokens.shape
    plies = max(0, length - 1) // 3  # the last position, length - 1, sees the board after this many
    boards = np.empty((batch, plies + 1, WIDTH), dtype=np.uint8)
    boards[:, 0] = START_POSITION
    for k in range(1, plies + 1):
        boards[:, k] = apply_moves(boards[:, k - 1], tokens[:, 3 * k - 2], tokens[:, 3 * k - 1], tokens[:, 3 * k])
    return boards


def codes(boards: np.ndarray) -> np.ndarray:
    """Embedding indices of (..., 64) boards: square * 13 + code, one per square."""
    return boards.astype(np.int64) + CODES * np.arange(SQUARES)


SIDE_CODES = CODES * SQUARES  # position_codes: after the (square, piece) codes, side to move (2),
CASTLING_CODES = SIDE_CODES + 2  # castling rights (16 sets of them)
EN_PASSANT_CODES = CASTLING_CODES + 16  # and the en passant file (8, or none)
POSITION_CODES = EN_PASSANT_CODES + NO_FILE + 1  # 859 embedding indices
POSITION_TERMS = SQUARES + 3  # indices per position


def position_codes(positions: np.ndarray) -> np.ndarray:
    """Embedding indices of (..., WIDTH) positions, (..., POSITION_TERMS): codes() of the board,
    then the side to move, the set of castling rights and the en passant file."""
    flags = positions[..., FLAGS].astype(np.int64)
    board = positions[..., :SQUARES].astype(np.int64)
    # The mover's pieces are 1..6 and the opponent's 7..12 (squares stay as they are): "a piece of
    # the side to move" is then one embedding per square, which a small model reads linearly.
    black = (flags & BLACK_TO_MOVE)[..., None] == 1
    board = np.where(black & (board > 0), (board + 5) % 12 + 1, board)
    state = np.stack(
        [
            SIDE_CODES + (flags & BLACK_TO_MOVE),
            CASTLING_CODES + (flags >> CASTLING_SHIFT),
            EN_PASSANT_CODES + positions[..., EN_PASSANT].astype(np.int64),
        ],
        axis=-1,
    )
    return np.concatenate([codes(board), state], axis=-1)
