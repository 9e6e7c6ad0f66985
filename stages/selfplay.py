"""Stage `selfplay`: a checkpoint -> self-play games (PGN + dataset shards), the RL-updated
checkpoint and stats.json.

    python -m stages.selfplay                                   # every option from params.yaml
    python -m stages.selfplay --checkpoint data/train/best.pt --out data/selfplay --games 64 --workers 2 --iterations 3
    RAY_ADDRESS=auto python -m stages.selfplay --backend ray    # the shards on a Ray cluster

Defaults come from params.yaml's `selfplay:` section; flags override them. Each iteration
plays `games` games against the opponent in worker processes, a Stockfish judge adjudicating
them (`selfplay.adjudication`: resign and draw rules, the ply cap), updates the model by policy
gradient (REINFORCE with a baseline, KL penalty to the checkpoint played from), and plays
`eval_games` against that frozen checkpoint for a win rate. OUT/rl.pt is written after every
iteration; a rerun resumes from it when its identity matches (`--resume none` starts afresh,
`--resume PATH` insists on a checkpoint). The outputs are byte-identical for any --workers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from chesscore import failures
from chesscore.cli.params import PARAMS, config_from, params_section
from chesscore.cli.runner import run_stage
from chesscore.play.adjudication import Adjudication
from chesscore.play.engine import find_stockfish
from chesscore.selfplay.parallel import WorkerDied
from chesscore.selfplay.run import CHECKPOINT, STATS, Execution, RunConfig, run_selfplay
from chesscore.train.state import ResumeRefused


def parser(defaults: dict[str, Any]) -> argparse.ArgumentParser:
    d = defaults.get
    p = argparse.ArgumentParser(
        prog="python -m stages.selfplay",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--params", type=Path, default=PARAMS, help="params file (its `selfplay:` section)")
    p.add_argument(
        "--checkpoint",
        type=Path,
        default=Path(d("checkpoint", "data/train/best.pt")),
        help="the supervised checkpoint: the starting policy, the KL reference and the eval opponent",
    )
    p.add_argument("--out", type=Path, default=Path(d("out", "data/selfplay")), help="output folder")
    p.add_argument("--games", type=int, default=d("games", RunConfig.games), help="self-play games per iteration")
    p.add_argument("--workers", type=int, default=d("workers", 2), help="worker processes (0: in this process)")
    p.add_argument("--iterations", type=int, default=d("iterations", RunConfig.iterations), help="play + update rounds")
    p.add_argument("--threads-per-worker", type=int, default=d("threads_per_worker", 1))
    p.add_argument("--backend", choices=("process", "ray"), default=d("backend", "process"))
    p.add_argument("--device", default=d("device", "cpu"), help="of the update (and of the games with --workers 0)")
    p.add_argument("--resume", default=d("resume", "auto"), help="auto | none | PATH of an rl.pt to continue")
    p.add_argument(
        "--stockfish",
        default=None,
        help="the judge's Stockfish executable (default: PATH, then /usr/games/stockfish)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def summary(stats: dict[str, Any], args: argparse.Namespace) -> str:
    e = stats["execution"]
    lines = [
        f"selfplay: {args.checkpoint} -> {args.out}: {stats['iterations']} iteration(s), {stats['games']} games, "
        f"{e['workers']} worker(s) x {e['threads_per_worker']} thread(s), backend {e['backend']}",
        "  iter  decisive  mean reward  KL/move   vs supervised: W-D-L   score   Elo [95%]",
    ]
    for entry in stats["per_iteration"]:
        u, v = entry["update"], entry.get("vs_reference")
        versus = "not evaluated"
        if v:
            elo = "n/a" if v["elo"] is None else f"{v['elo']:+.0f}"
            low = "-inf" if v["low"] is None else f"{v['low']:+.0f}"
            high = "+inf" if v["high"] is None else f"{v['high']:+.0f}"
            versus = f"{v['wins']:>4}-{v['draws']}-{v['losses']:<4}  {v['score']:.3f}  {elo} [{low}, {high}]"
        decisive = entry["play"]["white_wins"] + entry["play"]["black_wins"]
        lines.append(
            f"  {entry['iteration']:>4}  {decisive:>8}  {u['mean_reward']:>+11.3f}  {u['kl_per_move']:.5f}   {versus}"
        )
    ends = ", ".join(f"{name} {count}" for name, count in stats["terminations"].items() if count)
    lines.append(f"  results: white {stats['white_wins']}, draws {stats['draws']}, black {stats['black_wins']}; {ends}")
    games, decided = max(1, stats["games"]), stats["decided_by"]
    share = stats["nonzero_reward_share"]
    lines.append(
        f"  decided by the rules {decided['rules'] / games:.0%}, by adjudication {decided['adjudication'] / games:.0%},"
        f" drawn {decided['draw'] / games:.0%}; non-zero reward for {'-' if share is None else f'{share:.0%}'}"
        f" of the model's sides ({stats['reward']} reward)"
    )
    judge = stats["judge"]
    judge_share = "-" if judge["share_of_play"] is None else f"{judge['share_of_play']:.0%}"
    lines.append(
        f"  judge: {judge['rules']}; {judge['positions']:,} positions, {judge['seconds']:.1f} s"
        f" ({judge_share} of the workers' playing time)"
    )
    plies = stats["plies"]
    lines.append(
        f"  plies: mean {plies['mean']:.1f} (min {plies['min']}, max {plies['max']});"
        f" model's illegal attempt rate {stats['illegal_attempt_rate']:.4f}"
    )
    speed = stats["moves_per_second"]
    lines.append(
        f"  throughput: {'n/a (nothing played in this run)' if speed is None else f'{speed:,.0f} moves/s'};"
        f" wall {stats['wall_seconds']:.1f} s"
    )
    splits = stats["dataset_splits"]
    lines.append(
        f"  wrote {args.out}/{CHECKPOINT}, games.pgn, dataset/ (train {splits['train']['games']}, validation "
        f"{splits['validation']['games']}, test {splits['test']['games']} games), {STATS}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    params_path, values = params_section(argv, "selfplay")
    args = parser(values).parse_args(argv)
    rules = config_from(values.get("adjudication") or {}, Adjudication, params_path, "selfplay.adjudication")
    cfg = config_from(
        {**values, "games": args.games, "iterations": args.iterations, "adjudication": rules},
        RunConfig,
        params_path,
        "selfplay",
    )
    # No Stockfish for the judge: exit 78 with the command that installs it (run_stage).
    stockfish = find_stockfish(args.stockfish) if rules.enabled else None
    execution = Execution(
        stockfish=stockfish,
        workers=args.workers,
        threads_per_worker=args.threads_per_worker,
        backend=args.backend,
        device=args.device,
        progress=not args.no_progress,
    )
    if not args.checkpoint.is_file():
        raise failures.BadInput(f"{args.checkpoint}: no checkpoint (run the train stage first)")
    try:
        stats = run_selfplay(
            args.checkpoint,
            args.out,
            cfg,
            execution,
            resume=args.resume,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except ResumeRefused as error:
        raise failures.Refused(str(error)) from None
    except WorkerDied as error:
        raise failures.Temporary(str(error)) from None
    print(summary(stats, args))
    return 0


if __name__ == "__main__":
    run_stage("selfplay", main)
