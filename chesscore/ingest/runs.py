"""A part's dedup keys as sorted runs on disk, and their merge across parts in bounded memory.

    log = KeyLog()
    log.add(id_keys, move_keys, source_index)       # per validated batch, in input order
    log.write(part / "keys")                         # id_keys.npy, id_rows.npy, move_keys.npy, ...
    for keys, tags in shared_keys([Run(a, "id"), Run(b, "id")]):   # every key found more than once, all its tags
        ...

A part is one raw file validated alone (`python -m stages.validate --part`, which leaves dedup to
the merge stage, chesscore.ingest.merge). Its keys/ folder holds, per kind (`id`: the Lichess id,
rows without one left out; `move`: the tokens), two 1-D arrays sorted by (key, row): KIND_keys.npy
(uint64) and KIND_rows.npy (the row in the part's games.arrow), plus index.npy, each row's game
index in its file (for the duplicates' reject details). 1-D, so a slice of a run is one read.

shared_keys merges the runs of many parts a window at a time (`window` entries over all runs in
memory, then only the keys that repeat), so its memory does not grow with the games: a tag is
(part << 40) | row, the order in which the first occurrence wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

KINDS = ("id", "move")
INDEX = "index.npy"
ROW_BITS = 40  # a tag is (part << 40) | row, as validate_run's (file << 40) | game index
WINDOW = 1 << 20  # key entries read at a time over all runs (about 50 bytes each while merged)


class KeyLog:
    """The keys of a part's accepted rows, collected in row order and written as sorted runs."""

    def __init__(self) -> None:
        self._ids: list[np.ndarray] = []
        self._moves: list[np.ndarray] = []
        self._index: list[np.ndarray] = []

    def add(self, id_keys: np.ndarray, move_keys: np.ndarray, source_index: np.ndarray) -> None:
        self._ids.append(np.asarray(id_keys, np.uint64))
        self._moves.append(np.asarray(move_keys, np.uint64))
        self._index.append(np.asarray(source_index, np.int64))

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        ids, moves, index = (
            _joined(parts, dtype)
            for parts, dtype in ((self._ids, np.uint64), (self._moves, np.uint64), (self._index, np.int64))
        )
        rows = np.arange(len(index), dtype=np.uint64)
        has_id = ids != 0  # no Lichess id: such rows are told apart by their moves only
        for kind, keys, key_rows in (("id", ids[has_id], rows[has_id]), ("move", moves, rows)):
            order = np.lexsort((key_rows, keys))
            np.save(folder / f"{kind}_keys.npy", keys[order])
            np.save(folder / f"{kind}_rows.npy", key_rows[order])
        np.save(folder / INDEX, index)


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


class Run:
    """One sorted run of a part on disk, read a slice at a time with plain reads: a memory map
    would leave every page it touched resident, and the merge's RSS would grow with the keys."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.paths = (folder / f"{kind}_keys.npy", folder / f"{kind}_rows.npy")
        maps = [np.load(path, mmap_mode="r") for path in self.paths]  # the header only: no page is read
        self.offsets = [int(m.offset) for m in maps]
        self.length = len(maps[0])
        del maps

    def __len__(self) -> int:
        return self.length

    def keys(self, start: int, stop: int) -> np.ndarray:
        return self._read(0, start, stop)

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self._read(1, start, stop)

    def _read(self, which: int, start: int, stop: int) -> np.ndarray:
        stop = min(stop, self.length)
        if stop <= start:
            return np.zeros(0, np.uint64)
        return np.fromfile(self.paths[which], np.uint64, stop - start, offset=self.offsets[which] + 8 * start)

    def end_of(self, key: int, start: int, window: int) -> int:
        """The first position from `start` on whose key is above `key`, a window at a time."""
        while True:
            keys = self.keys(start, start + window)
            end = int(np.searchsorted(keys, key, "right"))
            if end < len(keys) or start + len(keys) >= self.length:
                return start + end
            start += len(keys)


def game_indexes(folder: Path, rows: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """index.npy at the given sorted rows, read a window at a time (not mapped, as Run)."""
    header = np.load(folder / INDEX, mmap_mode="r")
    offset, length = int(header.offset), len(header)
    del header
    out = np.zeros(len(rows), np.int64)
    for start in range(0, length, window):
        lo, hi = np.searchsorted(rows, [start, start + window])
        if hi > lo:
            chunk = np.fromfile(folder / INDEX, np.int64, min(window, length - start), offset=offset + 8 * start)
            out[lo:hi] = chunk[rows[lo:hi] - start]
    return out


def shared_keys(runs: list[Run], window: int = WINDOW) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(keys, tags) of every key occurring more than once over the runs (run i is part i), sorted
    by key then tag, `window` entries at a time over all runs (the entries of one key always come
    together, however many: a key repeated past the window is the one thing that exceeds it)."""
    window = max(1, window // max(len(runs), 1))  # of each run
    at = [0] * len(runs)
    while True:
        live = [i for i, run in enumerate(runs) if at[i] < len(run)]
        if not live:
            return
        windows = {i: runs[i].keys(at[i], at[i] + window) for i in live}
        # Every run is safe below the smallest last key of a window that does not reach its end.
        cut = [windows[i][-1] for i in live if at[i] + window < len(runs[i])]
        bound = min(cut) if cut else None
        if bound is None:
            stops = {i: at[i] + len(windows[i]) for i in live}
        else:
            stops = {i: at[i] + int(np.searchsorted(windows[i], bound, "left")) for i in live}
            if all(stops[i] == at[i] for i in live):  # one key fills a whole window: take all of it
                stops = {i: runs[i].end_of(bound, at[i], window) for i in live}
        keys = np.concatenate([runs[i].keys(at[i], stops[i]) for i in live])
        tags = np.concatenate([(np.uint64(i) << np.uint64(ROW_BITS)) | runs[i].rows(at[i], stops[i]) for i in live])
        for i in live:
            at[i] = stops[i]
        order = np.lexsort((tags, keys))
        keys, tags = keys[order], tags[order]
        same = keys[1:] == keys[:-1]
        repeated = np.zeros(len(keys), bool)
        repeated[1:] |= same
        repeated[:-1] |= same
        if repeated.any():
            yield keys[repeated], tags[repeated]
