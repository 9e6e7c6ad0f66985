"""A half of the real Lichess games written out for training (chesscore.eval.real_games): exactly
the half's usable games, each as its file holds it, read by validate with nothing lost, and
never a game of the other half."""

from __future__ import annotations

import io
import json
from pathlib import Path

import chess.pgn
import pytest

from chesscore.eval.real_games import HALVES, choose, half_of, read_real_games, write_half
from chesscore.failures import BadInput
from chesscore.pgn.inputs import read_blocks
from chesscore.pgn.split import split_games
from tests.eval.test_human import REAL
from tests.inprocess import run_module


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("halves")
    records = {half: write_half(REAL, half, folder / f"{half}.pgn") for half in HALVES}
    return folder, records


def test_a_written_half_holds_exactly_its_usable_games_byte_for_byte(written):
    folder, records = written
    games, source = read_real_games(REAL)
    for half in HALVES:
        back, back_source = read_real_games(folder / f"{half}.pgn")
        # the same games as the measure's choice of the half, in the source file's order
        assert sorted(g.game_id for g in back) == sorted(g.game_id for g in choose(games, half, None))
        assert [g.game_id for g in back] == [g.game_id for g in games if half_of(g.game_id) == half]
        assert back_source["skipped"] == {} and all(half_of(g.game_id) == half for g in back)
        record = records[half]
        assert record["written"] == len(back) and record["other_half"] == len(games) - len(back)
        assert sum(v for k, v in record.items() if k.startswith("skipped:")) == source["games_read"] - len(games)
    source_text = b"".join(read_blocks(Path(source["files"][0]["path"])))
    written_games = list(split_games(read_blocks(folder / "validation.pgn")))
    assert len(written_games) == records["validation"]["written"]
    assert all(game.data in source_text for game in written_games)  # each game's text as the source has it


def test_validate_reads_a_written_half_and_accounts_for_every_game(written, tmp_path):
    folder, records = written
    done = run_module(
        "stages.validate", "--raw", folder / "validation.pgn", "--out", tmp_path / "v", "--no-progress", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "v" / "report.json").read_text())
    assert report["games_seen"] == records["validation"]["written"]
    assert report["accepted"] + report["rejected"] == report["games_seen"] and report["accepted"] > 400


def test_a_last_game_without_a_blank_line_still_ends_before_the_next(tmp_path):
    source = next(REAL.glob("*.pgn.zst"))
    pieces = [game.data for game in split_games(read_blocks(source))]
    usable = [p for p in pieces if b"[Site " in p and b"1. " in p and b"BOT" not in p][:2]
    (tmp_path / "in").mkdir()
    for i, piece in enumerate(usable):  # two files, each ending without a newline
        (tmp_path / "in" / f"{i}.pgn").write_bytes(piece.rstrip(b"\n"))
    sites = []
    for half in HALVES:
        write_half(tmp_path / "in", half, tmp_path / f"{half}.pgn")
        with open(tmp_path / f"{half}.pgn", encoding="utf-8") as f:
            while (game := chess.pgn.read_game(f)) is not None:
                assert not game.errors and len(list(game.mainline_moves())) > 0
                sites.append(game.headers["Site"])
    expected = [chess.pgn.read_game(io.StringIO(p.decode())).headers["Site"] for p in usable]
    assert sorted(sites) == sorted(expected) and len(set(expected)) == 2


def test_bad_requests_name_the_file(tmp_path):
    with pytest.raises(BadInput, match="plain PGN"):
        write_half(REAL, "validation", tmp_path / "out.pgn.zst")
    (tmp_path / "a.pgn").write_bytes(next(REAL.glob("*.pgn.zst")).read_bytes()[:0])
    with pytest.raises(BadInput, match="one of the files"):
        write_half(tmp_path, "validation", tmp_path / "a.pgn")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="empty: no PGN file"):
        write_half(tmp_path / "empty", "validation", tmp_path / "b.pgn")
    done = run_module(
        "chesscore.eval.real_games", "--real-games", "nothing", "--half", "validation", "--out", "b.pgn", cwd=tmp_path
    )
    assert done.returncode == 1 and "nothing: no such file or folder" in done.stderr and "Traceback" not in done.stderr
    done = run_module("chesscore.eval.real_games", "--half", "validation", cwd=tmp_path)
    assert done.returncode == 2 and "--half and --out go together" in done.stderr
    done = run_module("chesscore.eval.real_games", "--real-games", REAL, cwd=tmp_path)
    assert done.returncode == 0 and "validation half" in done.stdout and "999 games read" in done.stdout
