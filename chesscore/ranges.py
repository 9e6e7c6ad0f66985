"""Sign and range checks for the numeric knobs of the config dataclasses (their __post_init__).

    check(self, positive=("micro", "epochs"), non_negative=("warmup_steps",), fraction=("min_lr_ratio",))
    # ValueError (an InvalidSetting): "grad_clip must be > 0, got -1"

Each message starts with the field's name, so the params layer can prefix it with the file and
section ("params.yaml: train.grad_clip: grad_clip must be > 0, got -1"). A field that is None is
an unset optional and passes; a bool or a string is not a number and fails. The error is an
InvalidSetting, a ValueError that is also a chesscore.failures.Refused: a stage that builds a
config outside the params layer still exits 78 with the message, never a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from chesscore.failures import Refused


class InvalidSetting(Refused, ValueError):
    """A knob outside its range (or not a number): refused before any work starts."""


def number(name: str, value: Any, integer: bool = False) -> float:
    """value as a finite number, or InvalidSetting naming the field."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InvalidSetting(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")
    if not math.isfinite(value):
        raise InvalidSetting(f"{name} must be a finite number, got {value!r}")
    return value


def at_least(name: str, value: Any, low: float, integer: bool = False) -> None:
    if value is not None and number(name, value, integer) < low:
        raise InvalidSetting(f"{name} must be >= {low:g}, got {value!r}")


def above(name: str, value: Any, low: float, integer: bool = False) -> None:
    if value is not None and number(name, value, integer) <= low:
        raise InvalidSetting(f"{name} must be > {low:g}, got {value!r}")


def at_most(name: str, value: Any, high: float, integer: bool = False) -> None:
    if value is not None and number(name, value, integer) > high:
        raise InvalidSetting(f"{name} must be <= {high:g}, got {value!r}")


def check(
    config: Any,
    *,
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    counts: Iterable[str] = (),
    whole: Iterable[str] = (),
    fraction: Iterable[str] = (),
    finite: Iterable[str] = (),
) -> None:
    """The checks of a config's fields, by kind:
    positive      > 0 (a learning rate, a clip norm, a time budget)
    non_negative  >= 0 (a weight decay, a margin, a coefficient)
    counts        integers >= 1 (games, batch sizes, steps)
    whole         integers >= 0 (iterations, warmup steps, evaluation games that may be 0)
    fraction      in [0, 1]
    finite        any finite number (a seed is an integer, see `whole`)"""
    for name in positive:
        above(name, getattr(config, name), 0)
    for name in non_negative:
        at_least(name, getattr(config, name), 0)
    for name in counts:
        at_least(name, getattr(config, name), 1, integer=True)
    for name in whole:
        at_least(name, getattr(config, name), 0, integer=True)
    for name in fraction:
        at_least(name, getattr(config, name), 0)
        at_most(name, getattr(config, name), 1)
    for name in finite:
        if getattr(config, name) is not None:
            number(name, getattr(config, name))


def one_of(name: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidSetting(f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}")
