"""dvc.yaml and params.yaml as written (no pipeline run): every stage depends on all the code it
runs, lists exactly the params it reads, declares its outputs and metrics; the profiles switch
the same keys back and forth, and every stage accepts what each profile sets."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest
import yaml

from chesscore.cli.params import stage_settings
from chesscore.config import setting_names
from chesscore.pipeline import profile, settings
from tests.imports import PROJECT, code_closure, unit

DVC = yaml.safe_load((PROJECT / "dvc.yaml").read_text())
PARAMS = yaml.safe_load((PROJECT / "params.yaml").read_text())
STAGES = ["validate", "convert", "train", "evaluate", "arena", "selfplay"]


def code_units(stage: str) -> set[str]:
    """What dvc.yaml should list for the code of a stage: its own file, the chesscore packages
    and top-level modules it runs (the package's own __init__.py aside)."""
    files = code_closure(PROJECT / "stages" / f"{stage}.py")
    return {unit(f) for f in files} - {"chesscore/__init__.py", "stages/__init__.py"}


@functools.cache
def names_in_code(stage: str) -> set[str]:
    """Every string constant and config-dataclass field name in the code a stage runs: a params
    key that appears nowhere in it is certainly not read (read_params + config_from match keys
    to dataclass fields by name)."""
    names = set()
    for file in code_closure(PROJECT / "stages" / f"{stage}.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
            elif isinstance(node, ast.ClassDef):
                names |= {
                    item.target.id
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                }
    return names


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_depends_on_the_packages_of_code_it_runs(stage: str) -> None:
    entry = DVC["stages"][stage]
    assert entry["cmd"] == f"python -m stages.{stage}"
    deps = {dep if isinstance(dep, str) else next(iter(dep)) for dep in entry["deps"]}
    code = {dep for dep in deps if dep.startswith(("chesscore", "stages"))}
    runs = code_units(stage)
    assert not runs - code, f"{stage} runs code dvc.yaml does not list in its deps: {sorted(runs - code)}"
    stale = code - runs
    assert not stale, f"{stage} depends on code it never imports (a change would rerun it for nothing): {stale}"
    assert all((PROJECT / dep).exists() for dep in code), f"{stage}: a code dep names no file or folder"


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_lists_exactly_the_params_it_reads(stage: str) -> None:
    entry = DVC["stages"][stage]
    listed = entry.get("params") or []
    assert all(isinstance(key, str) and key.startswith(f"{stage}.") for key in listed), (
        f"{stage}: params must be keys of its own section, one by one: {listed}"
    )
    keys = {key.split(".", 1)[1] for key in listed}
    unread = {key for key in keys if key.split(".")[0] not in names_in_code(stage)}
    assert not unread, f"{stage}: dvc.yaml lists params the stage never reads: {sorted(unread)}"
    # and lists every key but its deps/outs and its Settings.OUTPUT_NEUTRAL (one function says so)
    assert settings.dvc_disagreements({"stages": {stage: entry}}) == []


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_declares_outputs_and_metrics(stage: str) -> None:
    entry = DVC["stages"][stage]
    assert entry.get("outs"), stage
    assert entry.get("metrics") or stage == "convert", f"{stage} has no metrics"


def test_params_yaml_and_dvc_yaml_hold_the_stage_defaults_and_nothing_else() -> None:
    assert settings.disagreements(PROJECT / "params.yaml", PROJECT / "dvc.yaml") == []


def test_a_second_default_anywhere_fails_the_check(tmp_path: Path) -> None:
    """A value in params.yaml that is not the dataclass's default, a profile repeating a default,
    a demo profile written out, a dvc.yaml param list off by one: each is named."""
    text = (PROJECT / "params.yaml").read_text()
    params = tmp_path / "params.yaml"
    params.write_text(text.replace("\n  lr: 0.002 ", "\n  lr: 0.003 ", 1))
    assert any("train.lr is 0.003" in p for p in settings.disagreements(params, tmp_path / "none.yaml"))
    params.write_text(text.replace("  baseline:\n", "  baseline:\n    train.micro: 16\n", 1))
    assert any("profiles.baseline.train.micro: 16 is the default" in p for p in settings.disagreements(params))
    params.write_text(text.replace("profiles:\n", "profiles:\n  demo:\n    train.model: demo-moves\n", 1))
    assert any("profiles.demo is derived" in p for p in settings.disagreements(params))
    dvc = yaml.safe_load((PROJECT / "dvc.yaml").read_text())
    dvc["stages"]["train"]["params"].remove("train.lr")
    dvc["stages"]["selfplay"]["params"].append("selfplay.workers")
    problems = settings.dvc_disagreements(dvc)
    assert any("does not list param train.lr" in p for p in problems), problems
    assert any("lists selfplay.workers" in p for p in problems), problems


def test_write_restores_a_changed_default_and_leaves_the_rest_as_spelled(tmp_path: Path) -> None:
    """`--write` puts back a value that is not the default and rewrites nothing else: params.yaml
    comes back byte for byte, `raw: data/raw` still a path, not a one-item list."""
    text = (PROJECT / "params.yaml").read_text()
    params = tmp_path / "params.yaml"
    params.write_text(text.replace("\n  lr: 0.002 ", "\n  lr: 0.003 ", 1))
    assert settings.write_defaults(params) == ["train.lr"]
    assert params.read_text() == text
    assert settings.write_defaults(params) == []


@pytest.mark.parametrize("stage", settings.STAGES)
def test_no_setting_is_declared_twice_in_a_stage(stage: str) -> None:
    """A flat sub-config's key that the stage declares too would be two settings of one name."""
    names = setting_names(settings.settings_class(stage))
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_a_profile_is_the_same_values_from_wherever_it_is_switched(tmp_path: Path) -> None:
    """(The same bytes too, but for a comment's column after a list of another length.)"""
    params = tmp_path / "params.yaml"
    original = (PROJECT / "params.yaml").read_text()
    names = ["demo", *PARAMS["profiles"]]
    files = {}
    for name in names:
        params.write_text(original)
        profile.apply(profile.profile_values(name, params), params)
        files[name] = params.read_text()
    assert files["demo"] == original
    for start in names:
        for name in names:
            params.write_text(files[start])
            profile.apply(profile.profile_values(name, params), params)
            assert yaml.safe_load(params.read_text()) == yaml.safe_load(files[name]), f"{start} -> {name}"


def test_applying_a_profile_and_back_restores_params_yaml_byte_for_byte(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    original = (PROJECT / "params.yaml").read_text()
    params.write_text(original)
    baseline = profile.profile_values("baseline", params)
    changed = profile.apply(baseline, params)
    assert changed and set(changed) <= set(baseline)
    switched = yaml.safe_load(params.read_text())
    for key, value in baseline.items():  # every value as the profile says, read back by PyYAML as stages do
        node = switched
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    assert "# Every knob of the pipeline" in params.read_text()  # comments kept
    profile.apply(profile.profile_values("demo", params), params)
    assert params.read_text() == original
    assert " -S train.model=baseline" in " " + " ".join(
        profile.set_arguments(profile.profile_values("baseline", params))
    )


@pytest.mark.parametrize("name", ["demo", *sorted(PARAMS["profiles"])])
def test_every_profile_gives_every_stage_settings_it_accepts(tmp_path: Path, name: str) -> None:
    """A profile's values pass each stage's own checks (an opponent its told matches name, a
    known model, ranges) before anyone spends a run on it; one that a stage refuses fails here."""
    params = tmp_path / "params.yaml"
    params.write_text((PROJECT / "params.yaml").read_text())
    profile.apply(profile.profile_values(name, params), params)
    for stage in STAGES:
        module = importlib.import_module(f"stages.{stage}")
        settings, _ = stage_settings(["--params", str(params)], stage, module.Settings, module.__doc__ or "")
        assert isinstance(settings, module.Settings), stage
