"""AdamW over two parameter groups, the warmup-cosine learning rate, gradient clipping.

Weight decay applies to matrices only (linear and embedding weights); biases and LayerNorm
gains are not decayed (as in nanoGPT). The fused AdamW kernel is used where the device has
it (CUDA). The schedule is a pure function of the step, so a resumed run gets it back from
the scheduler's state (its step count).

    optimizer = adamw(model, OptimConfig(lr=3e-4), device)
    scheduler = warmup_cosine(optimizer, warmup_steps=100, schedule_steps=5000)
    ...loss.backward()
    norm = clip_gradients(model, 1.0, step)   # FloatingPointError on a non-finite norm
    optimizer.step(); scheduler.step()
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from chesscore import ranges


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 0.002  # peak learning rate, reached at the end of warmup
    min_lr_ratio: float = 0.1  # the cosine ends at lr * min_lr_ratio and stays there
    weight_decay: float = 0.1  # on matrices only
    beta1: float = 0.9  # AdamW's first-moment decay
    beta2: float = 0.95  # AdamW's second-moment decay
    grad_clip: float = 1.0  # max global L2 norm of the gradients

    def __post_init__(self) -> None:
        # A negative lr or clip norm trains backwards (the clip scales the gradient by a
        # negative factor) and nothing downstream notices: refuse them here.
        ranges.check(self, positive=("lr", "grad_clip"), non_negative=("weight_decay",), fraction=("min_lr_ratio",))
        for name in ("beta1", "beta2"):
            ranges.at_least(name, getattr(self, name), 0)
            if getattr(self, name) >= 1:
                raise ranges.InvalidSetting(f"{name} must be < 1, got {getattr(self, name)!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def adamw(model: nn.Module, config: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    fused = device.type == "cuda"  # one kernel for all parameters; not on CPU
    return torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2), fused=fused or None)


@dataclass
class WarmupCosine:
    """Multiplier of the peak lr at a step: linear warmup from 1/warmup to 1, then a cosine
    down to min_ratio at schedule_steps, then flat. A dataclass (not a lambda) so that
    LambdaLR's state_dict holds only numbers."""

    warmup_steps: int
    schedule_steps: int
    min_ratio: float

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.schedule_steps - self.warmup_steps))
        return self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(
    optimizer: torch.optim.Optimizer, warmup_steps: int, schedule_steps: int, min_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    if not 0 <= warmup_steps < schedule_steps:
        raise ValueError(f"warmup of {warmup_steps} steps must be shorter than the schedule of {schedule_steps} steps")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup_steps, schedule_steps, min_ratio))


def clip_gradients(model: nn.Module, max_norm: float, step: int) -> float:
    """Clip to max_norm and return the norm before clipping. A non-finite norm stops the
    run before the optimizer can write NaNs into the weights."""
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
    if not math.isfinite(norm):
        raise FloatingPointError(
            f"gradient norm is {norm} at step {step + 1}: refusing to update "
            "the weights (the last checkpoint is untouched); lower the "
            "learning rate or check the data"
        )
    return norm
