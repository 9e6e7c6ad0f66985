"""Move tokens, versions "triples-v1" and "triples-v2": the data contract between PGN, datasets
and models.

    0..63   squares in python-chess order (a1=0, b1=1, ..., h8=63): source and destination
    64      no promotion        65 knight   66 bishop   67 rook   68 queen
    69 BOS  70 EOS  71 PAD
    72      rating unknown (missing or provisional: the dataset's rating is null)
    73..100 rating bins: 73 below 600, 74 600-699, ..., 99 3100-3199, 100 3200 and up
    101..107 time control: ultrabullet, bullet, blitz, rapid, classical, correspondence, unknown
    108..127 reserved, never produced; VOCAB_SIZE = 128

triples-v1 (what datasets store): a game is BOS, then (source, destination, promotion) per ply,
then EOS. Castling is the king's own move (e1g1). Only the standard start position.

triples-v2 (what a conditioned model reads, GPTConfig.conditioning): the same game with a fixed
prefix of PREFIX_LENGTH = 3 conditioning tokens after BOS,

    BOS, white's rating bin, black's rating bin, time-control class, (src, dst, promo) ..., EOS

so a game is 5 + 3*plies tokens and the target at index i (over tokens[1:]) keeps the phase
i % 3 of v1 (the prefix is 3 long). The prefix is never a training target (chesscore.train.batching
ignores targets in the conditioning range) and no metric counts it. `UNKNOWN_PREFIX` is the
unconditioned use. Datasets keep storing v1 games and the ratings and time-control class as
columns: the prefix is made from them when a game is read (chesscore.conditioning), so one
dataset serves both versions and the share of games trained on "unknown" is a training knob.

`State` is the legal-move automaton over that grammar: `feed` one token at a time and ask
`mask()` what may come next (`State(conditioned=True)` expects the prefix after BOS). The legal
moves of a position are generated once, when the position is first asked about, and all three
masks of a move are read from them.

    >>> s = State(); s.feed(BOS); s.feed(12)      # e2
    >>> sorted(map(chess.square_name, s.mask().nonzero()[0]))
    ['e3', 'e4']
    >>> conditioning_prefix(1523, None, "blitz")
    (83, 72, 103)

Changing anything here changes the contract: bump the VERSION it touches.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Sequence

import chess
import numpy as np

VERSION = "triples-v1"  # the stored games (datasets) and unconditioned models
CONDITIONED_VERSION = "triples-v2"  # v1 with the conditioning prefix after BOS
VERSIONS = (VERSION, CONDITIONED_VERSION)
NO_PROMOTION = 64
KNIGHT = 65
BISHOP = 66
ROOK = 67
QUEEN = 68
BOS = 69
EOS = 70
PAD = 71
RESERVED_START = 72  # 72..127 are never a move or a target: conditioning, then reserved
RATING_UNKNOWN = 72
RATING_FIRST = 73  # below RATING_FLOOR
RATING_FLOOR = 600  # 74 is 600-699
RATING_BIN = 100
RATING_LAST = 100  # 3200 and up
TIME_CONTROL_CLASSES = ("ultrabullet", "bullet", "blitz", "rapid", "classical", "correspondence", "unknown")
TIME_CONTROL_FIRST = 101
TIME_CONTROL_UNKNOWN = TIME_CONTROL_FIRST + TIME_CONTROL_CLASSES.index("unknown")  # 107
CONDITIONING_END = TIME_CONTROL_FIRST + len(TIME_CONTROL_CLASSES)  # 108: 108..127 stay reserved
PREFIX_LENGTH = 3
UNKNOWN_PREFIX = (RATING_UNKNOWN, RATING_UNKNOWN, TIME_CONTROL_UNKNOWN)
VOCAB_SIZE = 128

# What State.phase holds: which kind of token comes next.
PHASE_BOS = -1
PHASE_SOURCE = 0  # a source square or EOS
PHASE_DESTINATION = 1
PHASE_PROMOTION = 2
PHASE_DONE = 3  # after EOS nothing may follow
PHASE_WHITE_RATING = 4  # triples-v2's prefix, in this order
PHASE_BLACK_RATING = 5
PHASE_TIME_CONTROL = 6

PROMOTION_TOKEN = {None: NO_PROMOTION, chess.KNIGHT: KNIGHT, chess.BISHOP: BISHOP, chess.ROOK: ROOK, chess.QUEEN: QUEEN}
TOKEN_PROMOTION = {token: piece for piece, token in PROMOTION_TOKEN.items()}
UNDER_AND_PROMOTIONS = (KNIGHT, BISHOP, ROOK, QUEEN)


# Games that exercise every rule of the encoding: both castlings, en passant, and the four
# promotions (onto an empty square and by capture). Their tokens are part of the contract's hash.
CONTRACT_GAMES = (
    "e2e4 g8f6 e4e5 d7d5 e5d6 e7d6 g1f3 f8e7 f1c4 e8g8 b1c3 b8c6 d2d3 c8e6 c1e3 d8d7 d1d2 e6c4 e1c1",
    "b2b4 b8c6 b4b5 a7a6 b5a6 c6e5 a6b7 e5c4 b7b8q",
    "b2b4 b8c6 b4b5 a7a6 b5a6 c6e5 a6b7 e5c4 b7b8r",
    "b2b4 b8c6 b4b5 a7a6 b5a6 c6e5 a6b7 e5c4 b7a8n",
    "b2b4 b8c6 b4b5 a7a6 b5a6 c6e5 a6b7 e5c4 b7c8b",
)


@functools.cache
def tokenizer_sha256(version: str = VERSION) -> str:
    """sha256 of the contract itself: the token table and the tokens of CONTRACT_GAMES (for v2
    also the prefix table and the games behind three prefixes). A checkpoint and a dataset record
    it, so a changed encoding is noticed; a change to this file that leaves the encoding as it is
    (a comment, formatting) leaves the hash as it is. v1's hash is the one v1 always had."""
    if version not in VERSIONS:
        raise ValueError(f"tokens version {version!r} is not one of {VERSIONS}")
    games = [encode_game(game.split()) for game in CONTRACT_GAMES]
    for game in games:
        decode_game(game)  # raises if a move is illegal
    table = {
        "version": VERSION,
        "vocab_size": VOCAB_SIZE,
        "squares": [chess.square_name(square) for square in chess.SQUARES],
        "promotion": {
            str(token): chess.piece_name(piece) if piece else None for token, piece in TOKEN_PROMOTION.items()
        },
        "special": {"BOS": BOS, "EOS": EOS, "PAD": PAD, "reserved": [RESERVED_START, VOCAB_SIZE - 1]},
        "games": games,
    }
    if version == CONDITIONED_VERSION:
        prefixes = [UNKNOWN_PREFIX, conditioning_prefix(599, 3200, "blitz"), conditioning_prefix(1500, 2199, "rapid")]
        conditioned = [encode_game(CONTRACT_GAMES[0].split(), prefix) for prefix in prefixes]
        for game in conditioned:
            decode_game(game)
        table["special"]["reserved"] = [CONDITIONING_END, VOCAB_SIZE - 1]
        table["conditioning"] = {
            "prefix": ["white_rating", "black_rating", "time_control"],
            "rating": {"unknown": RATING_UNKNOWN, "first": RATING_FIRST, "floor": RATING_FLOOR, "bin": RATING_BIN},
            "rating_last": RATING_LAST,
            "time_control": {name: TIME_CONTROL_FIRST + i for i, name in enumerate(TIME_CONTROL_CLASSES)},
        }
        table["version"], table["conditioned_games"] = version, conditioned
    return hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()


