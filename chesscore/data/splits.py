"""Which split a game belongs to: a keyed hash of its id, so a game keeps its split forever.

    rule = SplitRule(train=0.90, validation=0.05, test=0.05, split_key="chesscore-split-v1")
    splits = assign_splits(["QwErTy12", "moves:ab12..."], rule)   # 0 train, 1 validation, 2 test

Adding more input never moves a game from one split to another: the split depends on the id
and the key alone. Convert splits by game id; self-play by the hash of a game's moves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from chesscore import ranges


@dataclass(frozen=True)
class SplitRule:
    train: float = 0.90  # fraction of games (by hash of the game id) in each split
    validation: float = 0.05
    test: float = 0.05
    split_key: str = "chesscore-split-v1"  # the hash key: change it to draw a new split

    def __post_init__(self) -> None:
        ranges.check(self, fraction=("train", "validation", "test"))
        fractions = (self.train, self.validation, self.test)
        if abs(sum(fractions) - 1) > 1e-9:
            raise ranges.InvalidSetting(f"train, validation, test: the split fractions {fractions} must sum to 1")
        if not isinstance(self.split_key, str) or not 0 < len(self.split_key.encode()) <= 64:
            raise ranges.InvalidSetting(
                f"split_key must be a text of 1 to 64 bytes (a blake2b key), got {self.split_key!r}"
            )


def assign_splits(game_ids: list[str], rule: SplitRule) -> np.ndarray:
    """0 (train), 1 (validation) or 2 (test) per game: where a keyed 64-bit hash of the id falls."""
    key = rule.split_key.encode()
    hashes = np.frombuffer(
        b"".join(hashlib.blake2b(game_id.encode(), key=key, digest_size=8).digest() for game_id in game_ids), np.uint64
    )
    bounds = [np.uint64(min(int(f * 2**64), 2**64 - 1)) for f in (rule.train, rule.train + rule.validation)]
    return (hashes >= bounds[0]).astype(np.int8) + (hashes >= bounds[1]).astype(np.int8)
