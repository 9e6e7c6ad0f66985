"""Parse PGN game texts into moves, clocks, headers and result: fast (Rust) first, python-chess
where the fast parser gives up.

    batch = parse_batch(["[Event ...]\\n\\n1. e4 e5 1-0", ...])
    batch.headers[0], batch.moves(0), batch.result_token[0], batch.parser[0]

The fast path is `rust-pgn-reader-python-binding` (one call per batch, columnar results). A game
it rejects is re-read by the reference, python-chess, which decides: the fast path never loses
a game python-chess accepts. Moves are (from, to, promotion) squares in python-chess numbering,
promotion -1 (none) or the piece type 2..5 (knight..queen); castling is the king's own move.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import chess
import chess.pgn
import numpy as np
import pyarrow as pa
import rust_pgn_reader_python_binding as rust_pgn

from chesscore.pgn.reflow import reflow
from chesscore.pgn.tags import TAG_LINE, TagTable

# python-chess plays at most this many mainline moves of a game and only tokenizes the rest: a
# longer game is too long for any context (plies are stored as int16), and each move it plays
# costs ~6 us and ~250 bytes of board history (a 2 MB game of 4-byte moves took 13 s, 540 MB).
MAX_READ_PLIES = 1 << 15
OUTCOME_TOKEN = {"White": "1-0", "Black": "0-1", "Draw": "1/2-1/2", "Unknown": "*", None: None}


@dataclass
class ParsedBatch:
    """Columnar parse results of n games; the moves of game i are rows offsets[i]:offsets[i+1]."""

    heads: list[str | dict[str, str]] = field(default_factory=list)  # a tag paragraph, or tags read
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    from_squares: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    to_squares: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    promotions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    clocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # NaN: no clock
    result_token: list[str | None] = field(default_factory=list)  # the movetext's, None if absent
    checkmate: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # final position
    stalemate: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    error: list[tuple[str, str] | None] = field(default_factory=list)  # (reason, detail)
    parser: list[str] = field(default_factory=list)  # "rust" or "python-chess"

    def __len__(self) -> int:
        return len(self.heads)

    @property
    def tags(self) -> TagTable:
        """The tags of all games as one table (built on first use)."""
        if getattr(self, "_tags", None) is None:
            self._tags = TagTable.build(self.heads)
        return self._tags

    @property
    def headers(self) -> list[dict[str, str]]:
        """Each game's tags as a dict (built on first use: for tests and messages)."""
        if getattr(self, "_headers", None) is None:
            self._headers = self.tags.rows()
        return self._headers

    def plies(self) -> np.ndarray:
        return np.diff(self.offsets)

    def moves(self, i: int) -> list[str]:
        """UCI moves of game i (for tests and error messages)."""
        start, end = self.offsets[i], self.offsets[i + 1]
        return [
            chess.Move(int(f), int(t), None if p < 0 else int(p)).uci()
            for f, t, p in zip(self.from_squares[start:end], self.to_squares[start:end], self.promotions[start:end])
        ]


