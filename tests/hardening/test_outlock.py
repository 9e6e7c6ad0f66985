"""One writer per output folder (chesscore.cli.outlock) and no leaked temporary folders
(chesscore.runtime.locks.scratch_dir). The reproductions: two `stages.train --output X` at once both
exited 0, mixing their files; each killed self-play left a 3.7 MB folder of weights in /tmp."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

import pytest

from chesscore.cli import outlock
from chesscore.failures import MARKER
from chesscore.ingest.spool import spool_dir
from chesscore.runtime.locks import FileLock, is_locked, scratch_dir, sweep_scratch
from tests.hardening.pgnfiles import SAMPLE, process_tree
from tests.imports import PROJECT
from tests.inprocess import run_module


def _hold_in_child(out, seconds: float) -> subprocess.Popen:
    code = (
        "import sys, time; from chesscore.cli.outlock import hold_output; "
        f"hold_output({str(out)!r}, 'child'); print('held', flush=True); time.sleep({seconds})"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=PROJECT, stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    assert child.stdout.readline().strip() == "held"
    return child


@pytest.fixture
def held(tmp_path):
    """The output folder `out`, locked by another process as a running stage would hold it; its PID."""
    out = tmp_path / "out"
    child = _hold_in_child(out, 600)
    yield out, child.pid
    child.kill()
    child.wait()


STAGES = {
    "validate": lambda out, tmp: ["--raw", SAMPLE, "--out", out, "--no-progress"],
    "convert": lambda out, tmp: ["--validated", tmp / "validated", "--out", out, "--no-progress"],
    "train": lambda out, tmp: ["--output", out, "--dataset", tmp / "nowhere", "--model", "tiny"],
    "evaluate": lambda out, tmp: ["--out", out, "--dataset", tmp / "nowhere", "--checkpoint", tmp / "x.pt"],
    "arena": lambda out, tmp: ["--out", out, "--checkpoint", tmp / "x.pt", "--params", tmp / "p.yaml"],
    "selfplay": lambda out, tmp: ["--out", out, "--checkpoint", tmp / "x.pt", "--no-progress"],
}


@pytest.mark.parametrize("stage", STAGES)
def test_a_second_writer_of_an_output_folder_fails_at_once_naming_the_holder(held, tmp_path, stage):
    """Each stage run in this process (tests/inprocess.py), against the lock another one holds."""
    out, holder = held
    (tmp_path / "x.pt").write_bytes(b"not read: the lock comes first")
    (tmp_path / "p.yaml").write_text("arena:\n  opponents:\n    - {name: random, kind: random}\n")
    (tmp_path / "validated").mkdir()
    for name in ("games.arrow", "inputs.json", "report.json"):  # convert checks they exist, then locks
        (tmp_path / "validated" / name).write_bytes(b"not read: the lock comes first")
    started = time.monotonic()
    run = run_module(f"stages.{stage}", *STAGES[stage](out, tmp_path), cwd=tmp_path)
    assert run.returncode == 75, run.stderr[-1500:]
    assert f"{MARKER} temporary: {out}: another run is writing this folder (PID {holder}" in run.stderr
    assert "(child) since" in run.stderr and "Traceback" not in run.stderr
    assert time.monotonic() - started < 60
    assert not out.exists()  # nothing written by the refused run


def test_a_killed_holder_releases_the_lock(tmp_path):
    out = tmp_path / "out"
    child = _hold_in_child(out, 600)
    assert is_locked(outlock.lock_path(out)) and f"PID {child.pid}" in FileLock.holder(outlock.lock_path(out))
    with pytest.raises(outlock.OutputLocked, match=f"PID {child.pid} on .* \\(child\\)"):
        outlock.hold_output(out, "test")
    child.send_signal(signal.SIGKILL)  # as the OOM killer would: no cleanup runs
    child.wait()
    outlock.hold_output(out, "test")  # the kernel released it
    outlock.release_output(out)


def _has_open(pid: int, path: Path) -> bool:
    """Whether process `pid` holds `path` open (its /proc/PID/fd links)."""
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            if os.path.realpath(os.readlink(fd)) == os.path.realpath(path):
                return True
        except OSError:
            continue  # closed meanwhile
    return False


def test_a_second_run_waits_for_the_first_when_asked(tmp_path):
    out = tmp_path / "out"
    first = _hold_in_child(out, 600)  # holds the folder until it is stopped
    command = [sys.executable, "-m", "stages.validate", "--raw", str(SAMPLE), "--out", str(out), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT), outlock.WAIT_ENV: "120"}
    second = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _has_open(second.pid, outlock.lock_path(out)):  # it has reached the lock the first one holds
        assert second.poll() is None and time.monotonic() < deadline, second.communicate()[1][-1500:]
        time.sleep(0.05)
    time.sleep(0.5)
    assert second.poll() is None  # waiting, not failing
    first.terminate()
    first.wait()
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err[-1500:]
    assert (out / "games.arrow").is_file()


def test_the_next_run_removes_what_a_killed_run_left(tmp_path):
    out = tmp_path / "out"
    (out / "plots").mkdir(parents=True)
    left = [
        out / ".metrics.json.k3j2h1.tmp",  # atomic_write's temporary file
        out / "plots" / ".train_loss.csv.a1b2.tmp",
        out / ".dataset.tmp" / "shards" / "x.arrow",  # a staged sub-folder (self-play's dataset)
        tmp_path / ".out.tmp" / "games.arrow",  # staging_dir beside the folder
        tmp_path / ".out.old" / "games.arrow",  # replace_dir's previous folder
    ]
    for path in left:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    (out / "keep.json").write_text("{}")
    removed = outlock.hold_output(out, "test")
    outlock.release_output(out)
    assert {p.name for p in removed} == {
        ".metrics.json.k3j2h1.tmp",
        ".train_loss.csv.a1b2.tmp",
        ".dataset.tmp",
        ".out.tmp",
        ".out.old",
    }
    assert not any(path.exists() for path in left) and (out / "keep.json").is_file()


@pytest.mark.slow
def test_a_killed_self_play_leaves_no_weights_behind(tmp_path):
    """A real SelfPlayPool in a child process, killed while it holds its weights' folder: its
    worker dies with it (it used to wait on its own pipe forever, 360 MB of torch), and the next
    pool (the lock file made to look old, as after a real crash) sweeps the folder."""
    code = (
        "import sys, time, torch; from chesscore.selfplay.parallel import SelfPlayPool; "
        "from chesscore.selfplay.games import SelfPlayConfig; from chesscore.model import GPT, CONFIGS; "
        f"import tempfile; tempfile.tempdir = {str(tmp_path)!r}; "
        "pool = SelfPlayPool(workers=1); pool.play(GPT(CONFIGS['tiny']).eval(), None, SelfPlayConfig(games=2, "
        "max_plies=4)); print('played', flush=True); time.sleep(600)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "played"
    [folder] = [p for p in tmp_path.glob("chesscore-selfplay-*") if p.is_dir()]
    assert any(folder.glob("model-*.pt"))
    workers = process_tree(child.pid)[1:]
    assert workers  # the pool's worker process
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers), "an orphan worker waits forever"
    assert folder.is_dir()  # the leak the issue found
    lock = folder.with_name(folder.name + ".lock")
    os.utime(lock, (time.time() - 60, time.time() - 60))
    with scratch_dir("chesscore-selfplay-", tmp_path) as fresh:
        assert not folder.exists() and not lock.exists() and fresh.is_dir()
    assert list(tmp_path.iterdir()) == []


def test_a_live_owners_scratch_folder_is_never_swept(tmp_path):
    with scratch_dir("chesscore-x-", tmp_path) as folder:
        lock = folder.with_name(folder.name + ".lock")
        os.utime(lock, (time.time() - 3600, time.time() - 3600))
        assert sweep_scratch("chesscore-x-", tmp_path) == [] and folder.is_dir()


def test_a_killed_validate_takes_its_worker_processes_with_it(tmp_path):
    """...and its spool folder (the inflated ranges of a compressed input) goes with the next run."""
    big, temp = tmp_path / "big.pgn.zst", tmp_path / "temp"
    big.write_bytes(SAMPLE.read_bytes() * 4)  # four frames: four times the work
    temp.mkdir()
    command = [sys.executable, "-m", "stages.validate", "--raw", big, "--out", tmp_path / "out", "--workers", "2"]
    child = subprocess.Popen(
        [*map(str, command), "--no-progress"],
        cwd=PROJECT,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    deadline = time.monotonic() + 60
    while len(workers := process_tree(child.pid)[1:]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(workers) >= 2 and child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 20
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    outlock.hold_output(tmp_path / "out", "test")  # free, and the next run sweeps the rest
    outlock.release_output(tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "big.pgn.zst", "temp"]
    [spool] = [p for p in temp.glob("chesscore-spool-*") if p.is_dir()]  # the killed run's
    lock = spool.with_name(spool.name + ".lock")
    os.utime(lock, (time.time() - 60, time.time() - 60))  # as after a real crash: not one being set up
    with patch.object(tempfile, "tempdir", str(temp)), spool_dir() as fresh:
        assert not spool.exists() and not lock.exists() and fresh.parent == temp
    assert list(temp.iterdir()) == []
