"""params.yaml as the stage CLIs read it: one settings dataclass per stage is the one source of
every default, the flags are generated from it, and a section is checked before any work."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from chesscore.cli.params import flag_name, load, read_params, stage_settings
from chesscore.config import ConfigError, walk
from tests.imports import PROJECT
from tests.inprocess import run_module

STAGES = ["validate", "convert", "train", "evaluate", "arena", "selfplay"]
PARAMS = load(PROJECT / "params.yaml")
NOT_SETTINGS = {"--help", "-h", "--params", "--no-progress", "--force", "--allow-other-dataset"}


def settings_class(stage: str) -> type:
    return importlib.import_module(f"stages.{stage}").Settings


def section_keys(values: dict, prefix: str = "") -> set[str]:
    """Dotted keys of a section, nested mappings opened (a list is one key)."""
    keys = set()
    for key, value in values.items():
        keys |= section_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key}
    return keys


def flags_of(stage: str) -> set[str]:
    cls = settings_class(stage)
    parser_holder = {}

    def grab(parser):
        parser_holder["p"] = parser

    with pytest.raises(SystemExit):  # --help exits; the parser it built is what we look at
        stage_settings(["--help", "--params", str(PROJECT / "params.yaml")], stage, cls, "doc", extra=grab)
    return {option for action in parser_holder["p"]._actions for option in action.option_strings} - NOT_SETTINGS


@pytest.mark.parametrize("stage", STAGES)
def test_params_yaml_the_settings_dataclass_and_the_flags_hold_the_same_keys(stage, capsys):
    cls = settings_class(stage)
    settings, _ = stage_settings(["--params", str(PROJECT / "params.yaml")], stage, cls, "doc")
    fields = {".".join(path) for path, *_ in walk(cls, settings)}
    assert section_keys(PARAMS[stage]) == fields, f"params.yaml's {stage}: and {cls.__qualname__} differ"
    negated = {f"--no-{flag[2:]}" for flag in flags_of(stage)}
    assert flags_of(stage) - negated == {flag_name(tuple(key.split("."))) for key in fields}
    capsys.readouterr()


@pytest.mark.parametrize("stage", STAGES)
def test_every_setting_says_what_it_does(stage):
    cls = settings_class(stage)
    undocumented = [".".join(path) for path, _, _, doc in walk(cls, cls()) if len(doc.split()) < 2]
    assert not undocumented, f"{stage}: settings without a comment saying what they do: {undocumented}"


@pytest.mark.parametrize(
    "stage, section, message",
    [
        ("train", "learning_rate: 0.01", "train.learning_rate: unknown key (did you mean `lr`?)"),
        ("validate", "min_plies: two", "validate.min_plies: expected an integer, got 'two'"),
        ("arena", "stockfish: {nodse: 5}", "arena.stockfish.nodse: unknown key (did you mean `nodes`?)"),
        ("selfplay", "backend: rey", "selfplay.backend: expected one of process, ray, got 'rey' (did you mean ray?)"),
        ("evaluate", "threads: 0", "evaluate.threads: must be >= 1, got 0"),
        (
            "convert",
            "train: 0.5",
            "convert: train, validation, test: the split fractions (0.5, 0.05, 0.05) must sum to 1",
        ),
    ],
)
def test_a_wrong_params_section_is_refused_before_any_work(tmp_path, stage, section, message):
    params = tmp_path / "params.yaml"
    params.write_text(f"{stage}:\n  {section}\n")
    with pytest.raises(ConfigError) as error:
        stage_settings(["--params", str(params)], stage, settings_class(stage), "doc")
    assert str(error.value) == f"{params}: {message}"


def test_a_typo_makes_the_stage_exit_78_naming_the_file_and_key(tmp_path):
    (tmp_path / "params.yaml").write_text("train:\n  learning_rate: 0.01\n")
    done = run_module("stages.train", "--output", "out", cwd=tmp_path)
    assert done.returncode == 78, done.stderr
    assert (
        "chesscore-failure: refused: params.yaml: train.learning_rate: unknown key (did you mean `lr`?)" in done.stderr
    )
    assert not (tmp_path / "out").exists()


def test_flags_override_params_and_are_checked_like_them(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("train:\n  lr: 0.002\n  max_updates: 60\n  probe_micro: [1, 2]\n")
    cls = settings_class("train")
    settings, _ = stage_settings(["--params", str(params)], "train", cls, "doc")
    assert (settings.run.optim.lr, settings.run.max_updates, settings.probe_micro) == (0.002, 60, (1, 2))
    argv = ["--params", str(params), "--lr", "1e-3", "--max-updates", "none", "--probe-micro", "8,16", "32"]
    settings, _ = stage_settings(argv, "train", cls, "doc")
    assert (settings.run.optim.lr, settings.run.max_updates, settings.probe_micro) == (1e-3, None, (8, 16, 32))
    assert stage_settings(["--params", str(params), "--compile"], "train", cls, "doc")[0].run.compile is True
    assert stage_settings(["--params", str(params), "--no-compile"], "train", cls, "doc")[0].run.compile is False
    with pytest.raises(ConfigError, match=r"^--micro: expected an integer, got 'x'$"):
        stage_settings(["--params", str(params), "--micro", "x"], "train", cls, "doc")
    with pytest.raises(ConfigError, match=r"^--threads: must be >= 1 \(null: torch's default\), got 0$"):
        stage_settings(["--params", str(params), "--threads", "0"], "train", cls, "doc")


def test_an_unquoted_deadline_is_the_time_it_names_as_a_flag_and_in_params(tmp_path):
    """YAML reads `2000-01-01T00:00:00Z` unquoted as a datetime; the deadline setting (a string
    or Unix seconds) was refused with it, from the flag and from params.yaml alike."""
    from chesscore.train.deadline import parse_time

    params = tmp_path / "params.yaml"
    params.write_text("train:\n  deadline: 2000-01-01T00:00:00Z\n")
    cls = settings_class("train")
    from_params, _ = stage_settings(["--params", str(params)], "train", cls, "doc")
    params.write_text("train: {}\n")
    from_flag, _ = stage_settings(
        ["--params", str(params), "--deadline", "2000-01-01T01:00:00+01:00"], "train", cls, "doc"
    )
    assert parse_time(from_params.run.deadline) == parse_time(from_flag.run.deadline) == 946684800.0
    seconds, _ = stage_settings(["--params", str(params), "--deadline", "946684800"], "train", cls, "doc")
    assert parse_time(seconds.run.deadline) == 946684800.0


def test_exponent_floats_are_floats_as_dvc_reads_them(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  lr: 1e-5\n  min_delta: 2.5E-3\n  epochs: 3\n  name: 1.0.0\n")
    assert read_params(path, "train") == {"lr": 1e-5, "min_delta": 2.5e-3, "epochs": 3, "name": "1.0.0"}


def test_absent_file_or_section_is_empty_and_a_non_mapping_is_refused(tmp_path: Path):
    assert load(tmp_path / "missing.yaml") == {}
    path = tmp_path / "params.yaml"
    path.write_text("train: [1, 2]\n")
    assert read_params(path, "evaluate") == {}
    with pytest.raises(ConfigError, match="train: expected a mapping of settings"):
        read_params(path, "train")
