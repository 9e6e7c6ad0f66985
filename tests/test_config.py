"""chesscore.config: settings dataclasses checked key by key, documented by their comments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from chesscore.config import ConfigError, coerce, field_docs, flat, from_mapping, setting_names, to_mapping


@dataclass(frozen=True)
class Inner:
    rate: float = 0.5  # how fast
    # (a comment above a field is not its documentation)
    depth: int = 2  # how deep
    # (nor is a comment below it)


@dataclass(frozen=True)
class Outer:
    name: str = "x"  # what it is called
    size: int | None = None  # how big; null: any
    mode: Literal["fast", "slow"] = "fast"  # the pace
    paths: tuple[Path, ...] = ()  # where to look
    inner: Inner = flat(Inner)  # flat: its keys sit beside these
    nested: Inner = Inner()  # a nested mapping

    def __post_init__(self) -> None:
        if self.size is not None and self.size < 0:
            raise ValueError(f"size must be >= 0, got {self.size}")


def test_comments_are_the_documentation():
    assert field_docs(Outer)["size"] == "how big; null: any"
    assert field_docs(Inner) == {"rate": "how fast", "depth": "how deep"}


def test_flat_fields_are_keys_of_the_same_section():
    assert setting_names(Outer) == ["name", "size", "mode", "paths", "rate", "depth", "nested"]
    config = from_mapping(Outer, {"rate": 0.25, "nested": {"depth": 7}, "paths": "a/b"}, "params.yaml: s")
    assert config.inner == Inner(rate=0.25) and config.nested == Inner(depth=7) and config.paths == (Path("a/b"),)
    assert from_mapping(Outer, to_mapping(config), "again") == config


@pytest.mark.parametrize(
    "values, message",
    [
        ({"nmae": "y"}, "params.yaml: s.nmae: unknown key (did you mean `name`?)"),
        ({"speed": 1}, "params.yaml: s.speed: unknown key (the settings here: name, size, mode, paths, rate, depth"),
        ({"size": "two"}, "params.yaml: s.size: expected an integer or null, got 'two'"),
        ({"size": True}, "params.yaml: s.size: expected an integer or null, got True"),
        ({"size": -1}, "params.yaml: s.size: must be >= 0, got -1"),
        ({"rate": "fast"}, "params.yaml: s.rate: expected a number, got 'fast'"),
        ({"mode": "slwo"}, "params.yaml: s.mode: expected one of fast, slow, got 'slwo' (did you mean slow?)"),
        ({"nested": {"dpeth": 1}}, "params.yaml: s.nested.dpeth: unknown key (did you mean `depth`?)"),
        ({"nested": 3}, "params.yaml: s.nested: expected a mapping of Inner settings, got 3"),
        ({"paths": [1]}, "params.yaml: s.paths[0]: expected a path, got 1"),
    ],
)
def test_a_wrong_section_is_refused_naming_the_key(values, message):
    with pytest.raises(ConfigError) as error:
        from_mapping(Outer, values, "params.yaml: s")
    assert str(error.value).startswith(message)
    assert error.value.exit_code == 78


def test_a_key_named_in_a_description_is_suggested():
    @dataclass(frozen=True)
    class Optim:
        lr: float = 1e-3  # peak learning rate

    with pytest.raises(ConfigError, match=r"learning_rate: unknown key \(did you mean `lr`\?\)"):
        from_mapping(Optim, {"learning_rate": 0.1}, "params.yaml: train")


def test_numbers_widen_but_never_from_bools():
    assert coerce(float, 3, "x") == 3.0 and isinstance(coerce(float, 3, "x"), float)
    with pytest.raises(ConfigError):
        coerce(int, 2.5, "x")
    with pytest.raises(ConfigError):
        coerce(bool, 1, "x")
