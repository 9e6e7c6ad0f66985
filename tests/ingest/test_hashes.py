"""The inputs' sha256 computed beside validate's work (chesscore.ingest.hashes): the digests of
the files in order, and an unreadable one named without holding up the others."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from chesscore import failures
from chesscore.ingest.hashes import BLOCK, InputHashes


def test_each_file_gets_its_own_digest_in_order(tmp_path: Path) -> None:
    contents = [b"", b'[Event "x"]\n\n1. e4 *\n', bytes(range(256)) * (BLOCK // 256 * 3 + 7)]
    files = []
    for n, data in enumerate(contents):
        files.append(tmp_path / f"{n}.pgn")
        files[-1].write_bytes(data)
    with InputHashes(files) as hashes:
        assert [hashes.get(n) for n in (2, 0, 1)] == [hashlib.sha256(contents[n]).hexdigest() for n in (2, 0, 1)]


def test_an_unreadable_file_is_named_and_the_next_is_still_hashed(tmp_path: Path) -> None:
    good = tmp_path / "good.pgn"
    good.write_bytes(b"1. d4 *\n")
    gone = tmp_path / "gone.pgn"  # listed, then removed before the thread reads it
    with InputHashes([gone, good]) as hashes:
        with pytest.raises(failures.BadInput, match=r"gone\.pgn: cannot read this input"):
            hashes.get(0)
        assert hashes.get(1) == hashlib.sha256(b"1. d4 *\n").hexdigest()
