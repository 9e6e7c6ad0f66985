"""Decompression off the main process: a reader process inflates a compressed input, cuts it into
ranges and spools each range to a file that the worker which validates it reads and removes.

    with spool_dir() as spool:
        for chunk, read in spooled_chunks(Path("x.pgn.zst"), spool, chunk_bytes=4 << 20, limit=8 << 20, depth=8):
            chunk.spool               # the file holding chunk's bytes (chunk.data is None)

A .zst stream (like .gz and .bz2) is decompressed in order, a core's work of its own at full
speed: in the main process it would be the ceiling of every run. The reader runs at most `depth`
ranges ahead of the caller (a bounded queue), so the spool holds at most about 2 x depth ranges
(those queued and those in flight); the spool is a temporary folder removed when the caller is
done with every range. The ranges and their cuts are those
chesscore.ingest.chunks.cut_chunks makes, so the output does not change.
"""

from __future__ import annotations

import os
import queue
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

from chesscore.children import die_with_parent
from chesscore.ingest.chunks import Chunk, cut_chunks
from chesscore.pgn import inputs as pgn_input

_POLL_S = 1.0  # how often a waiting caller checks that the reader is still alive


def _reader(parent: int, path: str, spool: str, chunk_bytes: int, limit: int, out) -> None:
    """In the reader process: every range, spooled, then None (or the failure's traceback)."""
    die_with_parent(parent)
    read = [0]
    try:
        blocks = pgn_input.read_blocks(Path(path), on_read=lambda n: read.__setitem__(0, read[0] + n))
        for number, chunk in enumerate(cut_chunks(blocks, chunk_bytes, limit)):
            file = os.path.join(spool, f"{number}.pgn")
            with open(file, "wb") as f:  # read once and removed: no fsync, no rename
                f.write(chunk.data)
            out.put((replace(chunk, data=None, size=len(chunk.data), spool=file), read[0]))
        out.put(None)
    except BaseException:  # noqa: BLE001 - handed to the caller, which raises it
        out.put(traceback.format_exc())


@contextmanager
def spool_dir() -> Iterator[Path]:
    """A temporary folder for spooled ranges; it must outlive the workers' reads of them."""
    with tempfile.TemporaryDirectory(prefix="chesscore-spool-") as spool:
        yield Path(spool)


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
