"""One default per setting: each stage's settings dataclass (stages/<name>.py `Settings`) holds
it, and params.yaml, its profiles and dvc.yaml's `params:` lists are checked against it here.

    python -m chesscore.pipeline.settings            # check: exit 1 listing every disagreement
    python -m chesscore.pipeline.settings --write    # put back every value that is not its default

params.yaml's top-level sections hold the defaults (the `demo` profile): the file a user edits and
`dvc repro` reads, so it spells each value out, but it is a copy that this check keeps equal to
the dataclasses (`--write` regenerates the values, comments and order kept). Each other profile
lists only what it changes: a value equal to the default there is a second copy and refused, and
the `demo` profile is derived (the default of every key any profile sets). A stage's dvc.yaml
`params:` lists every key of its section except the paths its deps/outs name (`${train.dataset}`)
and the keys its Settings declares OUTPUT_NEUTRAL (the same output bytes for any value).
The command-line flags are generated from the same dataclasses (chesscore.cli.params).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from typing import Any

from chesscore.cli.params import load as load_params
from chesscore.config import ConfigError, from_mapping, to_mapping

PARAMS = Path("params.yaml")
DVC = Path("dvc.yaml")
STAGES = ("validate", "merge", "convert", "train", "evaluate", "arena", "selfplay")
DEMO = "demo"  # the profile of the defaults themselves


def settings_class(stage: str) -> type:
    return importlib.import_module(f"stages.{stage}").Settings


def defaults(stage: str) -> dict[str, Any]:
    """The stage's section as params.yaml holds it, every value its default."""
    return to_mapping(settings_class(stage)())


def default_of(key: str) -> Any:
    """The default of a dotted key (`train.lr`, `arena.stockfish.movetime_ms`)."""
    stage, *path = key.split(".")
    node: Any = defaults(stage)
    for part in path:
        node = node[part]
    return node


def normalised(stage: str, values: dict[str, Any], where: str) -> dict[str, Any]:
    """A section (or part of one) as the stage reads it, spelled as to_mapping spells it (`raw:
    data/raw` and `raw: [data/raw]` are one value), with the defaults filled in."""
    return to_mapping(from_mapping(settings_class(stage), values, where))


def params_disagreements(params: dict[str, Any], name: str = str(PARAMS)) -> list[str]:
    """Where params.yaml's sections differ from the dataclasses' defaults: a key missing, one no
    stage reads, or a value that is not the default."""
    problems = []
    for stage in STAGES:
        section = params.get(stage) or {}
        want = defaults(stage)
        for key in want:
            if key not in section:
                problems.append(f"{name}: {stage}.{key} missing (the default: {want[key]!r})")
        try:
            have = normalised(stage, section, f"{name}: {stage}")
        except ConfigError as error:
            problems.append(str(error))
            continue
        for key in want:
            if key in section and have[key] != want[key]:
                problems.append(
                    f"{name}: {stage}.{key} is {section[key]!r}, the default in stages/{stage}.py is "
                    f"{want[key]!r} (one of them is a second default)"
                )
    return problems


def profile_disagreements(params: dict[str, Any], name: str = str(PARAMS)) -> list[str]:
    """Profiles that set a key no stage has, values a stage refuses (read together, as a stage
    reads them: an opponent named in the same profile), or a value equal to its default (a
    second copy of it); `demo` is derived, so it is not listed."""
    problems = []
    for profile, values in (params.get("profiles") or {}).items():
        if profile == DEMO:
            problems.append(f"{name}: profiles.{DEMO} is derived from the defaults; remove it")
            continue
        by_stage: dict[str, dict[str, Any]] = {}
        for key, value in (values or {}).items():
            stage, _, rest = key.partition(".")
            try:
                if stage not in STAGES or not rest:
                    raise KeyError(stage)
                default_of(key)
            except (KeyError, TypeError):
                problems.append(f"{name}: profiles.{profile}.{key}: names no setting")
                continue
            section = by_stage.setdefault(stage, defaults(stage))
            _set(section, rest.split("."), value)
        for stage, section in by_stage.items():
            try:
                seen = normalised(stage, section, f"{name}: profiles.{profile} ({stage})")
            except ConfigError as error:
                problems.append(str(error))
                continue
            for key in values:
                if key.startswith(f"{stage}.") and _get(seen, key.split(".")[1:]) == default_of(key):
                    problems.append(
                        f"{name}: profiles.{profile}.{key}: {values[key]!r} is the default already (a second copy)"
                    )
    return problems


