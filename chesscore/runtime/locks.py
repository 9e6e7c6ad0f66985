"""OS file locks that die with their process, and temporary folders owned by one.

    lock = FileLock.acquire(Path("data/.train.lock"), wait=0)   # None if another process holds it
    FileLock.holder(Path("data/.train.lock"))                    # "PID 4242 (train) since 2024-..."

    with scratch_dir("chesscore-selfplay-") as folder:          # in the system temp folder
        ...                                                     # a killed owner's folder is removed
                                                                # by the next scratch_dir of its prefix

The lock is flock(2) on a lock file: the kernel releases it when the holder exits in any way
(SIGKILL, the OOM killer), so there is never a stale lock to clean by hand. The lock file stays
(deleting it would race with a process about to lock it) and holds a line naming its holder.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class FileLock:
    """An exclusive flock on `path`, held until release() or the end of the process."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def acquire(cls, path: Path, wait: float = 0.0, what: str = "") -> FileLock | None:
        """The lock, or None if another process still holds it after `wait` seconds."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        since = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        note = f"PID {os.getpid()} on {socket.gethostname()}{f' ({what})' if what else ''} since {since}\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode(), 0)
        return cls(path, fd)

    @staticmethod
    def holder(path: Path) -> str:
        """Who holds (or last held) the lock, as its lock file says."""
        try:
            return path.read_text(encoding="utf-8").strip() or "another process"
        except OSError:
            return "another process"

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the only descriptor releases the flock
            self.fd = -1


def is_locked(path: Path) -> bool:
    """Whether some process holds the flock on `path` now (False if the file does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@contextmanager
def scratch_dir(prefix: str, root: str | os.PathLike | None = None) -> Iterator[Path]:
    """A new temporary folder `<root>/<prefix>XXXX`, owned through the lock file beside it
    (`<prefix>XXXX.lock`) and removed at the end of the block. Folders of the same prefix whose
    lock nobody holds (their owner was killed) are removed first: a crash leaks nothing for long."""
    root = Path(root or tempfile.gettempdir())
    sweep_scratch(prefix, root)
    fd, lock_name = tempfile.mkstemp(prefix=prefix, suffix=".lock", dir=root)
    os.close(fd)
    lock_path = Path(lock_name)
    lock = FileLock.acquire(lock_path, wait=5.0, what="scratch")  # a sweeper may test it for an instant
    folder = lock_path.with_suffix("")
    try:
        folder.mkdir()
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        lock_path.unlink(missing_ok=True)
        if lock is not None:
            lock.release()


def sweep_scratch(prefix: str, root: Path, min_age_seconds: float = 10.0) -> list[Path]:
    """Remove the folders of dead owners (lock file older than min_age_seconds, so that one
    being set up right now is left alone); the removed folders."""
    removed = []
    for lock_path in root.glob(f"{prefix}*.lock"):
        try:
            young = time.time() - lock_path.stat().st_mtime < min_age_seconds
        except OSError:
            continue
        if young or is_locked(lock_path):
            continue
        folder = lock_path.with_suffix("")
        shutil.rmtree(folder, ignore_errors=True)
        lock_path.unlink(missing_ok=True)
        removed.append(folder)
    return removed
