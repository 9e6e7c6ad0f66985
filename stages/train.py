"""Stage `train`: the dataset's train split -> checkpoints, identity, events and results.

    python -m stages.train                                   # every option from params.yaml
    python -m stages.train --dataset data/dataset --output data/train --config demo
    torchrun --nproc_per_node 2 -m stages.train --micro 8    # same CLI, one process per device
    python -m stages.train --mode probe --config baseline --probe-micro 8,16,32

Defaults come from params.yaml's `train:` section (switch profiles with chesscore.pipeline.profile);
flags override them. By default the stage resumes from OUTPUT/last.pt when its identity
matches this run's (so a retried `dvc repro` continues a killed run), and starts afresh when
it does not; `--resume PATH` insists on
that checkpoint and refuses one whose identity differs; `--resume none` starts afresh.
A job deadline may also come from the CHESS_JOB_DEADLINE environment variable; SIGTERM
counts as the deadline. A run stopped for either has saved last.pt and exits with status 75
(EX_TEMPFAIL, chesscore.failures: retryable) so that DVC does not record it as done: run it
again to resume. A refused resume (identity) exits 78, a damaged dataset 65.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path
from typing import Any

from chesscore import failures
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import PARAMS, params_section
from chesscore.cli.runner import run_stage


def _optional(kind):
    """A flag type that also takes `none` (to switch off a limit params.yaml sets)."""

    def parse(text: str):
        return None if str(text).lower() in ("none", "null") else kind(text)

    parse.__name__ = kind.__name__
    return parse


def _int_list(value: str | list[int]) -> list[int]:
    """ "8,16,32" (a flag) or [8, 16, 32] (params.yaml)."""
    parts = value if isinstance(value, list) else str(value).split(",")
    return [int(part) for part in parts if str(part).strip()]


def parser(defaults: dict[str, Any]) -> argparse.ArgumentParser:
    d = defaults.get
    p = argparse.ArgumentParser(
        prog="python -m stages.train",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--params", type=Path, default=PARAMS, help="params file (read before other flags)")
    p.add_argument("--dataset", type=Path, default=d("dataset", "data/dataset"), help="converted dataset folder")
    p.add_argument("--output", type=Path, default=d("output", "data/train"), help="output folder")
    p.add_argument("--config", default=d("config", "demo"), help="model config in chesscore.model.CONFIGS")
    p.add_argument("--mode", choices=("train", "probe"), default=d("mode", "train"))
    p.add_argument("--micro", type=int, default=d("micro", 16), help="games per microbatch per rank")
    p.add_argument("--accum", type=int, default=d("accum", 1), help="microbatches per optimizer update")
    p.add_argument("--lr", type=float, default=d("lr", 3e-4), help="peak learning rate")
    p.add_argument("--min-lr-ratio", type=float, default=d("min_lr_ratio", 0.1), help="final lr / peak lr")
    p.add_argument("--weight-decay", type=float, default=d("weight_decay", 0.1), help="on matrices only")
    p.add_argument("--grad-clip", type=float, default=d("grad_clip", 1.0), help="max gradient norm")
    p.add_argument("--epochs", type=int, default=d("epochs", 20), help="max epochs")
    p.add_argument("--seed", type=int, default=d("seed", 2026))
    p.add_argument(
        "--max-seconds", type=_optional(float), default=d("max_seconds"), help="time budget of this run (resumable)"
    )
    p.add_argument("--max-updates", type=_optional(int), default=d("max_updates"), help="stop after this many updates")
    p.add_argument(
        "--schedule-steps",
        type=_optional(int),
        default=d("schedule_steps"),
        help="cosine horizon (default: planned updates)",
    )
    p.add_argument(
        "--warmup-steps",
        type=_optional(int),
        default=d("warmup_steps"),
        help="linear warmup (default: 10%% of the schedule)",
    )
    p.add_argument(
        "--validation-every-steps",
        type=_optional(int),
        default=d("validation_every_steps"),
        help="validate every K updates, besides every epoch end",
    )
    p.add_argument(
        "--validation-micro",
        type=_optional(int),
        default=d("validation_micro"),
        help="games per validation batch per rank",
    )
    p.add_argument(
        "--legality-eval-games",
        type=_optional(int),
        default=d("legality_eval_games"),
        help="validation games replayed for the legality metrics (default: all)",
    )
    p.add_argument(
        "--patience", type=int, default=d("patience", 5), help="validations without improvement before an early stop"
    )
    p.add_argument("--min-delta", type=float, default=d("min_delta", 1e-4), help="NLL improvement that counts")
    p.add_argument(
        "--deadline",
        default=os.environ.get("CHESS_JOB_DEADLINE") or d("deadline"),
        help="job deadline: ISO-8601 with zone or Unix seconds (default: env CHESS_JOB_DEADLINE, else params)",
    )
    p.add_argument(
        "--deadline-margin-seconds",
        type=float,
        default=d("deadline_margin_seconds", 120.0),
        help="soft stop this long before the deadline",
    )
    p.add_argument(
        "--bucket-pool-batches",
        type=int,
        default=d("bucket_pool_batches", 64),
        help="length buckets sort within pools of this many global microbatches",
    )
    p.add_argument("--log-every-steps", type=int, default=d("log_every_steps", 10))
    p.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, default=d("compile", False), help="torch.compile the model"
    )
    p.add_argument("--device", default=d("device", "auto"), choices=("auto", "cpu", "cuda"))
    p.add_argument(
        "--threads", type=_optional(int), default=d("threads"), help="torch CPU threads per process (default: torch's)"
    )
    p.add_argument("--resume", default=d("resume", "auto"), help="auto, none, or a last.pt to insist on")
    p.add_argument(
        "--integrity-receipt",
        type=Path,
        default=d("integrity_receipt"),
        help="receipt from chesscore.data.dataset.verify (skips re-hashing the shards)",
    )
    p.add_argument(
        "--probe-micro",
        type=_int_list,
        default=_int_list(d("probe_micro", "1,2,4,8")),
        help="probe mode: comma-separated microbatch sizes",
    )
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return parser(params_section(argv, "train")[1]).parse_args(argv)


def train_config(args: argparse.Namespace):
    from chesscore.train.config import TrainConfig

    return TrainConfig.from_flat(
        {
            "model": args.config,
            "micro": args.micro,
            "accum": args.accum,
            "epochs": args.epochs,
            "seed": args.seed,
            "lr": args.lr,
            "min_lr_ratio": args.min_lr_ratio,
            "weight_decay": args.weight_decay,
            "grad_clip": args.grad_clip,
            "schedule_steps": args.schedule_steps,
            "warmup_steps": args.warmup_steps,
            "max_updates": args.max_updates,
            "max_seconds": args.max_seconds,
            "deadline": args.deadline,
            "deadline_margin_seconds": args.deadline_margin_seconds,
            "validation_every_steps": args.validation_every_steps,
            "validation_micro": args.validation_micro,
            "legality_eval_games": args.legality_eval_games,
            "patience": args.patience,
            "min_delta": args.min_delta,
            "bucket_pool_batches": args.bucket_pool_batches,
            "log_every_steps": args.log_every_steps,
            "compile": args.compile,
            "device": args.device,
        }
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = train_config(args)
    except ValueError as error:
        raise failures.Refused(f"{args.params}: `train:` {error}") from None
    import torch

    from chesscore.fileio import atomic_write_json
    from chesscore.model import CONFIGS
    from chesscore.train import distributed
    from chesscore.train.data import open_dataset
    from chesscore.train.deadline import Deadline
    from chesscore.train.probe import probe
    from chesscore.train.trainer import train

    if args.config not in CONFIGS:
        raise failures.Refused(f"no model config {args.config!r} (have: {', '.join(CONFIGS)})")
    if args.threads:
        torch.set_num_threads(args.threads)
    deadline = Deadline.parse(config.deadline, config.deadline_margin_seconds)
    if deadline.soft_stop():
        raise failures.Refused(
            f"the job deadline {config.deadline} (less the margin of "
            f"{config.deadline_margin_seconds:.0f} s) has passed; nothing to do"
        )
    # SIGTERM (a scheduler's preemption, torchrun passing one on) means "the deadline is now":
    # the run saves at its next step or validation batch and exits with failures.TEMPORARY (75).
    signal.signal(signal.SIGTERM, lambda signum, frame: setattr(deadline, "at", 0.0))
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 holds it for all ranks
        hold_output(args.output, "train")
    env = distributed.setup(config.device)
    failure = args.output / f"failure-rank{env.rank}.json"
    failure.unlink(missing_ok=True)
    try:
        data = open_dataset(args.dataset, args.integrity_receipt, env)
        if args.mode == "probe":
            probe(CONFIGS[config.model], data.train, env, args.probe_micro, args.output, compile=config.compile)
            return 0
        results = train(
            config, data, args.output, env, resume=args.resume, deadline=deadline, code_files=(Path(__file__),)
        )
    except BaseException as error:
        atomic_write_json(failure, {"error": repr(error), "rank": env.rank, "time_unix": time.time()})
        raise
    finally:
        distributed.teardown()
    if results["status"] == "deadline_soft_stop":
        # Not finished: a non-zero exit keeps DVC from recording the stage as done, and tells
        # an orchestrator to retry (the rerun resumes).
        raise failures.Temporary(
            f"stopped for the job deadline (or SIGTERM) at step {results['step']}, last.pt saved; run again to resume"
        )
    return 0


if __name__ == "__main__":
    run_stage("train", main)
