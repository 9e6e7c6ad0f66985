"""Self-play throughput: batched games with the key/value cache against one game at a time
without it, and 2 worker processes against 1.

    python bench/selfplay.py                         # the demo model (random weights), ~2 minutes on 2 cores
    python bench/selfplay.py --checkpoint data/train/best.pt --games 64 --max-plies 100

Measured (moves/s = plies played / wall seconds, in this run, same model and ply cap):
  A  one game at a time, no cache: every token a full forward over the game so far  (baseline of B)
  A' one game at a time with the cache (play_games, games=1): the cache alone
  B  --games games at once with the cache (play_games): one batched forward per token
  C  SelfPlayPool, 1 worker x 1 thread, the --pool-games games in shards   (baseline of D)
  D  SelfPlayPool, 2 workers x 1 thread, the same shards (checked to give the same games)
     (C and D alternate --repeats times, best of each, workers started beforehand)
  E  the same shards in this process at 2 torch threads (threads instead of processes)
Targets: B / A >= 10x at 64 games; D / C >= 1.7x on a 2-core machine. The thread settings of
each row are printed. Results also go to bench/out/selfplay.json.

Run D / C on an otherwise idle machine: Linux's autogroup scheduler shares the CPUs fairly
between sessions, so while another session is busy this one gets about one core however many
workers it starts (D / C tends to 1), and the load average is printed for that reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chesscore.checkpoint import load_model  # noqa: E402
from chesscore.model import CONFIGS, GPT  # noqa: E402
from chesscore.play.endings import termination  # noqa: E402
from chesscore.play.moves import Sampler, play_mask  # noqa: E402
from chesscore.selfplay.games import SelfPlayConfig, play_games  # noqa: E402
from chesscore.selfplay.parallel import SelfPlayPool  # noqa: E402
from chesscore.tokens import BOS, State  # noqa: E402

OUT = ROOT / "bench" / "out" / "selfplay.json"


@torch.no_grad()
def one_game_without_cache(model: GPT, max_plies: int, seed: int) -> int:
    """Baseline A: the same sampler and legal mask, but each token re-reads the whole game."""
    sampler, state, tokens = Sampler(1.0, seed), State.from_moves([]), [BOS]
    while True:
        for _ in range(3):
            logits = model(torch.tensor([tokens]))[:, -1]
            token, _ = sampler.pick(logits, torch.from_numpy(play_mask(state).copy())[None])
            state.feed(int(token))
            tokens.append(int(token))
        if termination(state.board, state.legal_moves(), max_plies) is not None:
            return state.plies


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def threads() -> str:
    return (
        f"torch threads {torch.get_num_threads()}, interop {torch.get_num_interop_threads()}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, help="a checkpoint to play (default: the demo config, random weights)")
    p.add_argument("--games", type=int, default=64, help="concurrent games of row B")
    p.add_argument("--baseline-games", type=int, default=2, help="games of rows A and A'")
    p.add_argument("--max-plies", type=int, default=100)
    p.add_argument("--pool-games", type=int, default=128, help="games of rows C, D, E")
    p.add_argument("--shard-games", type=int, default=32)
    p.add_argument("--repeats", type=int, default=2, help="runs of C and D (the best counts)")
    args = p.parse_args()
    if args.checkpoint:
        model, _ = load_model(args.checkpoint)
        name = str(args.checkpoint)
    else:
        torch.manual_seed(0)
        model, name = GPT(CONFIGS["demo"]).eval(), "demo config, random weights"
    print(
        f"model: {name}, {model.num_parameters():,} parameters; ply cap {args.max_plies}; "
        f"{os.cpu_count()} CPU cores; load average before {os.getloadavg()[0]:.2f}"
    )
    rows = {}
    torch.set_num_threads(1)
    print(f"rows A, A', B in this process: {threads()}")
    seconds, plies = timed(
        lambda: sum(one_game_without_cache(model, args.max_plies, s) for s in range(args.baseline_games))
    )
    rows["A"] = {"what": "1 game at a time, no cache", "moves_per_second": plies / seconds, "plies": plies}
    seconds, plies = timed(
        lambda: sum(
            play_games(model, None, SelfPlayConfig(1, max_plies=args.max_plies, seed=s))[1]["plies"]["total"]
            for s in range(args.baseline_games)
        )
    )
    rows["A'"] = {"what": "1 game at a time, cache", "moves_per_second": plies / seconds, "plies": plies}
    seconds, (_, stats) = timed(lambda: play_games(model, None, SelfPlayConfig(args.games, max_plies=args.max_plies)))
    rows["B"] = {
        "what": f"{args.games} games batched, cache",
        "moves_per_second": stats["plies"]["total"] / seconds,
        "plies": stats["plies"]["total"],
    }

    cfg = SelfPlayConfig(args.pool_games, max_plies=args.max_plies, seed=1)
    games = {}
    pools = {"C": SelfPlayPool(workers=1, threads_per_worker=1), "D": SelfPlayPool(workers=2, threads_per_worker=1)}
    for pool in pools.values():
        pool.pids()  # started and warm: spawning is not counted
        pool.play(model, None, SelfPlayConfig(2, max_plies=4), shard_games=1)  # torch warmed up in each worker
    for _ in range(args.repeats):  # C and D alternate, so a burst of load elsewhere hits both
        for row, pool in pools.items():
            seconds, (records, stats) = timed(lambda pool=pool: pool.play(model, None, cfg, args.shard_games))
            games[row] = records
            speed = stats["plies"]["total"] / seconds
            if speed > rows.get(row, {}).get("moves_per_second", 0):
                rows[row] = {
                    "what": f"{pool.workers} worker(s) x 1 thread, {args.pool_games} games in shards of "
                    f"{args.shard_games}, best of {args.repeats}",
                    "moves_per_second": speed,
                    "plies": stats["plies"]["total"],
                    "threads": f"{pool.workers} spawned process(es), torch.set_num_threads(1), interop 1",
                }
    for pool in pools.values():
        pool.close()
    torch.set_num_threads(2)
    with SelfPlayPool(workers=0) as pool:
        seconds, (records, stats) = timed(lambda: pool.play(model, None, cfg, args.shard_games))
    rows["E"] = {
        "what": "in this process, 2 torch threads",
        "moves_per_second": stats["plies"]["total"] / seconds,
        "plies": stats["plies"]["total"],
        "threads": threads(),
    }
    same = games["C"] == games["D"] == records

    for key, row in rows.items():
        extra = f"   [{row['threads']}]" if "threads" in row else ""
        print(f"  {key:<2} {row['what']:<58} {row['moves_per_second']:>9,.0f} moves/s ({row['plies']} plies){extra}")
    ratios = {
        "B/A batched+cache vs 1 game no cache": rows["B"]["moves_per_second"] / rows["A"]["moves_per_second"],
        "A'/A cache alone": rows["A'"]["moves_per_second"] / rows["A"]["moves_per_second"],
        "D/C 2 workers vs 1": rows["D"]["moves_per_second"] / rows["C"]["moves_per_second"],
        "D/E 2 processes vs 2 threads": rows["D"]["moves_per_second"] / rows["E"]["moves_per_second"],
    }
    targets = {"B/A batched+cache vs 1 game no cache": 10.0, "D/C 2 workers vs 1": 1.7}
    for key, value in ratios.items():
        target = ""
        if key in targets:
            target = f"  (target >= {targets[key]}x: {'met' if value >= targets[key] else 'NOT met'})"
        print(f"  {key:<38} {value:6.2f}x{target}")
    print(f"  same games from 1 worker, 2 workers and in-process: {'yes' if same else 'NO'}")
    print(f"  load average after {os.getloadavg()[0]:.2f} (other work on the machine skews D/C and E)")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {"model": name, "max_plies": args.max_plies, "rows": rows, "ratios": ratios, "same_games": same}, indent=2
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
