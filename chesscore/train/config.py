"""Every knob of a training run, and the run's identity (what decides whether a resume is
allowed).

The identity holds what shapes the trajectory of the weights: tokenizer, dataset
fingerprint, model config, code, hyperparameters, schedule, world size, seed, microbatch,
accumulation, precision and torch version. A checkpoint resumes only under an equal
identity. Stop conditions that only say when to stop (max_updates, max_seconds, the job
deadline) are not in it: a run paused by its time budget resumes with a new budget, and
`max_updates` can be raised to extend a run whose schedule (schedule_steps) is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch

from chesscore import ranges, tokens
from chesscore.conditioning import FIELDS
from chesscore.config import flat, to_mapping
from chesscore.fileio import code_sha256
from chesscore.model import CONFIGS, GPTConfig, tokens_version
from chesscore.train.batching import steps_per_epoch
from chesscore.train.deadline import parse_time
from chesscore.train.optim import OptimConfig

LIBRARY = Path(__file__).resolve().parents[1]  # chesscore/
# The code a training trajectory depends on: this package and the model it trains (folders are
# hashed file by file); the stage adds its own file.
TRAINING_CODE = (
    LIBRARY / "train",
    LIBRARY / "model.py",
    LIBRARY / "boards.py",
    LIBRARY / "features.py",
    LIBRARY / "conditioning.py",
    LIBRARY / "checkpoint.py",
    LIBRARY / "resume.py",
    LIBRARY / "runtime" / "seeds.py",
)
DEVICES = ("auto", "cpu", "cuda")  # chesscore.train.distributed picks the CUDA device of each rank
PRECISIONS = ("auto", "fp32", "bf16")


@dataclass(frozen=True)
class TrainConfig:
    model: str = "demo-board"  # name of the model config in chesscore.model.CONFIGS
    tokens: Literal["triples-v1", "triples-v2"] = "triples-v2"  # triples-v2: condition on ratings and time control
    unknown_fraction: float = 0.1  # triples-v2: share of train games (seeded) read with the "unknown" prefix
    field_unknown_fraction: float = 0.2  # triples-v2: and per field, the share read with that field alone unknown
    skill_inputs: bool = False  # triples-v2: the ratings also added at every move position (Maia-2's skill inputs)
    micro: int = 16  # games per microbatch per rank
    accum: int = 1  # microbatches per optimizer update (global batch: micro * world * accum)
    epochs: int = 3  # at most this many passes over the train split
    seed: int = 2026  # model init, epoch plans and per-rank RNG derive from it
    optim: OptimConfig = flat(OptimConfig)  # AdamW and the peak of its schedule (keys of this section)
    schedule_steps: int | None = None  # cosine horizon; None: min(max_updates, epochs * steps per epoch)
    warmup_steps: int | None = None  # None: 10% of schedule_steps
    max_updates: int | None = None  # stop after this many optimizer updates (status max_updates)
    max_seconds: float | None = 900  # time budget of this invocation (status time_budget, resumable)
    deadline: str | float | None = None  # job deadline, absolute (ISO-8601 with zone or Unix seconds)
    deadline_margin_seconds: float = 60  # soft stop this long before the deadline, to save
    validation_every_steps: int | None = 100  # also validate every K updates (always at epoch ends)
    validation_micro: int | None = None  # games per validation batch per rank; None: 2 * micro
    legality_eval_games: int | None = 50  # games replayed for the legality metrics; None: all
    patience: int = 5  # early stop after this many validations without improvement
    min_delta: float = 1e-4  # improvement: validation NLL below best - min_delta
    bucket_pool_batches: int = 64  # length buckets sort within pools of this many global microbatches
    log_every_steps: int = 10  # train loss / lr / grad norm events and plot points
    compile: bool = False  # torch.compile the model (numerics differ slightly; in the identity)
    # Padded to `micro` rows as well, so a compiled model meets a bounded set of shapes
    # (chesscore.train.compiled); 0 leaves batches as they are (a compiled model: dynamic shapes).
    pad_to_multiple: int = 0  # pad batch widths to a multiple of this many tokens (capped at the context)
    # Processes that assemble the next microbatches (collate, padding, board features) while the
    # device trains (chesscore.train.loader); the batches are the same bytes with any number.
    loader_workers: int = 0  # 0: the training process assembles each microbatch itself
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto: bf16 autocast on CUDA, fp32 on CPU; weights stay fp32
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: cuda when present
    telemetry_seconds: float = 5.0  # nvidia-smi sampling period, where nvidia-smi exists

    def __post_init__(self) -> None:
        ranges.check(
            self,
            counts=(
                "micro",
                "accum",
                "epochs",
                "patience",
                "log_every_steps",
                "bucket_pool_batches",
                "schedule_steps",
                "max_updates",
                "validation_every_steps",
                "legality_eval_games",
                "validation_micro",
            ),
            whole=("seed", "warmup_steps", "pad_to_multiple", "loader_workers"),
            positive=("max_seconds", "telemetry_seconds"),
            non_negative=("deadline_margin_seconds", "min_delta"),
            fraction=("unknown_fraction", "field_unknown_fraction"),
        )
        ranges.one_of("device", self.device, DEVICES)
        ranges.one_of("precision", self.precision, PRECISIONS)
        ranges.one_of("tokens", self.tokens, tokens.VERSIONS)
        if self.skill_inputs and self.tokens != tokens.CONDITIONED_VERSION:
            raise ranges.InvalidSetting(f"skill_inputs needs tokens {tokens.CONDITIONED_VERSION} (the rating prefix)")
        if self.deadline is not None:
            parse_time(self.deadline)  # a deadline that names no time is refused now, not at the end

    def model_config(self) -> GPTConfig:
        """The named model config, reading triples-v2 when `tokens` says so."""
        conditioning = self.tokens == tokens.CONDITIONED_VERSION
        return replace(CONFIGS[self.model], conditioning=conditioning, skill_inputs=self.skill_inputs)

    def schedule(self, n_train_games: int, world_size: int) -> tuple[int, int]:
        """(schedule_steps, warmup_steps) as resolved for this data and world size."""
        per_epoch = steps_per_epoch(n_train_games, self.micro, world_size, self.accum)
        horizon = self.epochs * per_epoch
        if self.max_updates is not None:
            horizon = min(horizon, self.max_updates)
        schedule_steps = self.schedule_steps or horizon
        warmup = self.warmup_steps if self.warmup_steps is not None else round(0.1 * schedule_steps)
        return schedule_steps, warmup


# TrainConfig's settings that the identity holds under a name of its own (tokenizer, conditioning,
# model, schedule, seed, microbatch, accumulation, precision) or leaves out: stop conditions and
# where or how visibly the run goes. Every other setting is a hyperparameter: a new field joins the
# identity unless it is named here, so a resume can never ignore it by omission.
IDENTITY_ELSEWHERE = frozenset(
    {"model", "tokens", "unknown_fraction", "field_unknown_fraction", "skill_inputs", "schedule_steps", "warmup_steps"}
    | {"seed", "micro", "accum", "precision"}
)
NOT_IN_IDENTITY = frozenset(
    {
        "max_updates",
        "max_seconds",
        "deadline",
        "deadline_margin_seconds",
        "log_every_steps",
        "device",
        "telemetry_seconds",
        "loader_workers",
    }
)


def hyperparameters(config: TrainConfig) -> dict[str, Any]:
    """The identity's `hyperparameters`: every setting not held elsewhere in it nor left out."""
    skipped = IDENTITY_ELSEWHERE | NOT_IN_IDENTITY
    return {key: value for key, value in to_mapping(config).items() if key not in skipped}


