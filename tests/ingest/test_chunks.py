"""Byte ranges split by the workers give the games one stream gives, for any range size and
worker count (chesscore.ingest.chunks, chesscore.ingest.validate_feed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from chesscore.ingest import validate_feed
from chesscore.ingest.chunks import Chunk, cut_chunks, file_chunks, split_chunk
from chesscore.ingest.spool import spool_ranges
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import GAMES, INPUTS, REJECTS, REPORT, run_validate
from chesscore.pgn.inputs import InputError
from chesscore.pgn.split import split_games
from tests.sample import fixture, fixture_names, sample_pgn

MAX_GAME = 20_000
# A comment holding what looks like a game start: a cut there is not one.
TRAP = (
    b'[Event "trap"]\n[Site "https://lichess.org/trap0001"]\n[Result "1-0"]\n\n1. e4 { a note\n\n'
    b'[Event "inside a comment"]\n\n1. d4 } e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'
)
HUGE = b'[Event "huge"]\n[Result "1-0"]\n\n1. e4 { ' + b"x" * (MAX_GAME + 5_000) + b" } 1-0\n\n"


def tricky_text() -> bytes:
    """Lichess games, then every fixture's exporter quirks (CRLF, tags only, a BOM mid-file, tags
    and moves on one line...), a comment with a game start in it and a game over MAX_GAME,
    each between plain games."""
    sample = sample_pgn()
    head = sample[: sample.index(b'\n\n[Event "', 150_000) + 2]
    parts = [head[:60_000], TRAP, head[60_000:], HUGE]
    for name in fixture_names(".pgn"):
        parts += [fixture(name).rstrip(b"\n") + b"\n\n", head[:3_000]]
    start = head.index(b'\n\n[Event "', 3_000) + 2
    return b"".join([*parts, head[start : start + 40_000]])


def spans(text: bytes) -> list[tuple[int, int]]:
    return [(g.index, g.offset) for g in split_games(read_blocks_of(text), MAX_GAME)]


def read_blocks_of(text: bytes, block: int = 7_919) -> list[bytes]:
    return [text[i : i + block] for i in range(0, len(text), block)]


def test_a_cut_inside_a_comment_is_not_trusted_and_a_real_one_is():
    text = TRAP + TRAP.replace(b"trap0001", b"trap0002")
    fake = TRAP.index(b'[Event "inside')
    blank = text.index(b"\n\n", fake)
    games, clean = split_chunk(Chunk(0, text[: blank + 2], fake), MAX_GAME)
    assert not clean
    real = len(TRAP)
    games, clean = split_chunk(Chunk(0, text[: text.index(b"\n\n", real) + 2], real), MAX_GAME)
    assert clean and [(g.index, g.offset, g.data) for g in games] == [(0, 0, TRAP)]
    rest, clean = split_chunk(Chunk(real, text[real:], len(text) - real, final=True), MAX_GAME)
    assert clean and [(g.offset, g.data) for g in rest] == [(real, text[real:])]


@pytest.mark.parametrize("chunk_bytes", [200, 2_000, 9_000])
def test_clean_ranges_hold_the_games_of_one_stream_and_unclean_ones_are_found(chunk_bytes):
    text = tricky_text()
    whole = list(split_games([text], MAX_GAME))
    by_offset = {g.offset: g for g in whole}
    unclean = compared = total = 0
    for chunk in cut_chunks(read_blocks_of(text), chunk_bytes, MAX_GAME):
        total += 1
        assert text[chunk.offset : chunk.offset + len(chunk.data)] == chunk.data
        games, clean = split_chunk(chunk, MAX_GAME)
        if not clean:
            unclean += 1
            continue
        if chunk.offset not in by_offset:  # after an unclean range: the caller never uses it
            continue
        first = by_offset[chunk.offset].index
        assert [g._replace(index=first + g.index) for g in games] == whole[first : first + len(games)]
        compared += 1
    assert unclean >= 2  # the comment's cut, and the game over MAX_GAME
    assert compared >= 0.8 * total, (compared, total)  # most ranges are clean: the check above ran


@pytest.mark.parametrize(("chunk_bytes", "block"), [(200, 7_919), (2_000, 7_919), (9_000, 1 << 20)])
def test_the_reader_spools_ranges_block_by_block_and_workers_vouch_for_them(tmp_path, chunk_bytes, block):
    text = tricky_text()
    whole = list(split_games([text], MAX_GAME))
    by_offset = {g.offset: g for g in whole}
    chunks = list(spool_ranges(read_blocks_of(text, block), tmp_path, chunk_bytes, MAX_GAME))
    assert [c.offset for c in chunks[1:]] == [c.offset + c.cut for c in chunks[:-1]]
    assert chunks[-1].final and chunks[-1].offset + chunks[-1].cut == len(text)
    clean = 0
    for chunk in chunks:
        data = Path(chunk.spool).read_bytes()
        assert len(data) == chunk.size and data == text[chunk.offset : chunk.offset + chunk.size]
        games, ok = split_chunk(replace(chunk, data=data), MAX_GAME)
        if ok and chunk.offset in by_offset:
            first = by_offset[chunk.offset].index
            assert [g._replace(index=first + g.index) for g in games] == whole[first : first + len(games)]
            clean += 1
    assert clean >= 0.8 * len(chunks) and len(chunks) >= 3  # all but the ranges over the trap and the huge game


def test_a_read_error_ends_the_spooled_ranges_with_what_came_before_it(tmp_path):
    text = tricky_text()[:50_000]

    def blocks():
        yield from read_blocks_of(text)
        raise InputError("t.pgn.zst", 1234, "corrupt zstd data")

    chunks = list(spool_ranges(blocks(), tmp_path, 9_000, MAX_GAME))
    last = chunks[-1]
    assert last.broken is not None and last.broken.offset == 1234 and not last.final
    assert last.offset + last.cut == len(text) and Path(last.spool).read_bytes() == text[last.offset :]


def test_an_uncompressed_file_is_cut_by_reading_windows_only(tmp_path):
    text = tricky_text()
    (tmp_path / "t.pgn").write_bytes(text)
    read: list[int] = []
    chunks = list(file_chunks(tmp_path / "t.pgn", 30_000, MAX_GAME, read.append))
    assert sum(read) == len(text) and len(chunks) > 3
    assert all(c.data is None for c in chunks)  # the workers read every range: none was read here
    assert [c.offset for c in chunks[1:]] == [c.offset + c.cut for c in chunks[:-1]]
    assert all(text[c.offset - 2 : c.offset + 1] == b"\n\n[" for c in chunks[1:])
    assert chunks[-1].final and chunks[-1].offset + chunks[-1].cut == len(text)


def read(out, name: str) -> list[dict]:
    return pa.ipc.open_file(out / name).read_all().to_pylist()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".pgn", ".pgn.zst"])
def test_validate_is_byte_identical_for_1_2_3_workers_and_any_range_size(tmp_path, monkeypatch, suffix):
    text = tricky_text()
    raw = tmp_path / f"t{suffix}"
    raw.write_bytes(zstandard.ZstdCompressor().compress(text) if suffix.endswith("zst") else text)
    one_stream = []
    real = validate_feed._FileRun._one_stream
    monkeypatch.setattr(validate_feed._FileRun, "_one_stream", lambda *a: one_stream.append(1) or real(*a))
    runs = [(1, 7), (2, 7), (3, 7), (1, 3), (3, 64), (1, 10**6)]
    for workers, batch_games in runs:
        run_validate([raw], tmp_path / f"{workers}-{batch_games}", ValidateConfig(), workers, batch_games, MAX_GAME)
    assert one_stream, "the ranges over the trap and the huge game go to the one-stream path"
    first = tmp_path / "1-7"
    for workers, batch_games in runs[1:]:
        for name in (GAMES, REJECTS, INPUTS, REPORT):
            got = (tmp_path / f"{workers}-{batch_games}" / name).read_bytes()
            assert got == (first / name).read_bytes(), (workers, batch_games, name)
    # Every game the one stream finds is accepted or rejected once, at its index and offset.
    seen = [(g["source_index"], g["source_offset"]) for g in read(first, GAMES)]
    seen += [(r["game_index"], r["byte_offset"]) for r in read(first, REJECTS)]
    assert sorted(seen) == spans(text)
    assert len(read(first, GAMES)) > 50
