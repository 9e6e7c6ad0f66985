"""Which games of the merge's parts an earlier game repeats, from their sorted key runs.

    duplicates = find_duplicates([Path("data/parts/2024-01"), Path("data/parts/2024-02")], inputs)
    duplicates.of_part(1)             # the slice of part 1's duplicates (tags sorted: input order)
    duplicates.details(at, inputs)    # "same moves as game 12 of data/raw/2024-01.pgn.zst", ...

The rule is validate_run's: in input order, a game is dropped when its id or its moves equal a
game kept before it (a dropped game keeps no key, so it blocks nothing after it). Only games
holding a key that occurs more than once can be dropped: the parts' runs are merged a window at
a time (chesscore.ingest.runs.shared_keys) and only those keys are kept, then replayed in input
order. The replay's state is numpy arrays (a number per distinct repeated key, the tag of the
game kept with it), its Python objects a block of _BLOCK entries at a time: memory is the window
plus about 60 bytes per entry of a repeated key, not per game.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chesscore.ingest.runs import KINDS, ROW_BITS, WINDOW, Run, game_indexes, shared_keys
from chesscore.ingest.validate_run import KEYS

ROW_MASK = (1 << ROW_BITS) - 1


@dataclass(frozen=True)
class Duplicates:
    """Every game an earlier game repeats, in input order (tags sorted): what it repeats
    (WHAT[what]) and where the first occurrence is. numpy arrays: 25 bytes a duplicate."""

    tags: np.ndarray  # uint64: (part << ROW_BITS) | row
    what: np.ndarray  # uint8: 0 the game id, 1 the moves
    first_part: np.ndarray  # int64
    first_index: np.ndarray  # int64: the first occurrence's game index in its file

    def __len__(self) -> int:
        return len(self.tags)

    def of_part(self, number: int) -> slice:
        bounds = np.array([number, number + 1], np.uint64) << np.uint64(ROW_BITS)
        lo, hi = np.searchsorted(self.tags, bounds).tolist()
        return slice(lo, hi)

    def details(self, at: slice, inputs: list[dict]) -> list[str]:
        """The rejects' details, as validate_run words them: 'same moves as game N of PATH'."""
        columns = (self.what[at].tolist(), self.first_part[at].tolist(), self.first_index[at].tolist())
        return [f"same {WHAT[what]} as game {index} of {inputs[part]['path']}" for what, part, index in zip(*columns)]


WHAT = ("game id", "moves")
_BLOCK = 1 << 16  # repeated-key entries turned into Python ints at a time by the replay


def find_duplicates(parts: list[Path], inputs: list[dict], window: int = WINDOW) -> Duplicates:
    """Every game an earlier game repeats, by the rule of validate_run: a game is dropped when
    its id or its moves equal a game kept before it. Memory: the window, then about 60 bytes per
    entry of a repeated key (two per duplicate and one per first occurrence, per kind)."""
    found = [list(shared_keys([Run(part / KEYS, kind) for part in parts], window)) for kind in KINDS]
    keys = np.concatenate([keys for pieces in found for keys, _ in pieces] or [np.zeros(0, np.uint64)])
    tags = np.concatenate([tags for pieces in found for _, tags in pieces] or [np.zeros(0, np.uint64)])
    kinds = np.concatenate(
        [np.full(len(k), n, np.uint8) for n, pieces in enumerate(found) for k, _ in pieces] or [np.zeros(0, np.uint8)]
    )
    del found
    dense, unique = _dense_ids(keys, kinds)
    del keys
    order = np.lexsort((kinds, tags))  # input order, the id before the moves
    dup_tags, what, by = _replay(tags[order], kinds[order], dense[order], unique)
    first_part, first_index = _first_places(parts, by, window)
    return Duplicates(dup_tags, what, first_part, first_index)


def _dense_ids(keys: np.ndarray, kinds: np.ndarray) -> tuple[np.ndarray, int]:
    """A number from 0 for each distinct (kind, key), so the replay's state is one array."""
    order = np.lexsort((keys, kinds))
    k, c = keys[order], kinds[order]
    new = np.ones(len(k), bool)
    new[1:] = (k[1:] != k[:-1]) | (c[1:] != c[:-1])
    dense = np.empty(len(k), np.int64)
    dense[order] = np.cumsum(new) - 1
    return dense, int(new.sum())


def _replay(tags: np.ndarray, kinds: np.ndarray, dense: np.ndarray, unique: int) -> tuple[np.ndarray, ...]:
    """Walk the games holding repeated keys in input order: a game whose keys no kept game holds
    is kept (its keys remembered), any other is a duplicate of the first kept game found.
    (tags, what, first tag) of the duplicates, in input order."""
    kept = np.full(unique, -1, np.int64)  # the tag of the game kept with each key
    ends = np.append(np.flatnonzero(tags[1:] != tags[:-1]) + 1, len(tags))  # where each game's entries end
    out_tags, out_what, out_by = (np.zeros(len(ends), dtype) for dtype in (np.uint64, np.uint8, np.uint64))
    found, lo = 0, 0
    while lo < len(tags):  # a block of whole games at a time
        stop = int(ends[min(int(np.searchsorted(ends, lo + _BLOCK)), len(ends) - 1)])
        block_tags, block_kinds, block_ids = (a[lo:stop].tolist() for a in (tags, kinds, dense))
        at = 0
        while at < len(block_tags):
            tag, first, mine = block_tags[at], [-1, -1], []
            while at < len(block_tags) and block_tags[at] == tag:
                first[block_kinds[at]] = int(kept[block_ids[at]])
                mine.append(block_ids[at])
                at += 1
            if max(first) < 0:
                kept[mine] = tag
                continue
            what = 0 if first[0] >= 0 else 1
            out_tags[found], out_what[found], out_by[found] = tag, what, first[what]
            found += 1
        lo = stop
    return out_tags[:found], out_what[:found], out_by[:found]


def _first_places(parts: list[Path], tags: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Each tag's part and game index in its file (validate_run names a duplicate's first
    occurrence 'game N of PATH')."""
    part_of = (tags >> np.uint64(ROW_BITS)).astype(np.int64)
    index = np.zeros(len(tags), np.int64)
    for number, part in enumerate(parts):
        mine = np.flatnonzero(part_of == number)
        if len(mine):
            rows, back = np.unique((tags[mine] & np.uint64(ROW_MASK)).astype(np.int64), return_inverse=True)
            index[mine] = game_indexes(part / KEYS, rows, window)[back]
    return part_of, index
