"""Bad input stops where it enters: an input folder without PGN files, inputs of which not one
game is accepted, and a split left without a game fail validate or convert with exit 65 and a
message naming the folder or split, so no later stage ever sees them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.inprocess import run_module
from tests.sample import ROOT, sample_pgn

FIXTURES = ROOT / "tests" / "fixtures"


def stage(name: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_module(
        f"stages.{name}", "--params", "none.yaml", *args, "--no-progress", cwd=cwd, env={"PATH": "/usr/bin:/bin"}
    )


def failed_as_bad_input(done: subprocess.CompletedProcess, *phrases: str) -> str:
    assert done.returncode == 65, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("chesscore-failure: bad_input:"), done.stderr
    for phrase in phrases:
        assert phrase in last, last
    return last


def test_an_input_folder_without_pgn_files(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "notes.txt").write_text("not a dump\n")
    done = stage("validate", tmp_path, "--raw", "raw", "--out", "validated")
    failed_as_bad_input(done, "raw: no PGN file", "*.pgn.zst", "validate.raw")
    assert not (tmp_path / "validated").exists()
    missing = stage("validate", tmp_path, "--raw", "nowhere", "--out", "validated")
    failed_as_bad_input(missing, "nowhere: no such file or folder")


def test_inputs_with_no_acceptable_game(tmp_path):
    (tmp_path / "raw").mkdir()
    shutil.copy(FIXTURES / "variants.pgn", tmp_path / "raw")  # three variant games, one unparsable
    done = stage("validate", tmp_path, "--raw", "raw", "--out", "validated")
    failed_as_bad_input(done, "raw: no game accepted of 4 seen", "variant 3", "validated/rejects.arrow")
    assert (tmp_path / "validated" / "rejects.arrow").is_file()  # written first: it says why
    # convert refuses the same folder on its own, before writing anything
    converted = stage("convert", tmp_path, "--validated", "validated", "--out", "dataset")
    failed_as_bad_input(converted, "validated: no accepted game to convert")
    assert not (tmp_path / "dataset").exists()


def test_a_split_without_a_game(tmp_path):
    lichess = sample_pgn()
    ends = [i for i in range(len(lichess)) if lichess.startswith(b'\n\n[Event "', i)][:4]
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "four.pgn").write_bytes(lichess[: ends[3] + 2])  # the sample's first four games
    assert stage("validate", tmp_path, "--raw", "raw", "--out", "validated").returncode == 0
    done = stage("convert", tmp_path, "--validated", "validated", "--out", "dataset")
    last = failed_as_bad_input(done, "validated: the ", "split", "games accepted", "in params.yaml")
    assert "convert.validation" in last or "convert.test" in last
    assert not (tmp_path / "dataset").exists()
