"""Stage `evaluate`: a checkpoint on the dataset's test split (the only reader of that split).

    python -m stages.evaluate                                 # every option from params.yaml
    python -m stages.evaluate --checkpoint data/train/best.pt --dataset data/dataset --out data/evaluate

Teacher-forced metrics (training's: NLL, per-phase accuracy, triple legality, reserved and
illegal probability) and free-running ones (top-1 / top-k move matching under the legal mask,
raw legality of the model's own greedy move), each broken down by the mover's rating, the
time-control class and the game phase. Writes OUT/metrics.json (DVC metric), OUT/by_*.csv,
OUT/plots/*.csv (DVC plots) and OUT/report.md. A checkpoint whose identity names another
dataset is refused. A checkpoint is evaluated once: when OUT/metrics.json already holds this
checkpoint x dataset x settings, the stage says so and stops (--force to redo).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm import tqdm

from chesscore import failures
from chesscore.checkpoint import load_model
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import PARAMS, params_section
from chesscore.cli.runner import run_stage
from chesscore.data import dataset
from chesscore.eval.evaluate import EvalConfig, check_dataset, evaluate, sample_test_games
from chesscore.eval.report import write_outputs
from chesscore.fileio import sha256_file, sha256_json


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = params_section(argv, "evaluate")[1].get
    p = argparse.ArgumentParser(
        prog="python -m stages.evaluate",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--params", type=Path, default=PARAMS, help="params file (its `evaluate:` section)")
    p.add_argument("--checkpoint", type=Path, default=d("checkpoint", "data/train/best.pt"))
    p.add_argument("--dataset", type=Path, default=d("dataset", "data/dataset"))
    p.add_argument("--out", type=Path, default=d("out", "data/evaluate"))
    p.add_argument("--games", type=int, default=d("games", 200), help="test games sampled (0: all)")
    p.add_argument("--batch-size", type=int, default=d("batch_size", 32), help="games per batch")
    p.add_argument("--top-k", type=int, default=d("top_k", 3), help="move matching: top-1 and top-k")
    p.add_argument("--seed", type=int, default=d("seed", 0), help="keys the test-game sample")
    p.add_argument("--rating-bin", type=int, default=d("rating_bin", 100))
    p.add_argument("--opening-until-ply", type=int, default=d("opening_until_ply", 20))
    p.add_argument("--middlegame-until-ply", type=int, default=d("middlegame_until_ply", 60))
    p.add_argument("--device", default=d("device", "cpu"), help="cpu, cuda, or auto (cuda when present)")
    p.add_argument("--threads", type=int, default=d("threads", 2), help="torch CPU threads")
    p.add_argument(
        "--allow-other-dataset",
        action="store_true",
        help="evaluate a checkpoint whose identity names another dataset (or none)",
    )
    p.add_argument("--force", action="store_true", help="evaluate again even if OUT holds this evaluation")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        config = EvalConfig(
            games=args.games or None,
            batch_size=args.batch_size,
            top_k=args.top_k,
            seed=args.seed,
            rating_bin=args.rating_bin,
            opening_until_ply=args.opening_until_ply,
            middlegame_until_ply=args.middlegame_until_ply,
        )
    except ValueError as error:
        raise failures.Refused(str(error)) from None
    # A damaged dataset (IntegrityError: exit 65), a checkpoint that is not ours or was trained
    # on another dataset (CheckpointError, DatasetMismatch: exit 78) end the stage through
    # run_stage with one line naming the file.
    hold_output(args.out, "evaluate")
    manifest = dataset.manifest(args.dataset)
    model, payload = load_model(args.checkpoint, args.device)
    check = check_dataset(payload, manifest, args.allow_other_dataset, str(args.checkpoint))
    checkpoint_sha = sha256_file(args.checkpoint)
    key = sha256_json({"checkpoint": checkpoint_sha, "dataset": manifest["fingerprint"], "config": asdict(config)})
    previous = args.out / "metrics.json"
    if previous.is_file() and not args.force:
        if json.loads(previous.read_text(encoding="utf-8")).get("evaluation_key") == key:
            print(f"evaluate: {args.out} already holds this evaluation ({key[:16]}); --force to redo")
            return 0

    started = time.perf_counter()
    games, split_size = sample_test_games(args.dataset, config.games, config.seed)
    if not games:
        raise failures.BadInput(f"{args.dataset}: the test split has no games")
    positions = 0
    with tqdm(total=len(games), desc="evaluate", unit="game", file=sys.stderr) as bar:

        def progress(n_games: int, n_positions: int) -> None:
            nonlocal positions
            positions += n_positions
            bar.update(n_games)
            bar.set_postfix(positions_per_s=f"{positions / (time.perf_counter() - started):.0f}")

        results = evaluate(model, games, config, progress)
    seconds = time.perf_counter() - started

    record = {
        "evaluation_key": key,
        "checkpoint": {
            "path": str(args.checkpoint),
            "sha256": checkpoint_sha,
            "config_name": f"{payload['config']['n_layer']}x{payload['config']['n_embd']}",
            "parameters": model.num_parameters(),
        },
        "dataset": {"path": str(args.dataset), "fingerprint": manifest["fingerprint"], "check": check},
        "test_split": {
            "read_by": "evaluate",
            "games_in_split": split_size,
            "games_evaluated": len(games),
            "sample": (
                "all games"
                if config.games is None or config.games >= split_size
                else f"the {config.games} smallest sha256(seed:game_id), seed {config.seed}"
            ),
        },
        **results,
    }
    write_outputs(args.out, record)

    free, tf = record["free_running"], record["teacher_forced"]
    k = config.top_k
    print(
        f"\nevaluate: {args.checkpoint} on {args.dataset} (test split, {len(games)} of {split_size} games, "
        f"{free['positions']:,} positions) in {seconds:.1f} s ({free['positions'] / seconds:.0f} positions/s)"
    )
    print(f"  move matching (legal-masked): top-1 {_pct(free['top1'])}  top-{k} {_pct(free[f'top{k}'])}")
    print(
        f"  own greedy move legal: {_pct(free['move_legal'])} (source {_pct(free['source_legal'])}, "
        f"destination {_pct(free['destination_legal'])}, promotion {_pct(free['promotion_legal'])})"
    )
    print(
        f"  teacher-forced: NLL {tf['nll']:.3f} nats/token, source accuracy {_pct(tf['phase_accuracy']['source'])}, "
        f"illegal probability {tf['illegal_probability']:.4f}"
    )
    for row in record["breakdowns"]["phase"]:
        print(
            f"  {row['bucket']:<11} {row['positions']:>7} positions  top-1 {_pct(row['top1']):>6}  "
            f"top-{k} {_pct(row[f'top{k}']):>6}  legal {_pct(row['move_legal']):>6}"
        )
    print(f"outputs: {args.out}/metrics.json, report.md, by_rating.csv, by_time_control.csv, by_phase.csv, plots/")
    return 0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


if __name__ == "__main__":
    run_stage("evaluate", main)
