"""Profiles: named sets of params.yaml values, switched so that DVC sees (and records) the change.

params.yaml's top-level values are the defaults of the stages' settings dataclasses, the `demo`
profile (CPU, minutes; chesscore.pipeline.settings). `profiles:` lists, per profile, the dotted
keys it changes, such as `train.model: baseline`. A profile's values are its own keys and, for
every other key some profile sets, the default: so switching from any profile to any other
(`demo` included, which sets no key of its own) gives the same file.

    python -m chesscore.pipeline.profile baseline              # dvc exp run -S train.model=baseline ...
    python -m chesscore.pipeline.profile baseline --apply      # write the values into params.yaml; then `dvc repro`
    python -m chesscore.pipeline.profile demo --apply          # back to the demo values
    python -m chesscore.pipeline.profile baseline --show       # print the overrides as `-S key=value` arguments
    python -m chesscore.pipeline.profile baseline -- --queue   # arguments after -- go to `dvc exp run`

Either way the values live in params.yaml, where `dvc repro` reads and dvc.lock records them,
so a run is reproducible from its commit and `dvc params diff` shows what a profile changed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from chesscore.cli.params import load as load_params

PARAMS = Path("params.yaml")


def profile_values(name: str, params_path: Path = PARAMS) -> dict[str, Any]:
    """The dotted-key values of profile `name` (`demo`: the defaults), with the default of every
    key another profile sets; each checked to name an existing key."""
    from chesscore.pipeline.settings import DEMO, demo_values

    params = load_params(params_path)
    profiles = params.get("profiles") or {}
    if name not in profiles and name != DEMO:
        names = ", ".join([DEMO, *profiles])
        raise SystemExit(f"{params_path}: no profile {name!r} (profiles: {names})")
    values = {**demo_values(params_path), **(profiles.get(name) or {})}
    for key in values:
        _lookup(params, key, params_path)
    return values


def _lookup(params: dict[str, Any], key: str, params_path: Path) -> Any:
    node: Any = params
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise SystemExit(f"{params_path}: profile key {key!r} names no value in the file")
        node = node[part]
    return node


def apply(values: dict[str, Any], params_path: Path = PARAMS) -> list[str]:
    """Write dotted-key values into params.yaml in place (comments and order kept, atomically);
    return the keys whose value changed."""
    from ruamel.yaml import YAML  # round-trip YAML: keeps the file's comments (DVC uses it too)

    from chesscore.fileio import atomic_write

    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096
    rt.indent(mapping=2, sequence=4, offset=2)  # params.yaml's own style, so untouched lines stay as they are
    rt.representer.add_representer(  # spell None as the file does ("null"), not as an empty value
        type(None), lambda representer, _: representer.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    document = rt.load(params_path.read_text(encoding="utf-8"))
    changed = []
    for key, value in values.items():
        *parents, leaf = key.split(".")
        node = document
        for part in parents:
            node = node[part]
        if node.get(leaf) != value:
            node[leaf] = _styled_like(node.get(leaf), value)
            changed.append(key)
    if changed:
        atomic_write(params_path, lambda f: rt.dump(document, f))
    return changed


def _styled_like(old: Any, value: Any) -> Any:
    """`value` as round-trip YAML nodes styled like the value it replaces: lists and mappings are
    updated in place (their flow or block style and their items' comments stay), new nodes take
    the style of their neighbours. Switching profiles back and forth gives the file back byte
    for byte."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, list) and isinstance(old, CommentedSeq):
        for i, item in enumerate(value):
            if i >= len(old):
                old.append(_new_like(old[-1] if len(old) else None, item))
            elif old[i] != item:
                old[i] = _styled_like(old[i], item)
        del old[len(value) :]
        return old
    if isinstance(value, dict) and isinstance(old, CommentedMap):
        for key in [key for key in old if key not in value]:
            del old[key]
        for key, item in value.items():
            if old.get(key) != item:
                old[key] = _styled_like(old.get(key), item)
        return old
    return _new_like(old, value)


def _new_like(template: Any, value: Any) -> Any:
    """A new node for `value` in the style (flow or block) of `template`, which is left alone."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if not isinstance(value, (list, dict)):
        return value
    if isinstance(value, list):
        first = template[0] if isinstance(template, list) and template else None
        node: Any = CommentedSeq(_new_like(first, item) for item in value)
    else:
        node = CommentedMap(
            (k, _new_like(template.get(k) if isinstance(template, dict) else None, v)) for k, v in value.items()
        )
    if getattr(getattr(template, "fa", None), "flow_style", lambda: False)():
        node.fa.set_flow_style()
    return node


def set_arguments(values: dict[str, Any]) -> list[str]:
    """`-S key=value` arguments for `dvc exp run`, each value spelled as YAML (DVC parses it so)."""
    arguments = []
    for key, value in values.items():
        text = yaml.safe_dump(value, default_flow_style=True, width=4096).strip()
        text = text.removesuffix("\n...").removesuffix("...").strip()
        arguments += ["-S", f"{key}={text}"]
    return arguments


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m chesscore.pipeline.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="a profile named under `profiles:` in params.yaml (demo, baseline, ...)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--apply", action="store_true", help="write the values into params.yaml, run nothing")
    action.add_argument("--show", action="store_true", help="print the `-S key=value` arguments, run nothing")
    parser.add_argument("--params", type=Path, default=PARAMS, help="the params file")
    args = parser.parse_args(argv)
    values = profile_values(args.profile, args.params)
    if args.show:
        print(" ".join(set_arguments(values)))
        return 0
    if args.apply:
        changed = apply(values, args.params)
        print(
            f"profile {args.profile}: {len(changed)} value(s) changed in {args.params}"
            + "".join(f"\n  {key}: {values[key]!r}" for key in changed)
        )
        print("next: dvc repro")
        return 0
    command = [sys.executable, "-m", "dvc", "exp", "run", *set_arguments(values), *extra]
    print("+ " + " ".join(command[1:]), flush=True)
    return subprocess.call(
        command,
        env={
            **os.environ,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/games", os.environ.get("PATH", "")]),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
