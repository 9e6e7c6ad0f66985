"""A training run's checkpoints in its output folder: last.pt (what a resume continues) and
best.pt (the best validated weights), written by rank 0, atomically, with every rank taking part.

last.pt is saved after every validation and at the stop, best.pt (before last.pt) whenever
validation NLL improves, so a killed run always leaves a loadable pair. A provisional best.pt
(the deadline's validation, chesscore.train.trainer) moves the scheduled one aside to
SCHEDULED_BEST; a resumed run moves it back, a fresh one deletes it. The payloads themselves
are chesscore.train.state's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from chesscore import checkpoint
from chesscore.fileio import atomic_write_json
from chesscore.train.distributed import DistEnv
from chesscore.train.report import OUTPUTS
from chesscore.train.state import TrainState, best_payload, last_payload, rng_state

SCHEDULED_BEST = "best.scheduled.pt"


class Checkpoints:
    """The checkpoints of one run: its model, optimizer and schedule saved to, and resumed from, `output`."""

    def __init__(
        self,
        output: Path,
        env: DistEnv,
        identity: dict[str, Any],
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
    ) -> None:
        self.output, self.env, self.identity = output, env, identity
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler

    def resume(self, path: Path, payload: dict[str, Any]) -> TrainState:
        """Load last.pt's weights, optimizer and schedule; the state it continues from."""
        checkpoint.check_weights(path, self.model, payload.get("model"))
        try:
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            self.scheduler.load_state_dict(payload["scheduler"])
            return TrainState.from_dict(payload["train_state"])
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            raise checkpoint.CheckpointError(f"{path}: cannot resume from it ({error})") from None

    def prepare(self, fresh: bool) -> None:
        """The output folder as this run starts: no half-written files, no outputs of another
        run when it starts afresh, the scheduled best.pt back when it resumes; identity.json."""
        if self.env.is_main:
            self.output.mkdir(parents=True, exist_ok=True)
            for stale in [*self.output.glob(".*.tmp"), *self.output.glob("plots/.*.tmp")]:
                stale.unlink()  # left by a process killed in the middle of an atomic write
            if fresh:  # outputs of another run must not pass for this one's
                for name in ("last.pt", SCHEDULED_BEST, *OUTPUTS):
                    (self.output / name).unlink(missing_ok=True)
            elif (self.output / SCHEDULED_BEST).exists():  # undo a deadline's provisional best
                (self.output / SCHEDULED_BEST).replace(self.output / "best.pt")
            atomic_write_json(self.output / "identity.json", self.identity)
        self.env.barrier()

    def save(self, state: TrainState, *, improved: bool, status: str | None) -> None:
        """best.pt first, then last.pt: a kill between them leaves a last.pt that has not
        yet seen this best, so its resume redoes the validation and rewrites best.pt."""
        rngs = self.env.gather(rng_state(self.env.device))
        if self.env.is_main:
            if improved:
                checkpoint.save(best_payload(self.model, self.identity, state), self.output / "best.pt")
            checkpoint.save(
                last_payload(self.model, self.identity, self.optimizer, self.scheduler, rngs, state, status),
                self.output / "last.pt",
            )
        self.env.barrier()

    def save_provisional_best(self, provisional: TrainState) -> None:
        """best.pt of weights validated outside the state a resumed run continues from (rank 0
        only); the scheduled best.pt waits in SCHEDULED_BEST."""
        best = self.output / "best.pt"
        if best.exists():
            best.replace(self.output / SCHEDULED_BEST)
        checkpoint.save(best_payload(self.model, self.identity, provisional), best)
