"""A manifest whose fingerprint was recomputed after a broken edit is refused by field name
(IntegrityError, exit 65) instead of a TypeError or KeyError out of the readers. The
reproduction: a shard path `5`, `shards` a string."""

from __future__ import annotations

import json

import pytest

from chesscore.data import dataset
from chesscore.data.dataset import IntegrityError
from chesscore.data.shards import MANIFEST, fingerprint
from tests.hardening.pgnfiles import SAMPLE, run_stage
from tests.inprocess import run_module


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ds")
    assert run_stage("stages.validate", "--raw", SAMPLE, "--out", folder / "v", "--no-progress").code == 0
    assert run_stage("stages.convert", "--validated", folder / "v", "--out", folder / "d", "--no-progress").code == 0
    return folder / "d"


BROKEN = {
    "shard path 5": (lambda m: m["shards"][0].update(path=5), "shards[0].path must be a text, not 5"),
    "shards a string": (lambda m: m.update(shards="shards/x.arrow"), "shards must be a list, not str"),
    "shard a list": (lambda m: m["shards"].__setitem__(0, ["x"]), "shards[0] must be a mapping, not list"),
    "no shards": (lambda m: m.pop("shards"), "shards must be a list, not NoneType"),
    "sha256 short": (lambda m: m["shards"][0].update(sha256="abc"), "shards[0].sha256 must be 64 lowercase hex"),
    "rows negative": (lambda m: m["shards"][0].update(rows=-1), "shards[0].rows must be a whole number, not -1"),
    "rows text": (lambda m: m["shards"][0].update(rows="9"), "shards[0].rows must be a whole number"),
    "split unknown": (lambda m: m["shards"][0].update(split="holdout"), "shards[0].split 'holdout' is not one of"),
    "tokenizer a string": (lambda m: m.update(tokenizer="triples-v1"), "tokenizer must be a mapping"),
    "splits inconsistent": (lambda m: m["splits"]["train"].update(games=1), "splits do not add up"),
    "shard twice": (lambda m: m["shards"].append(dict(m["shards"][0])), "is listed twice"),
    "inputs a mapping": (lambda m: m.update(inputs={}), "inputs must be a list of mappings"),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_a_re_fingerprinted_broken_manifest_is_an_integrity_error(converted, tmp_path, kind):
    copy = tmp_path / "d"
    copy.mkdir()
    (copy / "shards").symlink_to(converted / "shards")
    meta = json.loads((converted / MANIFEST).read_text())
    spoil, message = BROKEN[kind]
    spoil(meta)
    meta["fingerprint"] = fingerprint(meta)
    (copy / MANIFEST).write_text(json.dumps(meta))
    with pytest.raises(IntegrityError, match=message.replace("[", r"\[").replace("]", r"\]")):
        dataset.verify(copy)


def test_the_evaluate_stage_exits_65_naming_the_field(converted, tmp_path):
    meta = json.loads((converted / MANIFEST).read_text())
    meta["shards"][0]["path"] = 5
    meta["fingerprint"] = fingerprint(meta)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / MANIFEST).write_text(json.dumps(meta))
    (tmp_path / "x.pt").write_bytes(b"")
    run = run_module(
        "stages.evaluate",
        "--dataset",
        tmp_path / "d",
        "--checkpoint",
        tmp_path / "x.pt",
        "--out",
        tmp_path / "e",
        cwd=tmp_path,
    )
    assert run.returncode == 65 and "Traceback" not in run.stderr
    assert f"bad_input: {tmp_path / 'd' / MANIFEST}: shards[0].path must be a text, not 5" in run.stderr
