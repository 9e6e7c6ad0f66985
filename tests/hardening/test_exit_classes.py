"""Every failure of the data stages is classified (chesscore.failures): bad input exits 65 naming
the file, a full disk exits 75 (retryable) with nothing partial left, and neither is a traceback.
The full disk is real: the stage runs under RLIMIT_FSIZE, so its writes fail with EFBIG as they
would with ENOSPC (both are `exhausted` errors), whoever runs the tests (root included). Runs
that need no limit of their own run in this process (tests/inprocess.py)."""

from __future__ import annotations

import errno
import json
import os
import resource

import pytest

from chesscore import failures
from chesscore.fileio import DiskFull, atomic_write_bytes, staging_dir
from tests.hardening.pgnfiles import SAMPLE, limit_file_size, random_games, run_stage
from tests.inprocess import run_module


def marker(run) -> str:
    lines = [line for line in run.stderr.splitlines() if line.startswith(failures.MARKER)]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def test_an_input_that_cannot_be_read_exits_65_naming_it(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.pgn").write_text(random_games(2))
    (raw / "b.pgn").symlink_to("/proc/self/mem")  # a real EIO on read, for any user
    run = run_module("stages.validate", "--raw", raw, "--out", tmp_path / "out", "--no-progress")
    assert run.returncode == 65 and f"bad_input: {raw / 'b.pgn'}: cannot read this input" in marker(run)
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.tmp").exists()


def test_a_broken_link_in_the_input_folder_exits_65_naming_it(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.pgn").write_text(random_games(2))
    (raw / "gone.pgn.zst").symlink_to(tmp_path / "nowhere.pgn.zst")
    run = run_module("stages.validate", "--raw", raw, "--out", tmp_path / "out", "--no-progress")
    assert run.returncode == 65 and f"{raw / 'gone.pgn.zst'}: not a readable file" in marker(run)


@pytest.mark.parametrize("stage", ["validate", "convert"])
def test_a_full_disk_exits_75_and_leaves_the_previous_output_and_no_temp(tmp_path, stage):
    validated, out = tmp_path / "validated", tmp_path / stage
    first = run_module("stages.validate", "--raw", SAMPLE, "--out", validated, "--no-progress")
    assert first.returncode == 0, first.stderr
    args = ["--raw", SAMPLE, "--out", out] if stage == "validate" else ["--validated", validated, "--out", out]
    assert run_module(f"stages.{stage}", *args, "--no-progress").returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    full = run_stage(f"stages.{stage}", *args, "--no-progress", limits=limit_file_size(64 << 10))
    assert full.code == 75 and f"temporary: {out}:" in marker(full)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))  # the outputs' locks stay
    assert left == sorted({"validated", stage})  # no .<name>.tmp


def test_a_damaged_validated_games_file_exits_65_naming_it(tmp_path):
    validated = tmp_path / "validated"
    assert run_module("stages.validate", "--raw", SAMPLE, "--out", validated, "--no-progress").returncode == 0
    games = validated / "games.arrow"
    data = bytearray(games.read_bytes())
    games.write_bytes(bytes(data[: len(data) // 2]))  # truncated: no footer
    run = run_module("stages.convert", "--validated", validated, "--out", tmp_path / "d", "--no-progress")
    assert run.returncode == 65 and f"bad_input: {games}: not an Arrow IPC file" in marker(run)
    (validated / "inputs.json").write_text(json.dumps({"inputs": "x"}))
    run = run_module("stages.convert", "--validated", validated, "--out", tmp_path / "d", "--no-progress")
    assert run.returncode == 65 and "inputs.json: not a validate stage's inputs.json" in marker(run)


def test_exhausted_os_errors_are_temporary_and_others_are_bugs():
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENOMEM):
        assert failures.classify(OSError(code, os.strerror(code))) is failures.Temporary
    assert failures.classify(OSError(errno.EACCES, "Permission denied")) is None
    assert failures.classify(DiskFull("x")) is failures.Temporary


def test_atomic_write_and_staging_leave_nothing_when_the_disk_fills(tmp_path):
    def full(_):
        raise OSError(errno.ENOSPC, "No space left on device")

    from chesscore import fileio

    with pytest.raises(DiskFull, match="x.bin: No space left on device"):
        fileio.atomic_write(tmp_path / "x.bin", full)
    atomic_write_bytes(tmp_path / "y.bin", b"old")
    with pytest.raises(DiskFull, match="out: No space left"), staging_dir(tmp_path / "out") as tmp:
        (tmp / "part").write_bytes(b"half")
        full(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.bin"]


def limit_memory(nbytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))

    return apply


def test_out_of_memory_is_a_retryable_exit_with_nothing_partial_left(tmp_path):
    """Real memory exhaustion: the address space is capped a little above what the stage needs
    for a tiny input, and the input needs ~300 MB more (a game of 2M plies). Python's
    MemoryError exits 75; the Rust parser aborts (SIGABRT, 134): both are retryable for the
    flow (failures.is_retryable_exit). The output folder is untouched; the next run succeeds and
    removes the killed run's temporary folder."""
    (tmp_path / "tiny.pgn").write_text(random_games(1))
    tiny = run_stage("stages.validate", "--raw", tmp_path / "tiny.pgn", "--out", tmp_path / "t", "--no-progress")
    assert tiny.code == 0 and tiny.peak_vm_mib > 0
    shuffle = "Nf3 Nf6 Ng1 Ng8 " * ((8 << 20) // 16 - 20)
    (tmp_path / "dense.pgn").write_text(f'[Event "x"]\n[Result "1/2-1/2"]\n\n1. e4 e5 {shuffle}1/2-1/2\n\n')
    out = tmp_path / "out"
    limit = int((tiny.peak_vm_mib + 64) * (1 << 20))
    run = run_stage("stages.validate", "--raw", tmp_path / "dense.pgn", "--out", out, limits=limit_memory(limit))
    assert failures.is_retryable_exit(run.code) and run.code != 0, (run.code, run.stderr[-800:])
    assert "Traceback" not in run.stderr
    assert not out.exists()
    again = run_stage("stages.validate", "--raw", tmp_path / "dense.pgn", "--out", out, "--no-progress")
    # Its one game is too long for the context: no game accepted is bad input, after writing it all.
    assert again.code == failures.BAD_INPUT and "no game accepted of 1 seen (too_long 1)" in again.stderr
    assert (out / "games.arrow").is_file()
    assert not (tmp_path / ".out.tmp").exists()


def test_atomic_write_flushes_the_file_then_its_folder(tmp_path, monkeypatch):
    """The rename lives in the folder: without an fsync of the folder a power loss may lose the
    newest name (the reproduction: atomic_write renamed without one)."""
    from chesscore import fileio

    synced, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src, dst):
        synced.append(("rename", os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    monkeypatch.setattr(fileio.os, "replace", replace)
    atomic_write_bytes(tmp_path / "x.bin", b"new")
    assert synced[0].startswith(str(tmp_path / ".x.bin.")) and synced[0].endswith(".tmp")
    assert synced[1:] == [("rename", str(tmp_path / "x.bin")), str(tmp_path)]
