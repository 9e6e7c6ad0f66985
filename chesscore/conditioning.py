"""The triples-v2 conditioning prefix of stored games: made from each game's rating and
time-control columns when the game is read, so datasets keep their v1 tokens (chesscore.tokens).

    prefixes = table_prefixes(table)                       # (N, 3) uint8: the true prefix of each game
    trained = drop_prefixes(prefixes, 0.1, seed=2026)      # 10% of the games -> UNKNOWN_PREFIX
    trained = drop_fields(trained, 0.2, seed=2026)         # and 20% per field: that field alone unknown
    source = ConditionedSource(table, trained)             # a GameSource of v2 rows: BOS, prefix, moves, EOS
    with_prefix(game, prefix)                              # one v1 game's v2 row
    prefix_of(meta)                                        # one game's prefix from its metadata dict

Which games are dropped to "unknown" is a pure function of the seed and the number of games
(exactly round(fraction * N) of them), so every rank and every resume picks the same ones.

Why single fields too: a bot is told its own rating (UCI_Elo) and often nothing of its opponent
or the clock, so it plays from prefixes such as (1500, unknown, unknown). A model trained on whole
prefixes or whole "unknown" only has never seen an unknown beside a known rating, and what it
makes of one is anyone's guess; dropping each field on its own teaches it to read the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from chesscore.runtime.seeds import derive_seed
from chesscore.tokens import PAD, PREFIX_LENGTH, UNKNOWN_PREFIX, conditioning_prefix, rating_token, time_control_token

FIELDS = ("white_rating", "black_rating", "time_control")  # the prefix's positions, in order


def prefix_of(meta: Mapping[str, Any]) -> tuple[int, int, int]:
    """The true prefix of one game from its metadata (white_elo, black_elo, time_control_class)."""
    return conditioning_prefix(meta.get("white_elo"), meta.get("black_elo"), meta.get("time_control_class"))


def table_prefixes(table: Any) -> np.ndarray:
    """(N, 3) uint8 true prefixes of every game of a TokenTable (chesscore.data.dataset), from its
    columns; a null rating (missing, provisional) is RATING_UNKNOWN."""
    white, black = (table.column(name).to_pylist() for name in ("white_elo", "black_elo"))
    classes = table.column("time_control_class").to_pylist()
    tc = {name: time_control_token(name) for name in set(classes)}
    out = np.empty((len(white), PREFIX_LENGTH), dtype=np.uint8)
    out[:, 0] = [rating_token(r) for r in white]
    out[:, 1] = [rating_token(r) for r in black]
    out[:, 2] = [tc[name] for name in classes]
    return out


def _chosen_rows(n: int, fraction: float, setting: str, seed: int, *labels: object) -> np.ndarray:
    """Exactly round(fraction * n) of n rows, a pure function of the seed, the labels and n."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"{setting} must be within 0..1, got {fraction}")
    rng = np.random.default_rng(derive_seed(seed, "conditioning", "unknown", *labels, n))
    return rng.permutation(n)[: round(fraction * n)]


def drop_prefixes(prefixes: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A copy with exactly round(fraction * N) seeded rows set to UNKNOWN_PREFIX (the games the
    model learns to play unconditioned)."""
    out = np.array(prefixes, dtype=np.uint8, copy=True)
    out[_chosen_rows(len(out), fraction, "unknown_fraction", seed)] = UNKNOWN_PREFIX
    return out


def drop_fields(prefixes: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A copy where, for each field of the prefix on its own, exactly round(fraction * N) seeded
    rows read that field's "unknown" token (chosen independently per field, so some rows lose two
    or all three)."""
    out = np.array(prefixes, dtype=np.uint8, copy=True)
    for column, field in enumerate(FIELDS):
        out[_chosen_rows(len(out), fraction, "field_unknown_fraction", seed, field), column] = UNKNOWN_PREFIX[column]
    return out


def with_prefix(game: np.ndarray | Sequence[int], prefix: Sequence[int]) -> np.ndarray:
    """A v1 game's tokens as its v2 row: BOS, the prefix, then the moves and EOS."""
    game = np.asarray(game)
    return np.concatenate([game[:1], np.asarray(prefix), game[1:]]).astype(np.uint8)


class ConditionedSource:
    """A GameSource of v1 games (a TokenTable or TokenList) read as v2 rows with one prefix each."""

    # base: a chesscore.train.batching.GameSource (not imported: chesscore.train reads this module)
    def __init__(self, base: Any, prefixes: np.ndarray | Sequence[Sequence[int]]) -> None:
        self.base = base
        self.prefixes = np.asarray(prefixes, dtype=np.uint8).reshape(-1, PREFIX_LENGTH)
        if len(self.prefixes) != len(base):
            raise ValueError(f"{len(self.prefixes)} prefixes for {len(base)} games")
        self.fingerprint = getattr(base, "fingerprint", None)

    def __len__(self) -> int:
        return len(self.base)

    def lengths(self) -> np.ndarray:
        return np.asarray(self.base.lengths()) + PREFIX_LENGTH

    def __getitem__(self, index: int) -> np.ndarray:
        return with_prefix(self.base[index], self.prefixes[index])

    def batch(self, indices: Sequence[int] | np.ndarray, pad: int = PAD) -> np.ndarray:
        rows = self.base.batch(indices, pad=pad)
        prefixes = self.prefixes[np.asarray(indices, dtype=np.int64).reshape(-1)]
        return np.concatenate([rows[:, :1], prefixes, rows[:, 1:]], axis=1)
