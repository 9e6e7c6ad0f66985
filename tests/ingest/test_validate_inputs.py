"""The validate stage on bad input files (empty, binary, HTML, truncated and corrupt .zst, invalid
UTF-8), its accounting, identical output for any worker count, and its CLI as a subprocess."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import GAMES, INPUTS, REJECTS, REPORT, run_validate
from tests.inprocess import run_module
from tests.sample import SAMPLE, fixture, sample_pgn, write_fixtures


def zstd_frames(data: bytes, frame: int = 200_000) -> bytes:
    compressor = zstandard.ZstdCompressor(level=1)
    return b"".join(compressor.compress(data[i : i + frame]) for i in range(0, len(data), frame))


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory) -> Path:
    """A folder of real and broken inputs; the embedded sample is cut in two so nothing repeats."""
    raw = tmp_path_factory.mktemp("bad") / "raw"
    raw.mkdir()
    lichess = sample_pgn()
    middle = lichess.index(b'\n\n[Event "', len(lichess) // 2) + 2
    head, tail = lichess[:middle], lichess[middle:]
    cut = zstd_frames(head)
    (raw / "cut.pgn.zst").write_bytes(cut[: len(cut) * 3 // 4])
    flipped = bytearray(zstd_frames(tail))
    flipped[len(flipped) * 3 // 4] ^= 0x55
    (raw / "flip.pgn.zst").write_bytes(bytes(flipped))
    (raw / "empty.pgn").write_bytes(b"")
    (raw / "garbage.pgn").write_bytes(random.Random(0).randbytes(5000))
    (raw / "page.pgn").write_bytes(
        b"<!DOCTYPE html>\n<html><head><title>404</title></head><body>Not Found</body></html>\n"
    )
    latin = fixture("crlf.pgn")  # two games; the first gets a Latin-1 byte in its comment
    (raw / "latin1.pgn").write_bytes(latin.replace(b"Gambit", b"Gambit refus\xe9", 1))
    return raw


def read(out: Path, name: str) -> list[dict]:
    return pa.ipc.open_file(out / name).read_all().to_pylist()


def test_bad_files_are_recorded_and_nothing_read_is_lost(bad_inputs, tmp_path):
    report = run_validate([bad_inputs], tmp_path / "out", ValidateConfig())
    errors = {Path(e["path"]).name: e["error"] for e in report["file_errors"]}
    assert set(errors) == {"cut.pgn.zst", "flip.pgn.zst", "empty.pgn", "garbage.pgn", "page.pgn"}
    assert "truncated zstd stream" in errors["cut.pgn.zst"] and "corrupt zstd data" in errors["flip.pgn.zst"]
    assert "NUL byte" in errors["garbage.pgn"] and "HTML" in errors["page.pgn"] and "no games" in errors["empty.pgn"]
    rejects = read(tmp_path / "out", REJECTS)
    by_file = {name: [r for r in rejects if r["source_path"].endswith(name)] for name in errors}
    assert [(r["game_index"], r["reason"]) for r in by_file["garbage.pgn"]] == [(0, "not_pgn")]
    assert [(r["game_index"], r["reason"]) for r in by_file["page.pgn"]] == [(0, "not_pgn")]
    for name in ("cut.pgn.zst", "flip.pgn.zst"):
        entry = report["by_file"][str(bad_inputs / name)]
        last = by_file[name][-1]
        assert last["reason"] == "unreadable" and last["game_index"] == entry["games_seen"] - 1
        assert entry["accepted"] > 50, f"{name}: the games before the damage are kept"
    games = read(tmp_path / "out", GAMES)
    cut_games = [g for g in games if g["source_sha256"] == by_file["cut.pgn.zst"][0]["source_sha256"]]
    assert [g["source_index"] for g in cut_games] == sorted(g["source_index"] for g in cut_games)
    latin = [r for r in rejects if r["source_path"].endswith("latin1.pgn")]
    assert [(r["game_index"], r["reason"]) for r in latin] == [(0, "unparsable")]
    bad_byte = (bad_inputs / "latin1.pgn").read_bytes().index(b"\xe9")
    assert latin[0]["detail"] == f"invalid UTF-8 at byte {bad_byte}"
    for path, entry in report["by_file"].items():
        assert entry["games_seen"] == entry["accepted"] + sum(entry["rejected"].values()), path
    inputs = json.loads((tmp_path / "out" / INPUTS).read_text())["inputs"]
    assert [Path(e["path"]).name for e in inputs] == sorted(errors | {"latin1.pgn": ""})


@pytest.mark.slow
def test_output_is_byte_identical_for_one_or_two_workers(bad_inputs, tmp_path):
    # The whole sample after its readable halves: over 2,000 duplicates, whose first copies a
    # worker other than the rejecting one may hold; then every fixture's exporter quirks.
    raws = [bad_inputs, SAMPLE, write_fixtures(tmp_path / "fixtures")]
    run_validate(raws, tmp_path / "one", ValidateConfig(), workers=1, batch_games=64)
    run_validate(raws, tmp_path / "two", ValidateConfig(), workers=2, batch_games=64)
    for name in (GAMES, REJECTS, INPUTS, REPORT):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    assert len(read(tmp_path / "one", GAMES)) > 900 and len(read(tmp_path / "one", REJECTS)) > 1000
    # The files' sha256 (hashed beside the workers) on every row and reject, and in the manifest.
    manifest = json.loads((tmp_path / "two" / INPUTS).read_text())["inputs"]
    true = {e["path"]: hashlib.sha256(Path(e["path"]).read_bytes()).hexdigest() for e in manifest}
    assert [e["sha256"] for e in manifest] == list(true.values())
    with_games = {true[e["path"]] for e in manifest if e["accepted"]}
    assert {g["source_sha256"] for g in read(tmp_path / "two", GAMES)} == with_games and len(with_games) > 3
    rejects = read(tmp_path / "two", REJECTS)
    assert all(r["source_sha256"] == true[r["source_path"]] for r in rejects)


def stage(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_module("stages.validate", *args, cwd=cwd, env={"PATH": "/usr/bin:/bin"})


def test_cli_summarises_bad_input_without_a_traceback_and_strict_fails_after_writing(bad_inputs, tmp_path):
    (tmp_path / "params.yaml").write_text("validate:\n  min_plies: 4\n  exclude_bots: true\n")
    done = stage("--raw", str(bad_inputs), "--out", "v", "--params", "params.yaml", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "FILE PROBLEM" in done.stdout and "accepted" in done.stdout
    report = json.loads((tmp_path / "v" / REPORT).read_text())
    assert report["by_reason"]["filtered:bot"] > 0 and report["by_reason"]["not_pgn"] == 2
    assert json.loads((tmp_path / "v" / INPUTS).read_text())["params"]["min_plies"] == 4
    strict = stage(
        "--raw", str(bad_inputs), "--out", "s", "--params", "params.yaml", "--strict", "--no-progress", cwd=tmp_path
    )
    assert strict.returncode == 65 and "chesscore-failure: bad_input: --strict:" in strict.stderr
    assert "Traceback" not in strict.stderr and (tmp_path / "s" / REPORT).is_file()
    missing = stage("--raw", "nowhere", "--out", "m", "--no-progress", cwd=tmp_path)
    assert missing.returncode == 65 and "nowhere: no such file" in missing.stderr and "Traceback" not in missing.stderr
    helped = stage("--help", cwd=tmp_path)
    assert helped.returncode == 0 and "--workers" in helped.stdout


# The sample's README names each broken game's kind; the reason our rules give each kind.
SAMPLE_REASONS = {
    "illegal_move": "illegal_move",
    "null_move": "null_move",
    "truncated": "no_result",
    "truncated_eof": "no_result",
    "no_result": "no_result",
    "setup": "setup_position",
    "from_position": "setup_position",
    "chess960": "variant",
    "crazyhouse": "variant",
    "no_moves": "no_moves",
    "result_mismatch": "result_mismatch",
    "result_vs_board": "result_mismatch",
    "duplicate_site": "duplicate",
    "duplicate_moves": "duplicate",
    "non_utf8": "unparsable",
    "too_long": "too_long",
}


def test_embedded_sample_rejects_exactly_its_broken_games(tmp_path):
    table = (SAMPLE.parent / "README.md").read_text(encoding="utf-8").split("| index | Site id | kind | detail |")[1]
    broken = {
        int(cells[1]): (cells[2], cells[3])
        for line in table.splitlines()
        if len(cells := [c.strip() for c in line.split("|")]) > 4 and cells[1].isdigit()
    }
    report = run_validate([SAMPLE], tmp_path / "out", ValidateConfig())
    rejects = {r["game_index"]: r for r in read(tmp_path / "out", REJECTS)}
    for index, (site, kind) in broken.items():
        assert index in rejects, f"broken game {index} ({kind}) was accepted"
        assert rejects[index]["reason"] == SAMPLE_REASONS[kind], (index, kind, rejects[index])
        assert kind == "non_utf8" or rejects[index]["game_id"] == site
    others = {r["reason"] for i, r in rejects.items() if i not in broken}
    assert others <= {"filtered:termination", "too_short"}, others  # abandoned games and the like
    assert report["games_seen"] == report["accepted"] + report["rejected"] and report["accepted"] > 3000
    assert len(broken) >= 100 and report["file_errors"] == []
