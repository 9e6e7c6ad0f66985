"""What a training checkpoint carries besides the weights, and the rules for resuming.

`TrainState` is the cursor (epoch, next step of its plan, optimizer updates, whether a
validation is owed) plus the validation history and early-stopping counters. It is saved
in last.pt with the optimizer, the scheduler and every rank's RNG state; a resumed run
recomputes the epoch plan and continues at the cursor, so N steps + resume + M steps give
the same weights as N + M steps.

A checkpoint resumes only under an equal identity (chesscore.resume: the rules training and
self-play share). A run that ended for good (`terminal_status`) is not continued: resuming it is a
no-op that returns a receipt.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from chesscore import checkpoint
from chesscore import resume as resume_rules
from chesscore.resume import canonical
from chesscore.train.config import TrainConfig

TERMINAL = ("early_stop", "max_updates", "max_epochs")
RESUMABLE = ("time_budget", "deadline_soft_stop")


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    next_step: int = 0  # index of the next optimizer step within the epoch's plan
    step: int = 0  # optimizer updates done in total
    validation_due: bool = True  # a validation is owed at this cursor (step 0, epoch end, every K)
    best_nll: float | None = None
    best_step: int | None = None
    bad_checks: int = 0  # validations in a row without improvement
    history: list[dict[str, Any]] = field(default_factory=list)  # one record per validation
    train_log: list[dict[str, Any]] = field(default_factory=list)  # loss, lr, grad norm every few steps

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainState:
        return cls(**values)

    def record_validation(self, metrics: dict[str, Any], min_delta: float) -> bool:
        """Add a complete validation; True when it improved on the best NLL by min_delta."""
        nll = metrics["nll"]
        if nll is None or not math.isfinite(nll):
            raise FloatingPointError(f"validation NLL is {nll} at step {self.step}")
        improved = self.best_nll is None or nll < self.best_nll - min_delta
        if improved:
            self.best_nll, self.best_step, self.bad_checks = nll, self.step, 0
        else:
            self.bad_checks += 1
        self.history.append(
            {
                "step": self.step,
                "epoch": self.epoch,
                "best_nll": self.best_nll,
                "bad_checks": self.bad_checks,
                "improved": improved,
                "validation": metrics,
            }
        )
        self.validation_due = False
        return improved


def terminal_status(state: TrainState, config: TrainConfig) -> str | None:
    """The status of a run that ended for good under this config, else None. A validation
    still owed (cut short by a deadline) is done first, so the run is not over yet."""
    if state.validation_due:
        return None
    if state.bad_checks >= config.patience:
        return "early_stop"
    if config.max_updates is not None and state.step >= config.max_updates:
        return "max_updates"
    if state.epoch >= config.epochs:
        return "max_epochs"
    return None


def _not_last(payload: dict[str, Any]) -> str | None:
    if "train_state" not in payload or "optimizer" not in payload:
        return "not a last checkpoint (no optimizer or train state)"
    return None


def find_resume(resume: str, output: Path, identity: dict[str, Any]) -> tuple[dict[str, Any] | None, str, Path]:
    """chesscore.resume.find_resume for output/last.pt; the note names the step it resumes at."""
    payload, note, path = resume_rules.find_resume(resume, output / "last.pt", identity, refuse=_not_last)
    if payload is not None:
        note = f"{note} at step {payload['train_state']['step']}"
    return payload, note, path


def receipt(path: Path, payload: dict[str, Any], status: str) -> dict[str, Any]:
    """What a no-op resume of a finished run reports."""
    state = TrainState.from_dict(payload["train_state"])
    return {
        "status": status,
        "resume_action": "no_op_terminal",
        "checkpoint": str(path),
        "step": state.step,
        "epoch": state.epoch,
        "best_step": state.best_step,
        "best_validation_nll": state.best_nll,
        "bad_checks": state.bad_checks,
        "optimizer_updates": 0,
        "validation_checks": 0,
        "checkpoint_written": False,
    }


def rng_state(device: torch.device) -> dict[str, torch.Tensor | None]:
    """This process's RNG states (CPU, and CUDA of its device). numpy and `random` are not
    used in training: epoch plans take their own seeded generators."""
    return {"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def set_rng_state(state: dict[str, torch.Tensor | None], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], device)


def last_payload(
    model: torch.nn.Module,
    identity: dict[str, Any],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rngs: list[dict],
    state: TrainState,
    status: str | None,
) -> dict[str, Any]:
    """last.pt: everything an exact resume needs. No timings, so equal runs save equal bytes."""
    return canonical(
        checkpoint.model_payload(
            model,
            identity,
            optimizer=optimizer.state_dict(),
            scheduler=scheduler.state_dict(),
            rng=rngs,
            train_state=state.to_dict(),
            status=status,
        )
    )


def best_payload(model: torch.nn.Module, identity: dict[str, Any], state: TrainState) -> dict[str, Any]:
    """best.pt: the weights of the best validation and what they scored (for evaluate/play)."""
    return canonical(
        checkpoint.model_payload(
            model,
            identity,
            step=state.step,
            epoch=state.epoch,
            best_validation_nll=state.best_nll,
            validation=state.history[-1]["validation"] if state.history else None,
        )
    )
