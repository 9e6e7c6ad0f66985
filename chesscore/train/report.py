"""What a training run tells the world: results.json, DVC metrics and plots, the run's own
record (run.json, events.jsonl), GPU telemetry, and the closing summary. Only rank 0 writes.

    output/results.json            status, best step and NLL, history, checkpoints' sha256
    output/metrics.json            the DVC metric: best validation NLL and its step
    output/plots/train_loss.csv    step, nll, lr, grad_norm  (for `dvc plots show`)
    output/plots/validation.csv    step, nll, accuracies, legality, illegal mass
  and, not DVC outputs (they describe this process and machine, so they differ run to run):
    output/run.json                how it started (resumed from, why), updates, throughput,
                                   peak memory, wall time, torch.compile's counts, and on GPUs
                                   this run's nvidia-smi summary (gpu_telemetry)
    output/events.jsonl            one JSON object per line: start, validation, train, stop...
    output/gpu-telemetry.jsonl     nvidia-smi samples (utilisation, memory, power), on GPUs

Those four, identity.json and the checkpoints are the same bytes for the same data, params, code
and seed, however often the run was interrupted and resumed (tests/train/test_resume.py).
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from chesscore.fileio import RUN_RECORD, csv_text, metrics_text, sha256_file, update_text, write_record
from chesscore.train.state import TrainState

OUTPUTS = (
    "best.pt",
    "results.json",
    RUN_RECORD,
    "metrics.json",
    "plots/train_loss.csv",
    "plots/validation.csv",
    "identity.json",
    "gpu-telemetry.jsonl",
)


class EventLog:
    """Appends one JSON line per event (a single write, so a killed run leaves whole lines)."""

    def __init__(self, path: Path, enabled: bool, fresh: bool) -> None:
        self.path, self.enabled = path, enabled
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)
            if fresh or not path.exists():
                path.write_text("")
            else:  # a killed run may have left half a line: cut it off
                text = path.read_bytes()
                if text and not text.endswith(b"\n"):
                    path.write_bytes(text[: text.rfind(b"\n") + 1])

    def __call__(self, event: str, **fields: Any) -> None:
        if self.enabled:
            line = json.dumps(
                {"event": event, "time_unix": round(time.time(), 3), **fields}, sort_keys=True, default=str
            )
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")


def peak_memory(device: torch.device) -> dict[str, int | None]:
    """Peak resident memory of this process, and peak CUDA memory of its device."""
    cuda = device.type == "cuda"
    return {
        "cpu_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "cuda_max_allocated_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "cuda_max_reserved_bytes": torch.cuda.max_memory_reserved(device) if cuda else None,
    }


class GpuTelemetry:
    """Samples nvidia-smi every `period` seconds into a JSON-lines file, where it exists: a row per
    GPU of this node, readings as numbers ("[N/A]" as null). A call that fails or hangs is an
    error line and sampling goes on: telemetry never stops a run. `summary()` sums up this
    run's samples (the file also holds earlier runs' into the same folder)."""

    FIELDS = ("index", "utilization.gpu", "memory.used", "memory.total", "power.draw")

    def __init__(self, path: Path, period: float, timeout: float = 30.0) -> None:
        self.path, self.period, self.timeout = path, period, timeout
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.readings: list[dict[str, float | None]] = []  # this run's rows, every GPU and sample
        self.errors = 0

    def __enter__(self) -> GpuTelemetry:
        if shutil.which("nvidia-smi") and torch.cuda.is_available():
            self.thread = threading.Thread(target=self._run, daemon=True, name="gpu-telemetry")
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=self.timeout + 10)

    def _run(self) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            while not self.stop_event.is_set():
                f.write(json.dumps(self.sample()) + "\n")
                f.flush()
                self.stop_event.wait(self.period)

    def sample(self) -> dict[str, Any]:
        """One nvidia-smi reading (or the error it gave), counted into this run's summary."""
        now = round(time.time(), 3)
        command = ["nvidia-smi", f"--query-gpu={','.join(self.FIELDS)}", "--format=csv,noheader,nounits"]
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout, check=True)
        except (OSError, subprocess.SubprocessError) as error:
            self.errors += 1
            return {"time_unix": now, "error": f"{type(error).__name__}: {error}"}
        lines = [line for line in out.stdout.splitlines() if line.strip()]
        gpus = [dict(zip(self.FIELDS, map(_reading, line.split(",")))) for line in lines]
        self.readings += gpus
        return {"time_unix": now, "gpus": gpus}

    def summary(self) -> dict[str, Any] | None:
        """Mean utilisation and power and the most memory used over this run's samples (all GPUs
        of the node together); None where nothing was sampled (no GPU, or every call failed)."""
        if not self.readings:
            return None

        def known(field: str) -> list[float]:
            return [r[field] for r in self.readings if r.get(field) is not None]

        utilisation, memory, power = known("utilization.gpu"), known("memory.used"), known("power.draw")
        return {
            "readings": len(self.readings),
            "failed_samples": self.errors,
            "utilization_percent_mean": sum(utilisation) / len(utilisation) if utilisation else None,
            "memory_used_mib_max": max(memory) if memory else None,
            "power_watts_mean": sum(power) / len(power) if power else None,
        }


