"""Reading raw inputs as byte streams: compression by content, multi-frame zstd, and clear errors
(file and byte offset) for truncated or corrupt streams, after everything before them."""

from __future__ import annotations

import bz2
import gzip

import pytest
import zstandard

from chesscore.pgn.inputs import InputError, compression, find_inputs, read_blocks, sniff
from tests.sample import fixture, sample_pgn


@pytest.fixture(scope="module")
def lichess() -> bytes:
    """Real Lichess-format PGN: the embedded sample's first 2.5 MB (its first ~1,100 games)."""
    return sample_pgn()[:2_500_000]


def zstd_frames(data: bytes, parts: int = 3) -> bytes:
    step = len(data) // parts + 1
    compressor = zstandard.ZstdCompressor(level=3)
    return b"".join(compressor.compress(data[i : i + step]) for i in range(0, len(data), step))


def read_all(path, block=4096) -> bytes:
    return b"".join(read_blocks(path, block=block))


def test_plain_zstd_gzip_and_bzip2_read_the_same_bytes(tmp_path, lichess):
    files = {
        "a.pgn": lichess,
        "b.pgn.zst": zstd_frames(lichess),
        "c.pgn.gz": gzip.compress(lichess),
        "d.pgn.bz2": bz2.compress(lichess[:300_000]) + bz2.compress(lichess[300_000:]),
        "e.pgn": zstd_frames(lichess, 1),
    }  # a zstd file named .pgn is read as zstd
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        assert read_all(tmp_path / name) == lichess, name
    assert [compression(tmp_path / n) for n in sorted(files)] == ["none", "zstd", "gzip", "bzip2", "zstd"]
    assert [p.name for p in find_inputs([tmp_path])] == sorted(files)


def test_truncated_zstd_yields_what_it_can_then_names_file_and_offset(tmp_path, lichess):
    data = zstd_frames(lichess)
    path = tmp_path / "cut.pgn.zst"
    path.write_bytes(data[: len(data) * 2 // 3])
    got = bytearray()
    with pytest.raises(InputError, match=r"cut\.pgn\.zst: truncated zstd stream.* at byte \d+") as caught:
        for block in read_blocks(path, block=4096):
            got += block
    assert len(got) > len(lichess) // 3 and lichess.startswith(bytes(got))
    assert caught.value.offset == len(data) * 2 // 3


def test_a_download_cut_short_yields_its_whole_frames_then_names_file_and_offset(tmp_path):
    path = tmp_path / "truncated.pgn.zst"
    path.write_bytes(fixture("truncated.pgn.zst"))
    got = bytearray()
    with pytest.raises(InputError, match=r"truncated\.pgn\.zst: truncated zstd stream.* at byte 704$") as caught:
        for block in read_blocks(path, block=64):
            got += block
    assert caught.value.offset == path.stat().st_size == 704
    # The two whole frames, the skippable frame between them (the fixture's note) read as nothing.
    assert got.count(b"[Event ") == 2 and got.endswith(b"2... Qh4# { [%clk 0:02:58] } 0-1\n\n")
    assert b"cut short" not in got and compression(path) == "zstd"


def test_corrupt_zstd_and_trailing_garbage_are_errors(tmp_path, lichess):
    data = bytearray(zstd_frames(lichess))
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "flip.pgn.zst").write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"flip\.pgn\.zst: corrupt zstd data"):
        read_all(tmp_path / "flip.pgn.zst")
    (tmp_path / "tail.pgn.zst").write_bytes(zstd_frames(lichess) + b"not zstd at all")
    with pytest.raises(InputError, match="after the last zstd frame"):
        read_all(tmp_path / "tail.pgn.zst")


def test_empty_and_missing_inputs(tmp_path):
    (tmp_path / "empty.pgn").write_bytes(b"")
    assert read_all(tmp_path / "empty.pgn") == b""
    with pytest.raises(FileNotFoundError, match="nowhere.pgn"):
        find_inputs([tmp_path / "nowhere.pgn"])


def test_sniff_tells_binary_and_html_from_pgn(lichess):
    assert sniff(lichess[:65536]) is None
    assert sniff(b"") is None
    assert "NUL byte at byte 3" in sniff(b"abc\x00def")
    assert "HTML" in sniff(b"\n  <!DOCTYPE html>\n<html><body>Not found</body></html>")
    assert "control bytes" in sniff(bytes(range(1, 32)) * 10)
