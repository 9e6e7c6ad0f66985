"""params.yaml as the stage CLIs read it: safely, with floats as YAML 1.2 (and DVC) read them."""

from pathlib import Path

import pytest

from chesscore import failures
from chesscore.cli.params import load, params_section, read_params


def test_exponent_floats_are_floats_as_dvc_reads_them(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  lr: 1e-5\n  min_delta: 2.5E-3\n  epochs: 3\n  name: 1.0.0\n")
    assert read_params(path, "train") == {"lr": 1e-5, "min_delta": 2.5e-3, "epochs": 3, "name": "1.0.0"}


def test_absent_file_or_section_is_empty_and_a_non_mapping_is_refused(tmp_path: Path):
    assert load(tmp_path / "missing.yaml") == {}
    path = tmp_path / "params.yaml"
    path.write_text("train: [1, 2]\n")
    assert read_params(path, "evaluate") == {}
    with pytest.raises(failures.Refused, match="not a mapping"):
        read_params(path, "train")


def test_python_tags_are_not_executed(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text("x: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(Exception, match="python/object"):
        load(path)


def test_params_section_reads_the_file_the_command_line_names(tmp_path: Path, monkeypatch):
    other = tmp_path / "other.yaml"
    other.write_text("arena:\n  games: 40\n")
    assert params_section(["--games", "2", "--params", str(other)], "arena") == (other, {"games": 40})
    monkeypatch.chdir(tmp_path)  # no params.yaml here: every default stands
    assert params_section(["--games", "2"], "arena") == (Path("params.yaml"), {})
