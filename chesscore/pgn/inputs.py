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


def find_inputs(paths: list[str | os.PathLike]) -> list[Path]:
    """Files as given, folders expanded to their PGN files (sorted, so the order is stable)."""
    found: list[Path] = []
    for given in map(Path, paths):
        if given.is_dir():
            found.extend(sorted(p for p in given.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES)))
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


def read_blocks(path: Path, block: int | None = None, on_read: Callable[[int], None] | None = None) -> Iterator[bytes]:
    """The decompressed bytes of a file, block by block (`block` bytes of the file at a time),
    across concatenated frames/members. on_read(n) is told each time n more bytes are read."""
    kind = compression(path)
    block = block or (BLOCK if kind == "none" else COMPRESSED_BLOCK)
    with open(path, "rb") as f:
        if kind == "none":
            while data := f.read(block):
                if on_read:
                    on_read(len(data))
                yield data
            return
        decoder, consumed, in_frame = _decompressor(kind), 0, False
        while data := f.read(block):
            if on_read:
                on_read(len(data))
            while data:
                try:
                    out = decoder.decompress(data)
                except (zstandard.ZstdError, zlib.error, OSError, EOFError) as error:
                    raise InputError(path, consumed, f"corrupt {kind} data ({error})") from None
                if out:
                    yield out
                if decoder.eof:  # one frame (member, stream) ended; the next may follow
                    rest = decoder.unused_data
                    consumed += len(data) - len(rest)
                    data, in_frame = rest, False
                    decoder = _decompressor(kind)
                    if data and not _starts_frame(kind, data):
                        raise InputError(path, consumed, f"data after the last {kind} frame is not {kind}")
                else:
                    consumed += len(data)
                    data, in_frame = b"", True
        if in_frame:
            raise InputError(path, consumed, f"truncated {kind} stream: the last frame ends early")


def _starts_frame(kind: str, data: bytes) -> bool:
    if kind == "zstd":  # a data frame, or a skippable frame (magic 0x184D2A5?)
        return data[:4] == ZSTD_MAGIC or (len(data) >= 4 and data[1:4] == b"\x2a\x4d\x18" and data[0] & 0xF0 == 0x50)
    return data.startswith(GZIP_MAGIC if kind == "gzip" else BZIP2_MAGIC)


def sniff(first_block: bytes) -> str | None:
    """Why the start of a file cannot be PGN (binary, HTML), or None when it may be."""
    head = first_block[: 1 << 16]
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"binary data (a NUL byte at byte {nul})"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")):
        return "an HTML/XML page, not PGN"
    if head and len(_CONTROL.findall(head)) > len(head) // 100:
        return "binary data (over 1% control bytes)"
    return None
