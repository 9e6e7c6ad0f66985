"""What the training loop reports as it goes: the start event and line, the progress bar and GPU
telemetry while it runs, every `log_every_steps` a train record (state.train_log, an event, the
bar's line), throughput totals, and at the stop results.json and run.json, the stop event and the summary.
The files and their formats are chesscore.train.report's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from chesscore.fileio import sha256_json
from chesscore.runtime.progress import progress_bar
from chesscore.train.compiled import CompileCount, describe, width_count
from chesscore.train.report import EventLog, GpuTelemetry, console, peak_memory, run_results, summary, write_results
from chesscore.train.run import RunSpec
from chesscore.train.state import TrainState


class RunLog:
    """The reports of one process's part of a run (rank 0 writes; every rank takes part in the sums)."""

    def __init__(self, spec: RunSpec, events: EventLog) -> None:
        self.spec, self.events = spec, events
        # Of this process's steps: target counts, step and batch-assembly seconds, updates.
        self.totals = {"useful": 0.0, "padded": 0.0, "seconds": 0.0, "assembly_seconds": 0.0, "updates": 0}
        self.telemetry: GpuTelemetry | None = None  # rank 0's nvidia-smi sampler, while the loop runs

    def start(self, state: TrainState, parameters: int) -> None:
        """The start event and line; CUDA's peak memory counted from here."""
        spec = self.spec
        self.events(
            "start",
            note=spec.resume_note,
            step=state.step,
            world_size=spec.env.world_size,
            parameters=parameters,
            device=str(spec.env.device),
            train_games=len(spec.lengths),
            validation_games=len(spec.data.validation),
            steps_per_epoch=spec.steps_per_epoch,
            identity_sha256=sha256_json(spec.identity),
        )
        if spec.env.is_main:
            console(f"train: {spec.resume_note}")
        if spec.env.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(spec.env.device)

    @contextlib.contextmanager
    def running(self, state: TrainState) -> Iterator[Any]:
        """The progress bar (rank 0) and, on GPUs, nvidia-smi samples while the loop runs."""
        spec = self.spec
        planned = spec.config.epochs * spec.steps_per_epoch
        planned = min(planned, spec.config.max_updates or planned)
        bar = progress_bar(
            spec.env.is_main, total=planned, initial=state.step, unit="step", dynamic_ncols=True, desc="train"
        )
        if spec.env.is_main:
            self.telemetry = GpuTelemetry(spec.output / "gpu-telemetry.jsonl", spec.config.telemetry_seconds)
        with bar, self.telemetry or contextlib.nullcontext():
            yield bar

    def step(
        self,
        state: TrainState,
        bar: Any,
        *,
        loss_sum: torch.Tensor,
        useful: int,
        padded: int,
        seconds: float,
        assembly_seconds: float,
        lr: float,
        grad_norm: float,
    ) -> None:
        """Count the step just taken (state.step is its number) and log it when it is due."""
        self.totals["useful"] += useful
        self.totals["padded"] += padded
        self.totals["seconds"] += seconds
        self.totals["assembly_seconds"] += assembly_seconds
        self.totals["updates"] += 1
        bar.update(1)
        if state.step % self.spec.config.log_every_steps:
            return
        total = self.spec.env.all_reduce_sum(torch.tensor([float(loss_sum), useful, padded], dtype=torch.float64))
        nll, tokens_per_second = float(total[0] / total[1]), float(total[1]) / seconds
        record = {
            "step": state.step,
            "nll": nll,
            "lr": lr,
            "grad_norm": grad_norm,
            "padding_fraction": 1 - float(total[1] / total[2]),
        }
        state.train_log.append(record)
        self.events(
            "train",
            epoch=state.epoch,
            useful_tokens_per_second=tokens_per_second,
            padded_tokens_per_second=float(total[2]) / seconds,
            step_seconds=seconds,
            assembly_seconds=assembly_seconds,
            **record,
        )
        bar.set_postfix(
            nll=f"{nll:.3f}",
            lr=f"{lr:.2e}",
            gnorm=f"{grad_norm:.2f}",
            tok_s=f"{tokens_per_second:.0f}",
            pad=f"{record['padding_fraction']:.1%}",
        )

    def finish(
        self,
        state: TrainState,
        status: str,
        wall_seconds: float,
        *,
        compile_count: CompileCount | None,
        deadline_validation: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """results.json and run.json (throughput and memory over all ranks), the stop event, the summary."""
        spec, env = self.spec, self.spec.env
        sums = env.all_reduce_sum(torch.tensor([self.totals["useful"], self.totals["padded"]], dtype=torch.float64))
        memory = env.gather({"rank": env.rank, **peak_memory(env.device)})
        run = run_results(
            state,
            status,
            useful=float(sums[0]),
            padded=float(sums[1]),
            seconds=self.totals["seconds"],
            assembly_seconds=self.totals["assembly_seconds"],
            updates=self.totals["updates"],
        )
        results = spec.results(
            run,
            note=spec.resume_note,
            memory=memory,
            wall_seconds=wall_seconds,
            deadline_validation=deadline_validation,
        )
        if compile_count is not None:  # only then: an eager run's run.json keeps its keys
            widths = width_count(spec.config.pad_to_multiple, spec.model_config.block_size)
            results["compile"] = {
                **compile_count.report(),
                "pad_to_multiple": spec.config.pad_to_multiple,
                "max_widths": widths,
            }
            if env.is_main:
                console(describe(results["compile"], results["compile"]["max_widths"]))
        if self.telemetry is not None and (gpu := self.telemetry.summary()) is not None:
            results["gpu_telemetry"] = gpu  # only on GPUs: a CPU run's run.json keeps its keys
        if env.is_main:
            write_results(spec.output, results, state)
            self.events(
                "stop",
                status=status,
                step=state.step,
                best_step=state.best_step,
                best_nll=state.best_nll,
                wall_seconds=wall_seconds,
            )
            print(summary(results), flush=True)
        return results