def uses_bf16(precision: str, device: torch.device) -> bool:
    """Whether a run of this `precision` setting autocasts to bf16 on `device` (auto: on CUDA
    only, as before the setting existed; bf16 on the CPU too, where torch's CPU autocast runs
    it, so tests exercise the GPU profile's numerics without a GPU)."""
    return precision == "bf16" or (precision == "auto" and device.type == "cuda")


def precision_name(bf16: bool) -> str:
    """The identity's words for the precision (unchanged since before the setting existed)."""
    return "bf16-autocast, fp32 weights" if bf16 else "fp32"


def identity(
    config: TrainConfig,
    model_config: GPTConfig,
    parameters: int,
    *,
    dataset_fingerprint: str,
    world_size: int,
    precision: str,
    n_train_games: int,
    receipt_sha256: str | None = None,
    code_files: Iterable[Path] = (),
) -> dict[str, Any]:
    """The JSON-able identity of a run (see the module docstring for what is left out)."""
    schedule_steps, warmup_steps = config.schedule(n_train_games, world_size)
    version = tokens_version(model_config)
    return {
        "tokenizer": {"version": version, "sha256": tokens.tokenizer_sha256(version)},
        "conditioning": (
            {
                "prefix": list(FIELDS),
                "unknown_fraction": config.unknown_fraction,
                "field_unknown_fraction": config.field_unknown_fraction,
                "skill_inputs": model_config.skill_inputs,
            }
            if model_config.conditioning
            else None
        ),
        "dataset_fingerprint": dataset_fingerprint,
        "integrity_receipt_sha256": receipt_sha256,
        "model": {"name": config.model, "config": model_config.to_dict(), "parameters": parameters},
        "training_code": code_sha256([*TRAINING_CODE, *code_files]),
        "hyperparameters": hyperparameters(config),
        "schedule": {
            "kind": "linear warmup, cosine decay to lr * min_lr_ratio",
            "schedule_steps": schedule_steps,
            "warmup_steps": warmup_steps,
        },
        "world_size": world_size,
        "seed": config.seed,
        "microbatch": config.micro,
        "accumulation": config.accum,
        "precision": precision,
        "torch": str(torch.__version__),
    }
