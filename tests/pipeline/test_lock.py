"""dvc.lock and the small uncached outputs of the demo run are committed, as DVC users commit
them (DVC's example-get-started does): a fresh clone then knows what `dvc pull` fetches and what
`dvc status` compares. This holds them current: dvc.lock must record every stage of dvc.yaml
with its command, its dependencies, its params' values and its outputs as dvc.yaml and
params.yaml say now, and each committed metric, plot or record must be the bytes dvc.lock names.
Code edits alone change only hashes (that is `dvc status`'s business, not a stale definition).

When this fails: `make lock` (runs `dvc repro`, then stages dvc.lock and data/ for the commit).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo

from chesscore.fileio import load_yaml
from tests.imports import PROJECT

REFRESH = "out of date with dvc.yaml/params.yaml: run `make lock` and commit"


@pytest.fixture(scope="module")
def definition() -> dict:
    """Every stage as DVC resolves dvc.yaml and params.yaml now (no run, nothing written); the
    stages of scale/dvc.yaml are not the demo's (the root reaches them only through
    convert.validated), so the demo's dvc.lock does not hold them."""
    root = PROJECT / "dvc.yaml"
    with Repo(str(PROJECT)) as repo:
        return {stage.name: stage for stage in repo.index.stages if Path(stage.path) == root}


@pytest.fixture(scope="module")
def lock() -> dict:
    path = PROJECT / "dvc.lock"
    assert path.is_file(), f"dvc.lock is missing: {REFRESH}"
    return load_yaml(path)["stages"]


def tracked() -> set[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT, capture_output=True, check=True).stdout
    return set(filter(None, listed.decode().split("\0")))


def test_every_stage_is_locked_as_defined(definition, lock):
    assert set(lock) == set(definition), f"stages differ: dvc.lock {REFRESH}"
    for name, stage in definition.items():
        entry = lock[name]
        assert entry["cmd"] == stage.cmd, f"{name}: command {REFRESH}"
        files = sorted(dep.def_path for dep in stage.deps if not isinstance(dep, ParamsDependency))
        assert sorted(dep["path"] for dep in entry.get("deps", [])) == files, f"{name}: deps {REFRESH}"
        params = {str(dep.def_path): dep.read_params() for dep in stage.deps if isinstance(dep, ParamsDependency)}
        assert entry.get("params", {}) == params, f"{name}: params {REFRESH}"
        outs = sorted(out.def_path for out in stage.outs)
        assert sorted(out["path"] for out in entry.get("outs", [])) == outs, f"{name}: outs {REFRESH}"


def test_the_committed_metrics_plots_and_records_are_the_locked_bytes(definition, lock):
    in_git = tracked()
    assert "dvc.lock" in in_git, "dvc.lock is not committed: `git add dvc.lock`"
    uncached = 0
    for name, stage in definition.items():
        md5 = {out["path"]: out.get("md5") for out in lock[name].get("outs", [])}
        for out in stage.outs:
            if out.use_cache:
                continue
            uncached += 1
            path = str(out.def_path)
            assert path in in_git, f"{path}: an uncached output of {name} that git does not track: {REFRESH}"
            digest = hashlib.md5((PROJECT / path).read_bytes()).hexdigest()
            assert digest == md5[path], f"{path}: not the bytes dvc.lock records: {REFRESH}"
    assert uncached >= 15  # the metrics, plots and records of every stage but convert
