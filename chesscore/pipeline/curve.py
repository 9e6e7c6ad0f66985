"""A learning curve: the pipeline at several training budgets, one `dvc exp run` each (a
profile's values plus the budget), with the CPU seconds each took and what it measured: top-1
move matching, own-move legality, the score against the random mover, the strength knob (a
triples-v2 model's Elo at each told rating, when the profile's arena plays told matches) and the
RL model against its supervised parent at the largest budget (docs/strength-experiment.md).

    python -m chesscore.pipeline.curve strength --budgets 1500 3000 6000    # run and tabulate
    python -m chesscore.pipeline.curve strength --budgets 1500 3000 6000 --dry-run   # the commands only
    python -m chesscore.pipeline.curve human --budgets 150 300 600 --set train.model=demo-board

A budget is a number of training updates (train.max_updates; the cosine schedule follows it), not
seconds: the same budget gives the same model on any machine. Smaller budgets run self-play for
one token iteration (`SMALL_BUDGET` below: the arena depends on its checkpoint); the largest runs
the profile's self-play as it is. Each experiment's figures are read from the workspace after it
ran (dvc exp run leaves its results there) and the curve is written to `--out` as JSON.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml

from chesscore.eval.human import MEASURERS
from chesscore.fileio import atomic_write_json
from chesscore.pipeline.profile import PARAMS, profile_values, set_arguments
from chesscore.pipeline.summary import collect
from chesscore.play.strength import curve_text

# Self-play at the smaller budgets: the RL verdict is measured at the largest budget only.
SMALL_BUDGET = {"selfplay.iterations": 1, "selfplay.games": 8, "selfplay.eval_games": 0}


def overrides(
    profile: dict[str, Any], budget: int, largest: bool, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Every value an experiment sets, all of them each time: `dvc exp run` starts from the
    workspace, where the previous experiment left its own values. `extra` (--set) wins over the
    profile."""
    values = {**profile, **(extra or {}), "train.max_updates": budget}
    if not largest:
        values.update(SMALL_BUDGET)
    return values


def experiment_name(profile: str, budget: int, extra: dict[str, Any] | None = None) -> str:
    """PROFILE-BUDGET, then the --set values (letters, digits and dashes), so that two curves of
    one profile keep apart: human-300-demo-board."""
    words = [profile, str(budget), *(str(value) for value in (extra or {}).values())]
    return re.sub(r"[^A-Za-z0-9-]+", "-", "-".join(words)).strip("-")


