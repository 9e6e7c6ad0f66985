"""SIGKILL of each real stage mid-way, then a rerun: no half-written file is ever visible under
its final name, and the rerun's outputs are byte-identical to the uninterrupted run's (on a copy
of the session's pipeline run, tests/pipeline_fixtures.py).

Each stage but train writes its outputs at its end, so it is killed there: as its second file is
about to be renamed into place (CHESSCORE_FAULT's kill-at-write), with the first one done and the
second whole under its temporary name only (a stage that builds a folder does that inside the
folder's staging copy). Train, which writes its checkpoints all along, has its own two: killed at a
random moment, its rerun resumes to the uninterrupted run's bytes (tests/train/test_cli.py), and
under `dvc repro`, with DVC killed too, the next `dvc repro` resumes it (tests/train/test_dvc.py)."""

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
from tests.pipeline_fixtures import STAGES, PipelineRun, copy_tree, dvc, output_files

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


@pytest.mark.parametrize("stage", [stage for stage in STAGES if stage != "train"])
def test_sigkill_mid_stage_then_rerun_is_byte_identical(pipeline_run: PipelineRun, tmp_path: Path, stage: str) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    outs = stage_outs(repo, stage)
    for out in outs:  # self-play resumes from its rl.pt: the killed run starts afresh, as the first did
        if out["path"].endswith(".pt"):
            (repo / out["path"]).unlink(missing_ok=True)
    output, code = dvc_repro_faulted(repo, stage, "kill-at-write=2")
    assert code != 0, f"{stage} finished before its second write:\n{output[-2000:]}"
    assert "injected fault kill-at-write=2" in output
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
    for path in sorted(mine):  # every output, records included: times go to run.json, not an output
        assert after[path] == pipeline_run.outputs[path], f"{path} differs after kill + rerun"
    assert mine >= {
        p for p in pipeline_run.outputs if any(p == o["path"] or p.startswith(o["path"] + "/") for o in outs)
    }
    shutil.rmtree(repo)