def _set(mapping: dict[str, Any], path: list[str], value: Any) -> None:
    node = mapping
    for part in path[:-1]:
        node[part] = dict(node[part])  # a copy: the defaults' own mapping stays as it is
        node = node[part]
    node[path[-1]] = value


def _get(mapping: Any, path: list[str]) -> Any:
    for part in path:
        mapping = mapping[part]
    return mapping


def dvc_params(stage: str, entry: dict[str, Any]) -> set[str]:
    """The keys dvc.yaml's stage must list as params: every key of the section but the paths the
    stage's deps/outs/cmd name and the OUTPUT_NEUTRAL ones."""
    text = repr(entry)
    tracked = set(re.findall(rf"\$\{{{stage}\.([a-z_]+)\}}", text))
    neutral = set(getattr(settings_class(stage), "OUTPUT_NEUTRAL", ()))
    return {f"{stage}.{key}" for key in defaults(stage)} - {f"{stage}.{key}" for key in tracked | neutral}


def dvc_disagreements(dvc: dict[str, Any], name: str = str(DVC)) -> list[str]:
    problems = []
    for stage, entry in (dvc.get("stages") or {}).items():
        if stage not in STAGES:
            continue
        listed, want = set(entry.get("params") or []), dvc_params(stage, entry)
        for key in sorted(want - listed):
            problems.append(f"{name}: stage {stage} does not list param {key} (a change would not rerun it)")
        for key in sorted(listed - want):
            problems.append(f"{name}: stage {stage} lists {key}, which is a dep/out, output-neutral or no setting")
    return problems


def disagreements(params_path: Path = PARAMS, dvc_path: Path = DVC) -> list[str]:
    """Every place params.yaml or dvc.yaml holds a setting's value or list other than the
    dataclasses say; [] when they agree."""
    params = load_params(params_path)
    problems = params_disagreements(params, str(params_path)) + profile_disagreements(params, str(params_path))
    if dvc_path.is_file():
        problems += dvc_disagreements(load_params(dvc_path), str(dvc_path))
    return problems


def demo_values(params_path: Path = PARAMS) -> dict[str, Any]:
    """The `demo` profile: the default of every key some profile sets (so any switch goes back),
    spelled as params.yaml spells it: a one-item list as its item where the file does so (`raw:
    data/raw`, which dvc.yaml interpolates into a path), a list of mappings (the opponents)
    without their null keys."""
    params = load_params(params_path)
    keys = {key for values in (params.get("profiles") or {}).values() for key in (values or {})}
    values = {}
    for key in sorted(keys):
        value, current = default_of(key), _get(params, key.split("."))
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            value = [{k: v for k, v in item.items() if v is not None} for item in value]
        elif isinstance(value, list) and len(value) == 1 and not isinstance(current, list):
            value = value[0]
        values[key] = value
    return values


def write_defaults(params_path: Path = PARAMS) -> list[str]:
    """Put every default that params.yaml's sections lack or contradict back into them
    (comments and order kept); the keys changed. A key whose value already reads as its default
    keeps its spelling (`raw: data/raw` is not rewritten as `raw: [data/raw]`)."""
    from chesscore.pipeline.profile import apply

    params, writes = load_params(params_path), {}
    for stage in STAGES:
        section = params.get(stage) or {}
        try:
            current = normalised(stage, section, f"{params_path}: {stage}")
        except ConfigError:  # an unknown or ill-typed key: every default is written
            current = {}
        for key, value in defaults(stage).items():
            if key not in section or current.get(key) != value:
                writes[f"{stage}.{key}"] = value
    return apply(writes, params_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chesscore.pipeline.settings", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write every default into the params file")
    parser.add_argument("--params", type=Path, default=PARAMS, help="the params file (default: params.yaml)")
    parser.add_argument("--dvc", type=Path, default=DVC, help="the pipeline file (default: dvc.yaml)")
    args = parser.parse_args(argv)
    if args.write:
        changed = write_defaults(args.params)
        print(f"{args.params}: {len(changed)} value(s) written" + "".join(f"\n  {key}" for key in changed))
    problems = disagreements(args.params, args.dvc)
    for problem in problems:
        print(problem)
    print(f"settings: {len(problems)} disagreement(s) between the stage dataclasses, {args.params} and {args.dvc}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
