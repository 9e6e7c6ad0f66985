"""GPU telemetry (chesscore.train.report.GpuTelemetry): nvidia-smi sampled while training runs,
its readings as numbers, a failing or hanging nvidia-smi recorded and never fatal, and this
run's summary in run.json and the closing lines. No GPU here: nvidia-smi is a script on PATH
that answers as the real one does (`--format=csv,noheader,nounits`: one line per GPU).

    .venv/bin/python -m pytest -p no:xdist tests/train/test_telemetry.py -q
"""

from __future__ import annotations

import json
import os
import time

import pytest

from chesscore.train import report, runlog
from chesscore.train.report import RUN_KEYS, GpuTelemetry
from tests.training_data import run, small_data

TWO_GPUS = "0, 50, 1000, 81559, 300.5\n1, 70, 2000, 81559, [N/A]\n"


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    """Installs an nvidia-smi that runs `body` (a shell script's lines), and says CUDA is there."""

    def install(body: str) -> None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        script = bin_dir / "nvidia-smi"
        script.write_text("#!/bin/sh\n" + body + "\n")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    monkeypatch.setattr(report.torch.cuda, "is_available", lambda: True)
    return install


def sampled(telemetry: GpuTelemetry, lines: int) -> list[dict]:
    """The file's samples once it holds `lines` of them (the sampler runs in its own thread)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if telemetry.path.exists() and len(telemetry.path.read_text().splitlines()) >= lines:
            break
        time.sleep(0.02)
    return [json.loads(line) for line in telemetry.path.read_text().splitlines()]


def test_readings_are_numbers_and_the_summary_is_this_runs(tmp_path, nvidia_smi):
    nvidia_smi(f"printf '{TWO_GPUS}'")
    path = tmp_path / "gpu-telemetry.jsonl"
    path.write_text('{"time_unix": 1.0, "gpus": [{"utilization.gpu": 100.0}]}\n')  # an earlier run's
    with GpuTelemetry(path, period=0.01) as telemetry:
        samples = sampled(telemetry, 4)
    assert samples[0]["gpus"] == [{"utilization.gpu": 100.0}]
    for sample in samples[1:]:
        assert sample["gpus"] == [
            dict(zip(GpuTelemetry.FIELDS, (0.0, 50.0, 1000.0, 81559.0, 300.5))),
            dict(zip(GpuTelemetry.FIELDS, (1.0, 70.0, 2000.0, 81559.0, None))),
        ]
    summary = telemetry.summary()
    assert summary["readings"] == len(telemetry.readings) >= 6 and summary["failed_samples"] == 0
    # Only this run's readings: the earlier run's 100% is not in the mean.
    assert summary["utilization_percent_mean"] == 60.0 and summary["memory_used_mib_max"] == 2000.0
    assert summary["power_watts_mean"] == 300.5  # [N/A] is left out, not read as 0
    assert not telemetry.thread.is_alive()


def test_a_failing_or_hanging_nvidia_smi_is_recorded_and_sampling_goes_on(tmp_path, nvidia_smi):
    nvidia_smi("echo 'NVIDIA-SMI has failed' >&2; exit 9")
    with GpuTelemetry(tmp_path / "failing.jsonl", period=0.01) as telemetry:
        samples = sampled(telemetry, 3)
    assert all(s["error"].startswith("CalledProcessError: Command") and "exit status 9" in s["error"] for s in samples)
    assert telemetry.errors >= 3 and telemetry.summary() is None and not telemetry.thread.is_alive()

    nvidia_smi("exec sleep 30")
    started = time.monotonic()
    with GpuTelemetry(tmp_path / "hanging.jsonl", period=0.01, timeout=0.2) as telemetry:
        samples = sampled(telemetry, 2)
    assert time.monotonic() - started < 10 and not telemetry.thread.is_alive()
    assert all(s["error"].startswith("TimeoutExpired") for s in samples)


def test_without_nvidia_smi_nothing_is_sampled(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    with GpuTelemetry(tmp_path / "none.jsonl", period=0.01) as telemetry:
        pass
    assert telemetry.thread is None and telemetry.summary() is None and not (tmp_path / "none.jsonl").exists()


def test_a_run_on_a_gpu_node_has_its_summary_in_run_json_and_the_closing_lines(
    tmp_path, monkeypatch, capsys, nvidia_smi
):
    """The training loop's own sampler, as it runs on a GPU node: here it samples although the
    run is on the CPU (its sampler is told CUDA is there; the model is not)."""

    class Sampling(GpuTelemetry):
        def __init__(self, path, period):
            super().__init__(path, period=0.01)

    nvidia_smi(f"printf '{TWO_GPUS}'")
    monkeypatch.setattr(runlog, "GpuTelemetry", Sampling)
    run(small_data(), tmp_path / "out")
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(record) == set(RUN_KEYS) - {"compile"} and "gpu_telemetry" not in results
    gpu = record["gpu_telemetry"]
    assert gpu["readings"] >= 2 and gpu["utilization_percent_mean"] == 60.0 and gpu["power_watts_mean"] == 300.5
    assert "GPU (nvidia-smi, " in capsys.readouterr().out
