"""A run before any training state exists: the rows it reads, its identity, the last.pt it
resumes from; and the no-op of a run whose last.pt shows it finished.

    spec, payload = open_run(config, data, output, env, resume="auto")
    receipt = finished_run(spec, payload)       # a dict when there is nothing left to train
    results = receipt or Trainer(spec, payload).run()                # chesscore.train.trainer

open_run builds no weights, optimizer or batches (the identity's parameter count comes from a
model on the meta device): confirming a finished run builds none of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from chesscore.fileio import sha256_json
from chesscore.model import GPT, GPTConfig
from chesscore.train.batching import check_context, steps_per_epoch
from chesscore.train.config import TrainConfig, identity, precision_name, uses_bf16
from chesscore.train.data import TrainData, conditioned
from chesscore.train.distributed import DistEnv
from chesscore.train.report import run_results, write_metrics_and_plots, write_results
from chesscore.train.state import TrainState, find_resume, receipt, terminal_status


@dataclass(frozen=True)
class RunSpec:
    """What a run is and where it starts, the same for its training and its no-op."""

    config: TrainConfig
    model_config: GPTConfig
    data: TrainData  # with triples-v2 prefixes where the model is conditioned
    output: Path
    env: DistEnv
    lengths: np.ndarray  # tokens of each train game
    bf16: bool
    identity: dict[str, Any]
    steps_per_epoch: int
    resume_note: str  # which checkpoint it resumes from, or why it starts afresh
    resume_path: Path
    resumed_from: int | None  # the step of that checkpoint; None: a fresh start

    def results(
        self,
        run: dict[str, Any],
        *,
        note: str,
        memory: Any,
        wall_seconds: float | None,
        deadline_validation: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """results.json's content (report.run_results and the run's facts) and run.json's (what this
        process knows of itself: report.RUN_KEYS); train() returns both in one dict."""
        return {
            **run,
            "resumed_from_step": self.resumed_from,
            "note": note,
            "world_size": self.env.world_size,
            "parameters": self.identity["model"]["parameters"],
            "steps_per_epoch": self.steps_per_epoch,
            "peak_memory": memory,
            "wall_seconds": wall_seconds,
            "output": str(self.output),
            "identity_sha256": sha256_json(self.identity),
            "deadline_validation": deadline_validation,
        }


def open_run(
    config: TrainConfig,
    data: TrainData,
    output: Path,
    env: DistEnv,
    *,
    resume: str = "auto",
    model_config: GPTConfig | None = None,
    code_files: tuple[Path, ...] = (),
) -> tuple[RunSpec, dict[str, Any] | None]:
    """The run's spec, and the last.pt payload it continues from (None: a fresh start).
    Raises ResumeRefused for a checkpoint `resume` insists on whose identity differs."""
    model_config = model_config or config.model_config()
    if model_config.conditioning:  # triples-v2 rows: the prefix after BOS
        data = conditioned(data, config.unknown_fraction, config.seed, config.field_unknown_fraction)
    lengths = np.asarray(data.train.lengths())
    check_context(lengths, model_config.block_size, "train")
    check_context(np.asarray(data.validation.lengths()), model_config.block_size, "validation")
    bf16 = uses_bf16(config.precision, env.device)
    with torch.device("meta"):  # the shapes alone: no memory, no random numbers drawn
        parameters = GPT(model_config).num_parameters()
    run_identity = identity(
        config,
        model_config,
        parameters,
        dataset_fingerprint=data.fingerprint,
        world_size=env.world_size,
        precision=precision_name(bf16),
        n_train_games=len(lengths),
        receipt_sha256=data.receipt_sha256,
        code_files=code_files,
    )
    payload, note, path = find_resume(resume, Path(output), run_identity)
    env.barrier()  # every rank has read last.pt before rank 0 may replace it
    spec = RunSpec(
        config=config,
        model_config=model_config,
        data=data,
        output=Path(output),
        env=env,
        lengths=lengths,
        bf16=bf16,
        identity=run_identity,
        steps_per_epoch=steps_per_epoch(len(lengths), config.micro, env.world_size, config.accum),
        resume_note=note,
        resume_path=path,
        resumed_from=None if payload is None else payload["train_state"]["step"],
    )
    return spec, payload


def finished_run(spec: RunSpec, payload: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run whose last.pt ended for good under this config (state.terminal_status): its
    receipt, printed as one JSON line, after putting back the metrics, plots and results.json
    that DVC may have deleted. It trains nothing and writes no checkpoint. None for a run to train."""
    if payload is None:
        return None
    state = TrainState.from_dict(payload["train_state"])
    status = terminal_status(state, spec.config)
    if status is None:
        return None
    done = receipt(spec.resume_path, payload, status)
    if spec.env.is_main:
        # DVC deletes uncached metrics and plots it finds changed or missing before it
        # reruns a stage: a finished run's no-op puts them back (the same bytes).
        write_metrics_and_plots(spec.output, state, status)
        if not (spec.output / "results.json").exists():
            rebuild_results(spec, state, status)
        print(json.dumps(done, sort_keys=True), flush=True)
    return done


def rebuild_results(spec: RunSpec, state: TrainState, status: str) -> None:
    """results.json of a run that finished but was killed between its final last.pt and
    results.json, from what last.pt knows: the bytes the run would have written. Its run.json
    says so; the throughput, memory and wall time are not known."""
    run = run_results(state, status, useful=0.0, padded=0.0, seconds=0.0, assembly_seconds=0.0, updates=0)
    note = (
        f"{spec.resume_note}; results.json rebuilt from last.pt (the finished run stopped before writing it): "
        "throughput, peak memory and wall time not known"
    )
    results = spec.results({**run, "throughput": None}, note=note, memory=None, wall_seconds=None)
    write_results(spec.output, results, state)
