"""The validate stage on hostile input, each case built from a reproduction of issue 15: one odd
game never stops a run, a stray NUL loses only its game, a file without blank lines or a
decompression bomb stays in bounded memory, a game of many comments in linear time (issue 43:
over the cap or not, counted rather than timed)."""

from __future__ import annotations

import chess.pgn
import pyarrow as pa
import pytest
import zstandard

from chesscore.ingest import validate
from chesscore.ingest.validate import BatchJob, ValidateConfig, validate_batch
from chesscore.ingest.validate_run import GAMES, REJECTS, run_validate
from chesscore.pgn import meta
from chesscore.pgn.split import MAX_GAME_BYTES, split_games
from tests.counted import count_split_work
from tests.hardening.pgnfiles import random_game, random_games, run_stage


def read(out, name):
    return pa.ipc.open_file(out / name).read_all().to_pylist()


ODD_TIME_CONTROLS = {
    "3000000000+0": (None, None, "unknown"),  # past int32: the Arrow overflow that killed the run
    "\u00b2+0": (None, None, "unknown"),  # str.isdigit() says yes, int() says no
    "180+\u00b2": (None, None, "unknown"),
    "\u0661\u0668\u0660+\u0662": (None, None, "unknown"),  # Arabic-Indic digits: int() would read 180+2
    "99999999999999999999999+1": (None, None, "unknown"),
    "1_80+2": (None, None, "unknown"),  # int() takes the underscore
    "+": (None, None, "unknown"),
    "180+": (None, None, "unknown"),
    " 180+2 ": (180, 2, "blitz"),
    "2147483647+0": (2147483647, 0, "classical"),
    "-": (None, None, "correspondence"),
}


@pytest.mark.parametrize("value, expected", ODD_TIME_CONTROLS.items())
def test_time_control_values_parse_or_read_as_unknown(value, expected):
    assert meta.parse_time_control(value) == expected


def test_a_game_with_an_odd_time_control_is_kept_and_the_run_goes_on(tmp_path):
    games = [random_game(i, TimeControl=value) for i, value in enumerate(ODD_TIME_CONTROLS)]
    (tmp_path / "odd.pgn").write_text("".join(games), encoding="utf-8")
    report = run_validate([tmp_path / "odd.pgn"], tmp_path / "out", ValidateConfig(), batch_games=4)
    rows = read(tmp_path / "out", GAMES)
    assert report["accepted"] == len(ODD_TIME_CONTROLS) and report["rejected"] == 0
    got = {
        row["time_control"]: (row["base_seconds"], row["increment_seconds"], row["time_control_class"]) for row in rows
    }
    assert got == {value: expected for value, expected in ODD_TIME_CONTROLS.items()}


def test_the_stage_exits_0_on_the_reproduction(tmp_path):
    (tmp_path / "tc.pgn").write_text(random_games(3) + random_game(7, TimeControl="3000000000+0"), encoding="utf-8")
    run = run_stage("stages.validate", "--raw", tmp_path / "tc.pgn", "--out", tmp_path / "out", "--no-progress")
    assert run.code == 0, run.stderr
    assert len(read(tmp_path / "out", GAMES)) == 4


def _poisoned(monkeypatch):
    """Make the row builder fail on any batch that holds a game with POISON in its text: a
    stand-in for a reader bug that only one game triggers."""
    real = validate.accepted_rows

    def rows(parsed, raws, picks):
        if any(b"POISON" in raws[k].data for k in picks.tolist()):
            raise OverflowError("a value the table cannot hold")
        return real(parsed, raws, picks)

    monkeypatch.setattr(validate, "accepted_rows", rows)


def _job(texts: list[str]) -> BatchJob:
    data = "".join(texts).encode()
    return BatchJob(ValidateConfig(), "x.pgn", list(split_games([data])))


