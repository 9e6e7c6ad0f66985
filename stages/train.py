"""Stage `train`: the dataset's train split -> checkpoints, identity, events and results.

    python -m stages.train                                   # every option from params.yaml
    python -m stages.train --dataset data/dataset --output data/train --model demo
    torchrun --nproc_per_node 2 -m stages.train --micro 8    # same CLI, one process per device
    python -m stages.train --mode probe --model baseline --probe-micro 8,16,32

Settings come from params.yaml's `train:` section (switch profiles with
chesscore.pipeline.profile), each key also a flag that overrides it (`--help` lists them). By
default the stage resumes from OUTPUT/last.pt when its identity matches this run's (so a retried
`dvc repro` continues a killed run), and starts afresh when it does not; `--resume PATH` insists
on that checkpoint and refuses one whose identity differs; `--resume none` starts afresh.
A job deadline may also come from the CHESS_JOB_DEADLINE environment variable; SIGTERM
counts as the deadline. A run stopped for either has saved last.pt and exits with status 75
(EX_TEMPFAIL, chesscore.failures: retryable) so that DVC does not record it as done: run it
again to resume. A refused resume (identity) exits 78, a damaged dataset 65.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from chesscore import failures
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings
from chesscore.cli.runner import run_stage
from chesscore.config import flat
from chesscore.train.config import TrainConfig


@dataclass(frozen=True)
class Settings:
    """params.yaml's `train:` section; every key is also a flag (`--lr 1e-3`, `--max-updates none`)."""

    dataset: Path = Path("data/dataset")  # the convert stage's output; the test split is never read here
    output: Path = Path("data/train")  # last.pt, best.pt, identity.json, results.json, metrics, run.json, events.jsonl
    mode: Literal["train", "probe"] = "train"  # probe: step time and memory per microbatch size, no weights kept
    threads: int | None = None  # torch CPU threads per process; null: torch's default
    resume: str = "auto"  # auto: continue OUTPUT/last.pt when its identity matches; none; or a last.pt to insist on
    integrity_receipt: Path | None = None  # a chesscore.data.dataset.verify receipt (skips re-hashing the shards)
    probe_micro: tuple[int, ...] = (1, 2, 4, 8)  # probe mode: microbatch sizes per rank
    run: TrainConfig = flat(TrainConfig)  # the run's knobs (chesscore.train.config): model, batch, schedule, stops

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 (null: torch's default), got {self.threads}")
        if not self.probe_micro or min(self.probe_micro) < 1:
            raise ValueError(f"probe_micro must be microbatch sizes >= 1, got {list(self.probe_micro)}")


def settings(argv: list[str] | None) -> Settings:
    """The stage's settings: params.yaml's train section, the flags, and the job deadline of
    CHESS_JOB_DEADLINE when neither the flags nor params.yaml set one."""
    chosen, _ = stage_settings(argv, "train", Settings, __doc__)
    deadline = os.environ.get("CHESS_JOB_DEADLINE")
    if deadline and chosen.run.deadline is None:
        chosen = replace(chosen, run=replace(chosen.run, deadline=deadline))
    return chosen


def main(argv: list[str] | None = None) -> int:
    chosen = settings(argv)
    config, args = chosen.run, chosen
    import torch

    from chesscore.fileio import atomic_write_json
    from chesscore.model import CONFIGS
    from chesscore.train import distributed
    from chesscore.train.data import conditioned, open_dataset
    from chesscore.train.deadline import Deadline
    from chesscore.train.probe import probe
    from chesscore.train.trainer import train

    if config.model not in CONFIGS:
        raise failures.Refused(f"train.model: no model config {config.model!r} (have: {', '.join(CONFIGS)})")
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
        if args.mode == "probe":  # the rows training would read: a triples-v2 model's carry the prefix
            model_config = config.model_config()
            rows = (
                conditioned(data, config.unknown_fraction, config.seed, config.field_unknown_fraction)
                if model_config.conditioning
                else data
            )
            probe(
                model_config,
                rows.train,
                env,
                args.probe_micro,
                args.output,
                compile=config.compile,
                precision=config.precision,
            )
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
