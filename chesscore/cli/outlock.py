"""One writer per output folder: the lock each stage takes on its output before it writes.

    hold_output(args.out, "train")     # one line in a stage's main, once its params are checked

The lock is an flock on `<parent>/.<name>.lock`, beside the folder (a stage may replace the
folder itself by a rename): the kernel releases it when the process ends in any way, so a killed
run leaves no stale lock. A second run on the same folder fails at once with OutputLocked
(temporary, exit 75: retry when the first one ends) naming the holder's PID, or waits for it up
to CHESSCORE_LOCK_WAIT seconds. Two `stages.train --output X` at once both exited 0, leaving
identity.json of one run beside the checkpoints of the other.

Once the lock is held, no other run can own a temporary file in the folder, so what a killed
run left is removed: `.<name>.tmp` and `.<name>.old` beside it (chesscore.fileio.staging_dir and
replace_dir) and every `.*.tmp` inside it (atomic_write's temporary files, staged sub-folders).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from chesscore.failures import Refused, Temporary
from chesscore.runtime.locks import FileLock

WAIT_ENV = "CHESSCORE_LOCK_WAIT"
_HELD: dict[Path, FileLock] = {}  # held until the process ends (or release_output)


class OutputLocked(Temporary):
    """Another run is writing the same output folder."""


def lock_path(out: str | os.PathLike) -> Path:
    out = Path(out).absolute()
    return out.with_name(f".{out.name}.lock")


def hold_output(out: str | os.PathLike, stage: str, wait: float | None = None) -> list[Path]:
    """Lock `out` for this process (OutputLocked if another run holds it), then remove the
    temporary files and folders a killed run left there; the removed paths."""
    out = Path(out).absolute()
    if out in _HELD:
        return []
    if wait is None:
        wait = _wait_from_env()
    path = lock_path(out)
    lock = FileLock.acquire(path, wait=wait, what=stage)
    if lock is None:
        raise OutputLocked(
            f"{out}: another run is writing this folder ({FileLock.holder(path)}); run again when it "
            f"ends, or set {WAIT_ENV}=SECONDS to wait for it"
        )
    _HELD[out] = lock
    return remove_leftovers(out)


def release_output(out: str | os.PathLike) -> None:
    lock = _HELD.pop(Path(out).absolute(), None)
    if lock is not None:
        lock.release()


def remove_leftovers(out: Path) -> list[Path]:
    """The temporary files and folders of killed runs, beside and inside `out`, removed."""
    found = [out.with_name(f".{out.name}.tmp"), out.with_name(f".{out.name}.old")]
    if out.is_dir():
        found += sorted(out.rglob(".*.tmp"), key=lambda p: len(p.parts))
    removed = []
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink(missing_ok=True)
        else:
            continue
        removed.append(path)
    return removed


def _wait_from_env() -> float:
    text = os.environ.get(WAIT_ENV, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise Refused(f"{WAIT_ENV}={text!r}: expected a number of seconds >= 0")
    return value
