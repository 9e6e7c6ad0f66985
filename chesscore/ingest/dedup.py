"""First-occurrence tracking of 64-bit keys in 16 bytes per key, for dedup over whole dumps.

    seen = SeenKeys()
    seen.lookup(keys)            # int64 per key: the tag stored with its first occurrence, or -1
    seen.add(key, tag)           # remember a key (call in input order: the first one wins)
    seen.add_new(keys, tags)     # remember many keys known to be unseen and distinct
    repeated(keys)               # which keys occur more than once in one array

Each add_new becomes a sorted run of two numpy arrays (key, tag), and runs of similar size are
merged (size-tiered, as an LSM tree does); single adds wait in a small dict until FLUSH of them
make a run. Memory is 16 bytes per key plus the dict, and a lookup is one binary search per run
(a few dozen at most), all vectorised. Keys are 64-bit hashes: two different games share one
with probability about n^2 / 2^65 (1e-4 at 10^8 games).
"""

from __future__ import annotations

import numpy as np

FLUSH = 1 << 12  # each lookup scans the waiting keys: more of them cost more than the extra runs


def repeated(keys: np.ndarray) -> np.ndarray:
    """True where a key occurs more than once in the array (0 included)."""
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return counts[inverse] > 1


class SeenKeys:
    def __init__(self, flush: int = FLUSH) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # sorted (keys, tags), older and larger first
        self._recent: dict[int, int] = {}
        self._flush = flush

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self._runs) + len(self._recent)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The first occurrence's tag of each key, -1 where it was not seen."""
        keys = np.asarray(keys, np.uint64)
        found = np.full(len(keys), -1, np.int64)
        if self._runs:  # searched in key order: each binary search starts where the last ended
            order = np.argsort(keys)
            ordered, found_ordered = keys[order], np.full(len(keys), -1, np.int64)
            for run_keys, run_tags in self._runs:
                at = np.minimum(np.searchsorted(run_keys, ordered), len(run_keys) - 1)
                hit = (run_keys[at] == ordered) & (found_ordered < 0)  # older runs first: the first occurrence wins
                found_ordered[hit] = run_tags[at[hit]]
            found[order] = found_ordered
        if self._recent:
            recent = self._recent
            candidates = (found < 0) & np.isin(keys, np.fromiter(recent, np.uint64, len(recent)))
            for i in np.flatnonzero(candidates).tolist():
                found[i] = recent[int(keys[i])]
        return found

    def add(self, key: int, tag: int) -> None:
        self._recent.setdefault(key, tag)
        if len(self._recent) >= self._flush:
            self._spill()

    def add_new(self, keys: np.ndarray, tags: np.ndarray) -> None:
        """Remember keys known to be unseen and distinct (the caller checked with lookup)."""
        keys, tags = np.asarray(keys, np.uint64), np.asarray(tags, np.int64)
        if len(keys):
            self._add_run(keys, tags)

    def _spill(self) -> None:
        keys = np.fromiter(self._recent.keys(), np.uint64, len(self._recent))
        tags = np.fromiter(self._recent.values(), np.int64, len(self._recent))
        self._recent = {}
        self._add_run(keys, tags)

    def _add_run(self, keys: np.ndarray, tags: np.ndarray) -> None:
        order = np.argsort(keys)
        self._runs.append((keys[order], tags[order]))
        while len(self._runs) > 1 and len(self._runs[-1][0]) * 2 > len(self._runs[-2][0]):
            (keys_a, tags_a), (keys_b, tags_b) = self._runs.pop(), self._runs.pop()
            keys, tags = np.concatenate([keys_b, keys_a]), np.concatenate([tags_b, tags_a])
            order = np.argsort(keys, kind="stable")
            self._runs.append((keys[order], tags[order]))
