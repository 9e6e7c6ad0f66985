"""Self-play's unit of work: a shard of games with its own seed, and the error when its worker dies.

    shards = plan_shards(SelfPlayConfig(games=64, seed=3), shard_games=16)   # 4 shards, seeds 3000..3003

Shard s of a run with seed S plays with seed S*1000 + s, so the games are the same whichever
backend (local processes or Ray) plays them and in whatever order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chesscore.failures import Temporary
from chesscore.selfplay.games import SelfPlayConfig

MAX_SHARDS = 1000  # shard seeds are seed*1000 + shard: more would collide with the next seed


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
    if count > MAX_SHARDS:
        raise ValueError(
            f"{cfg.games} games in shards of {shard_games} make {count} shards; at most {MAX_SHARDS}: raise shard_games"
        )
    return [
        Shard(s, replace(cfg, games=min(shard_games, cfg.games - s * shard_games), seed=cfg.seed * 1000 + s))
        for s in range(count)
    ]
