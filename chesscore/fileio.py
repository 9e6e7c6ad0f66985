"""Small file helpers every stage shares: atomic writes and content hashes.

A file is written to a temporary name in the same folder, flushed to disk, then renamed over
its final name, so a killed process never leaves a half file under the final name.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Call write(file) on a temporary file beside `path`, then rename it to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def csv_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """rows as CSV text with a header: the given columns only, \n line ends (same bytes on every OS)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def canonical_json(obj: Any) -> str:
    """The one JSON spelling hashed for fingerprints: sorted keys, no spaces."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Pretty JSON with sorted keys (byte-identical for equal objects), written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def load_yaml(path: str | os.PathLike) -> Any:
    """A YAML file read safely (no Python tags) and as YAML 1.2, the way DVC reads params.yaml
    and dvc.lock: `1e-5` is a float here, where PyYAML's YAML 1.1 makes it a string."""
    return load_yaml_text(Path(path).read_text(encoding="utf-8"))


def load_yaml_text(text: str) -> Any:
    """YAML text read as load_yaml reads a file (a flag's `1e-3` is the number params.yaml's is)."""
    from ruamel.yaml import YAML  # imported here: most users of this module never read YAML

    return YAML(typ="safe", pure=True).load(text)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    return sha256_bytes(canonical_json(obj).encode("utf-8"))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def replace_dir(new: Path, out: Path) -> None:
    """Put `new` in place of `out` (renames: a reader sees the old folder or the new one)."""
    old = out.with_name(f".{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def code_sha256(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """sha256 of each file of code, keyed by its path relative to the checkout; a folder (a
    package) stands for every .py file under it."""
    root = Path(__file__).resolve().parents[1]
    files = []
    for path in map(Path, paths):
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    out = {}
    for path in files:
        path = path.resolve()
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
