"""Self-play: games between a model and itself (or an opponent), and the RL update they feed.

    records, stats = play_games(model, None, SelfPlayConfig(games=64, seed=1))   # one process
    pool = SelfPlayPool(workers=2); pool.play(model, None, cfg, shard_games=16)   # many (or Ray)
    run_selfplay(RunConfig(...), Execution(...))                                  # the stage

Modules: `games` (batched games, records), `plan` (shards and their seeds), `parallel` (a
process pool; `ray_shards` the same on Ray), `rl` (REINFORCE with a KL term to the supervised
model), `export` (games as PGN and as a dataset in the shard format), `run` (iterations of play
and update, resumable, with stats).
"""

from chesscore.selfplay.games import GameRecord, SelfPlayConfig, play_games
from chesscore.selfplay.parallel import SelfPlayPool
from chesscore.selfplay.plan import WorkerDied, plan_shards
from chesscore.selfplay.run import Execution, RunConfig, run_selfplay

__all__ = [
    "Execution",
    "GameRecord",
    "RunConfig",
    "SelfPlayConfig",
    "SelfPlayPool",
    "WorkerDied",
    "plan_shards",
    "play_games",
    "run_selfplay",
]