def _reading(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def validation_row(record: dict[str, Any]) -> dict[str, Any]:
    v = record["validation"]
    return {
        "step": record["step"],
        "nll": v["nll"],
        **{f"accuracy_{phase}": value for phase, value in v["phase_accuracy"].items()},
        "triple_legality": v["teacher_forced_triple_legality"],
        "illegal_probability": v["illegal_probability"],
        "reserved_probability": v["reserved_probability"],
    }


def write_metrics_and_plots(output: Path, state: TrainState, status: str) -> None:
    """DVC metrics and plots, derived from the checkpointed state alone (no timings), so a
    finished run's no-op rewrites them byte for byte; a file already holding its bytes is left
    alone. metrics.json holds the numbers people compare across experiments: the best
    validation NLL and its step (every validation is in plots/validation.csv, the run in
    results.json)."""
    rows = [validation_row(r) for r in state.history]
    metrics = {"best_nll": state.best_nll, "best_step": state.best_step}
    update_text(output / "metrics.json", metrics_text(metrics))
    update_text(output / "plots" / "train_loss.csv", csv_text(state.train_log, ["step", "nll", "lr", "grad_norm"]))
    columns = list(rows[0]) if rows else ["step", "nll"]
    update_text(output / "plots" / "validation.csv", csv_text(rows, columns))


def run_results(
    state: TrainState,
    status: str,
    *,
    useful: float,
    padded: float,
    seconds: float,
    assembly_seconds: float,
    updates: int,
) -> dict[str, Any]:
    """The run's part of results.json: where it stands, the history, the throughput (rank 0's
    step seconds, and the part of them its host spent assembling batches)."""
    return {
        "status": status,
        "step": state.step,
        "epoch": state.epoch,
        "next_step": state.next_step,
        "best_step": state.best_step,
        "best_validation_nll": state.best_nll,
        "bad_checks": state.bad_checks,
        "history": state.history,
        "updates_this_run": updates,
        "test_evaluated": False,
        "throughput": {
            "useful_tokens_per_second": useful / max(seconds, 1e-9),
            "padded_tokens_per_second": padded / max(seconds, 1e-9),
            "padding_fraction": 1 - useful / padded if padded else None,
            "train_seconds": seconds,
            "assembly_seconds": assembly_seconds,
            "assembly_fraction": assembly_seconds / seconds if seconds > 0 else None,
        },
    }


# What a process knows of its own run, not of the model it trained (where it wrote, how it
# started, how fast): run.json, not results.json.
RUN_KEYS = (
    "output",
    "resumed_from_step",
    "note",
    "updates_this_run",
    "throughput",
    "peak_memory",
    "wall_seconds",
    "compile",
    "gpu_telemetry",
)


def write_results(output: Path, results: dict[str, Any], state: TrainState) -> None:
    """results.json (with the checkpoints' sha256), run.json (RUN_KEYS), metrics.json and the
    plots."""
    for name in ("last", "best"):
        path = output / f"{name}.pt"
        results[f"{name}_checkpoint_sha256"] = sha256_file(path) if path.exists() else None
    write_record(output / "results.json", results, RUN_KEYS)
    write_metrics_and_plots(output, state, results["status"])


def summary(results: dict[str, Any]) -> str:
    """The one-screen summary a stage ends with."""
    history = results["history"]
    first, last = (history[0]["validation"], history[-1]["validation"]) if history else ({}, {})
    t = results["throughput"]
    lines = [
        f"train: {results['status']} after {results['step']} updates ({results['epoch']} epochs complete), "
        f"{results['updates_this_run']} in this run, world size {results['world_size']}",
        f"  validation NLL: initial {_f(first.get('nll'))} -> last {_f(last.get('nll'))} "
        f"(step {history[-1]['step'] if history else '-'}), "
        f"best {_f(results['best_validation_nll'])} at step {results['best_step']}",
        "  accuracy (last validation): " + ", ".join(f"{k} {_f(v)}" for k, v in last.get("phase_accuracy", {}).items()),
        f"  triple legality {_f(last.get('teacher_forced_triple_legality'))}, "
        f"illegal mass {_f(last.get('illegal_probability'))}, reserved mass {_f(last.get('reserved_probability'))}",
        f"  throughput: {_f(t['useful_tokens_per_second'], 0)} useful tokens/s, "
        f"{_f(t['padded_tokens_per_second'], 0)} padded tokens/s, padding {_f(t['padding_fraction'])}, "
        f"batch assembly {_f(t['assembly_fraction'])} of the step time, wall {_f(results['wall_seconds'], 1)} s",
        f"  peak memory (rank 0): {results['peak_memory'][0]['cpu_max_rss_bytes'] / 2**20:.0f} MiB RSS"
        + (
            f", {results['peak_memory'][0]['cuda_max_allocated_bytes'] / 2**30:.2f} GiB CUDA"
            if results["peak_memory"][0]["cuda_max_allocated_bytes"]
            else ""
        ),
        *([telemetry_line(results["gpu_telemetry"])] if results.get("gpu_telemetry") else []),
        f"  outputs: {results['output']}/(last.pt, best.pt, results.json, metrics.json, plots/), "
        "run.json and events.jsonl beside them",
    ]
    return "\n".join(lines)


def telemetry_line(gpu: dict[str, Any]) -> str:
    return (
        f"  GPU (nvidia-smi, {gpu['readings']} readings): utilisation mean {_f(gpu['utilization_percent_mean'], 0)}%, "
        f"memory used at most {_f(gpu['memory_used_mib_max'], 0)} MiB, power mean {_f(gpu['power_watts_mean'], 0)} W"
    )


def _f(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def console(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
