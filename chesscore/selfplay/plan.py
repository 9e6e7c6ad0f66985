"""Self-play's unit of work: a shard of games with its own seed, and the error when its worker dies.

    shards = plan_shards(SelfPlayConfig(games=64, seed=3), shard_games=16)   # 4 shards, 4 seeds

Shard s of a run with seed S plays with seed derive_seed(S, "shard", s), so the games are the
same whichever backend (local processes or Ray) plays them and in whatever order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chesscore.failures import Temporary
from chesscore.runtime.seeds import derive_seed
from chesscore.selfplay.games import SelfPlayConfig


class WorkerDied(Temporary, RuntimeError):
    """A worker process (or Ray task) ended without returning its shard."""


@dataclass(frozen=True)
class Shard:
    index: int
    cfg: SelfPlayConfig  # games and seed of this shard

    def describe(self) -> str:
        return f"shard {self.index} (seed {self.cfg.seed}, {self.cfg.games} games)"


def plan_shards(cfg: SelfPlayConfig, shard_games: int) -> list[Shard]:
    """cfg.games cut into shards of shard_games (the last may be smaller)."""
    if shard_games < 1:
        raise ValueError(f"shard_games must be >= 1, got {shard_games}")
    count = -(-cfg.games // shard_games)
    return [
        Shard(
            s, replace(cfg, games=min(shard_games, cfg.games - s * shard_games), seed=derive_seed(cfg.seed, "shard", s))
        )
        for s in range(count)
    ]
