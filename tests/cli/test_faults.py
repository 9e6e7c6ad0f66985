"""Fault injection (chesscore/cli/faults.py) and the stage exit-code convention (chesscore/failures.py),
with real processes; and the orchestrator's reading of real `dvc repro` failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chesscore import failures
from chesscore.cli import faults
from flows import dvc_stages

# A stage under the convention; what it does is chosen by its first argument.
STAGE = """
import sys
from chesscore import failures
from chesscore.cli.runner import run_stage
from chesscore.data.dataset import IntegrityError

def main():
    what = sys.argv[1]
    if what == "integrity":
        raise IntegrityError("data/dataset/shards/x.arrow: sha256 differs from the manifest")
    if what == "refused":
        raise failures.Refused("resume refused: identity differs in keys seed, lr")
    if what == "memory":
        raise MemoryError()
    if what == "bug":
        raise ZeroDivisionError("division by zero")
    print("worked")
    return 0

run_stage("toy", main)
"""


def run_stage(tmp_path: Path, what: str, **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "stage.py"
    script.write_text(STAGE)
    return subprocess.run(
        [sys.executable, str(script), what],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", **env},
    )


@pytest.mark.parametrize(
    "what, code, kind",
    [
        ("integrity", failures.BAD_INPUT, "bad_input"),
        ("refused", failures.REFUSED, "refused"),
        ("memory", failures.TEMPORARY, "temporary"),
    ],
)
def test_expected_failures_exit_with_their_code_and_a_marker(tmp_path: Path, what: str, code: int, kind: str) -> None:
    done = run_stage(tmp_path, what)
    assert done.returncode == code
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{failures.MARKER} {kind}: ")
    assert "Traceback" not in done.stderr  # an expected failure is a message, not a traceback


def test_a_bug_keeps_its_traceback_and_exits_1(tmp_path: Path) -> None:
    done = run_stage(tmp_path, "bug")
    assert done.returncode == 1
    assert "ZeroDivisionError" in done.stderr and "Traceback" in done.stderr
    assert failures.MARKER not in done.stderr


def test_faults_fire_for_their_stage_only_and_once(tmp_path: Path) -> None:
    assert run_stage(tmp_path, "ok", CHESSCORE_FAULT="other:exit=75").returncode == 0
    once = tmp_path / "once"
    env = {"CHESSCORE_FAULT": "toy:kill", "CHESSCORE_FAULT_ONCE": str(once)}
    assert run_stage(tmp_path, "ok", **env).returncode == -9
    assert (once / "toy").exists()
    again = run_stage(tmp_path, "ok", **env)
    assert again.returncode == 0 and again.stdout == "worked\n"
    assert run_stage(tmp_path, "ok", CHESSCORE_FAULT="*:exit=75").returncode == 75
    assert run_stage(tmp_path, "ok", CHESSCORE_FAULT="toy:oom").returncode == failures.TEMPORARY
    assert run_stage(tmp_path, "ok", CHESSCORE_FAULT="toy:bad-input").returncode == failures.BAD_INPUT


def run_script(tmp_path: Path, source: str, fault: str) -> subprocess.CompletedProcess:
    """A stage script run in tmp_path under CHESSCORE_FAULT=fault."""
    script = tmp_path / "script.py"
    script.write_text(source)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"CHESSCORE_FAULT": fault},
    )


def test_kill_after_kills_mid_way(tmp_path: Path) -> None:
    source = "import time\nfrom chesscore.cli.runner import run_stage\ndef main():\n    time.sleep(30)\n"
    done = run_script(tmp_path, source + "run_stage('slow', main)\n", "slow:kill-after=0.5")
    assert done.returncode == -9
    assert "injected fault kill-after=0.5" in done.stderr


def test_kill_at_write_kills_as_that_file_is_renamed_into_place(tmp_path: Path) -> None:
    source = (
        "from chesscore.cli.runner import run_stage\nfrom chesscore.fileio import atomic_write_text\n"
        "def main():\n    for name in 'abc':\n        atomic_write_text(name + '.txt', name * 1000)\n"
    )
    done = run_script(tmp_path, source + "run_stage('writes', main)\n", "writes:kill-at-write=2")
    assert done.returncode == -9 and "injected fault kill-at-write=2" in done.stderr
    assert (tmp_path / "a.txt").read_text() == "a" * 1000  # the first file is done
    assert not (tmp_path / "b.txt").exists() and not (tmp_path / "c.txt").exists()
    [partial] = tmp_path.glob(".b.txt.*.tmp")  # the second, whole, under its temporary name only
    assert partial.read_text() == "b" * 1000


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("train", "bad rule"),
        ("train:explode", "bad rule"),
        ("train:exit", "needs =<value>"),
        ("train:kill=3", "takes no =<value>"),
        ("train:kill-after=soon", "is not a number"),
        ("train:kill-at-write", "needs =<value>"),
        ("train:kill-at-write=0", "counts files from 1"),
        ("train:kill-at-write=1.5", "counts files from 1"),
    ],
)
def test_malformed_fault_rules_are_errors(spec: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        faults.parse(spec)


def test_several_rules() -> None:
    assert faults.parse("train:kill-after=2.5, *:exit=75") == [
        faults.Fault("train", "kill-after", 2.5),
        faults.Fault("*", "exit", 75.0),
    ]


@pytest.mark.parametrize(
    "code, retryable",
    [(0, False), (1, False), (2, False), (65, False), (78, False), (75, True), (-9, True), (137, True), (143, True)],
)
def test_which_exit_codes_are_worth_a_retry(code: int, retryable: bool) -> None:
    assert failures.is_retryable_exit(code) is retryable


def test_classify_reads_real_dvc_output() -> None:
    # The exact lines DVC 3 prints for a failed command and for a held lock.
    exited = [
        "> python -m stages.convert",
        f"{failures.MARKER} bad_input: data/raw/x.pgn: not a PGN file",
        "ERROR: failed to reproduce 'convert': failed to run: python -m stages.convert, exited with 65",
    ]
    failure = dvc_stages.classify(255, exited)
    assert (failure.kind, failure.retryable, failure.exit_code) == ("bad_input", False, 65)
    assert failure.message == "data/raw/x.pgn: not a PGN file"
    killed = ["ERROR: failed to reproduce 'train': failed to run: python -m stages.train, exited with -9"]
    assert dvc_stages.classify(255, killed).kind == "killed" and dvc_stages.classify(255, killed).retryable
    busy = [
        "ERROR: failed to reproduce 'train': '/repo/data/train' is busy, it is being blocked by:",
        "  (PID 10097): dvc repro",
    ]
    assert dvc_stages.classify(255, busy).kind == "lock" and dvc_stages.classify(255, busy).retryable
    bug = [
        "> python -m stages.train",
        "Traceback (most recent call last):",
        "ZeroDivisionError: division by zero",
        "ERROR: failed to reproduce 'train': failed to run: python -m stages.train, exited with 1",
    ]
    assert dvc_stages.classify(255, bug) == dvc_stages.Failure("bug", False, "ZeroDivisionError: division by zero", 1)
    unknown = ["ERROR: unexpected error - something inside DVC"]
    assert dvc_stages.classify(255, unknown) == dvc_stages.Failure("dvc", False, unknown[0], None)
