"""Raw PGN inputs as streams of bytes: plain, .zst (multi-frame), .gz or .bz2, found by content.

    for block in read_blocks(Path("lichess_db_standard_rated_2024-01.pgn.zst")):
        ...                       # decompressed bytes, BLOCK-sized input reads, memory bounded

Compression is recognised by its magic bytes, not the file name. A truncated or corrupt stream
raises InputError naming the file and the compressed byte offset, after every block before it
was yielded. `sniff` tells a PGN apart from files that cannot be one (binary data, HTML).
"""

from __future__ import annotations

import bz2
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import zstandard

from chesscore.failures import BadInput

BLOCK = 1 << 20  # bytes of a plain file read at a time
COMPRESSED_BLOCK = 1 << 17  # of a compressed one: PGN inflates 5-15x, so about a BLOCK comes out
#                              (64 KiB reads cost a fifth more: the splitter's work per buffer adds up)
PIECE = 1 << 10  # compressed bytes fed to the decoder at a time (zstd's worst ratio makes that 32 MiB out)
MAX_RATIO = 1000  # PGN inflates 2-15x; past this x the compressed bytes read (plus RATIO_SLACK) it is a bomb
RATIO_SLACK = 64 << 20
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
BZIP2_MAGIC = b"BZh"
SUFFIXES = (".pgn", ".pgn.zst", ".pgn.gz", ".pgn.bz2")
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")  # not in text (ESC 0x1b allowed)


class InputError(BadInput):
    """An input that cannot be read (further): names the file and the byte offset."""

    def __init__(self, path: str | os.PathLike, offset: int, message: str) -> None:
        super().__init__(f"{path}: {message} at byte {offset}")
        self.path, self.offset, self.message = str(path), offset, message

    def __reduce__(self):  # it travels to worker processes with the range it ends
        return type(self), (self.path, self.offset, self.message)


def find_inputs(paths: list[str | os.PathLike]) -> list[Path]:
    """Files as given, folders expanded to their PGN files (sorted, so the order is stable)."""
    found: list[Path] = []
    for given in map(Path, paths):
        if given.is_dir():
            named = sorted(p for p in given.rglob("*") if p.name.endswith(SUFFIXES) and not p.is_dir())
            for path in named:
                if not path.is_file():  # a broken link is an input that went missing, not nothing
                    raise FileNotFoundError(f"{path}: not a readable file (a broken link?)")
            found.extend(named)
        elif given.is_file():
            found.append(given)
        else:
            raise FileNotFoundError(f"{given}: no such file or folder")
    return found


def compression(path: Path) -> str:
    """ "zstd", "gzip", "bzip2" or "none", from the file's first bytes."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(BZIP2_MAGIC):
        return "bzip2"
    return "none"


def _decompressor(kind: str):
    if kind == "zstd":
        return zstandard.ZstdDecompressor().decompressobj()
    if kind == "gzip":
        return zlib.decompressobj(wbits=31)
    return bz2.BZ2Decompressor()


def read_blocks(
    path: Path, block: int | None = None, on_read: Callable[[int], None] | None = None, start: int = 0
) -> Iterator[bytes]:
    """The decompressed bytes of a file, block by block (`block` bytes of the file at a time),
    across concatenated frames/members. on_read(n) is told each time n more bytes are read.
    From byte `start` on when given (of the decompressed bytes: a compressed stream is inflated
    from its start, and what comes before `start` dropped)."""
    kind = compression(path)
    block = block or (BLOCK if kind == "none" else COMPRESSED_BLOCK)
    if start and kind != "none":
        yield from _skipped(read_blocks(path, block, on_read), start)
        return
    with open(path, "rb") as f:
        if kind == "none":
            f.seek(start)
            while data := _read(path, f, block):
                if on_read:
                    on_read(len(data))
                yield data
            return
        yield from _inflate(path, f, kind, block, on_read)


def _skipped(blocks: Iterator[bytes], start: int) -> Iterator[bytes]:
    """The blocks' bytes from byte `start` on."""
    for data in blocks:
        if start >= len(data):
            start -= len(data)
            continue
        yield data[start:] if start else data
        start = 0