def cpu_seconds() -> float:
    """User + system seconds of every finished child process (and theirs, once waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def point(facts: dict[str, Any]) -> dict[str, Any]:
    """The curve's figures from the stages' reports (chesscore.pipeline.summary.collect)."""
    evaluate, arena, selfplay = facts.get("evaluate") or {}, facts.get("arena") or {}, facts.get("selfplay") or {}
    train = facts.get("train") or {}
    free = evaluate.get("free_running") or {}
    random = next((o for o in (arena.get("opponents") or {}).values() if o.get("kind") == "random"), {})
    keys = ("wins", "draws", "losses", "score", "elo", "low", "high", "decided_by")
    return {
        "best_validation_nll": train.get("best_validation_nll"),
        "top1": free.get("top1"),
        "move_legal": free.get("move_legal"),
        "vs_random": {key: random.get(key) for key in keys} if random else None,
        "rl_vs_parent": {key: selfplay["vs_supervised"].get(key) for key in keys}
        if selfplay.get("vs_supervised")
        else None,
        "knob": arena.get("strength"),  # a triples-v2 model's Elo at each told rating (chesscore.play.strength)
        "human": _human(evaluate.get("human")),  # top-1 on real games: the model, Stockfish, random
    }


def _human(human: dict[str, Any] | None) -> dict[str, Any] | None:
    """Top-1 [95%] on real games of each measurer, and the model minus Stockfish (chesscore.eval.human)."""
    if not human:
        return None
    overall = human["overall"]
    figures = {who: {"top1": overall[who]["top1"], "ci95": overall[who]["top1_ci95"]} for who in MEASURERS}
    return {
        **figures,
        "positions": overall["positions"],
        "model_minus_stockfish": overall["model_minus_stockfish_top1"],
    }


def run(
    profile: str,
    budgets: list[int],
    out: Path,
    dry_run: bool,
    params: Path = PARAMS,
    extra: dict[str, Any] | None = None,
) -> list[dict]:
    values = profile_values(profile, params)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/games", os.environ["PATH"]])}
    curve = []
    for budget in sorted(budgets):
        largest = budget == max(budgets)
        command = [sys.executable, "-m", "dvc", "exp", "run", "-n", experiment_name(profile, budget, extra)]
        command += set_arguments(overrides(values, budget, largest, extra))
        print("+ " + " ".join(command[1:]), flush=True)
        if dry_run:
            continue
        cpu, wall = cpu_seconds(), time.perf_counter()
        if subprocess.call(command, env=env) != 0:
            raise SystemExit(f"dvc exp run failed at budget {budget}; the curve so far is in {out}")
        entry = {
            "budget_updates": budget,
            "cpu_seconds": cpu_seconds() - cpu,
            "wall_seconds": time.perf_counter() - wall,
            **point(collect(params.parent)),
        }
        curve.append(entry)
        atomic_write_json(out, {"profile": profile, "set": extra or {}, "budgets": sorted(budgets), "curve": curve})
        print(row(entry), flush=True)
    return curve


def row(entry: dict[str, Any]) -> str:
    versus, rl = entry.get("vs_random") or {}, entry.get("rl_vs_parent")

    def elo(v: dict[str, Any]) -> str:
        low, high = v.get("low"), v.get("high")
        return f"[{'-inf' if low is None else f'{low:+.0f}'}, {'+inf' if high is None else f'{high:+.0f}'}]"

    text = (
        f"budget {entry['budget_updates']:>6} updates: {entry['cpu_seconds']:7.0f} CPU s, "
        f"{entry['wall_seconds']:6.0f} s wall; top-1 {entry['top1']:.1%}, own move legal {entry['move_legal']:.1%}; "
        f"vs random +{versus.get('wins')} ={versus.get('draws')} -{versus.get('losses')} "
        f"score {versus.get('score', 0):.3f} Elo {elo(versus)}"
    )
    human = entry.get("human")
    if human:
        text += "; real games top-1 " + ", ".join(
            f"{who} {human[who]['top1']:.1%} [{human[who]['ci95'][0]:.1%}, {human[who]['ci95'][1]:.1%}]"
            for who in MEASURERS
        )
    if rl:
        text += f"; RL vs parent +{rl['wins']} ={rl['draws']} -{rl['losses']} score {rl['score']:.3f} Elo {elo(rl)}"
    if entry.get("knob"):  # the arena's own lines for it (chesscore.play.strength)
        text += "\n" + textwrap.indent(curve_text(entry["knob"]), "    ")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chesscore.pipeline.curve", description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="a profile of params.yaml (e.g. strength)")
    parser.add_argument("--budgets", type=int, nargs="+", required=True, help="training updates, one experiment each")
    parser.add_argument("--out", type=Path, default=None, help="the curve as JSON (default: runs/PROFILE-curve.json)")
    parser.add_argument("--dry-run", action="store_true", help="print the dvc exp run commands, run nothing")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a value over the profile's (YAML), e.g. train.model=demo-board",
    )
    args = parser.parse_args(argv)
    extra = {}
    for item in args.set:
        key, equals, value = item.partition("=")
        if not equals:
            parser.error(f"--set {item!r}: expected KEY=VALUE")
        extra[key] = yaml.safe_load(value)
    out = args.out or Path("runs") / f"{args.profile}-curve.json"
    run(args.profile, args.budgets, out, args.dry_run, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
