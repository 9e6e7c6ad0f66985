"""params.yaml for the stage CLIs: one section read, a config dataclass built from it.

    path, values = params_section(argv, "convert")   # --params FILE (else params.yaml), its convert:
    config = config_from(values, ConvertConfig, path, "convert")

Kept apart from any stage so that a stage importing these helpers does not import (and so, for
DVC, depend on) another stage's code.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from chesscore import failures
from chesscore.fileio import load_yaml

PARAMS = Path("params.yaml")


def load(path: Path) -> dict[str, Any]:
    """The whole params file ({} when absent), read as DVC reads it."""
    return (load_yaml(path) or {}) if path.is_file() else {}


def read_params(path: Path, section: str) -> dict[str, Any]:
    """One section of the params file ({} when the file or the section is absent)."""
    values = load(path).get(section) or {}
    if not isinstance(values, dict):
        raise failures.Refused(f"{path}: `{section}:` is not a mapping")
    return values


def params_section(argv: list[str] | None, section: str) -> tuple[Path, dict[str, Any]]:
    """The params file a command line names with --params (params.yaml by default) and its
    `section:`. Read before the stage's own parser is built: its values are that parser's
    defaults."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--params", type=Path, default=PARAMS)
    path = pre.parse_known_args(argv)[0].params
    return path, read_params(path, section)


def worker_count(value: int) -> int:
    """0 means one worker per CPU core."""
    return value if value > 0 else (os.cpu_count() or 1)


def config_from(values: dict[str, Any], cls: type, path: Path, section: str) -> Any:
    """A config dataclass from the params section's matching keys (lists become tuples)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    chosen = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in fields}
    try:
        return cls(**chosen)
    except (TypeError, ValueError) as error:
        raise failures.Refused(f"{path}: `{section}:` {error}") from None
