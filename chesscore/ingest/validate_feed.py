"""Validate's inner parallel path: every input's batch results, in input order, from N processes.

    with worker_pool(4) as pool:
        for number, result in results(pool, files, inputs, Feed(config, 4000, MAX_GAME_BYTES), errors):
            ...                      # BatchResult of file `number`; game indices are the file's

The main process reads (and decompresses) each file and cuts it into raw byte ranges at game
starts (chesscore.ingest.chunks); the workers split, parse and judge the ranges, and build rows
and dedup keys. What is left in the main process is reading, shifting each range's game indices
by the games before it, and the caller's dedup and writing. A range whose cut the worker cannot
vouch for sends the rest of that file down the one-stream path (the main process splits, the
workers validate batches of games), so the games, and so the output, are the same for any
number of workers and any range size. At most 2 x workers ranges (or batches) are in flight.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from chesscore.data.shards import SCHEMA
from chesscore.ingest.chunks import Chunk, ChunkJob, batches, cut_chunks, file_chunks, validate_chunk
from chesscore.ingest.spool import spool_dir, spooled_chunks
from chesscore.ingest.validate import BatchJob, BatchResult, ValidateConfig, rejected, validate_batch
from chesscore.pgn import inputs as pgn_input
from chesscore.pgn.split import RawGame, split_games
from chesscore.runtime.children import die_with_parent

GAME_BYTES = 1 << 10  # about a Lichess game with clocks: a range is batch_games of them


@dataclass(frozen=True)
class Feed:
    config: ValidateConfig
    batch_games: int
    max_game_bytes: int

    @property
    def chunk_bytes(self) -> int:
        # Below max_game_bytes, so that a range never holds text the one stream would skip.
        return max(1, min(self.batch_games * GAME_BYTES, self.max_game_bytes // 2))


class _Inline:
    """The pool of one worker: the main process does the work when the result is asked for
    (so a range that is never needed is never validated)."""

    def __init__(self, fn: Callable, arg: Any) -> None:
        self.fn, self.arg = fn, arg

    def result(self) -> Any:
        return self.fn(self.arg)


@contextmanager
def worker_pool(workers: int) -> Iterator[tuple[Executor | None, int]]:
    """(pool, how many items may be in flight); no pool for one worker."""
    if workers <= 1:
        yield None, 1
        return
    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        yield pool, 2 * workers


def _submit(pool: Executor | None, fn: Callable, arg: Any) -> Future | _Inline:
    return _Inline(fn, arg) if pool is None else pool.submit(fn, arg)


def results(
    pool: tuple[Executor | None, int],
    files: list[Path],
    inputs: list[dict],
    feed: Feed,
    errors: list[dict],
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[int, BatchResult]]:
    """(file number, result) for every input in order. File-level problems become one reject each
    (not PGN at all, or unreadable from some byte on), after every game before, and an entry in
    `errors`. progress(raw bytes read, games seen) is called as the inputs are read."""
    seen = 0
    for number, path in enumerate(files):
        entry = inputs[number]
        on_read = (lambda n: progress(n, seen)) if progress else None  # noqa: B023 - reads the running count
        run = _FileRun(pool, feed, entry, errors)
        for result in run.results(path, on_read):
            seen += result.seen
            yield number, result


class _FileRun:
    """One input: its ranges through the workers, falling back to one stream where needed."""

    def __init__(self, pool: tuple[Executor | None, int], feed: Feed, entry: dict, errors: list[dict]) -> None:
        (self.pool, self.depth), self.feed, self.entry, self.errors = pool, feed, entry, errors
        self.games, self.end = 0, 0  # games of the file merged so far, and where the last one ends
        self.failure: pgn_input.InputError | None = None

    def results(self, path: Path, on_read: Callable[[int], None] | None) -> Iterator[BatchResult]:
        plain = self.entry["compression"] == "none"  # the workers read their own ranges
        spooled = not plain and self.pool is not None  # a reader process inflates it
        blocks = pgn_input.read_blocks(path, on_read=None if plain or spooled else on_read)
        try:
            first = next(blocks, b"")
        except pgn_input.InputError as error:
            first, blocks = b"", _raising(error)
        else:
            why = pgn_input.sniff(first)
            if why is not None:
                self.errors.append({"path": self.entry["path"], "error": why})
                yield rejected(0, 0, "not_pgn", why)
                return
        feed = self.feed
        with ExitStack() as stack:
            if plain and first:
                blocks.close()
                chunks = file_chunks(path, feed.chunk_bytes, feed.max_game_bytes, on_read)
            elif spooled and first:
                blocks.close()
                chunks = self._from_reader(path, stack.enter_context(spool_dir()), on_read)
            else:
                chunks = cut_chunks(itertools.chain([first], blocks), feed.chunk_bytes, feed.max_game_bytes)
            yield from self._ranges(path, chunks)
        if self.failure is not None:
            detail = f"{self.failure.message} at byte {self.failure.offset} of the file; the rest is unread"
            self.errors.append({"path": self.entry["path"], "error": str(self.failure)})
            yield rejected(self.games, self.end, "unreadable", detail)
        elif self.games == 0:
            self.errors.append({"path": self.entry["path"], "error": "no games (empty file)"})

    def _from_reader(self, path: Path, spool: Path, on_read: Callable[[int], None] | None) -> Iterator[Chunk]:
        told = 0
        for chunk, read in spooled_chunks(path, spool, self.feed.chunk_bytes, self.feed.max_game_bytes, self.depth):
            if on_read and read > told:
                on_read(read - told)
                told = read
            yield chunk

    def _job(self, chunk: Chunk) -> ChunkJob:
        entry, feed = self.entry, self.feed
        return ChunkJob(feed.config, entry["path"], chunk, feed.batch_games, feed.max_game_bytes)

    def _ranges(self, path: Path, chunks: Generator[Chunk, None, None]) -> Iterator[BatchResult]:
        pending: deque[tuple[Chunk, Future | _Inline]] = deque()
        for chunk in itertools.chain(chunks, [None]):
            if chunk is not None:
                pending.append((chunk, _submit(self.pool, validate_chunk, self._job(chunk))))
            while pending and (chunk is None or len(pending) > self.depth):
                done, future = pending.popleft()
                out = future.result()
                if not out.clean:
                    for _, later in pending:  # computed for a cut that may not be a game start
                        if isinstance(later, Future):
                            later.cancel()
                    if done.data is None:  # the workers read the ranges: the main process reads on from this one
                        chunks.close()
                        yield from self._one_stream(path, done, iter(()))
                    else:
                        yield from self._one_stream(path, done, itertools.chain((c for c, _ in pending), chunks))
                    return
                for result in out.results:
                    yield _shifted(result, self.games)
                if out.games:
                    self.games, self.end = self.games + out.games, done.offset + out.end
                if done.broken is not None:
                    self.failure = done.broken

    def _one_stream(self, path: Path, first: Chunk, chunks: Iterator[Chunk]) -> Iterator[BatchResult]:
        """The rest of the file from `first` (a game start) on, as the main process splits it,
        its batches validated by the workers."""

        def blocks() -> Iterator[bytes]:
            for chunk in itertools.chain([first], chunks):
                yield chunk.data[: chunk.cut]
                if chunk.broken is not None:
                    raise chunk.broken

        feed, entry = self.feed, self.entry
        # Ranges the workers read: the main process reads the file on from the first.
        stream = blocks() if first.data is not None else pgn_input.read_blocks(path, start=first.offset)
        games = split_games(stream, feed.max_game_bytes, offset=first.offset, index=self.games)
        pending: deque[Future | _Inline] = deque()
        try:
            for batch in batches(_tracked(games, self), feed.batch_games):
                job = BatchJob(feed.config, entry["path"], batch)
                pending.append(_submit(self.pool, validate_batch, job))
                while len(pending) > self.depth:
                    yield pending.popleft().result()
        except pgn_input.InputError as error:
            self.failure = error
        while pending:
            yield pending.popleft().result()


def _tracked(games: Iterator[RawGame], run: _FileRun) -> Iterator[RawGame]:
    """The games, noting in `run` how many there were and where the last one ends."""
    for game in games:
        run.games, run.end = game.index + 1, game.offset + len(game.data)
        yield game


def _raising(error: Exception) -> Iterator[bytes]:
    yield from ()
    raise error


def _shifted(result: BatchResult, games_before: int) -> BatchResult:
    """A range's result with the file's game indices (the range's count from 0)."""
    if not games_before:
        return result
    rows = result.rows
    if rows.num_rows:
        at = SCHEMA.get_field_index("source_index")
        rows = rows.set_column(at, SCHEMA.field(at), pc.add(rows.column(at), games_before))
    rejects = [(index + games_before, *rest) for index, *rest in result.rejects]
    return dataclasses.replace(result, rows=rows, rejects=rejects)
