"""A stage's settings: its params.yaml section, checked, then the command line's flags on top.

    settings, args = stage_settings(argv, "evaluate", Settings, __doc__)
    python -m stages.evaluate --games 50 --device auto      # a flag for every key of the section
    python -m stages.evaluate --params other.yaml           # another params file

The flags are generated from the stage's settings dataclass (chesscore.config): one per key,
named as the key with dashes (`batch_size` -> `--batch-size`; nested keys joined:
`stockfish.movetime_ms` -> `--stockfish-movetime-ms`), documented by the field's comment, with
params.yaml's value as the default. A flag's text is read as YAML (`--max-updates none`,
`--lr 1e-3`), so it means what the same text means in params.yaml, and is checked the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from chesscore.config import ConfigError, coerce, from_mapping, to_mapping, walk
from chesscore.fileio import load_yaml, load_yaml_text

PARAMS = Path("params.yaml")


def load(path: Path) -> dict[str, Any]:
    """The whole params file ({} when absent), read as DVC reads it."""
    return (load_yaml(path) or {}) if path.is_file() else {}


def read_params(path: Path, section: str) -> dict[str, Any]:
    """One section of the params file ({} when the file or the section is absent)."""
    values = load(path).get(section) or {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: {section}", "expected a mapping of settings")
    return values


def worker_count(value: int) -> int:
    """0 means one worker per CPU core."""
    return value if value > 0 else (os.cpu_count() or 1)


def flag_name(path: tuple[str, ...]) -> str:
    return "--" + "-".join(path).replace("_", "-")


def _leaf(tp: Any) -> Any:
    """The type inside `X | None`."""
    if get_origin(tp) in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        return options[0] if len(options) == 1 else tp
    return tp


def _read_flag(text: str, tp: Any) -> Any:
    """A flag's text as params.yaml would hold it: YAML, except that `none` is null too and a
    string or path setting takes the text as it is (`--split-key 2024`, `--out data/x`)."""
    optional = get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)
    if optional and text.strip().lower() in ("none", "null", "~"):
        return None
    if _leaf(tp) in (str, Path):
        return text  # `--resume none` is the text none: that setting's own word for "start afresh"
    return load_yaml_text(text)


def _flag_value(raw: str | list[str] | bool, tp: Any) -> Any:
    """A flag's value: a switch's bool, one text, or (a list setting) texts each of which may hold
    a comma-separated list (`--probe-micro 8 16` or `--probe-micro 8,16`); `none` switches an
    optional list off."""
    if isinstance(raw, bool):
        return raw
    if not isinstance(raw, list):
        return _read_flag(raw, tp)
    item_type = get_args(_leaf(tp))[0]
    if dataclasses.is_dataclass(item_type):  # each text one mapping: `--opponents "{name: r, kind: random}"`
        return [load_yaml_text(text) for text in raw]
    items = [part.strip() for text in raw for part in text.split(",") if part.strip()]
    if [item.lower() for item in items] in (["none"], ["null"]):
        return None
    return [_read_flag(item, item_type) for item in items]


def settings_parser(cls: type, base: Any, prog: str, doc: str, params: Path) -> argparse.ArgumentParser:
    """The stage's argument parser: --params and a flag per setting, params' values as defaults."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=doc.strip().split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Every flag overrides its key of the params file's section; without a flag the value there holds.",
    )
    parser.add_argument("--params", type=Path, default=params, help=f"params file (default: {params})")
    group = parser.add_argument_group("settings (params.yaml keys)")
    for path, tp, value, help_text in walk(cls, base):
        common = {
            "dest": "setting:" + ".".join(path),
            "default": argparse.SUPPRESS,
            "help": f"{help_text} (now: {shown(value)})".replace("%", "%%"),  # argparse formats help with %
        }
        leaf = _leaf(tp)
        if leaf is bool:
            group.add_argument(flag_name(path), action=argparse.BooleanOptionalAction, **common)
        elif get_origin(leaf) is tuple:
            item = _leaf(get_args(leaf)[0])
            group.add_argument(flag_name(path), nargs="+", metavar=METAVARS.get(item, "ITEM"), **common)
        elif get_origin(leaf) is Literal:
            group.add_argument(flag_name(path), metavar="{" + ",".join(map(str, get_args(leaf))) + "}", **common)
        else:
            group.add_argument(flag_name(path), metavar=METAVARS.get(leaf, "VALUE"), **common)
    return parser


def shown(value: Any) -> str:
    """A setting's value as params.yaml spells it (null, true, a list)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, tuple):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, Path):
        return value.as_posix()
    if hasattr(value, "__dataclass_fields__"):
        return "{" + ", ".join(f"{k}: {v}" for k, v in to_mapping(value).items() if v is not None) + "}"
    return str(value)


METAVARS = {int: "N", float: "X", str: "TEXT", Path: "PATH"}


def stage_settings(
    argv: list[str] | None,
    section: str,
    cls: type,
    doc: str,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[Any, argparse.Namespace]:
    """The stage's settings (params file section, then flags) and the parsed command line.
    `extra` adds the flags that are not settings (--force, --no-progress)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--params", type=Path, default=PARAMS)
    params = pre.parse_known_args(argv)[0].params
    values = read_params(params, section)
    base = from_mapping(cls, values, where=f"{params}: {section}")
    parser = settings_parser(cls, base, f"python -m stages.{section}", doc, params)
    if extra:
        extra(parser)
    args = parser.parse_args(argv)
    kinds = {".".join(path): tp for path, tp, _, _ in walk(cls, base)}
    merged, flags = to_mapping(base), {}
    for dest, raw in list(vars(args).items()):
        if not dest.startswith("setting:"):
            continue
        delattr(args, dest)
        key = dest.removeprefix("setting:")
        flags[key] = flag = flag_name(tuple(key.split(".")))
        value = _flag_value(raw, kinds[key])
        coerce(kinds[key], value, flag)  # a wrong flag is named as the flag
        *parents, leaf = key.split(".")
        node = merged
        for part in parents:
            node = node[part]
        node[leaf] = value
    if not flags:
        return base, args
    try:
        return from_mapping(cls, merged, where=f"{params}: {section}"), args
    except ConfigError as error:
        if error.key in flags:  # the flag's value is refused: say so by the flag's name
            raise ConfigError(flags[error.key], error.detail, key=error.key) from None
        raise
