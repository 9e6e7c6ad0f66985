"""SIGKILL of each real stage mid-way, then a rerun: no half-written file is ever visible under
its final name, and the rerun's outputs are byte-identical to the uninterrupted run's (on a copy
of the session's pipeline run, tests/pipeline_fixtures.py).

Train is killed mid-training (its checkpoints are written all along); every other stage writes its
outputs at its end, so it is killed there: as its second file is about to be renamed into place
(CHESSCORE_FAULT's kill-at-write), with the first one done and the second whole under its
temporary name only (a stage that builds a folder does that inside the folder's staging copy)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from chesscore.checkpoint import load
from chesscore.fileio import sha256_file
from tests.pipeline_fixtures import NOT_REPRODUCIBLE, STAGES, PipelineRun, copy_tree, dvc, output_files

pytestmark = pytest.mark.slow
TEMPORARY = re.compile(r"^\..*\.tmp$")  # chesscore.fileio.atomic_write's temporary names


def stage_outs(repo: Path, stage: str) -> list[dict]:
    return yaml.safe_load((repo / "dvc.lock").read_text())["stages"][stage]["outs"]


def files_under(repo: Path, outs: list[dict]) -> list[Path]:
    found = []
    for out in outs:
        path = repo / out["path"]
        found += (
            [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        )
    return found


def assert_complete(path: Path) -> None:
    """A file under a final name must be whole: it parses to its end as what its name says."""
    data = path.read_bytes()
    if path.suffix == ".json":
        json.loads(data)
    elif path.suffix == ".jsonl":
        assert data.endswith(b"\n"), path
        for line in data.splitlines():
            json.loads(line)
    elif path.suffix == ".pt":
        load(path)
    elif path.suffix == ".arrow":
        pa.ipc.open_file(pa.BufferReader(data)).read_all()
        assert path.stem.split("-")[-1] in (sha256_file(path), path.stem)  # content-addressed names hold
    else:  # .csv, .md, .pgn: text that ends its last line
        assert data.endswith(b"\n"), path


def dvc_repro_faulted(repo: Path, stage: str, fault: str) -> tuple[str, int]:
    """`dvc repro --force` of one stage under CHESSCORE_FAULT=stage:fault: DVC's output and exit code."""
    done = dvc(
        repo, "repro", "--force", "--single-item", stage, check=False, env={"CHESSCORE_FAULT": f"{stage}:{fault}"}
    )
    return done.stdout + done.stderr, done.returncode


def dvc_repro_killed(repo: Path, stage: str, delay: float, persist: list[Path]) -> tuple[str, str]:
    """`dvc repro --force` of one stage, SIGKILLed mid-way: train `delay` seconds in (if it
    finished first, on a faster machine, sooner), any other stage at its second write. Returns
    DVC's output and the fault that hit."""
    for _ in range(6):
        for path in persist:  # a resumable stage keeps these; the killed run starts afresh as the first did
            path.unlink(missing_ok=True)
        fault = f"kill-after={round(delay, 2):g}" if stage == "train" else "kill-at-write=2"
        output, code = dvc_repro_faulted(repo, stage, fault)
        if code != 0:
            return output, fault
        assert stage == "train", f"{stage} finished before its second write:\n{output[-2000:]}"
        delay = max(delay / 2, 0.01)
    raise AssertionError(f"{stage} always finished before the SIGKILL")


@pytest.mark.parametrize("stage", STAGES)
def test_sigkill_mid_stage_then_rerun_is_byte_identical(pipeline_run: PipelineRun, tmp_path: Path, stage: str) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    outs = stage_outs(repo, stage)
    persist = [repo / out["path"] for out in outs if (repo / out["path"]).suffix == ".pt"]
    output, fault = dvc_repro_killed(repo, stage, 0.3 * pipeline_run.seconds[stage], persist)
    assert f"injected fault {fault}" in output
    # -9 where DVC's shell execs the command, 137 (128 + SIGKILL) where the shell waits on it
    assert re.search(rf"failed to reproduce '{stage}'.*exited with (-9|137)\b", output), output[-2000:]

    left = files_under(repo, outs)
    temporaries = list((repo / "data").rglob(".*.tmp"))  # beside the outputs: files, or a folder's staging copy
    assert left or temporaries, f"{stage}: killed before it wrote anything, so nothing here was checked"
    for path in left:
        if TEMPORARY.match(path.name):
            continue  # a temporary name, never a final one
        relative = path.relative_to(repo).as_posix()
        if pipeline_run.outputs.get(relative) != sha256_file(path):
            assert_complete(path)  # not the final bytes: then a whole file of an earlier moment

    rerun = dvc(repo, "repro", "--force", "--single-item", stage)  # else DVC would restore its cached outputs
    assert f"Running stage '{stage}'" in rerun.stdout + rerun.stderr
    after = output_files(repo)
    mine = {p.relative_to(repo).as_posix() for p in files_under(repo, outs)}
    for path in sorted(mine):
        if NOT_REPRODUCIBLE.match(path):
            assert_complete(repo / path)
        else:
            assert after[path] == pipeline_run.outputs[path], f"{path} differs after kill + rerun"
    assert mine >= {
        p for p in pipeline_run.outputs if any(p == o["path"] or p.startswith(o["path"] + "/") for o in outs)
    }
    shutil.rmtree(repo)
