"""The lineage audit on a real pipeline run (tests/pipeline_fixtures.py): every kind of artifact
audits OK back to the raw dump, and each kind of damage is reported at the node it happened."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chesscore.lineage import audit as lineage
from chesscore.lineage.dvc_lock import dvc_md5
from chesscore.pipeline import profile
from tests.inprocess import run_module
from tests.pipeline_fixtures import BIN, PipelineRun, copy_tree, run

pytestmark = pytest.mark.slow
RAW = "data/raw/lichess_sample.pgn.zst"


def nodes(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield tree
    for child in tree["children"]:
        yield from nodes(child)


def find(tree: dict[str, Any], label_start: str) -> list[dict[str, Any]]:
    return [node for node in nodes(tree) if node["label"].startswith(label_start)]


def audit(repo: Path, path: str) -> dict[str, Any]:
    return lineage.audit(path, repo).to_dict()


@pytest.fixture(scope="module")
def damaged(pipeline_run: PipelineRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the run for the damage tests; each test undoes its own damage."""
    return copy_tree(pipeline_run.repo, tmp_path_factory.mktemp("lineage") / "repo")


@pytest.mark.parametrize(
    "artifact, kind",
    [
        ("data/train/best.pt", "checkpoint"),
        ("data/evaluate/metrics.json", "report"),
        ("data/evaluate/report.md", "report"),
        ("data/arena/arena.json", "report"),
        ("data/dataset", "dataset"),
        ("data/selfplay", "self-play output"),
        ("data/selfplay/rl.pt", "checkpoint"),
    ],
)
def test_a_clean_run_audits_ok_back_to_the_raw_dump(pipeline_run: PipelineRun, artifact: str, kind: str) -> None:
    tree = audit(pipeline_run.repo, artifact)
    assert tree["label"] == f"{artifact}  [{kind}]"
    bad = [node for node in nodes(tree) if node["status"] != "OK"]
    assert not bad, bad
    raw = find(tree, f"{RAW}  [input]")
    assert raw and all(node["status"] == "OK" for node in raw)
    assert any("sha256 as in data/dataset/manifest.json" in node["detail"] for node in raw) or any(
        "sha256 as in data/validated/inputs.json" in node["detail"] for node in raw
    )
    stages = {node["label"].split()[1] for node in find(tree, "stage ")}
    assert {"validate", "convert"} <= stages  # walked back through dvc.lock to the first stage


def test_the_cli_prints_the_tree_and_json(pipeline_run: PipelineRun) -> None:
    done = run([str(BIN / "chesscore"), "lineage", "audit", "data/evaluate/metrics.json"], pipeline_run.repo)
    assert done.stdout.splitlines()[0] == "OK       data/evaluate/metrics.json  [report]"
    assert "└── " in done.stdout and f"OK       {RAW}  [input]" in done.stdout
    done = run_module("chesscore.lineage", "audit", "data/train/best.pt", "--json", cwd=pipeline_run.repo)
    report = json.loads(done.stdout)  # (the module's entry point, run in this process: tests/inprocess.py)
    assert report["ok"] is True and report["problems"] == 0


def test_a_flipped_byte_in_a_shard_is_a_mismatch_at_that_shard(damaged: Path) -> None:
    manifest = json.loads((damaged / "data/dataset/manifest.json").read_text())
    shard = damaged / "data/dataset" / manifest["shards"][0]["path"]
    original = shard.read_bytes()
    shard.chmod(0o644)
    try:
        shard.write_bytes(original[:100] + bytes([original[100] ^ 1]) + original[101:])
        tree = audit(damaged, "data/evaluate/metrics.json")
        [node] = find(tree, f"shard {manifest['shards'][0]['path']}")
        assert node["status"] == "MISMATCH" and "manifest.json says" in node["detail"]
        assert all(n["status"] == "OK" for n in find(tree, f"{RAW}  [input]"))  # the raw dump is fine
        assert all(n["status"] == "OK" for n in find(tree, "manifest fingerprint"))
    finally:
        shard.write_bytes(original)
    assert audit(damaged, "data/evaluate/metrics.json")["status"] == "OK"


def test_a_replaced_raw_file_is_a_mismatch_at_the_raw_input(damaged: Path) -> None:
    raw = damaged / RAW
    saved = damaged / "saved.zst"
    shutil.copy2(raw, saved)
    try:
        raw.write_bytes(raw.read_bytes()[::-1])
        tree = audit(damaged, "data/train/best.pt")
        raw_nodes = find(tree, f"{RAW}  [input]")
        assert raw_nodes and all(node["status"] == "MISMATCH" for node in raw_nodes)
        assert [n["status"] for n in find(tree, "data/raw  [input]")] == ["MISMATCH"]  # DVC's folder hash too
        assert all(n["status"] == "OK" for n in find(tree, "shards:"))  # what was made from it is intact
    finally:
        shutil.move(saved, raw)
    assert dvc_md5(raw.parent) is not None and audit(damaged, "data/train/best.pt")["status"] == "OK"


def test_a_params_value_edited_after_the_run_is_a_mismatch_at_that_key(damaged: Path) -> None:
    params = damaged / "params.yaml"
    original = params.read_text()
    try:
        profile.apply({"train.lr": 0.123}, params)
        tree = audit(damaged, "data/evaluate/metrics.json")
        [key] = find(tree, "train.lr")
        assert key["status"] == "MISMATCH" and key["detail"] == "0.123 in params now, 0.002 when the stage ran"
        changed = [n["label"] for n in find(tree, "params:") if n["status"] != "OK"]
        assert len(changed) == 1 and changed[0].startswith("params: 1 of ")  # train's; the others' are OK
    finally:
        params.write_text(original)


def test_a_missing_checkpoint_is_reported_missing(damaged: Path) -> None:
    checkpoint = damaged / "data/train/best.pt"
    saved = damaged / "saved.pt"
    shutil.move(checkpoint, saved)
    try:
        tree = audit(damaged, "data/evaluate/metrics.json")
        found = find(tree, "data/train/best.pt  [checkpoint]")
        assert found and all(node["status"] == "MISSING" for node in found)
        named = " ".join(node["detail"] for node in found)
        # the record that names it, and dvc.lock's deps of the evaluate stage
        assert "data/evaluate/evaluation.json" in named and "dvc.lock (evaluate deps)" in named, named
        done = run_module("chesscore.lineage", "audit", "data/train/best.pt", cwd=damaged)
        assert done.returncode == 1
        assert done.stdout.startswith("MISSING  data/train/best.pt")
    finally:
        shutil.move(saved, checkpoint)


def test_the_project_cli_dispatches_to_each_command() -> None:
    done = run([str(BIN / "chesscore"), "--help"], Path.cwd())
    assert all(name in done.stdout for name in ("lineage", "uci", "samplegen"))
    assert "audit" in run([str(BIN / "chesscore"), "lineage", "--help"], Path.cwd()).stdout
    unknown = run([str(BIN / "chesscore"), "bogus"], Path.cwd(), check=False)
    assert unknown.returncode == 2 and "unknown command 'bogus'" in unknown.stderr