def test_a_game_the_reader_fails_on_is_an_internal_error_reject_and_the_batch_survives(monkeypatch):
    _poisoned(monkeypatch)
    texts = [random_game(1), random_game(2, White="POISON"), random_game(3)]
    result = validate_batch(_job(texts))
    assert result.rows.num_rows == 2 and result.seen == 3
    [(index, _, _, reason, detail)] = result.rejects
    assert (index, reason) == (1, validate.INTERNAL_ERROR)
    assert "OverflowError: a value the table cannot hold" in detail


def test_a_fault_every_game_hits_is_raised_not_hidden_as_rejects(monkeypatch):
    _poisoned(monkeypatch)
    with pytest.raises(OverflowError):
        validate_batch(_job([random_game(i, White="POISON") for i in range(3)]))


def test_a_nul_byte_near_the_start_loses_only_its_game(tmp_path):
    games = [random_game(i) for i in range(6)]
    games[1] = games[1].replace("[White ", "[White \0", 1)
    games[3] = games[3].replace(" 2. ", " 2. \0", 1)  # python-chess would skip it and read on
    (tmp_path / "nul.pgn").write_text("".join(games), encoding="utf-8")
    report = run_validate([tmp_path / "nul.pgn"], tmp_path / "out", ValidateConfig())
    rejects = read(tmp_path / "out", REJECTS)
    assert report["accepted"] == 4 and report["file_errors"] == []
    assert [(r["game_index"], r["reason"]) for r in rejects] == [(1, "unparsable"), (3, "unparsable")]
    assert all("NUL byte" in r["detail"] for r in rejects)


def test_binary_and_utf16_files_are_still_one_not_pgn_reject(tmp_path):
    (tmp_path / "bin.pgn").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "wide.pgn").write_bytes(random_games(2).encode("utf-16"))
    report = run_validate([tmp_path], tmp_path / "out", ValidateConfig())
    errors = {e["path"].rsplit("/", 1)[1]: e["error"] for e in report["file_errors"]}
    assert "binary data" in errors["bin.pgn"] and "NUL byte at byte 0" in errors["bin.pgn"]
    assert "UTF-16" in errors["wide.pgn"]
    assert report["by_reason"] == {"not_pgn": 2}


def test_a_stream_without_blank_lines_is_split_as_it_is_read():
    """The reproduction read a 200 MB file without a blank line whole (1.77 GB RSS): the cap
    on a game was only checked at blank lines. Games must come out while the stream is read."""
    game = b'[Event "x"]\n[Result "1-0"]\n1. e4 e5 1-0\n'
    consumed = []

    def blocks():
        for number in range(10_000):
            consumed.append(number)
            yield game * 100

    stream = split_games(blocks(), max_game_bytes=100_000)
    first = next(stream)
    assert first.data == game and first.problem is None
    assert len(consumed) < 50  # about max_game_bytes of input, not the whole stream


def test_a_huge_line_is_one_oversized_reject_and_reading_resumes_at_the_next_tag_line():
    data = b'[Event "big"]\n1. e4 ' + b"{ x } " * 100_000 + b'1-0\n[Event "next"]\n1. d4 d5 *\n'
    blocks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    games = list(split_games(blocks, max_game_bytes=64 << 10))
    assert [(g.index, g.offset, g.problem) for g in games[:1]] == [(0, 0, f"game text over {64 << 10} bytes")]
    assert len(games) == 2 and games[1].data == b'[Event "next"]\n1. d4 d5 *\n'
    assert games[1].offset == data.index(b'[Event "next"]')


def test_a_decompression_bomb_is_an_unreadable_reject_read_in_bounded_memory(tmp_path):
    text = random_games(3).encode() + b'[Event "bomb"]\n\n1. e4 ' + b"{ aaaaaaaa } " * (40 << 20)
    (tmp_path / "bomb.pgn.zst").write_bytes(zstandard.ZstdCompressor(level=19).compress(text))
    assert (tmp_path / "bomb.pgn.zst").stat().st_size < 200_000  # 500 MB inside
    run = run_stage("stages.validate", "--raw", tmp_path / "bomb.pgn.zst", "--out", tmp_path / "out", "--no-progress")
    assert run.code == 0, run.stderr
    rejects = read(tmp_path / "out", REJECTS)
    assert [r["reason"] for r in rejects] == ["unreadable"] and "decompression bomb" in rejects[0]["detail"]
    assert len(read(tmp_path / "out", GAMES)) == 3
    assert run.peak_rss_mib < 400, run.peak_rss_mib


