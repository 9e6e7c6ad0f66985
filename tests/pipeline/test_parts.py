"""Per-file validation under DVC, in a real repository (a snapshot of the project): 3 synthetic
months through scale/dvc.yaml's part@NAME stages and the merge give convert the same bytes as the
validate stage over the same folder; a 4th month reruns only its part, the merge and convert.
(Every case of tests/months.py is in month 2 on: the duplicates across files, and the old id
over moves the month has again later; the merge's scale is bench/merge.py's.)"""

from __future__ import annotations

import filecmp
import re
import sys
from pathlib import Path

import pytest

from chesscore.pipeline import profile
from tests.months import write_months
from tests.pipeline_fixtures import commit, dvc, run, snapshot

pytestmark = pytest.mark.slow

VALIDATED = ("games.arrow", "rejects.arrow", "inputs.json", "report.json", "metrics.json")


def ran_and_skipped(output: str) -> tuple[set[str], set[str]]:
    ran = set(re.findall(r"Running stage '([^']+)'", output))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change, skipping", output))
    return ran, skipped


def same_tree(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    return files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) and all(
        filecmp.cmp(a / f, b / f, shallow=False) for f in files
    )


def single_stage(repo: Path, out: str) -> None:
    """The validate and convert stages over the whole months folder, as today's single stage."""
    python = sys.executable
    run([python, "-m", "stages.validate", "--raw", "data/months", "--out", f"{out}/validated", "--no-progress"], repo)
    command = ["--validated", f"{out}/validated", "--out", f"{out}/dataset", "--no-progress"]
    run([python, "-m", "stages.convert", *command], repo)


def test_three_months_then_a_fourth(tmp_path: Path) -> None:
    repo = snapshot(tmp_path / "repo")
    write_months(repo / "data" / "months", count=3, games=30)
    months = [f"m{k:02d}" for k in range(1, 4)]
    profile.apply(
        {"merge.months": months, "merge.into": ["data/merged"], "convert.validated": "data/merged"},
        repo / "params.yaml",
    )
    commit(repo, "three months")

    first = dvc(repo, "repro", "convert")
    ran, _ = ran_and_skipped(first.stdout)
    assert ran == {*(f"scale/dvc.yaml:part@{m}" for m in months), "scale/dvc.yaml:merge@data/merged", "convert"}, (
        first.stdout
    )
    single_stage(repo, "single")
    for name in VALIDATED:
        assert filecmp.cmp(repo / "data/merged" / name, repo / "single/validated" / name, shallow=False), name
    assert same_tree(repo / "data/dataset", repo / "single/dataset")

    write_months(repo / "data" / "months", count=1, games=30, first=4)
    profile.apply({"merge.months": [*months, "m04"]}, repo / "params.yaml")
    second = dvc(repo, "repro", "convert")
    ran, skipped = ran_and_skipped(second.stdout)
    assert ran == {"scale/dvc.yaml:part@m04", "scale/dvc.yaml:merge@data/merged", "convert"}, second.stdout
    assert skipped == {f"scale/dvc.yaml:part@{m}" for m in months}, second.stdout
    single_stage(repo, "single4")
    for name in VALIDATED:
        assert filecmp.cmp(repo / "data/merged" / name, repo / "single4/validated" / name, shallow=False), name
    assert same_tree(repo / "data/dataset", repo / "single4/dataset")
    assert not same_tree(repo / "single/dataset", repo / "single4/dataset")  # the 4th month is in it
