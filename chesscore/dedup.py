"""First-occurrence tracking of 64-bit keys in 16 bytes per key, for dedup over whole dumps.

    seen = SeenKeys()
    seen.lookup(keys)            # int64 per key: the tag stored with its first occurrence, or -1
    seen.add(key, tag)           # remember a key (call in input order: the first one wins)
    seen.add_new(keys, tags)     # remember many keys known to be unseen and distinct

Recent keys live in a small dict; every FLUSH of them become a sorted run of two numpy arrays
(key, tag), and runs of similar size are merged (size-tiered, as an LSM tree does), so memory is
16 bytes per key plus a bounded dict, and a lookup is one binary search per run (a few dozen at
most). Keys are 64-bit hashes: two different games share one with probability about n^2 / 2^65
(1e-4 at 10^8 games).
"""

from __future__ import annotations

import numpy as np

FLUSH = 1 << 16


class SeenKeys:
    def __init__(self, flush: int = FLUSH) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # sorted (keys, tags), older and larger first
        self._recent: dict[int, int] = {}
        self._flush = flush

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self._runs) + len(self._recent)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The first occurrence's tag of each key, -1 where it was not seen (vectorised over the
        runs; the recent keys are looked up one by one)."""
        keys = np.asarray(keys, np.uint64)
        found = np.full(len(keys), -1, np.int64)
        for run_keys, run_tags in self._runs:
            at = np.minimum(np.searchsorted(run_keys, keys), len(run_keys) - 1)
            hit = (run_keys[at] == keys) & (found < 0)  # older runs first: the first occurrence wins
            found[hit] = run_tags[at[hit]]
        if self._recent:
            recent = self._recent
            for i in np.flatnonzero(found < 0).tolist():
                found[i] = recent.get(int(keys[i]), -1)
        return found

    def add(self, key: int, tag: int) -> None:
        self._recent.setdefault(key, tag)
        if len(self._recent) >= self._flush:
            self._spill()

    def add_new(self, keys: np.ndarray, tags: np.ndarray) -> None:
        """Remember keys known to be unseen and distinct (the caller checked with lookup)."""
        self._recent.update(zip(np.asarray(keys, np.uint64).tolist(), np.asarray(tags, np.int64).tolist()))
        if len(self._recent) >= self._flush:
            self._spill()

    def _spill(self) -> None:
        keys = np.fromiter(self._recent.keys(), np.uint64, len(self._recent))
        tags = np.fromiter(self._recent.values(), np.int64, len(self._recent))
        order = np.argsort(keys)
        self._runs.append((keys[order], tags[order]))
        self._recent = {}
        while len(self._runs) > 1 and len(self._runs[-1][0]) * 2 > len(self._runs[-2][0]):
            (keys_a, tags_a), (keys_b, tags_b) = self._runs.pop(), self._runs.pop()
            keys, tags = np.concatenate([keys_b, keys_a]), np.concatenate([tags_b, tags_a])
            order = np.argsort(keys, kind="stable")
            self._runs.append((keys[order], tags[order]))
