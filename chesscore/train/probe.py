"""Probe mode: how fast one training step is, and how much memory it takes, for a list of
microbatch sizes on the longest training game. The weights are thrown away.

    python -m stages.train --mode probe --model baseline --probe-micro 8 16 32 64

For each microbatch size (per rank): one warm-up step, then `repeats` timed steps of
forward, backward, clipping and AdamW on `micro` copies of the longest game. Reports step
seconds, useful and padded tokens/s (all ranks), peak memory per rank and, on a GPU whose
peak bf16 rate is known, the model FLOP utilisation (MFU, PaLM-style 6N + attention FLOPs).
A size that runs out of GPU memory is reported as such, and the larger ones are not tried.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from chesscore.features import Features
from chesscore.fileio import atomic_write_json
from chesscore.model import GPT, GPTConfig
from chesscore.tokens import PAD
from chesscore.train.batching import IGNORE, GameSource, collate, device_inputs
from chesscore.train.config import uses_bf16
from chesscore.train.distributed import DistEnv
from chesscore.train.optim import OptimConfig, adamw, clip_gradients
from chesscore.train.report import peak_memory

# Dense bf16 peak FLOP/s by device name (vendor data sheets, SXM parts).
# The first key found in the device's name counts, so the PCIe and NVL parts come before "H100".
PEAK_BF16_FLOPS = {
    "H200": 989.4e12,
    "H100 PCIe": 756.5e12,
    "H100 NVL": 835.5e12,
    "H100": 989.4e12,
    "A100": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
    "A10G": 70e12,
    "RTX 4090": 165e12,
}


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((flops for key, flops in PEAK_BF16_FLOPS.items() if key in name), None)


def probe(
    model_config: GPTConfig,
    train: GameSource,
    env: DistEnv,
    micro_sizes: list[int],
    output: Path,
    repeats: int = 3,
    compile: bool = False,
    precision: str = "auto",
) -> dict[str, Any]:
    """Time `repeats` steps per microbatch size (after one warm-up); writes OUTPUT/probe.json.
    `precision` as train.precision: auto is bf16 autocast on CUDA, fp32 on the CPU."""
    bf16 = uses_bf16(precision, env.device)
    lengths = train.lengths()
    longest = int(lengths.argmax())
    torch.manual_seed(0)
    model = GPT(model_config).to(env.device)
    optimizer = adamw(model, OptimConfig(), env.device)
    wrapped = (
        DistributedDataParallel(model, device_ids=[env.device.index] if env.device.type == "cuda" else None)
        if env.distributed
        else model
    )
    forward = torch.compile(wrapped) if compile else wrapped
    seq_len = int(lengths[longest]) - 1
    flops = peak_flops(env.device)
    results = []
    for micro in micro_sizes:
        inputs, targets = collate(train.batch([longest] * micro, pad=PAD))
        inputs, features = device_inputs(model, inputs, env.device)
        targets = targets.to(env.device)
        if env.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(env.device)
        try:
            times = timed_steps(model, forward, optimizer, inputs, targets, features, env, bf16, repeats)
        except torch.cuda.OutOfMemoryError:
            # A size that does not fit is a finding, not a crash, and larger ones would not fit
            # either. (Under DDP every rank holds the same batch, so all ranks fail together.)
            times = None
        if times is None:  # freed here, where the traceback no longer holds the step's tensors
            optimizer.zero_grad(set_to_none=True)
            del inputs, targets, features
            torch.cuda.empty_cache()
            results.append({"micro_per_rank": micro, "sequence_length": seq_len, "out_of_memory": True})
            break
        step = sum(times) / len(times)
        useful = int((targets != IGNORE).sum()) * env.world_size
        padded = targets.numel() * env.world_size
        achieved = model.flops_per_token(seq_len) * useful / step
        results.append(
            {
                "micro_per_rank": micro,
                "sequence_length": seq_len,
                "timed_steps": repeats,
                "step_seconds": times,
                "useful_tokens_per_second": useful / step,
                "padded_tokens_per_second": padded / step,
                "model_flops_per_second": achieved,
                "mfu": achieved / (flops * env.world_size) if flops else None,
                "memory": env.gather({"rank": env.rank, **peak_memory(env.device)}),
            }
        )
    report = {
        "status": "probe",
        "parameters": model.num_parameters(),
        "world_size": env.world_size,
        "device": torch.cuda.get_device_name(env.device) if env.device.type == "cuda" else "cpu",
        "precision": "bf16 autocast" if bf16 else "fp32",
        "compile": compile,
        "peak_bf16_flops_per_device": peak_flops(env.device),
        "results": results,
        "scope": "repeated longest training game; weights discarded; not end-to-end throughput",
    }
    if env.is_main:
        atomic_write_json(Path(output) / "probe.json", report)
        for r in results:
            print(describe(r))
    return report


def timed_steps(
    model: GPT,
    forward: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    features: Features | None,
    env: DistEnv,
    bf16: bool,
    repeats: int,
) -> list[float]:
    """Seconds of each of `repeats` training steps on one batch, after one warm-up step
    (allocator, kernels, compile)."""
    times = []
    for repeat in range(repeats + 1):
        env.barrier()
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(env.device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = forward(inputs, features=features)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        loss.backward()
        clip_gradients(model, 1.0, repeat)
        optimizer.step()
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)
        if repeat:
            times.append(time.perf_counter() - started)
    return times


def describe(result: dict[str, Any]) -> str:
    """One console line for one microbatch size."""
    size = f"probe: micro {result['micro_per_rank']} x {result['sequence_length']} tokens: "
    if result.get("out_of_memory"):
        return size + "out of memory (larger sizes not tried)"
    mfu = f", MFU {result['mfu']:.1%}" if result["mfu"] is not None else ", MFU n/a (no known bf16 peak)"
    memory = result["memory"][0]
    peak = memory["cuda_max_allocated_bytes"] or memory["cpu_max_rss_bytes"]
    return (
        size + f"{sum(result['step_seconds']) / result['timed_steps'] * 1000:.1f} ms/step, "
        f"{result['useful_tokens_per_second']:.0f} useful tokens/s{mfu}, peak {peak / 2**20:.0f} MiB"
    )
