"""Self-play over spawned worker processes and Ray: same games whatever the worker count or
the order shards finish in, weights re-sent per call, a dead worker named, never a hang."""

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from chesscore.failures import Refused
from chesscore.model import CONFIGS, GPT
from chesscore.runtime.seeds import derive_seed
from chesscore.selfplay.games import SelfPlayConfig, play_games
from chesscore.selfplay.parallel import SelfPlayPool, WorkerDied, plan_shards

pytestmark = pytest.mark.timeout(120)  # a hang is a failure, not a stuck CI job


def _model(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(CONFIGS["tiny"]).eval()


REPO = Path(__file__).resolve().parents[2]
CFG = SelfPlayConfig(games=10, max_plies=40, seed=3)


@pytest.fixture(scope="module")
def pool():
    with SelfPlayPool(workers=2, threads_per_worker=1) as pool:
        yield pool


def _expected(model, opponent, cfg, shard_games):
    """The shards played one after another in this process, by play_games itself."""
    return [r for shard in plan_shards(cfg, shard_games) for r in play_games(model, opponent, shard.cfg)[0]]


def test_shards_have_their_own_seeds_and_cover_every_game():
    shards = plan_shards(SelfPlayConfig(games=10, seed=3), shard_games=4)
    assert [(s.index, s.cfg.games) for s in shards] == [(0, 4), (1, 4), (2, 2)]
    assert [s.cfg.seed for s in shards] == [derive_seed(3, "shard", s) for s in range(3)]
    many = plan_shards(SelfPlayConfig(games=2000, seed=0), shard_games=1)  # seed*1000 + s would collide here
    assert (
        len({s.cfg.seed for s in many} | {s.cfg.seed for s in plan_shards(SelfPlayConfig(games=2000, seed=1), 1)})
        == 4000
    )


@pytest.mark.slow
def test_same_games_in_process_and_over_workers(pool):
    model, opponent = _model(0), _model(1)
    for other in (None, opponent):  # 0 workers (this process) and 2: the same games
        in_process, _ = SelfPlayPool(workers=0).play(model, other, CFG, shard_games=4)
        over_two, stats = pool.play(model, other, CFG, shard_games=4)
        assert in_process == over_two
        seeds = [derive_seed(CFG.seed, "shard", s) for s in range(3)]
        assert [r.seed for r in over_two] == [seeds[0]] * 4 + [seeds[1]] * 4 + [seeds[2]] * 2
        assert stats["games"] == 10 and stats["shards"] == 3 and stats["workers"] == 2
    assert [(r.white, r.black) for r in over_two[:4]] == [("model", "opponent"), ("opponent", "model")] * 2


@pytest.mark.slow
def test_the_pool_keeps_its_workers_and_takes_new_weights_each_call(pool):
    pids = pool.pids()
    first, _ = pool.play(_model(0), None, CFG, shard_games=5)
    trained = _model(0)
    with torch.no_grad():
        trained.lm_head.weight.mul_(3.0)  # what an RL update does between calls: new weights
    second, _ = pool.play(trained, None, CFG, shard_games=5)
    assert second == _expected(trained, None, CFG, 5) != first
    assert pool.pids() == pids


@pytest.mark.slow
def test_a_worker_killed_mid_shard_is_named_and_the_next_call_works(pool):
    model = _model(0)
    long_shard = SelfPlayConfig(games=64, max_plies=300, seed=1)  # seconds on one thread
    victim = pool.pids()[0]  # shard 0 goes to worker 0
    outcome = {}

    def play():
        try:
            outcome["records"] = pool.play(model, None, long_shard, shard_games=64)
        except Exception as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error

    caller = threading.Thread(target=play)
    caller.start()
    time.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    caller.join(timeout=60)
    assert not caller.is_alive(), "the call hung after its worker died"
    error = outcome.get("error")
    assert isinstance(error, WorkerDied), outcome
    assert f"worker 0 died while playing shard 0 (seed {derive_seed(1, 'shard', 0)}, 64 games)" in str(error)
    records, _ = pool.play(model, None, CFG, shard_games=5)
    assert records == _expected(model, None, CFG, 5)
    assert victim not in pool.pids()


@pytest.mark.slow
def test_a_worker_that_died_between_calls_is_replaced(pool):
    model = _model(0)
    os.kill(pool.pids()[1], signal.SIGKILL)
    records, _ = pool.play(model, None, CFG, shard_games=5)  # at once: no grace time for the pool
    assert records == _expected(model, None, CFG, 5)


@pytest.mark.slow
@pytest.mark.timeout(600)  # a Ray node and its workers each import torch: 34 s idle, over 120 s on a loaded machine
def test_ray_backend_plays_the_same_shards():
    ray = pytest.importorskip("ray", reason="ray is an optional extra: pip install -e '.[ray]'")
    model, opponent = _model(0), _model(1)
    cfg = replace(CFG, games=6)
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}}
    )  # where not pip-installed
    try:
        with SelfPlayPool(workers=0, backend="ray") as on_ray:
            records, stats = on_ray.play(model, opponent, cfg, shard_games=2)
            again, _ = on_ray.play(model, None, cfg, shard_games=3)  # new weights, same workers
    finally:
        ray.shutdown()
    assert records == _expected(model, opponent, cfg, 2) and stats["backend"] == "ray"
    assert again == _expected(model, None, cfg, 3)


@pytest.mark.slow
def test_workers_play_on_the_pools_device_and_cuda_is_refused_where_there_is_none(pool):
    _, stats = pool.play(_model(0), None, replace(CFG, games=2), shard_games=1)
    assert stats["worker_device"] == "cpu" and stats["workers"] == 2
    if torch.cuda.is_available():  # bench/gpu.py measures this path on a GPU
        with SelfPlayPool(workers=1, device="cuda") as on_gpu:
            records, stats = on_gpu.play(_model(0), None, replace(CFG, games=2), shard_games=1)
        assert stats["worker_device"].startswith("cuda") and len(records) == 2
    else:
        for cuda in ("cuda", "cuda:0", torch.device("cuda", 0)):  # pick_device's answer is a cuda:0
            with pytest.raises(Refused, match="no CUDA device"):
                SelfPlayPool(workers=1, device=cuda)
    assert SelfPlayPool(workers=0, device=torch.device("cpu")).device == "cpu"
