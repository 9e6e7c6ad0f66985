"""dvc_md5 against DVC itself: a folder dependency holding files that `.dvcignore` files ignore
(bytecode caches, as every code folder gets once it is imported) hashes to what DVC records."""

from __future__ import annotations

from pathlib import Path

import pytest

from chesscore.fileio import load_yaml
from chesscore.lineage.dvc_lock import dvc_md5
from tests.pipeline_fixtures import dvc, init_repo

DEP = "pkg/code"


def recorded_md5(repo: Path, dep: str) -> str:
    [stage] = load_yaml(repo / "dvc.lock")["stages"].values()
    return next(d["md5"] for d in stage["deps"] if d["path"] == dep)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / ".dvcignore").write_text("# caches\n__pycache__/\n*.pyc\n")
    code = repo / "pkg" / "code"
    (code / "sub").mkdir(parents=True)
    (code / "a.py").write_text("A = 1\n")
    (code / "sub" / "b.py").write_text("B = 2\n")
    # A nested one, its patterns relative to pkg/ (DVC refuses one inside a folder it hashes).
    (repo / "pkg" / ".dvcignore").write_text("code/sub/*.tmp\n")
    (repo / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: python -c \"open('out.txt', 'w').write('x')\"\n"
        f"    deps: [{DEP}]\n    outs: [out.txt]\n"
    )
    dvc(repo, "repro", "-q")
    return repo


def test_ignored_files_do_not_count_as_dvc_ignores_them(repo: Path) -> None:
    code = repo / DEP
    clean = dvc_md5(code)
    assert clean == recorded_md5(repo, DEP)
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (code / "sub" / "stray.pyc").write_bytes(b"\x00")
    (code / "sub" / "scratch.tmp").write_text("scratch\n")
    assert dvc_md5(code) == clean
    assert "up to date" in dvc(repo, "status", "s").stdout  # DVC agrees: nothing changed


def test_a_file_that_is_not_ignored_changes_the_hash(repo: Path) -> None:
    code = repo / DEP
    (code / "scratch.tmp").write_text("not under sub/, so the nested rule does not reach it\n")
    assert dvc_md5(code) != recorded_md5(repo, DEP)
    dvc(repo, "repro", "-q")
    assert dvc_md5(code) == recorded_md5(repo, DEP)