def test_a_batch_ends_at_a_byte_budget_and_the_output_does_not_change(tmp_path, monkeypatch):
    from chesscore.ingest import chunks

    (tmp_path / "g.pgn").write_text(random_games(40), encoding="utf-8")
    run_validate([tmp_path / "g.pgn"], tmp_path / "whole", ValidateConfig())
    sizes = []
    real = chunks.validate_batch
    monkeypatch.setattr(chunks, "MAX_BATCH_BYTES", 5_000)
    monkeypatch.setattr(
        chunks, "validate_batch", lambda job: sizes.append(sum(len(g.data) for g in job.games)) or real(job)
    )
    run_validate([tmp_path / "g.pgn"], tmp_path / "cut", ValidateConfig())
    assert len(sizes) > 5 and max(sizes) <= 5_000
    for name in ("games.arrow", "rejects.arrow", "report.json"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "cut" / name).read_bytes()


def test_a_long_game_for_python_chess_is_read_in_bounded_time_and_memory(tmp_path):
    """The Rust parser gives up on the illegal last move, so python-chess reads the game: it
    used to play all 500k moves of these 2 MB (13 s, 540 MB); it plays 32768 and skims the rest."""
    shuffle = "Nf3 Nf6 Ng1 Ng8 " * ((2 << 20) // 16)
    text = random_games(2) + f'[Event "x"]\n[Result "1/2-1/2"]\n\n1. e4 e5 {shuffle} Qxh8 1/2-1/2\n\n'
    (tmp_path / "long.pgn").write_text(text, encoding="utf-8")
    run = run_stage("stages.validate", "--raw", tmp_path / "long.pgn", "--out", tmp_path / "out", "--no-progress")
    assert run.code == 0, run.stderr
    assert [(r["game_index"], r["reason"]) for r in read(tmp_path / "out", REJECTS)] == [(2, "too_long")]
    assert run.peak_rss_mib < 400 and run.cpu_seconds < 10, (run.peak_rss_mib, run.cpu_seconds)


COMMENT_GAME_HEAD = b'[Event "x"]\n[Site "y"]\n[White "a"]\n[Black "b"]\n[Result "*"]\n\n'


def counted_python_chess(monkeypatch) -> list:
    """A list that grows by one for every game python-chess is asked to read."""
    reads: list = []
    real = chess.pgn.read_game
    monkeypatch.setattr(chess.pgn, "read_game", lambda *args, **kwargs: reads.append(1) or real(*args, **kwargs))
    return reads


def test_a_10_mb_game_of_comments_is_one_oversized_reject_in_linear_work(tmp_path, monkeypatch):
    """Issue 43, as a new user tried it: one game of 10 MB of `{ comment }`s and no result took
    139 s of CPU (every comment searched the rest of its line again). It is over the 8 MiB cap:
    one reject naming the file, game and byte, python-chess never reads it, and the splitter
    looks at each byte a bounded number of times (counted, not timed)."""
    data = COMMENT_GAME_HEAD + b"{ comment } " * (10_000_000 // 12) + b"\n"
    path = tmp_path / "comments.pgn"
    path.write_bytes(data)
    work, reads = count_split_work(monkeypatch), counted_python_chess(monkeypatch)
    report = run_validate([path], tmp_path / "out", ValidateConfig())
    rejects = read(tmp_path / "out", REJECTS)
    where = [(r["source_path"], r["game_index"], r["byte_offset"], r["reason"], r["detail"]) for r in rejects]
    assert where == [(path.as_posix(), 0, 0, "unparsable", f"game text over {MAX_GAME_BYTES} bytes")]
    assert report["games_seen"] == 1 and report["reference_reads"] == 0 and not reads
    assert work.searched <= 2 * len(data) and work.walked <= 3 * len(data), (work, len(data))


CAP = 64 << 10  # the tests below lower the cap to keep the files small
OVERSIZED = {  # what follows the tags of a game of about 2.5 x CAP
    "comments": b"{ c } " * 27_000 + b"\n",
    "moves between comments": b"1. e4 { c } 1... e5 { c } " * 6_500 + b"\n",
    "comment lines": (b"{ c } " * 12 + b"\n") * 2_300,
    "comment paragraphs": (b"{ c\n\nc } " * 8 + b"\n") * 2_300,
    "one comment": b"{ " + b"comment " * 20_000 + b"}\n",
    "semicolons in comments": b"{ ; } " * 27_000 + b"\n",
    "game starts in comments": (b"1. e4 { a\n\n[b] } 1... e5 { c } " * 4 + b"\n") * 1_300,
}


@pytest.mark.parametrize("compressed", [False, True], ids=["pgn", "zst"])
@pytest.mark.parametrize("body", OVERSIZED.values(), ids=OVERSIZED)
def test_a_comment_heavy_game_over_the_cap_is_one_reject_in_linear_work(tmp_path, monkeypatch, body, compressed):
    """Between other games and last in the file, in small work units (a .zst's come to the
    splitter in blocks of the unit's size): the games around it are kept, it is one reject at its
    own game index and byte, python-chess never reads it, the splitter's work is linear."""
    before, after = random_games(3).encode(), random_games(2, seed=1).encode()
    text = before + COMMENT_GAME_HEAD + body + b"\n" + after + COMMENT_GAME_HEAD + body
    path = tmp_path / ("g.pgn.zst" if compressed else "g.pgn")
    path.write_bytes(zstandard.ZstdCompressor().compress(text) if compressed else text)
    work, reads = count_split_work(monkeypatch), counted_python_chess(monkeypatch)
    report = run_validate([path], tmp_path / "out", ValidateConfig(), batch_games=2, max_game_bytes=CAP)
    rejects = [(r["game_index"], r["byte_offset"], r["reason"], r["detail"]) for r in read(tmp_path / "out", REJECTS)]
    over = f"game text over {CAP} bytes"
    last = len(text) - len(COMMENT_GAME_HEAD + body)
    assert rejects == [(3, len(before), "unparsable", over), (6, last, "unparsable", over)]
    assert report["accepted"] == 5 and report["games_seen"] == 7
    assert not reads and report["reference_reads"] == 0
    assert work.searched <= 6 * len(text) and work.walked <= 4 * len(text), (work, len(text))


@pytest.mark.parametrize("body", OVERSIZED.values(), ids=OVERSIZED)
def test_a_comment_heavy_game_alone_in_its_file_is_one_reject_in_linear_work(tmp_path, monkeypatch, body):
    """The issue's layout at a cap of one read block: the work unit of a game with no game start
    in sight ends at the cap, not past it, so the game was only found oversized in the stream's
    last block, after the splitter had walked all of it (comment by comment)."""
    cap = 1 << 20
    text = COMMENT_GAME_HEAD + body * 8  # about 2.6 MB
    (tmp_path / "g.pgn").write_bytes(text)
    work, reads = count_split_work(monkeypatch), counted_python_chess(monkeypatch)
    report = run_validate([tmp_path / "g.pgn"], tmp_path / "out", ValidateConfig(), max_game_bytes=cap)
    rejects = [(r["game_index"], r["byte_offset"], r["reason"], r["detail"]) for r in read(tmp_path / "out", REJECTS)]
    assert rejects == [(0, 0, "unparsable", f"game text over {cap} bytes")]
    assert report["games_seen"] == 1 and not reads and report["reference_reads"] == 0
    assert work.searched <= 6 * len(text) and work.walked <= 4 * len(text), (work, len(text))
