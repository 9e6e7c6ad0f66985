"""The inputs' sha256, computed in a thread beside validate's work instead of before it.

    with InputHashes(files) as hashes:
        ...                         # the workers validate; rows carry source_sha256 = ""
        hashes.get(0)               # file 0's hex digest (waits for it); an unreadable file raises

SHA-256 is one serial pass over every byte of the input. Done first in the main process it was
a third of that process's CPU per game on a plain .pgn (4.9 of 8.2-9.0 us), and the main
process is what limits --workers. hashlib hands the GIL back while it digests a block, so one
thread hashes the files in order on a core of its own while the main thread cuts, merges and
writes; the main process fills in the rows' source_sha256 when it writes them (the workers
leave it empty), so the output is the same bytes as before.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from types import TracebackType

from chesscore import failures

BLOCK = 1 << 20  # bytes read (into one buffer) and digested at a time, the GIL free for both


class InputHashes:
    """Each file's sha256, one file after another, in a daemon thread (stopped on close, so an
    error does not wait on the hash of a large file)."""

    def __init__(self, files: list[Path]) -> None:
        self.files = files
        self._digests: list[str | BaseException | None] = [None] * len(files)
        self._ready = [threading.Event() for _ in files]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="input-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for number, path in enumerate(self.files):
                if self._stop.is_set():
                    break
                self._digests[number] = self._digest(path)
                self._ready[number].set()
        finally:
            for ready in self._ready:  # stopped or failed: no caller waits for ever
                ready.set()

    def _digest(self, path: Path) -> str | BaseException | None:
        digest, block = hashlib.sha256(), bytearray(BLOCK)
        view = memoryview(block)
        try:
            with open(path, "rb", buffering=0) as f:
                while size := f.readinto(block):
                    if self._stop.is_set():
                        return None
                    digest.update(view[:size])
        except OSError as error:
            return failures.BadInput(f"{path}: cannot read this input ({error.strerror or error})")
        return digest.hexdigest()

    def get(self, number: int) -> str:
        """File `number`'s hex digest, once the thread has it."""
        self._ready[number].wait()
        digest = self._digests[number]
        if isinstance(digest, BaseException):
            raise digest
        if digest is None:
            raise RuntimeError(f"{self.files[number]}: its hash was stopped (InputHashes closed)")
        return digest

    def close(self) -> None:
        self._stop.set()

    def __enter__(self) -> InputHashes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
