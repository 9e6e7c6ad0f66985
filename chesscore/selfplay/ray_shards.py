"""The `ray` backend of SelfPlayPool: the same shards, played as Ray tasks on a cluster.

    ray start --head                       # on one machine; `ray start --address=...` on others
    RAY_ADDRESS=auto python -m stages.selfplay --backend ray --workers 0

Each call puts the weights files' bytes into Ray's object store once; a Ray worker fetches
them only when it has not loaded that call's weights yet, writes them to a local temporary
file and loads it with the one checkpoint loader (weights_only=True). Every machine needs
this project installed (`pip install -e ".[ray]"`), or pass a runtime_env to ray.init.
A shard whose worker crashes is retried by Ray (the shard is deterministic, so a retry gives
the same games); if it still fails, the error names the shard.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import ray
import torch

from chesscore.checkpoint import load_model
from chesscore.model import GPT
from chesscore.runtime.locks import scratch_dir
from chesscore.selfplay.games import GameRecord, play_games
from chesscore.selfplay.plan import Shard, WorkerDied

_LOADED: dict = {}  # per Ray worker process: the weights of the latest call it served


def _models(key: tuple[str, str | None], blobs: list) -> tuple[GPT, GPT | None]:
    if _LOADED.get("key") != key:
        models = []
        for blob in ray.get(blobs):
            with scratch_dir("chesscore-ray-") as folder:
                path = folder / "weights.pt"
                path.write_bytes(blob)
                models.append(load_model(path)[0])
        _LOADED.update(key=key, model=models[0], opponent=models[1] if len(models) > 1 else None)
    return _LOADED["model"], _LOADED["opponent"]


def _play_shard(shard: Shard, key: tuple[str, str | None], blobs: list, threads: int) -> tuple[list[GameRecord], dict]:
    torch.set_num_threads(threads)
    model, opponent = _models(key, blobs)  # blobs arrive as references: fetched only when needed
    return play_games(model, opponent, shard.cfg)


class RayShards:
    """Runs shards as Ray tasks of `threads` CPUs each; ray.init() if not yet connected."""

    def __init__(self, threads: int) -> None:
        if not ray.is_initialized():
            ray.init(include_dashboard=False)  # honours RAY_ADDRESS; else a local instance
        self.threads = threads
        self.task = ray.remote(num_cpus=threads)(_play_shard)

    def run(
        self, shards: list[Shard], model_path: str, opponent_path: str | None, done_one: Callable[[], None]
    ) -> dict[int, tuple[list[GameRecord], dict]]:
        paths = [model_path] + ([opponent_path] if opponent_path else [])
        blobs = [ray.put(Path(path).read_bytes()) for path in paths]
        key = (f"{os.uname().nodename}:{model_path}", opponent_path)
        pending = {self.task.remote(shard, key, blobs, self.threads): shard for shard in shards}
        results = {}
        while pending:
            [ready], _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(ready)
            try:
                results[shard.index] = ray.get(ready)
            except ray.exceptions.RayError as error:
                for other in pending:
                    ray.cancel(other)
                raise WorkerDied(f"self-play {shard.describe()} failed on Ray: {error}") from None
            done_one()
        return results
