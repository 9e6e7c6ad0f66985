"""Stage `evaluate`: a checkpoint on the dataset's test split (the only reader of that split).

    python -m stages.evaluate                                 # every option from params.yaml
    python -m stages.evaluate --checkpoint data/train/best.pt --dataset data/dataset --out data/evaluate

Teacher-forced metrics (training's: NLL, per-phase accuracy, triple legality, reserved and
illegal probability) and free-running ones (top-1 / top-k move matching under the legal mask,
raw legality of the model's own greedy move), each broken down by the mover's rating, the
time-control class and the game phase. Writes OUT/evaluation.json (the whole record),
OUT/metrics.json (DVC metric: top-1 and legality), OUT/by_*.csv, OUT/plots/*.csv (DVC plots)
and OUT/report.md; for a triples-v2 model also top-1 told the true ratings, "unknown" and fixed
ratings, per actual rating band (OUT/plots/conditioning.csv, OUT/conditioning.png); and, on the real
Lichess games of `real_games` (never in any split), how often the model picks the human's move
beside Stockfish at depth 1 and the uniform random mover on the same positions
(chesscore.eval.human). A checkpoint
whose identity names another dataset is refused. A checkpoint is evaluated once: when
OUT/evaluation.json already holds this checkpoint x dataset x settings, the stage writes back a
missing metric or plot from it, says so and stops (--force to redo).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch

from chesscore import failures
from chesscore.checkpoint import load_model
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings
from chesscore.cli.runner import run_stage
from chesscore.config import flat
from chesscore.data import dataset
from chesscore.eval.conditioning import conditioning_matrix
from chesscore.eval.evaluate import EvalConfig, check_dataset, evaluate, sample_test_games
from chesscore.eval.human import HumanConfig, human_eval
from chesscore.eval.human import headline as human_headline
from chesscore.eval.real_games import real_game_files
from chesscore.eval.report import RECORD, write_dvc_files, write_outputs
from chesscore.fileio import sha256_file, sha256_json
from chesscore.model import pick_device
from chesscore.runtime.progress import progress_bar


@dataclass(frozen=True)
class Settings:
    """params.yaml's `evaluate:` section; every key is also a flag (`--games 500`)."""

    checkpoint: Path = Path("data/train/best.pt")  # any chesscore checkpoint whose identity names `dataset`
    dataset: Path = Path("data/dataset")  # the convert stage's output; evaluate is the only reader of its test split
    out: Path = Path("data/evaluate")  # evaluation.json, metrics.json, report.md, by_*.csv, plots/
    device: Literal["auto", "cpu", "cuda"] = "cpu"  # auto: cuda when present
    threads: int = 1  # torch CPU threads (the forwards are small: more threads than free cores hurt)
    evaluation: EvalConfig = flat(EvalConfig)  # what is measured (chesscore.eval.evaluate)
    real_games: Path = Path("data/real")  # real human games (never in a split) for human-move prediction
    human: HumanConfig = flat(HumanConfig)  # how it is measured (chesscore.eval.human)

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")


def extra_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-other-dataset",
        action="store_true",
        help="evaluate a checkpoint whose identity names another dataset (or none)",
    )
    parser.add_argument("--force", action="store_true", help="evaluate again even if OUT holds this evaluation")


def main(argv: list[str] | None = None) -> int:
    settings, args = stage_settings(argv, "evaluate", Settings, __doc__, extra=extra_flags)
    config, out = settings.evaluation, settings.out
    torch.set_num_threads(settings.threads)
    device = str(pick_device(settings.device))
    # A damaged dataset (IntegrityError: exit 65), a checkpoint that is not ours or was trained
    # on another dataset (CheckpointError, DatasetMismatch: exit 78) end the stage through
    # run_stage with one line naming the file.
    hold_output(out, "evaluate")
    manifest = dataset.manifest(settings.dataset)
    model, payload = load_model(settings.checkpoint, device)
    check = check_dataset(payload, manifest, args.allow_other_dataset, str(settings.checkpoint))
    checkpoint_sha = sha256_file(settings.checkpoint)
    identity = {"checkpoint": checkpoint_sha, "dataset": manifest["fingerprint"], "config": asdict(config)}
    if settings.human.human_games != 0:  # the real games and how they are measured
        identity["human"] = {"games": real_game_files(settings.real_games), "config": asdict(settings.human)}
    key = sha256_json(identity)
    previous = out / RECORD
    if previous.is_file() and not args.force:
        record = json.loads(previous.read_text(encoding="utf-8"))
        if record.get("evaluation_key") == key:
            write_dvc_files(out, record)  # puts back what DVC removed (metrics, plots): the same bytes
            print(f"evaluate: {out} already holds this evaluation ({key[:16]}); --force to redo")
            return 0

    started = time.perf_counter()
    games, split_size = sample_test_games(settings.dataset, config.games, config.seed)
    if not games:
        raise failures.BadInput(f"{settings.dataset}: the test split has no games")
    positions = 0
    with progress_bar(total=len(games), desc="evaluate", unit="game") as bar:

        def progress(n_games: int, n_positions: int) -> None:
            nonlocal positions
            positions += n_positions
            bar.update(n_games)
            bar.set_postfix(positions_per_s=f"{positions / (time.perf_counter() - started):.0f}")

        results = evaluate(model, games, config, progress)
    if model.config.conditioning:  # triples-v2: does the conditioning matter (chesscore.eval.conditioning)?
        print("evaluate: top-1 told the true ratings, unknown and each of", list(config.conditioning_ratings))
        results["conditioning"] = conditioning_matrix(model, games, config.conditioning_ratings, config.batch_size)
    if settings.human.human_games != 0:
        results["human"] = human_eval(model, settings.real_games, settings.human, config)
    seconds = time.perf_counter() - started

    record = {
        "evaluation_key": key,
        "checkpoint": {
            "path": str(settings.checkpoint),
            "sha256": checkpoint_sha,
            "config_name": f"{payload['config']['n_layer']}x{payload['config']['n_embd']}",
            "parameters": model.num_parameters(),
        },
        "dataset": {"path": str(settings.dataset), "fingerprint": manifest["fingerprint"], "check": check},
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
    write_outputs(out, record)

    free, tf = record["free_running"], record["teacher_forced"]
    k = config.top_k
    print(
        f"\nevaluate: {settings.checkpoint} on {settings.dataset} (test split, {len(games)} of {split_size} games, "
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
    if "human" in record:
        print(human_headline(record["human"]))
    print(f"outputs: {out}/evaluation.json, metrics.json, report.md, by_*.csv, plots/")
    return 0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


if __name__ == "__main__":
    run_stage("evaluate", main)
