"""Raw byte ranges of a PGN stream that workers split and validate themselves.

    for chunk in cut_chunks(read_blocks(path), chunk_bytes=4 << 20, limit=MAX_GAME_BYTES):
        result = validate_chunk(ChunkJob(config, path, chunk, batch_games, max_game_bytes))
        result.clean        # False: the main process splits the rest of the file itself

The main process only reads (and decompresses) and cuts the stream at `\\n\\n[`, the line that
starts every game in the Lichess layout; the worker splits its range with
chesscore.pgn.split.split_games and validates the games. A cut is trusted only when the worker's
split confirms it: a chunk carries a little of the next game (up to that game's first blank
line), and the cut is a game start exactly when the split, reading on, ends a game there. Any
chunk the worker cannot vouch for (the cut is inside a game or a comment, a game is longer than
the chunk may be, a text problem the splitter resolves by skipping) comes back `clean=False`,
and the caller splits the file from that chunk's start on in one stream as before, so the games
are the same for any chunk size and any number of workers (tests hold both).

Game indices in a chunk's results count from 0: only the caller, merging in input order, knows
how many games came before; byte offsets are the file's own (`Chunk.offset` is where it starts).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from chesscore.ingest.validate import BatchJob, BatchResult, ValidateConfig, validate_batch
from chesscore.pgn import inputs as pgn_input
from chesscore.pgn.split import RawGame, split_games

CUT = b"\n\n["  # a blank line, then a tag line: where Lichess games start
# A batch also ends before this much text (4000 Lichess games are about 3 MB; a game alone may
# reach MAX_GAME_BYTES, the same 8 MiB): the parsers' buffers grow with the moves in a batch
# (~70 bytes a position), and hostile games can pack a ply into 4 bytes. The output does not
# depend on where batches end.
MAX_BATCH_BYTES = 8 << 20


@dataclass(frozen=True)
class Chunk:
    offset: int  # where data starts in the (decompressed) file: a game start
    data: bytes | None  # the range, then (when not final) the next game's text up to its first blank
    #                     line; None: the worker reads `size` bytes at `offset` of the (uncompressed) file
    cut: int  # the range is data[:cut]
    final: bool = False  # the range ends the file
    broken: pgn_input.InputError | None = None  # the file cannot be read past the range
    size: int = 0  # len(data), when the worker reads it
    spool: str | None = None  # the file holding data (then removed), instead of the input itself


@dataclass(frozen=True)
class ChunkJob:
    config: ValidateConfig
    source_path: str
    chunk: Chunk
    batch_games: int
    max_game_bytes: int


@dataclass
class ChunkResult:
    clean: bool  # the cut is a game start and every game was split as one stream would split it
    games: int = 0  # games in the range
    end: int = 0  # where the last of them ends, in the range
    results: list[BatchResult] = field(default_factory=list)  # game indices count from 0 in the chunk


def cut_chunks(blocks: Iterable[bytes], chunk_bytes: int, limit: int) -> Iterator[Chunk]:
    """The stream in ranges of about chunk_bytes, each cut before a `\\n\\n[` line. Where no cut is
    found within `limit` bytes a range ends anyway (its worker reports it unclean). A read error
    ends the stream with a `broken` range holding what was read before it."""
    buf, offset, more = b"", 0, []  # more: blocks read since the last cut was looked for
    try:
        for block in blocks:
            more.append(block)
            if len(buf) + sum(map(len, more)) < chunk_bytes:
                continue
            buf, more, pos = b"".join([buf, *more]), [], 0
            while len(buf) - pos >= chunk_bytes:
                at = buf.rfind(CUT, pos + 1, pos + chunk_bytes)  # the last game start within the size
                if at < 0:
                    at = buf.find(CUT, pos + chunk_bytes)  # or the first one past it
                blank = buf.find(b"\n\n", at + 3) if at >= 0 else -1  # the next game's first blank line
                if blank >= 0:
                    yield Chunk(offset + pos, buf[pos : blank + 2], at + 2 - pos)
                    pos = at + 2
                    continue
                if len(buf) - pos >= limit:  # no game start in sight: the worker reports it, the caller walks it
                    yield Chunk(offset + pos, buf[pos:], len(buf) - pos)
                    pos = len(buf)
                break
            offset, buf = offset + pos, buf[pos:]
    except pgn_input.InputError as error:
        buf = b"".join([buf, *more])
        yield Chunk(offset, buf, len(buf), broken=error)
        return
    buf = b"".join([buf, *more])
    yield Chunk(offset, buf, len(buf), final=True)


WINDOW = 64 << 10  # bytes read around a cut in an uncompressed file


def file_chunks(
    path: Path, chunk_bytes: int, limit: int, on_read: Callable[[int], None] | None = None
) -> Iterator[Chunk]:
    """An uncompressed file's ranges, found by reading only WINDOW bytes around each cut: the
    workers read the ranges themselves. Where no cut shows in the window (or a read fails) the
    rest is read in full and cut by cut_chunks."""
    size = path.stat().st_size
    pos = 0
    with open(path, "rb") as f:
        while size - pos >= chunk_bytes + WINDOW:
            start = pos + max(0, chunk_bytes - WINDOW)
            try:
                window = os.pread(f.fileno(), pos + chunk_bytes - start + WINDOW, start)
            except OSError:
                break
            at = window.rfind(CUT, 0, pos + chunk_bytes - start)  # the last game start within the size
            blank = window.find(b"\n\n", at + 3) if at >= 0 and start + at > pos else -1
            if blank < 0:
                break
            cut = start + at + 2
            if on_read:
                on_read(cut - pos)
            yield Chunk(pos, None, cut - pos, size=start + blank + 2 - pos)
            pos = cut
    if size - pos < chunk_bytes + WINDOW:
        if on_read:
            on_read(size - pos)
        yield Chunk(pos, None, size - pos, final=True, size=size - pos)
        return
    rest = pgn_input.read_blocks(path, on_read=on_read, start=pos)
    yield from (replace(chunk, offset=chunk.offset + pos) for chunk in cut_chunks(rest, chunk_bytes, limit))


class _More(Exception):
    """The stream goes on past the chunk (split_games then keeps the open game back)."""


def _and_more(data: bytes) -> Iterator[bytes]:
    yield data
    raise _More


def split_chunk(chunk: Chunk, max_game_bytes: int) -> tuple[list[RawGame], bool]:
    """The games of the chunk's range (indices from 0, the file's offsets), and whether they are
    those a split of the whole stream finds there."""
    final = chunk.final or chunk.broken is not None
    if len(chunk.data) > max_game_bytes:  # one stream would hold back and skip there: its rules
        return [], False
    games: list[RawGame] = []
    blocks = [chunk.data] if chunk.final else _and_more(chunk.data)
    try:
        for game in split_games(blocks, max_game_bytes, offset=chunk.offset):
            if game.offset - chunk.offset + len(game.data) > chunk.cut:
                break
            games.append(game)
    except _More:
        pass
    end = games[-1].offset - chunk.offset + len(games[-1].data) if games else 0
    clean = (final or end == chunk.cut) and not any(game.problem for game in games)
    return games, clean


def validate_chunk(job: ChunkJob) -> ChunkResult:
    """Split the chunk and validate its games in batches (at most batch_games games and
    MAX_BATCH_BYTES of text each), as one stream's batches would be."""
    chunk = job.chunk
    if chunk.data is None:
        data = _spooled(chunk) if chunk.spool else pgn_input.read_range(Path(job.source_path), chunk.offset, chunk.size)
        if data is None:  # the caller reads on as a stream: it names the error and the place
            return ChunkResult(False)
        chunk = replace(chunk, data=data)
    games, clean = split_chunk(chunk, job.max_game_bytes)
    if not clean:
        return ChunkResult(False)
    results = [
        validate_batch(BatchJob(job.config, job.source_path, batch)) for batch in batches(games, job.batch_games)
    ]
    end = games[-1].offset - chunk.offset + len(games[-1].data) if games else 0
    return ChunkResult(True, len(games), end, results)


def _spooled(chunk: Chunk) -> bytes | None:
    """A spooled range's bytes (its file removed); None if it is gone (the run moved on)."""
    try:
        with open(chunk.spool, "rb") as f:
            data = f.read()
        os.unlink(chunk.spool)
    except OSError:
        return None
    return data if len(data) == chunk.size else None


def batches(games: Iterable[RawGame], batch_games: int) -> Iterator[list[RawGame]]:
    """Games in lists of at most batch_games games and, past the first game, MAX_BATCH_BYTES; when
    the stream breaks (InputError), the games before it, then the error."""
    batch, size = [], 0
    try:
        for game in games:
            if batch and size + len(game.data) > MAX_BATCH_BYTES:
                yield batch
                batch, size = [], 0
            batch.append(game)
            size += len(game.data)
            if len(batch) == batch_games:
                yield batch
                batch, size = [], 0
    except pgn_input.InputError:  # the stream broke: the games read before it still count
        if batch:
            yield batch
        raise
    if batch:
        yield batch
