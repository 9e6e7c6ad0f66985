"""Typed settings: a frozen dataclass per stage, whose fields document themselves.

    @dataclass(frozen=True)
    class EvalConfig:
        games: int = 100  # test games sampled; 0: all
        device: Literal["auto", "cpu", "cuda"] = "cpu"  # where the model runs

    config = from_mapping(EvalConfig, {"games": 50}, where="params.yaml: evaluate")
    field_docs(EvalConfig)   # {"games": "test games sampled; 0: all", "device": "where the model runs"}

A field's comment is its documentation (a stage's --help shows it), its annotation its type and
its default the one default there is. `from_mapping` checks a mapping (a params.yaml section,
the flags of a command line) against the dataclass before any work is done: an unknown key
(with the closest valid name), a value of the wrong type, or a value the dataclass's own
`__post_init__` refuses is a ConfigError (a Refused: exit 78) that names where and which key:

    params.yaml: train.learning_rate: unknown key (did you mean `lr`?)
    params.yaml: validate.min_plies: expected an integer, got 'two'

A field declared with `flat(OptimConfig)` holds a nested dataclass whose own fields are keys of
the same section (params.yaml's `train:` holds `lr` beside `epochs`); any other dataclass-typed
field is a nested mapping (`arena.stockfish.nodes`).
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import difflib
import functools
import inspect
import io
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from chesscore.failures import Refused


class ConfigError(Refused):
    """Settings refused before any work: names the file or flag, the key and what is wrong."""

    def __init__(self, place: str, detail: str, key: str | None = None):
        super().__init__(f"{place}: {detail}")
        self.detail = detail  # what is wrong
        self.key = key  # the setting at fault, when one is (`min_plies`)


def flat(cls: type) -> Any:
    """A field holding the dataclass `cls`, whose fields sit flat in the enclosing section."""
    return dataclasses.field(default_factory=cls, metadata={"flat": True})


def is_flat(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("flat"))


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's documentation: the comment at the end of its line (of each of its lines, when
    the declaration spans several), as written in the class body. Inherited fields come from the
    class that declares them."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        source = textwrap.dedent(inspect.getsource(klass))
        comments = {
            token.start[0]: token.string.lstrip("#").strip()
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT
        }
        body = ast.parse(source).body[0]
        for node in getattr(body, "body", []):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                parts = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
                if parts:
                    docs[node.target.id] = " ".join(parts)
    return docs


def setting_names(cls: type) -> list[str]:
    """The keys a section for `cls` may hold: its fields, with flat fields' own keys in their place."""
    names = []
    for f in dataclasses.fields(cls):
        names += setting_names(type_hints(cls)[f.name]) if is_flat(f) else [f.name]
    return names


def settings_docs(cls: type) -> dict[str, str]:
    """setting_names -> documentation, flat fields' keys included."""
    docs = {}
    for f in dataclasses.fields(cls):
        if is_flat(f):
            docs |= settings_docs(type_hints(cls)[f.name])
        else:
            docs[f.name] = field_docs(cls).get(f.name, "")
    return docs


def suggestion(key: str, cls: type) -> str:
    """' (did you mean `x`?)' for an unknown key: a similar name, or a setting whose
    documentation holds every word of the key (`learning_rate` -> lr, 'peak learning rate')."""
    names = setting_names(cls)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if not close:
        words = [w for w in re.split(r"[_\W]+", key.lower()) if w]
        docs = settings_docs(cls)
        close = [name for name in names if words and all(w in docs.get(name, "").lower() for w in words)][:1]
    return f" (did you mean `{close[0]}`?)" if close else f" (the settings here: {', '.join(names)})"


def describe(tp: Any) -> str:
    """A type as a person reads it: 'an integer', 'a list of strings', 'one of cpu, cuda'."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        options = [describe(a) for a in args if a is not type(None)]
        return " or ".join(options) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is tuple:
        return f"a list of {describe(args[0]).split(' ', 1)[-1]}s"
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} settings"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string", Path: "a path"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _refuse(where: str, tp: Any, value: Any) -> ConfigError:
    return ConfigError(where, f"expected {describe(tp)}, got {value!r}")


def coerce(tp: Any, value: Any, where: str) -> Any:
    """`value` as the type `tp` holds it (a list becomes a tuple, a str a Path), or ConfigError.
    Strict where YAML is ambiguous: an integer is no bool, a bool no integer."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for option in options:
            try:
                return coerce(option, value, where)
            except ConfigError as error:
                if len(options) == 1:
                    raise _refuse(where, tp, value) from error
        raise _refuse(where, tp, value)
    if origin is Literal:
        if value in args:
            return value
        close = difflib.get_close_matches(str(value), [str(a) for a in args], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(where, f"expected {describe(tp)}, got {value!r}{hint}")
    if origin is tuple:
        items = list(value) if isinstance(value, (list, tuple)) else [value]  # a scalar: a one-item list
        return tuple(coerce(args[0], item, f"{where}[{i}]") for i, item in enumerate(items))
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise _refuse(where, tp, value)
        return from_mapping(tp, value, where)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (datetime.date, datetime.datetime)):  # YAML reads an unquoted time as one
            return value.isoformat()
    elif tp is Path:
        if isinstance(value, (str, Path)) and str(value):
            return Path(value)
    else:
        raise TypeError(f"{where}: settings of type {tp!r} are not supported")  # a bug in the dataclass
    raise _refuse(where, tp, value)


def from_mapping(cls: type, values: Mapping[str, Any], where: str) -> Any:
    """An instance of the settings dataclass `cls` from `values` (missing keys: the defaults),
    checked key by key; `where` names the section in messages, e.g. 'params.yaml: train'."""
    if not isinstance(values, Mapping):
        raise ConfigError(where, f"expected a mapping of settings, got {values!r}")
    names = setting_names(cls)
    for key in values:
        if key not in names:
            raise ConfigError(f"{where}.{key}", f"unknown key{suggestion(str(key), cls)}", key=str(key))
    hints = type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if is_flat(f):
            own = set(setting_names(hints[f.name]))
            kwargs[f.name] = from_mapping(hints[f.name], {k: v for k, v in values.items() if k in own}, where)
        elif f.name in values:
            kwargs[f.name] = coerce(hints[f.name], values[f.name], f"{where}.{f.name}")
    try:
        return cls(**kwargs)
    except ValueError as error:
        message = str(error)
        name, _, rest = message.partition(" ")
        name = name.rstrip(":")
        if name in names and rest:  # "grad_clip must be > 0, got -1" names its key
            raise ConfigError(f"{where}.{name}", rest, key=name) from None
        raise ConfigError(where, message) from None


def to_mapping(config: Any) -> dict[str, Any]:
    """The section that gives `config` back: flat fields' keys in place, nested dataclasses as
    mappings, tuples as lists, paths as strings (what params.yaml would hold)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if is_flat(f):
            out |= to_mapping(value)
        else:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return to_mapping(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return value.as_posix()
    return value


def walk(cls: type, config: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any, Any, str]]:
    """(key path, type, current value, documentation) of every leaf setting, nested mappings
    opened (a list of dataclasses, like the arena's opponents, is one leaf)."""
    hints, docs = type_hints(cls), field_docs(cls)
    for f in dataclasses.fields(cls):
        tp, value = hints[f.name], getattr(config, f.name)
        if is_flat(f):
            yield from walk(tp, value, prefix)
        elif dataclasses.is_dataclass(tp):
            yield from walk(tp, value, (*prefix, f.name))
        else:
            yield (*prefix, f.name), tp, value, docs.get(f.name, "")