def rating_token(rating: int | None) -> int:
    """The bin token of a rating; RATING_UNKNOWN for None (a missing or provisional rating)."""
    if rating is None:
        return RATING_UNKNOWN
    return min(RATING_LAST, max(RATING_FIRST, RATING_FIRST + 1 + (int(rating) - RATING_FLOOR) // RATING_BIN))


def rating_range(token: int) -> tuple[int | None, int | None]:
    """(lowest, highest) rating of a bin token; None for an open end; ValueError off the bins."""
    if not RATING_FIRST <= token <= RATING_LAST:
        raise ValueError(f"token {token} is not a rating bin ({RATING_FIRST}..{RATING_LAST})")
    low = RATING_FLOOR + (token - RATING_FIRST - 1) * RATING_BIN
    return (None if token == RATING_FIRST else low), (None if token == RATING_LAST else low + RATING_BIN - 1)


def rating_label(token: int) -> str:
    """ "unknown", "<600", "1500-1599" or "3200+" for a rating token."""
    if token == RATING_UNKNOWN:
        return "unknown"
    low, high = rating_range(token)
    return f"<{high + 1}" if low is None else f"{low}+" if high is None else f"{low}-{high}"


def time_control_token(time_control_class: str | None) -> int:
    """The token of a Lichess time-control class (None: unknown); ValueError on another name."""
    name = time_control_class or "unknown"
    if name not in TIME_CONTROL_CLASSES:
        raise ValueError(f"time-control class {name!r} is not one of {TIME_CONTROL_CLASSES}")
    return TIME_CONTROL_FIRST + TIME_CONTROL_CLASSES.index(name)


def conditioning_prefix(
    white_rating: int | None, black_rating: int | None, time_control_class: str | None
) -> tuple[int, int, int]:
    """triples-v2's prefix: white's rating bin, black's rating bin, the time-control class."""
    return rating_token(white_rating), rating_token(black_rating), time_control_token(time_control_class)


def is_conditioning(token: int) -> bool:
    return RESERVED_START <= int(token) < CONDITIONING_END


def prefix_length(tokens: Sequence[int]) -> int:
    """PREFIX_LENGTH when a game's tokens (from BOS) carry the v2 prefix, else 0 (v1)."""
    return PREFIX_LENGTH if len(tokens) > 1 and is_conditioning(tokens[1]) else 0


def _is_promotion_geometry(source: int, destination: int) -> bool:
    """A pawn step onto the last rank: the only squares a promotion can go between."""
    rank_from, rank_to = chess.square_rank(source), chess.square_rank(destination)
    forward = (rank_from, rank_to) in ((6, 7), (1, 0))
    return forward and abs(chess.square_file(source) - chess.square_file(destination)) <= 1


def encode_move(move: chess.Move) -> tuple[int, int, int]:
    """(source, destination, promotion) tokens of a standard-chess move."""
    if not move:
        raise ValueError(f"null move {move.uci()} has no token encoding")
    if move.drop is not None:
        raise ValueError(f"drop {move.uci()} is not standard chess")
    if move.promotion not in PROMOTION_TOKEN:
        raise ValueError(f"cannot promote to {chess.piece_name(move.promotion)} in {move.uci()}")
    if move.promotion is not None and not _is_promotion_geometry(move.from_square, move.to_square):
        raise ValueError(f"{move.uci()} promotes away from the last rank")
    return move.from_square, move.to_square, PROMOTION_TOKEN[move.promotion]


def decode_move(tokens: Sequence[int]) -> chess.Move:
    """The move of one triple; ValueError on anything malformed (not on illegal moves:
    legality needs a board, see `decode_game` and `State`)."""
    if len(tokens) != 3:
        raise ValueError(f"a move is 3 tokens, got {len(tokens)}: {list(tokens)}")
    source, destination, promotion = (int(t) for t in tokens)
    for name, square in (("source", source), ("destination", destination)):
        if not 0 <= square < 64:
            raise ValueError(f"{name} token {square} is not a square (0..63)")
    if source == destination:
        raise ValueError(f"source and destination are both {chess.square_name(source)}")
    if promotion not in TOKEN_PROMOTION:
        raise ValueError(f"promotion token {promotion} is not 64..68")
    piece = TOKEN_PROMOTION[promotion]
    if piece is not None and not _is_promotion_geometry(source, destination):
        raise ValueError(
            f"promotion token {promotion} on {chess.square_name(source)}"
            f"{chess.square_name(destination)}, which is not a promotion"
        )
    return chess.Move(source, destination, promotion=piece)


def encode_game(moves: Iterable[chess.Move | str], prefix: Sequence[int] | None = None) -> list[int]:
    """BOS, the conditioning prefix when given (triples-v2), a triple per move, EOS. Moves may be
    chess.Move or UCI strings; legality is not checked here (the PGN reader replays every game
    before it encodes it)."""
    tokens = [BOS, *(_checked_prefix(prefix) if prefix is not None else ())]
    for move in moves:
        tokens.extend(encode_move(chess.Move.from_uci(move) if isinstance(move, str) else move))
    tokens.append(EOS)
    return tokens


def decode_game(tokens: Sequence[int]) -> list[chess.Move]:
    """Replay a whole token sequence from the start position and return its moves.

    A v2 sequence (a conditioning token after BOS) is read with its prefix. ValueError names
    the ply (1-based) and token index of the first illegal or malformed token, and a sequence
    that does not end in EOS."""
    offset = prefix_length(tokens)
    state = State(conditioned=bool(offset))
    for index, token in enumerate(tokens):
        try:
            state.feed(int(token))
        except ValueError as error:
            ply = max(0, index - offset - 1) // 3 + 1 if index > offset else 0
            raise ValueError(f"ply {ply} (token {index}): {error}") from None
    if state.phase != PHASE_DONE:
        raise ValueError(f"game of {len(tokens)} tokens does not end with EOS")
    return list(state.board.move_stack)


_GRAMMAR = {phase: np.zeros(VOCAB_SIZE, dtype=bool) for phase in range(PHASE_BOS, PHASE_DONE + 1)}
_GRAMMAR[PHASE_BOS][BOS] = True
_GRAMMAR[PHASE_SOURCE][:64] = True
_GRAMMAR[PHASE_SOURCE][EOS] = True
_GRAMMAR[PHASE_DESTINATION][:64] = True
_GRAMMAR[PHASE_PROMOTION][NO_PROMOTION : QUEEN + 1] = True
for _phase in (PHASE_WHITE_RATING, PHASE_BLACK_RATING):
    _GRAMMAR[_phase] = np.zeros(VOCAB_SIZE, dtype=bool)
    _GRAMMAR[_phase][RATING_UNKNOWN : RATING_LAST + 1] = True
_GRAMMAR[PHASE_TIME_CONTROL] = np.zeros(VOCAB_SIZE, dtype=bool)
_GRAMMAR[PHASE_TIME_CONTROL][TIME_CONTROL_FIRST:CONDITIONING_END] = True
_NEXT_PREFIX_PHASE = {PHASE_WHITE_RATING: PHASE_BLACK_RATING, PHASE_BLACK_RATING: PHASE_TIME_CONTROL}
for _mask in _GRAMMAR.values():
    _mask.flags.writeable = False

_PROMOTION_MASK = np.zeros(VOCAB_SIZE, dtype=bool)
_PROMOTION_MASK[list(UNDER_AND_PROMOTIONS)] = True
_NO_PROMOTION_MASK = np.zeros(VOCAB_SIZE, dtype=bool)
_NO_PROMOTION_MASK[NO_PROMOTION] = True
_BOS_MASK = _GRAMMAR[PHASE_BOS]
_DONE_MASK = _GRAMMAR[PHASE_DONE]
for _mask in (_PROMOTION_MASK, _NO_PROMOTION_MASK):
    _mask.flags.writeable = False


class State:
    """Where a token sequence stands: the board after its complete moves, the phase of the
    next token, and the partial move (source, destination) being spelled. A conditioned State
    (triples-v2) reads the three prefix tokens after BOS before the first move.

    feed(token) raises ValueError on a token that may not come next and then leaves the
    State exactly as it was. mask(legal=True) is the boolean array over all 128 tokens of
    what may come next; mask(legal=False) is what the grammar alone allows. The arrays
    returned are read-only and shared: copy before writing into one.
    """

    __slots__ = ("board", "phase", "conditioned", "_source", "_destination", "_moves", "_sources")

    def __init__(self, conditioned: bool = False) -> None:
        self.board = chess.Board()
        self.phase = PHASE_BOS
        self.conditioned = conditioned
        self._source: int | None = None
        self._destination: int | None = None
        self._moves: list[chess.Move] | None = None  # legal moves of the board, once
        self._sources: np.ndarray | None = None

    @classmethod
    def from_moves(cls, moves: Iterable[chess.Move | str], prefix: Sequence[int] | None = None) -> State:
        """A State that has read BOS, the prefix when given (triples-v2), and these moves
        (ValueError on an illegal one)."""
        state = cls(conditioned=prefix is not None)
        state.feed(BOS)
        for token in _checked_prefix(prefix) if prefix is not None else ():
            state.feed(token)
        for move in moves:
            for token in encode_move(chess.Move.from_uci(move) if isinstance(move, str) else move):
                state.feed(token)
        return state

    @property
    def plies(self) -> int:
        return len(self.board.move_stack)

    @property
    def done(self) -> bool:
        return self.phase == PHASE_DONE

    def legal_moves(self) -> list[chess.Move]:
        """The legal moves of the current board, generated once per position."""
        if self._moves is None:
            self._moves = list(self.board.generate_legal_moves())
        return self._moves

    def mask(self, legal: bool = True) -> np.ndarray:
        if not legal or self.phase not in (PHASE_SOURCE, PHASE_DESTINATION, PHASE_PROMOTION):
            return _GRAMMAR[self.phase]
        if self.phase == PHASE_SOURCE:
            if self._sources is None:
                sources = np.zeros(VOCAB_SIZE, dtype=bool)
                sources[[move.from_square for move in self.legal_moves()]] = True
                sources[EOS] = True
                sources.flags.writeable = False
                self._sources = sources
            return self._sources
        if self.phase == PHASE_DESTINATION:
            destinations = np.zeros(VOCAB_SIZE, dtype=bool)
            source = self._source
            destinations[[move.to_square for move in self.legal_moves() if move.from_square == source]] = True
            return destinations
        # Promotion phase: the move (source, destination) is legal, so either all four
        # promotions are legal together or it is no promotion at all.
        return _PROMOTION_MASK if self._promotes(self._source, self._destination) else _NO_PROMOTION_MASK

    def _promotes(self, source: int, destination: int) -> bool:
        return self.board.piece_type_at(source) == chess.PAWN and chess.square_rank(destination) in (0, 7)

    def feed(self, token: int) -> None:
        token = int(token)
        phase = self.phase
        if phase == PHASE_DONE:
            raise ValueError(f"token {token} after EOS: nothing may follow EOS")
        if not 0 <= token < VOCAB_SIZE:
            raise ValueError(f"token {token} is outside the vocabulary (0..{VOCAB_SIZE - 1})")
        if not _GRAMMAR[phase][token]:
            raise ValueError(f"token {token} is not a {_PHASE_NAMES[phase]} token")
        if phase == PHASE_BOS:
            self.phase = PHASE_WHITE_RATING if self.conditioned else PHASE_SOURCE
        elif phase in _NEXT_PREFIX_PHASE:
            self.phase = _NEXT_PREFIX_PHASE[phase]
        elif phase == PHASE_TIME_CONTROL:
            self.phase = PHASE_SOURCE
        elif phase == PHASE_SOURCE:
            if token == EOS:
                self.phase = PHASE_DONE
                return
            if not self.mask()[token]:
                raise ValueError(f"no legal move from {chess.square_name(token)} in {self.board.fen()}")
            self._source, self.phase = token, PHASE_DESTINATION
        elif phase == PHASE_DESTINATION:
            if not any(m.from_square == self._source and m.to_square == token for m in self.legal_moves()):
                raise ValueError(
                    f"{chess.square_name(self._source)}{chess.square_name(token)} is not legal in {self.board.fen()}"
                )
            self._destination, self.phase = token, PHASE_PROMOTION
        else:
            if (
                token != NO_PROMOTION
                and not self._promotes(self._source, self._destination)
                or token == NO_PROMOTION
                and self._promotes(self._source, self._destination)
            ):
                move = chess.Move(self._source, self._destination, TOKEN_PROMOTION[token])
                raise ValueError(f"{move.uci()} is not legal in {self.board.fen()}")
            self.board.push(chess.Move(self._source, self._destination, TOKEN_PROMOTION[token]))
            self._source = self._destination = None
            self._moves = self._sources = None
            self.phase = PHASE_SOURCE

    def copy(self) -> State:
        """An independent State at the same point (the board's history is copied too)."""
        other = State.__new__(State)
        other.board = self.board.copy()
        other.phase, other._source, other._destination = self.phase, self._source, self._destination
        other.conditioned = self.conditioned
        other._moves, other._sources = self._moves, self._sources  # immutable once built
        return other

    def __repr__(self) -> str:
        return f"State(phase={_PHASE_NAMES[self.phase]}, plies={self.plies}, fen={self.board.fen()!r})"


_PHASE_NAMES = {
    PHASE_BOS: "BOS",
    PHASE_SOURCE: "source or EOS",
    PHASE_DESTINATION: "destination",
    PHASE_PROMOTION: "promotion",
    PHASE_DONE: "end",
    PHASE_WHITE_RATING: "white rating",
    PHASE_BLACK_RATING: "black rating",
    PHASE_TIME_CONTROL: "time control",
}


def _checked_prefix(prefix: Sequence[int]) -> tuple[int, int, int]:
    """A prefix as three ints, ValueError unless each is a token of its place."""
    values = tuple(int(t) for t in prefix)
    if len(values) != PREFIX_LENGTH:
        raise ValueError(f"a conditioning prefix is {PREFIX_LENGTH} tokens, got {len(values)}: {list(values)}")
    for token, phase in zip(values, (PHASE_WHITE_RATING, PHASE_BLACK_RATING, PHASE_TIME_CONTROL)):
        if not _GRAMMAR[phase][token]:
            raise ValueError(f"token {token} is not a {_PHASE_NAMES[phase]} token")
    return values  # type: ignore[return-value]
