"""The test suite's own rules: every fixture names the real-world case it reproduces, and only
the corpus tier (and the benchmarks, beside the embedded sample: bench/_inputs.py) may read the
shared corpus, and tests/corpus.py alone says where it lies."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from bench import _inputs
from tests import corpus
from tests.imports import PROJECT
from tests.sample import FIXTURES, fixture, fixture_names, fixture_note


@pytest.mark.parametrize("name", fixture_names(".pgn"))
def test_each_pgn_fixture_opens_with_a_comment_naming_its_case(name):
    first = (FIXTURES / name).read_bytes().split(b"\n", 1)[0]
    assert first.startswith(b"% ") and len(fixture_note(name).split()) >= 6, first
    assert not fixture(name).startswith(b"%")  # one comment line, then the exporter's bytes


def test_the_zst_fixture_carries_its_note_in_a_skippable_frame_and_is_listed():
    data = fixture("truncated.pgn.zst")
    at = data.index(struct.pack("<I", 0x184D2A50))  # the first of zstd's skippable-frame magics
    (size,) = struct.unpack("<I", data[at + 4 : at + 8])
    assert b"cut short" in data[at + 8 : at + 8 + size]
    assert fixture_names(".zst") == ["truncated.pgn.zst"]  # the .pgn ones: tests/pgn/test_split.py
    assert "| `truncated.pgn.zst` |" in (FIXTURES / "README.md").read_text(encoding="utf-8")


def test_the_corpus_is_read_only_by_tests_of_the_corpus_tier(monkeypatch):
    monkeypatch.setattr(corpus, "ENABLED", False)  # as in any run without --corpus
    with pytest.raises(RuntimeError, match=r"not in the corpus tier: mark it @pytest\.mark\.corpus"):
        corpus.corpus_dir()


def test_only_the_corpus_tier_knows_where_the_corpus_lies():
    """Everything else (stages, benchmarks, other tests) works in a clone with nothing beside it."""
    command = ["git", "ls-files", "-co", "--exclude-standard", "*.py"]  # tracked and new: what a commit holds
    listed = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, check=True).stdout.split()
    this = Path(__file__).relative_to(PROJECT).as_posix()
    naming = [n for n in listed if n != this and "pgn-corpus" in (PROJECT / n).read_text(encoding="utf-8")]
    assert naming == ["tests/corpus.py"], naming


def test_the_benchmarks_read_the_embedded_sample_where_the_corpus_is_absent(monkeypatch, tmp_path):
    monkeypatch.setattr(_inputs, "CORPUS", tmp_path / "absent.pgn")
    assert _inputs.describe() == "data/raw/lichess_sample.pgn.zst (the embedded sample)"
    texts = _inputs.game_texts()
    assert len(texts) == 3515 and all(text.startswith("[Event ") and text.endswith("\n") for text in texts)
    games = _inputs.mainlines(5, max_plies=12, min_plies=10)
    assert len(games) == 5 and all(10 <= len(moves) <= 12 for moves in games)
