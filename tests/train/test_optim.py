"""AdamW groups, the warmup-cosine schedule, and gradient clipping that fails loudly."""

from __future__ import annotations

import math

import pytest
import torch

from chesscore import checkpoint
from chesscore.model import CONFIGS, GPT
from chesscore.train.optim import OptimConfig, WarmupCosine, adamw, clip_gradients, warmup_cosine


def test_weight_decay_on_matrices_only_and_betas():
    model = GPT(CONFIGS["tiny"])
    optimizer = adamw(model, OptimConfig(), torch.device("cpu"))
    names = {id(p): n for n, p in model.named_parameters()}
    decay, plain = ([names[id(p)] for p in g["params"]] for g in optimizer.param_groups)
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]
    assert optimizer.defaults["betas"] == (0.9, 0.95)
    assert all(n.endswith("weight") and "ln" not in n for n in decay)
    assert decay.count("transformer.wte.weight") == 1 and "transformer.wpe.weight" in decay  # tied: once
    assert all(n.endswith("bias") or ".ln_" in n for n in plain)
    assert len(decay) + len(plain) == len(list(model.parameters()))
    assert not optimizer.defaults["fused"]  # the fused kernel is for CUDA


def test_linear_warmup_then_cosine_to_the_floor():
    schedule = WarmupCosine(warmup_steps=10, schedule_steps=110, min_ratio=0.1)
    assert [schedule(s) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert schedule(10) == pytest.approx(1.0) and schedule(60) == pytest.approx(0.55)
    assert schedule(110) == pytest.approx(0.1) and schedule(500) == pytest.approx(0.1)
    after = [schedule(s) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(after, after[1:]))
    with pytest.raises(ValueError, match="shorter than the schedule"):
        warmup_cosine(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0), 20, 20, 0.1)


def test_scheduler_state_survives_a_weights_only_checkpoint(tmp_path):
    model = GPT(CONFIGS["tiny"])
    optimizer = adamw(model, OptimConfig(lr=1e-3), torch.device("cpu"))
    scheduler = warmup_cosine(optimizer, 3, 30, 0.1)
    for _ in range(7):
        optimizer.step()
        scheduler.step()
    checkpoint.save(
        checkpoint.model_payload(model, {}, scheduler=scheduler.state_dict(), optimizer=optimizer.state_dict()),
        tmp_path / "s.pt",
    )
    saved = checkpoint.load(tmp_path / "s.pt")
    fresh_optimizer = adamw(model, OptimConfig(lr=1e-3), torch.device("cpu"))
    fresh = warmup_cosine(fresh_optimizer, 3, 30, 0.1)
    fresh_optimizer.load_state_dict(saved["optimizer"])
    fresh.load_state_dict(saved["scheduler"])
    assert fresh.get_last_lr() == scheduler.get_last_lr()
    fresh_optimizer.step(), fresh.step(), optimizer.step(), scheduler.step()
    assert fresh.get_last_lr() == scheduler.get_last_lr()


def test_clipping_returns_the_norm_and_refuses_non_finite_gradients():
    model = torch.nn.Linear(4, 4)
    for p in model.parameters():
        p.grad = torch.full_like(p, 3.0)
    norm = clip_gradients(model, 1.0, step=0)
    assert norm == pytest.approx(3.0 * math.sqrt(20))
    assert float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()) == pytest.approx(1.0, rel=1e-5)
    model.bias.grad[0] = float("nan")
    with pytest.raises(FloatingPointError, match="gradient norm is nan at step 8"):
        clip_gradients(model, 1.0, step=7)