def parse_batch(
    texts: list[str],
    to_reference: list[bool] | None = None,
    movetext_at: list[int] | None = None,
    rejected_by_tags: Callable[[dict[str, str]], bool] | None = None,
) -> ParsedBatch:
    """Parse every text (one game each). Games the Rust parser rejects go to python-chess, and so
    do the games flagged in `to_reference` (layouts where the two parsers are known to differ).
    movetext_at[i] > 0 says where game i's movetext starts after a plain tag section: its tags
    are then read here (as python-chess reads them) and only the movetext goes to Rust.
    rejected_by_tags(headers): a game its tags alone reject (a variant, a set-up position) is
    not re-read when Rust fails on it: whatever python-chess made of the moves, it goes."""
    if not texts:
        return ParsedBatch()
    forced = np.zeros(len(texts), bool) if to_reference is None else np.asarray(to_reference, bool)
    at = movetext_at or [0] * len(texts)
    tags = [text[: a - 2] if a else None for text, a in zip(texts, at)]  # plain tag paragraphs
    # An Arrow array in costs less than the binding's conversion of a list of str (pa.array
    # gives a chunked one by itself past 2 GiB of text).
    moves = pa.array([t[a:] if a else t for t, a in zip(texts, at)], pa.string())
    moves = moves if isinstance(moves, pa.ChunkedArray) else pa.chunked_array([moves])
    parsed = rust_pgn.parse_games(moves, num_threads=1, chunk_multiplier=1)
    if len(parsed) != len(texts):  # it skips texts with no game in them: go one by one
        return _concat([reference(text) if force else _one(text) for text, force in zip(texts, forced)])
    parts, done = [], 0
    for chunk in parsed.chunks:
        columns = _Columns(chunk, tags[done : done + chunk.num_games])
        # Keep runs of valid games columnar; send each invalid one to the reference.
        start = 0
        for bad in np.flatnonzero(~columns.valid | forced[done : done + len(columns.valid)]):
            if bad > start:
                parts.append(columns.games(start, int(bad)))
            head = columns.heads[bad]
            headers = head if isinstance(head, dict) else dict(TAG_LINE.findall(head))
            if rejected_by_tags is not None and not forced[done + bad] and rejected_by_tags(headers):
                parts.append(
                    _single(
                        headers,
                        [],
                        [],
                        None,
                        False,
                        False,
                        ("unparsable", "not read: its tags reject it"),
                        parser="rust",
                    )
                )
            else:
                parts.append(reference(texts[done + int(bad)]))
            start = int(bad) + 1
        if start < len(columns.valid):
            parts.append(columns.games(start, len(columns.valid)))
        done += len(columns.valid)
    return parts[0] if len(parts) == 1 else _concat(parts)


def _one(text: str) -> ParsedBatch:
    parsed = rust_pgn.parse_game(text)
    if len(parsed) == 1 and parsed.chunks[0].valid.all():
        return _Columns(parsed.chunks[0]).games(0, 1)
    return reference(text)


class _Columns:
    """The arrays of one Rust result chunk, read once (each property access builds them)."""

    def __init__(self, chunk, heads: list[str | None] | None = None) -> None:
        self.valid = chunk.valid
        self.offsets = chunk.move_offsets.astype(np.int64)
        self.outcome = chunk.outcome
        # Plain tag paragraphs were cut off before Rust saw the movetext alone: its headers (a
        # dict per game, costly to build) are read only for the other games.
        if heads is None or None in heads:
            self.heads = (
                chunk.headers
                if heads is None
                else [mine if mine is not None else theirs for mine, theirs in zip(heads, chunk.headers)]
            )
        else:
            self.heads = heads
        self.from_squares, self.to_squares = chunk.from_squares, chunk.to_squares
        self.promotions, self.clocks = chunk.promotions, chunk.clocks
        self.checkmate, self.stalemate = chunk.is_checkmate, chunk.is_stalemate

    def games(self, start: int, stop: int) -> ParsedBatch:
        """Games start:stop as a ParsedBatch (array slices, no copies)."""
        offsets = self.offsets[start : stop + 1]
        first, last = int(offsets[0]), int(offsets[-1])
        return ParsedBatch(
            heads=self.heads[start:stop],
            offsets=offsets - first,
            from_squares=self.from_squares[first:last],
            to_squares=self.to_squares[first:last],
            promotions=self.promotions[first:last],
            clocks=self.clocks[first:last],
            result_token=[OUTCOME_TOKEN[o] for o in self.outcome[start:stop]],
            checkmate=self.checkmate[start:stop],
            stalemate=self.stalemate[start:stop],
            error=[None] * (stop - start),
            parser=["rust"] * (stop - start),
        )


