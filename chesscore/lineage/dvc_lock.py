"""DVC's record of a pipeline run (dvc.lock), read as plain YAML: which stage made a path, from
which inputs, code and params, with which hashes. No DVC import (chesscore stays free of it).

    lock = Lock.read(".")                     # None when the checkout has no dvc.lock
    [(stage, out)] = lock.outputs("data/train/best.pt")
    md5_now = dvc_md5(Path("data/dataset"))   # the same hash DVC records (files and folders)

Both dvc.lock and params.yaml are read as YAML 1.2, as DVC reads them (PyYAML's YAML 1.1 would
read a `1e-05` that DVC wrote as a string). DVC 3 hashes a file as the md5 of its bytes, and a
folder as the md5 of a JSON listing of its files' md5s (sorted by relative path) with ".dir"
appended; `dvc_md5` recomputes both. A folder's listing leaves out what the repository's
`.dvcignore` files ignore (the bytecode caches in the code folders), read with pathspec's
gitignore rules as DVC reads them: a pattern is relative to the folder of its `.dvcignore`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pathspec

from chesscore.fileio import load_yaml


def file_digest(path: Path, algorithm: str = "md5") -> str:
    """A file's hash (md5 as DVC records it, or sha256 as our manifests do), computed once per
    process for a file that has not changed since, however many records name it."""
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_mtime_ns, stat.st_size, algorithm)


@functools.lru_cache(maxsize=65536)
def _digest(path: str, mtime_ns: int, size: int, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def dvc_md5(path: Path) -> str | None:
    """The hash DVC records for `path` (a file or a folder); None when it does not exist."""
    if path.is_file():
        return file_digest(path)
    if not path.is_dir():
        return None
    ignored = _ignore_rules(path)
    entries = sorted(
        (
            {"md5": file_digest(file), "relpath": file.relative_to(path).as_posix()}
            for file in path.rglob("*")
            if file.is_file() and not ignored(file)
        ),
        key=lambda entry: entry["relpath"],
    )
    listing = json.dumps(entries, sort_keys=True).encode("utf-8")
    return hashlib.md5(listing).hexdigest() + ".dir"


def _ignore_rules(folder: Path) -> Callable[[Path], bool]:
    """Whether a file under `folder` is one DVC ignores: a match of any `.dvcignore` from the
    repository's root (the nearest folder above that holds `.dvc/`) down to the file."""
    folder = folder.resolve()
    root = next((p for p in (folder, *folder.parents) if (p / ".dvc").is_dir()), None)
    if root is None:
        return lambda file: False

    @functools.cache
    def rules(directory: Path) -> pathspec.PathSpec | None:
        file = directory / ".dvcignore"
        return pathspec.GitIgnoreSpec.from_lines(file.read_text().splitlines()) if file.is_file() else None

    def ignored(file: Path) -> bool:
        file = file.resolve()
        for directory in (d for d in reversed(file.parents) if d == root or root in d.parents):
            spec = rules(directory)
            if spec is not None and spec.match_file(file.relative_to(directory).as_posix()):
                return True
        return False

    return ignored


def _inside(path: str, folder: str) -> bool:
    return path == folder or PurePosixPath(path).is_relative_to(PurePosixPath(folder))


@dataclass(frozen=True)
class Lock:
    """dvc.lock's stages: name -> {"cmd", "deps", "params", "outs"} as DVC wrote them."""

    root: Path
    stages: dict[str, dict[str, Any]]

    @classmethod
    def read(cls, root: str | os.PathLike) -> Lock | None:
        path = Path(root) / "dvc.lock"
        if not path.is_file():
            return None
        data = load_yaml(path) or {}
        return cls(Path(root), data.get("stages") or {})

    def outputs(self, path: str) -> list[tuple[str, dict[str, Any]]]:
        """(stage, output entry) for every recorded output that is `path`, holds it (a folder
        output), or lies inside it (`path` is a folder of several outputs)."""
        return [
            (name, out)
            for name, stage in self.stages.items()
            for out in stage.get("outs", [])
            if _inside(path, out["path"]) or _inside(out["path"], path)
        ]

    def params(self, stage: str) -> dict[str, Any]:
        """Dotted key -> value of every param the stage depended on, as recorded at its run."""
        recorded = {}
        for file_values in (self.stages.get(stage, {}).get("params") or {}).values():
            recorded.update(_flatten(file_values))
        return recorded

    def params_files(self, stage: str) -> list[str]:
        return list((self.stages.get(stage, {}).get("params") or {}).keys())


def _flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def current_params(root: Path, params_file: str, keys: list[str]) -> dict[str, Any]:
    """The current value of each dotted key in a params file (a missing key maps to KeyError)."""
    data = load_yaml(root / params_file) or {}
    values: dict[str, Any] = {}
    for key in keys:
        node: Any = data
        for part in key.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = KeyError(key)
                break
        values[key] = node
    return values
