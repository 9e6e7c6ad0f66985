"""Stage `selfplay`: a checkpoint -> self-play games (PGN + dataset shards), the RL-updated
checkpoint and stats.json; run.json beside them (its times and workers).

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from chesscore import failures
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings
from chesscore.cli.runner import run_stage
from chesscore.config import flat
from chesscore.fileio import RUN_RECORD
from chesscore.model import pick_device
from chesscore.play.engine import find_stockfish
from chesscore.selfplay.run import CHECKPOINT, STATS, Execution, RunConfig, run_selfplay


@dataclass(frozen=True)
class Settings:
    """params.yaml's `selfplay:` section; every key is also a flag (`--games 128 --workers 0`)."""

    OUTPUT_NEUTRAL: ClassVar[tuple[str, ...]] = ("workers", "backend", "stockfish")  # not DVC params: the
    # same bytes for any count and backend; the judge's path is where it is installed (stats.json has its version)

    checkpoint: Path = Path("data/train/best.pt")  # the supervised model: starting policy, KL reference, eval opponent
    out: Path = Path("data/selfplay")  # rl.pt, games.pgn, dataset/ (shards + manifest), stats.json
    resume: str = "auto"  # auto: continue OUT/rl.pt when its identity matches; none; or a path
    execution: Execution = flat(Execution)  # workers, threads, backend, device, the judge (chesscore.selfplay.run)
    run: RunConfig = flat(RunConfig)  # games, iterations, the update (chesscore.selfplay.run)


def no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def summary(stats: dict[str, Any], settings: Settings) -> str:
    e = stats["execution"]
    lines = [
        f"selfplay: {settings.checkpoint} -> {settings.out}: {stats['iterations']} iteration(s), "
        f"{stats['games']} games, "
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
    told = stats.get("conditioning")
    if told:  # a triples-v2 model: what every game and update read after BOS
        lines.append(
            f"  conditioned on: white {told['labels'][0]}, black {told['labels'][1]}, time control unknown"
            f" (prefix {told['prefix']})"
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
    judge, judge_share = stats["judge"], stats["judge_share_of_play"]
    lines.append(
        f"  judge: {judge['rules']}; {judge['positions']:,} positions, {stats['judge_seconds']:.1f} s"
        f" ({'-' if judge_share is None else f'{judge_share:.0%}'} of the workers' playing time)"
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
        f"  wrote {settings.out}/{CHECKPOINT}, games.pgn, dataset/ (train {splits['train']['games']}, validation "
        f"{splits['validation']['games']}, test {splits['test']['games']} games), {STATS}; {RUN_RECORD} (times)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    settings, args = stage_settings(argv, "selfplay", Settings, __doc__, extra=no_progress)
    chosen = settings.execution
    # No Stockfish for the judge: exit 78 with the command that installs it (run_stage).
    stockfish = find_stockfish(chosen.stockfish) if settings.run.adjudication.enabled else None
    execution = replace(chosen, device=str(pick_device(chosen.device)), stockfish=stockfish)
    if not settings.checkpoint.is_file():
        raise failures.BadInput(f"{settings.checkpoint}: no checkpoint (run the train stage first)")
    hold_output(settings.out, "selfplay")
    stats = run_selfplay(
        settings.checkpoint,
        settings.out,
        settings.run,
        execution,
        resume=settings.resume,
        log=lambda line: print(line, file=sys.stderr, flush=True),
        progress=not args.no_progress,
    )
    print(summary(stats, settings))
    return 0


if __name__ == "__main__":
    run_stage("selfplay", main)