def _concat(parts: list[ParsedBatch]) -> ParsedBatch:
    sizes = np.cumsum([0] + [len(p.from_squares) for p in parts[:-1]])
    return ParsedBatch(
        heads=[h for p in parts for h in p.heads],
        offsets=np.concatenate([[0]] + [p.offsets[1:] + size for p, size in zip(parts, sizes)]).astype(np.int64),
        from_squares=np.concatenate([p.from_squares for p in parts]),
        to_squares=np.concatenate([p.to_squares for p in parts]),
        promotions=np.concatenate([p.promotions for p in parts]),
        clocks=np.concatenate([p.clocks for p in parts]),
        result_token=[r for p in parts for r in p.result_token],
        checkmate=np.concatenate([p.checkmate for p in parts]),
        stalemate=np.concatenate([p.stalemate for p in parts]),
        error=[e for p in parts for e in p.error],
        parser=[x for p in parts for x in p.parser],
    )


class _FirstError(Exception):
    """Raised out of python-chess's reader at a game's first error."""


class _Mainline(chess.pgn.BaseVisitor):
    """python-chess visitor that keeps what validation needs: the tags as written, mainline
    moves and clocks, the movetext's result token, the first error (reading stops there), and
    the final board."""

    def begin_game(self) -> None:
        self.headers: dict[str, str] = {}
        self.moves: list[chess.Move] = []
        self.clocks: list[float] = []
        self.result_token: str | None = None
        self.errors: list[str] = []
        self.board: chess.Board | None = None

    def visit_header(self, tagname: str, tagvalue: str) -> None:
        self.headers[tagname] = tagvalue

    def begin_variation(self):
        return chess.pgn.SKIP  # mainline only

    def begin_parse_san(self, board: chess.Board, san: str):
        return chess.pgn.SKIP if len(self.moves) >= MAX_READ_PLIES else None

    def visit_move(self, board: chess.Board, move: chess.Move) -> None:
        self.moves.append(move)
        self.clocks.append(float("nan"))

    def visit_board(self, board: chess.Board) -> None:
        self.board = board

    def visit_comment(self, comment: str) -> None:
        match = chess.pgn.CLOCK_REGEX.search(comment)
        if match and self.moves and np.isnan(self.clocks[-1]):
            self.clocks[-1] = int(match["hours"]) * 3600 + int(match["minutes"]) * 60 + float(match["seconds"])

    def visit_result(self, result: str) -> None:
        self.result_token = result

    def handle_error(self, error: Exception) -> None:
        self.errors.append(str(error))
        raise _FirstError  # the first error rejects the game: the rest of its text is not read

    def result(self) -> _Mainline:
        return self


def reference(text: str) -> ParsedBatch:
    """One game read by python-chess (the reference), as a one-game ParsedBatch."""
    visitor = _Mainline()
    try:
        game = chess.pgn.read_game(io.StringIO(reflow(text)), Visitor=lambda: visitor)  # linear time
    except _FirstError:
        game = visitor
    if game is None:
        return _single({}, [], [], None, False, False, ("unparsable", "no PGN game in the text"))
    error = None
    null = next((ply for ply, move in enumerate(game.moves, 1) if not move), None)
    if null is not None:
        error = ("null_move", f"null move at ply {null}")
    elif game.errors:
        error = ("illegal_move", f"after ply {len(game.moves)}: {game.errors[0]}")
    board = game.board
    over = board is not None and null is None and board.is_valid()
    return _single(
        game.headers,
        game.moves,
        game.clocks,
        game.result_token,
        over and board.is_checkmate(),
        over and board.is_stalemate(),
        error,
    )


def _single(headers, moves, clocks, result, checkmate, stalemate, error, parser="python-chess") -> ParsedBatch:
    encodable = [m for m in moves if m and m.drop is None]
    return ParsedBatch(
        heads=[headers],
        offsets=np.array([0, len(encodable)], np.int64),
        from_squares=np.array([m.from_square for m in encodable], np.uint8),
        to_squares=np.array([m.to_square for m in encodable], np.uint8),
        promotions=np.array([m.promotion or -1 for m in encodable], np.int8),
        clocks=np.array([c for m, c in zip(moves, clocks) if m and m.drop is None], np.float32),
        result_token=[result],
        checkmate=np.array([checkmate]),
        stalemate=np.array([stalemate]),
        error=[error],
        parser=[parser],
    )
