"""Small file helpers every stage shares: atomic writes and content hashes.

A file is written to a temporary name in the same folder, flushed to disk, then renamed over
its final name (and the folder flushed), so a killed process or a power loss never leaves a
half file under the final name. A folder is built beside its final name and swapped in whole:

    with staging_dir(out) as tmp:        # out/../.<name>.tmp, removed if the block fails
        ...write into tmp...
        replace_dir(tmp, out)
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from chesscore.failures import Temporary, exhausted

_UMASK = os.umask(0)
os.umask(_UMASK)


# Called with the final path once a file's temporary copy is whole, just before the rename: the
# crash tests' `kill-at-write` fault (chesscore.cli.faults) kills the process there.
before_rename: Callable[[Path], None] | None = None


class DiskFull(Temporary):
    """The disk, a quota or a file size limit ran out while writing: nothing was left under the
    final name, and the same run may pass once space is freed."""


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Call write(file) on a temporary file beside `path`, then rename it to `path`. The file
    and then its folder are fsynced, so after a power loss the name holds the old file or the
    new one, whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if before_rename is not None:
            before_rename(path)
        os.replace(tmp, path)
        fsync_dir(path.parent)  # the rename itself lives in the folder: without this it may be lost
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if exhausted(error):
            raise _disk_full(path, error) from error
        raise


def fsync_dir(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (creations, renames) to disk."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as error:  # a file system that cannot sync folders (some network ones) says EINVAL
        if error.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


@contextmanager
def staging_dir(out: str | os.PathLike) -> Iterator[Path]:
    """A fresh, empty folder beside `out` (`.<name>.tmp`) to build `out` in; end the block with
    replace_dir(tmp, out). If the block fails, the folder is removed (a full disk becomes
    DiskFull): nothing partial is left, neither under `out` nor beside it."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # a killed run's leftovers
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if exhausted(error) or isinstance(error, DiskFull):
            raise _disk_full(out, error) from error
        raise


def _disk_full(target: Path, error: BaseException) -> DiskFull:
    while isinstance(error, DiskFull) and error.__cause__ is not None:  # name the outermost target
        error = error.__cause__
    why = getattr(error, "strerror", None) or str(error)
    return DiskFull(f"{target}: {why} while writing it; nothing was written under that name")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def update_text(path: str | os.PathLike, text: str) -> bool:
    """Write `text` atomically unless the file already holds it (its mtime then stays, and a
    no-op rerun that restores a missing output touches nothing else); True when written."""
    path = Path(path)
    if path.is_file() and path.read_bytes() == text.encode("utf-8"):
        return False
    atomic_write_text(path, text)
    return True


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


def json_text(obj: Any) -> str:
    """Pretty JSON with sorted keys (byte-identical for equal objects): how every JSON output reads."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def metrics_text(metrics: dict[str, Any]) -> str:
    """A DVC metrics file: a few numbers, floats rounded to 4 decimals (the full values live in
    the stage's own records), so `dvc metrics show` and `dvc exp show` stay narrow; a number
    that does not exist (None: no rating without anchored games) is left out, as DVC would."""
    return json_text({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items() if v is not None})


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """json_text(obj), written atomically."""
    atomic_write_text(path, json_text(obj))


RUN_RECORD = "run.json"  # beside a stage's outputs: how this process ran (not a DVC output)


def write_record(path: str | os.PathLike, record: dict[str, Any], run_keys: Iterable[str]) -> None:
    """A stage's record split in two, each written atomically: `path` with what the inputs,
    params, code and seed decide (a DVC output, the same bytes on every run), and run.json
    beside it with `run_keys`, what this process and machine decide (seconds, throughput,
    memory, workers, how it resumed). DVC hashes outputs into dvc.lock, so a time in an output
    would make every rerun look like a new result."""
    run_keys = set(run_keys)
    atomic_write_json(path, {k: v for k, v in record.items() if k not in run_keys})
    atomic_write_json(Path(path).with_name(RUN_RECORD), {k: v for k, v in record.items() if k in run_keys})


def load_yaml(path: str | os.PathLike) -> Any:
    """A YAML file read safely (no Python tags) and as YAML 1.2, the way DVC reads params.yaml
    and dvc.lock: `1e-5` is a float here, where PyYAML's YAML 1.1 makes it a string."""
    return load_yaml_text(Path(path).read_text(encoding="utf-8"))


def load_yaml_text(text: str) -> Any:
    """YAML text read as load_yaml reads a file (a flag's `1e-3` is the number params.yaml's is)."""
    from ruamel.yaml import YAML  # imported here: most users of this module never read YAML

    return YAML(typ="safe").load(text)  # libyaml's parser where ruamel.yaml.clib is installed (as DVC)


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
    """Put `new` in place of `out` (renames: a reader sees the old folder or the new one). A
    .gitignore in `out` is git's and DVC's (it names the outputs git must not track), not the
    stage's: it is carried over, or `git status` would show it deleted after every run."""
    old = out.with_name(f".{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if (out / ".gitignore").is_file() and not (new / ".gitignore").exists():
        shutil.copy2(out / ".gitignore", new / ".gitignore")
    for folder, _, names in os.walk(new):  # the new files' contents, before any name points at them
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(folder)
    if out.exists():
        out.rename(old)
    new.rename(out)
    fsync_dir(out.parent)
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