def read_range(path: Path, start: int, size: int) -> bytes | None:
    """`size` bytes of an uncompressed file from byte `start`; None when they cannot all be read
    (the caller then reads the file as a stream, which names the error and the place)."""
    parts, got = [], 0
    try:
        with open(path, "rb") as f:
            while got < size and (part := os.pread(f.fileno(), size - got, start + got)):  # reads may come short
                parts.append(part)
                got += len(part)
    except OSError:
        return None
    return b"".join(parts) if got == size else None


def _read(path: Path, f, size: int) -> bytes:
    """f.read(size); a read error (a failing disk, a vanished network file) is an InputError
    naming the file and the offset (OSError's own message names neither)."""
    try:
        return f.read(size)
    except OSError as error:
        raise InputError(path, f.tell(), f"read error ({error.strerror or error})") from None


def _inflate(path: Path, f, kind: str, block: int, on_read: Callable[[int], None] | None) -> Iterator[bytes]:
    """The decompressed blocks of an open compressed file. The decoder is fed PIECE bytes at a
    time, so one call never inflates more than PIECE x the format's largest ratio (32 MiB for
    zstd); what comes out is handed on in blocks of about BLOCK bytes. A stream that inflates
    more than MAX_RATIO times its compressed size is a decompression bomb, not a PGN dump."""
    decoder, consumed, in_frame = _decompressor(kind), 0, False
    pending: list[bytes] = []
    size = 0  # of pending
    inflated = 0
    while data := _read(path, f, block):
        if on_read:
            on_read(len(data))
        view = memoryview(data)
        for start in range(0, len(view), PIECE):
            piece = view[start : start + PIECE]
            while piece:
                try:
                    out = decoder.decompress(piece)
                except (zstandard.ZstdError, zlib.error, OSError, EOFError) as error:
                    yield from _flush(pending)
                    raise InputError(path, consumed, f"corrupt {kind} data ({error})") from None
                if out:
                    pending.append(out)
                    size += len(out)
                    inflated += len(out)
                    if inflated > MAX_RATIO * (consumed + len(piece)) + RATIO_SLACK:
                        yield from _flush(pending)
                        raise InputError(
                            path,
                            consumed,
                            f"{kind} data inflates over {MAX_RATIO}x ({inflated:,} bytes so far): a "
                            f"decompression bomb, not a PGN dump",
                        )
                if decoder.eof:  # one frame (member, stream) ended; the next may follow
                    rest = decoder.unused_data
                    consumed += len(piece) - len(rest)
                    piece, in_frame = rest, False
                    decoder = _decompressor(kind)
                    if piece and not _starts_frame(kind, piece):
                        yield from _flush(pending)
                        raise InputError(path, consumed, f"data after the last {kind} frame is not {kind}")
                else:
                    consumed += len(piece)
                    piece, in_frame = b"", True
            if size >= BLOCK:
                yield from _flush(pending)
                size = 0
    yield from _flush(pending)
    if in_frame:
        raise InputError(path, consumed, f"truncated {kind} stream: the last frame ends early")


def _flush(pending: list[bytes]) -> Iterator[bytes]:
    """pending as one block (emptied)."""
    if pending:
        out = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        yield out


def _starts_frame(kind: str, data: bytes) -> bool:
    if kind == "zstd":  # a data frame, or a skippable frame (magic 0x184D2A5?)
        return data[:4] == ZSTD_MAGIC or (len(data) >= 4 and data[1:4] == b"\x2a\x4d\x18" and data[0] & 0xF0 == 0x50)
    return data.startswith(GZIP_MAGIC if kind == "gzip" else BZIP2_MAGIC)


def sniff(first_block: bytes) -> str | None:
    """Why the start of a file cannot be PGN (binary, HTML), or None when it may be."""
    head = first_block[: 1 << 16]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (PGN is read as UTF-8: convert it first, e.g. iconv -f UTF-16 -t UTF-8)"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")):
        return "an HTML/XML page, not PGN"
    # A stray NUL (or a few) is damage inside a game, rejected with that game; a file whose
    # start is over 1% control bytes (NULs included) is not text at all.
    control = len(_CONTROL.findall(head))
    if head and control > len(head) // 100:
        nul = head.find(b"\x00")
        where = f"; the first NUL byte at byte {nul}" if nul >= 0 else ""
        return f"binary data ({control} control bytes in the first {len(head):,} bytes{where})"
    return None
