"""First-occurrence tracking of 64-bit keys in 16 bytes per key, for dedup over whole dumps.

    seen = SeenKeys()
    seen.lookup(keys)            # int64 per key: the tag stored with its first occurrence, or -1
    seen.add(key, tag)           # remember a key (call in input order: the first one wins)

Recent keys live in a dict; past FLUSH of them they are merged into two sorted numpy arrays
(key, tag), so memory is flat per key instead of a Python object per game. Keys are 64-bit
hashes: two different games share one with probability about n^2 / 2^65 (1e-4 at 10^8 games).
"""

from __future__ import annotations

import numpy as np

FLUSH = 1 << 20


class SeenKeys:
    def __init__(self, flush: int = FLUSH) -> None:
        self._keys = np.zeros(0, np.uint64)
        self._tags = np.zeros(0, np.int64)
        self._recent: dict[int, int] = {}
        self._flush = flush

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The first occurrence's tag of each key, -1 where it was not seen (vectorised over the
        merged keys; the recent ones are looked up one by one)."""
        keys = np.asarray(keys, np.uint64)
        found = np.full(len(keys), -1, np.int64)
        if len(self._keys):
            at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
            hit = self._keys[at] == keys
            found[hit] = self._tags[at[hit]]
        if self._recent:
            recent = self._recent
            for i in np.flatnonzero(found < 0).tolist():
                found[i] = recent.get(int(keys[i]), -1)
        return found

    def get(self, key: int) -> int:
        """The tag of one key, -1 if unseen."""
        tag = self._recent.get(key, -1)
        return tag if tag >= 0 else int(self.lookup(np.array([key], np.uint64))[0])

    def add(self, key: int, tag: int) -> None:
        self._recent.setdefault(key, tag)
        if len(self._recent) >= self._flush:
            self._merge()

    def add_new(self, keys: np.ndarray, tags: np.ndarray) -> None:
        """Remember keys known to be unseen and distinct (the caller checked with lookup)."""
        self._recent.update(zip(np.asarray(keys, np.uint64).tolist(), np.asarray(tags, np.int64).tolist()))
        if len(self._recent) >= self._flush:
            self._merge()

    def _merge(self) -> None:
        keys = np.fromiter(self._recent.keys(), np.uint64, len(self._recent))
        tags = np.fromiter(self._recent.values(), np.int64, len(self._recent))
        keys, tags = np.concatenate([self._keys, keys]), np.concatenate([self._tags, tags])
        order = np.argsort(keys, kind="stable")
        self._keys, self._tags = keys[order], tags[order]
        self._recent = {}
