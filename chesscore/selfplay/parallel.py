"""Self-play over many processes (or, with the `ray` backend, many machines).

The games are cut into shards of `shard_games`; shard s is played by `play_games` with seed
`derive_seed(seed, "shard", s)`, and the records come back in shard order. So the output depends only on
the models, the config and shard_games: not on the worker count, the backend or which
worker finished first.

    records, stats = play_games_parallel(model, None, SelfPlayConfig(games=128, seed=3), workers=2)

    with SelfPlayPool(workers=2, threads_per_worker=1) as pool:   # RL: one pool, many calls
        for iteration in range(10):
            records, stats = pool.play(model, None, replace(cfg, seed=iteration))

    SelfPlayPool(workers=8, device="cuda")   # every worker plays its shards on the one GPU

Workers are started with spawn, not fork: the parent has already started torch's OpenMP
thread pool, which is not fork-safe (forked children can deadlock in it). Each worker is a
one-process ProcessPoolExecutor, so the pool knows which shard a dead worker was playing:
that call fails with WorkerDied naming the shard (never a hang), and the worker is replaced
so the next call works. The weights go to workers as checkpoint files in a temporary folder
(chesscore.runtime.locks.scratch_dir: a killed run's folder is swept by the next pool), loaded with
weights_only=True, written afresh by every call (never through pickled init
arguments, which pass down a pipe and broke with large state dicts).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack

import torch

from chesscore.checkpoint import load_model, model_payload, save
from chesscore.model import GPT, pick_device
from chesscore.runtime.children import die_with_parent
from chesscore.runtime.locks import scratch_dir
from chesscore.runtime.progress import progress_bar
from chesscore.selfplay.games import GameRecord, SelfPlayConfig, play_games, summarise
from chesscore.selfplay.plan import Shard, WorkerDied, plan_shards

BACKENDS = ("process", "ray")


# ---- inside a worker process --------------------------------------------------------------

_WORKER: dict = {}  # the models this worker has loaded, keyed by their file paths


def _init_worker(threads: int, device: str) -> None:
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    _WORKER["device"] = device


def _worker_pid() -> int:
    return os.getpid()


def _load_models(model_path: str, opponent_path: str | None) -> tuple[GPT, GPT | None]:
    if _WORKER.get("paths") != (model_path, opponent_path):
        device = _WORKER["device"]  # set by _init_worker
        model, _ = load_model(model_path, device)
        opponent = load_model(opponent_path, device)[0] if opponent_path else None
        _WORKER.update(paths=(model_path, opponent_path), model=model, opponent=opponent)
    return _WORKER["model"], _WORKER["opponent"]


def _play_shard(shard: Shard, model_path: str, opponent_path: str | None) -> tuple[list[GameRecord], dict]:
    model, opponent = _load_models(model_path, opponent_path)
    return play_games(model, opponent, shard.cfg)


# ---- in the parent ------------------------------------------------------------------------


def _checked_device(device: str | torch.device) -> str:
    """The workers' device as torch names it ("cpu", "cuda:0"), from a setting (auto, cpu, cuda)
    or a torch.device such as the one pick_device gave the caller (cuda:1 stays cuda:1)."""
    if str(device) == "auto":
        return str(pick_device("auto"))
    named = torch.device(device)
    return str(pick_device(named.type, named.index or 0))


class SelfPlayPool:
    """Long-lived workers for repeated self-play calls (spawning costs seconds per worker).

    workers=0 plays the shards in this process, with the models as given (on their device);
    the output is the same as over workers on that device. Process workers load the models
    onto `device`: with "cuda" many workers share one GPU, so that its cost per move is spread
    over their python-chess work, which one process alone cannot keep up with (bench/gpu.py).
    backend="ray" sends the shards to the Ray cluster that ray.init() connects to (on its CPUs)."""

    def __init__(
        self,
        workers: int = 2,
        threads_per_worker: int = 1,
        backend: str = "process",
        progress: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend {backend!r} is not one of {BACKENDS}")
        if workers < 0 or threads_per_worker < 1:
            raise ValueError(f"need workers >= 0 and threads_per_worker >= 1, got {workers}, {threads_per_worker}")
        self.workers, self.threads, self.backend, self.progress = workers, threads_per_worker, backend, progress
        self.device = _checked_device(device)  # refused here, not in a worker, where there is no GPU
        # The weights' folder is owned through a lock: a killed run's folder (3.7 MB for the demo
        # model) is removed by the next pool, not left in the temp folder for good.
        self._scratch = ExitStack()
        self._folder = self._scratch.enter_context(scratch_dir("chesscore-selfplay-"))
        self._calls = 0
        self._executors = [self._new_executor() for _ in range(workers)] if backend == "process" else []
        for worker in range(len(self._executors)):
            self._submit(worker, _worker_pid)  # start them all now, while the caller sets up
        self._ray = None
        if backend == "ray":
            from chesscore.selfplay.ray_shards import RayShards  # optional extra: imported only when asked

            self._ray = RayShards(threads_per_worker)

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=die_with_parent,  # a killed run must not leave its workers waiting forever
            initargs=(os.getpid(), _init_worker, self.threads, self.device),
        )

    def pids(self) -> list[int]:
        """The worker processes' ids, once each has answered: a worker not started yet is
        waited for, one that died since the last call is replaced."""
        futures = [self._submit(worker, _worker_pid) for worker in range(len(self._executors))]
        pids = []
        for worker, future in enumerate(futures):
            try:
                pids.append(future.result())
            except BrokenProcessPool:
                self._executors[worker] = self._new_executor()
                pids.append(self._executors[worker].submit(_worker_pid).result())
        return pids

    def play(
        self, model: GPT, opponent: GPT | None, cfg: SelfPlayConfig, shard_games: int = 32
    ) -> tuple[list[GameRecord], dict]:
        """Play cfg.games games in shards; the records in shard order and their stats."""
        started = time.perf_counter()
        shards = plan_shards(cfg, shard_games)
        if opponent is model:
            opponent = None
        with progress_bar(self.progress, total=len(shards), unit="shard", desc="self-play") as bar:
            if self.workers == 0 and self._ray is None:  # the models as they are, on their device
                results = {}
                for shard in shards:
                    results[shard.index] = play_games(model, opponent, shard.cfg)
                    bar.update()
            else:
                model_path, opponent_path = self._write_weights(model, opponent)
                if self._ray is not None:
                    results = self._ray.run(shards, model_path, opponent_path, bar.update)
                else:
                    self.pids()  # no shard goes to a worker that died while idle
                    results = self._run_processes(shards, model_path, opponent_path, bar.update)
        records = [record for shard in shards for record in results[shard.index][0]]
        stats = summarise(records, time.perf_counter() - started)
        stats.update(shards=len(shards), workers=self.workers, threads_per_worker=self.threads, backend=self.backend)
        if self.workers and self._ray is None:
            stats["worker_device"] = self.device
        # Summed over the shards (so over workers): the judge's share of the time games took.
        stats["shard_seconds"] = sum(results[shard.index][1]["seconds"] for shard in shards)
        stats["judge_seconds"] = sum(results[shard.index][1].get("judge_seconds", 0.0) for shard in shards)
        return records, stats

    def _write_weights(self, model: GPT, opponent: GPT | None) -> tuple[str, str | None]:
        """This call's weights as checkpoint files (new names: a worker reloads on a new name)."""
        self._calls += 1
        folder = self._folder
        for old in folder.glob("*.pt"):  # the previous call's weights
            old.unlink()
        paths = []
        for name, net in (("model", model), ("opponent", opponent)):
            if net is not None:
                paths.append(str(folder / f"{name}-{self._calls}.pt"))
                save(model_payload(net, identity={}), paths[-1])
        return paths[0], (paths[1] if len(paths) > 1 else None)

    def _run_processes(
        self, shards: list[Shard], model_path: str, opponent_path: str | None, done_one
    ) -> dict[int, tuple[list[GameRecord], dict]]:
        """Each worker holds at most one shard at a time, so a failure names its shard."""
        waiting, running, results = deque(shards), {}, {}
        idle = deque(range(self.workers))
        while waiting or running:
            while waiting and idle:
                worker, shard = idle.popleft(), waiting.popleft()
                running[self._submit(worker, _play_shard, shard, model_path, opponent_path)] = (worker, shard)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                worker, shard = running.pop(future)
                results[shard.index] = self._result(future, worker, shard)
                idle.append(worker)
                done_one()
        return results

    def _submit(self, worker: int, function, *args) -> Future:
        try:
            return self._executors[worker].submit(function, *args)
        except BrokenProcessPool:  # it died while idle, since the last call: replace it
            self._executors[worker] = self._new_executor()
            return self._executors[worker].submit(function, *args)

    def _result(self, future: Future, worker: int, shard: Shard) -> tuple[list[GameRecord], dict]:
        try:
            return future.result()
        except BrokenProcessPool:
            self._executors[worker] = self._new_executor()  # so the next call works
            raise WorkerDied(
                f"self-play worker {worker} died while playing {shard.describe()}; "
                f"it has been replaced, the call can be repeated"
            ) from None
        except Exception as error:
            raise RuntimeError(f"self-play {shard.describe()} failed: {error}") from error

    def close(self) -> None:
        for executor in self._executors:
            executor.shutdown(wait=True, cancel_futures=True)
        self._executors = []
        self._scratch.close()

    def __enter__(self) -> SelfPlayPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def play_games_parallel(
    model: GPT,
    opponent: GPT | None,
    cfg: SelfPlayConfig,
    workers: int = 2,
    threads_per_worker: int = 1,
    shard_games: int = 32,
    backend: str = "process",
) -> tuple[list[GameRecord], dict]:
    """play_games over `workers` fresh processes (or Ray); see SelfPlayPool for repeated calls."""
    with SelfPlayPool(workers, threads_per_worker, backend) as pool:
        return pool.play(model, opponent, cfg, shard_games)
