"""Decompression off the main process: a reader process inflates a compressed input, cuts it into
ranges and spools each range to a file that the worker which validates it reads and removes.

    with spool_dir() as spool:
        for chunk, read in spooled_chunks(Path("x.pgn.zst"), spool, chunk_bytes=4 << 20, limit=8 << 20, depth=8):
            chunk.spool               # the file holding chunk's bytes (chunk.data is None)

A .zst stream (like .gz and .bz2) is decompressed in order, a core's work of its own at full
speed: in the main process it would be the ceiling of every run, and in the reader it is the
ceiling still, so the reader does little else. Each inflated block is written straight to the
open range's file (no joined buffer, no copy of a range in memory) and cut there the way
chesscore.ingest.chunks.cut_chunks cuts: before the last game start within chunk_bytes of the
range's start that the block holds with its next blank line, the next game's first lines
written to both files. A cut the block does not show waits for the next block; the workers
check every cut as they do for cut_chunks', so where ranges end never changes the output. The
reader runs at most `depth` ranges ahead of the caller (a bounded queue), so the spool holds at
most about 2 x depth ranges (those queued and those in flight); the spool is a temporary folder
removed when the caller is done with every range.
"""

from __future__ import annotations

import os
import queue
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path

from chesscore.ingest.chunks import CUT, Chunk
from chesscore.pgn import inputs as pgn_input
from chesscore.runtime.children import die_with_parent
from chesscore.runtime.locks import scratch_dir

_POLL_S = 1.0  # how often a waiting caller checks that the reader is still alive


def _reader(parent: int, path: str, spool: str, chunk_bytes: int, limit: int, out) -> None:
    """In the reader process: every range, spooled, then None (or the failure's traceback)."""
    die_with_parent(parent)
    read = [0]
    try:
        blocks = pgn_input.read_blocks(Path(path), on_read=lambda n: read.__setitem__(0, read[0] + n))
        for chunk in spool_ranges(blocks, Path(spool), chunk_bytes, limit):
            out.put((chunk, read[0]))
        out.put(None)
    except BaseException:  # noqa: BLE001 - handed to the caller, which raises it
        out.put(traceback.format_exc())


def spool_ranges(blocks: Iterable[bytes], spool: Path, chunk_bytes: int, limit: int) -> Iterator[Chunk]:
    """The stream's ranges, each written to a file of `spool` as its blocks come (Chunk.spool;
    data None). Where no game start shows within `limit` bytes a range ends anyway (its worker
    reports it unclean); a read error ends the stream with a `broken` range."""
    ranges = _Ranges(spool)
    try:
        for block in blocks:
            yield from ranges.add(block, chunk_bytes, limit)
    except pgn_input.InputError as error:
        yield ranges.close(broken=error)
        return
    yield ranges.close(final=True)


class _Ranges:
    """The open range's file, and where the range starts in the stream."""

    def __init__(self, spool: Path) -> None:
        self.spool, self.number, self.offset, self.size = spool, 0, 0, 0
        self.file = open(self._name(), "wb")  # noqa: SIM115 - closed as each range ends

    def _name(self) -> str:
        return str(self.spool / f"{self.number}.pgn")

    def add(self, block: bytes, chunk_bytes: int, limit: int) -> Iterator[Chunk]:
        """Write the block, ending ranges in it; `base` is where the open range starts, in the
        block's own positions (negative: in a block before)."""
        view = memoryview(block)  # slices written without a copy
        base, pos = -self.size, 0  # pos: the block's first byte not yet written
        while len(block) - base >= chunk_bytes:
            low = max(0, base + 1)
            at = block.rfind(CUT, low, max(low, base + chunk_bytes))  # the last game start within the size
            if at < 0:
                at = block.find(CUT, max(low, base + chunk_bytes))  # or the first one past it
            blank = block.find(b"\n\n", at + 3) if at >= 0 else -1  # the next game's first blank line
            if blank < 0:
                break
            self.file.write(view[pos : blank + 2])
            yield self._end(cut=at + 2 - base, size=blank + 2 - base)
            base = pos = at + 2  # the next range starts there: its first lines go to both files
        self.file.write(view[pos:])
        self.size = len(block) - base
        if self.size >= limit:  # no game start in sight: the worker reports it, the caller walks it
            yield self._end(cut=self.size, size=self.size)

    def _end(self, cut: int, size: int, final: bool = False, broken: pgn_input.InputError | None = None) -> Chunk:
        """The open range, closed; a new one opened `cut` bytes on."""
        self.file.close()
        chunk = Chunk(self.offset, None, cut, final=final, broken=broken, size=size, spool=self._name())
        self.number, self.offset, self.size = self.number + 1, self.offset + cut, 0
        if not (final or broken):
            self.file = open(self._name(), "wb")  # noqa: SIM115 - closed as each range ends
        return chunk

    def close(self, final: bool = False, broken: pgn_input.InputError | None = None) -> Chunk:
        return self._end(cut=self.size, size=self.size, final=final, broken=broken)


@contextmanager
def spool_dir() -> Iterator[Path]:
    """A temporary folder for spooled ranges; it must outlive the workers' reads of them. A
    killed run's folder (up to 2 x depth ranges of inflated text) is removed by the next run's
    spool_dir (chesscore.runtime.locks.scratch_dir), not left in the temp folder for good."""
    with scratch_dir("chesscore-spool-") as spool:
        yield spool


def spooled_chunks(path: Path, spool: Path, chunk_bytes: int, limit: int, depth: int) -> Iterator[tuple[Chunk, int]]:
    """(range, compressed bytes read so far) of a compressed file, from a reader process that
    writes each range to a file in `spool`."""
    context = get_context("spawn")
    out = context.Queue(maxsize=max(1, depth))
    reader = context.Process(
        target=_reader, args=(os.getpid(), str(path), str(spool), chunk_bytes, limit, out), daemon=True
    )
    reader.start()
    try:
        while True:
            try:
                item = out.get(timeout=_POLL_S)
            except queue.Empty:
                if not reader.is_alive():
                    raise RuntimeError(f"{path}: the reader process ended ({reader.exitcode})") from None
                continue
            if item is None:
                break
            if isinstance(item, str):
                raise RuntimeError(f"{path}: the reader process failed:\n{item}")
            yield item
    finally:
        if reader.is_alive():
            reader.kill()
        reader.join()
        out.close()
