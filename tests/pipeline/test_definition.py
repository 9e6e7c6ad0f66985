"""dvc.yaml and params.yaml as written (no pipeline run): every stage depends on all the code it
runs, lists exactly the params it reads, declares its outputs and metrics; the profiles switch
the same keys back and forth, and every stage accepts what each profile sets."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest
import yaml

from chesscore.cli.params import stage_settings
from chesscore.pipeline import profile
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


def interpolated_keys(text: str, section: str) -> set[str]:
    return set(re.findall(rf"\$\{{{section}\.([a-z_]+)\}}", text))


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
    # Every key of the section is a param, a path DVC already tracks as a dep/out, or a knob that
    # leaves the outputs identical (named in dvc.yaml's `# output-neutral:` comment of the stage).
    text = (PROJECT / "dvc.yaml").read_text()
    block = text[text.index(f"\n  {stage}:\n") :]
    block = block[: (re.search(r"\n  [a-z]+:\n", block[1:]) or re.search(r"\Z", block)).start() + 1]
    neutral = set(re.findall(r"[a-z_]+", (re.search(r"# output-neutral:([^\n]*)", block) or [None, ""])[1]))
    paths = interpolated_keys(block, stage)
    assert not keys & paths, f"{stage}: {sorted(keys & paths)} are deps/outs already, not params"
    untracked = set(PARAMS[stage]) - keys - paths - neutral
    assert not untracked, f"{stage}: params.yaml keys that no dvc.yaml entry covers: {sorted(untracked)}"


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_declares_outputs_and_metrics(stage: str) -> None:
    entry = DVC["stages"][stage]
    assert entry.get("outs"), stage
    assert entry.get("metrics") or stage == "convert", f"{stage} has no metrics"


def test_profiles_switch_the_same_keys_and_demo_is_the_default() -> None:
    profiles = PARAMS["profiles"]
    assert "demo" in profiles and "baseline" in profiles
    for name, values in profiles.items():
        for key in values:
            node = PARAMS
            for part in key.split("."):
                assert part in node, f"profiles.{name}: {key} names no value in params.yaml"
                node = node[part]
    for values in profiles.values():
        assert set(values) <= set(profiles["demo"]), f"demo cannot switch back {set(values) - set(profiles['demo'])}"
    for key, value in profiles["demo"].items():
        section, rest = key.split(".", 1)
        node = PARAMS[section]
        for part in rest.split("."):
            node = node[part]
        assert node == value, f"profiles.demo.{key} is {value!r} but the default is {node!r}"


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


@pytest.mark.parametrize("name", sorted(PARAMS["profiles"]))
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
