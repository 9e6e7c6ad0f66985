"""Validation during training: the validation split scored over all ranks, recorded in the
state (best, patience) and checkpointed, or cut short by the job deadline and not recorded at all.

A validation the deadline cuts short changes nothing: the cursor keeps `validation_due` and the
resumed run does it. The deadline's own validation (`at_deadline`, in the first half of its
margin) is provisional: it is kept out of the state the resumed run continues from, and when
it beats the best, best.pt is its weights until then (chesscore.train.checkpoints).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from chesscore.runtime import progress
from chesscore.train.batching import eval_batches
from chesscore.train.checkpoints import Checkpoints
from chesscore.train.deadline import Deadline
from chesscore.train.metrics import Totals, accumulate, legality_subset
from chesscore.train.report import EventLog, console
from chesscore.train.run import RunSpec
from chesscore.train.state import TrainState


class Validator:
    """Validates `model` for one run; records into the TrainState it is given, saves through `checkpoints`."""

    def __init__(
        self,
        spec: RunSpec,
        model: torch.nn.Module,
        deadline: Deadline,
        events: EventLog,
        checkpoints: Checkpoints,
    ) -> None:
        self.spec, self.model, self.deadline, self.events, self.checkpoints = spec, model, deadline, events, checkpoints

    def validate(self, state: TrainState) -> bool:
        """Validate and record it (best, patience, checkpoints). False (and nothing recorded)
        when the deadline cut it short."""
        env = self.spec.env
        started = time.perf_counter()
        metrics = self.measure(should_stop=lambda: env.any(self.deadline.soft_stop()))
        if metrics is None:
            self.events("validation_cut_short", step=state.step, seconds=time.perf_counter() - started)
            if env.is_main:
                console(
                    f"train: validation at step {state.step} cut short by the deadline; best and patience unchanged"
                )
            return False
        improved = state.record_validation(metrics, self.spec.config.min_delta)
        self.events(
            "validation",
            step=state.step,
            epoch=state.epoch,
            improved=improved,
            best_nll=state.best_nll,
            bad_checks=state.bad_checks,
            seconds=time.perf_counter() - started,
            **metrics,
        )
        if env.is_main:
            progress.write(
                f"validation @ step {state.step}: nll {metrics['nll']:.4f} "
                f"(best {state.best_nll:.4f} @ {state.best_step}, "
                f"{state.bad_checks}/{self.spec.config.patience} without improvement)"
            )
        self.checkpoints.save(state, improved=improved, status=None)
        return True

    def at_deadline(self, state: TrainState) -> dict[str, Any] | None:
        """Validate the weights the deadline stops with, without recording it in `state`. When
        they beat the best, best.pt becomes theirs (the scheduled best waits in SCHEDULED_BEST).
        What it found (results.json's deadline_validation), or None when its window closed first."""
        env = self.spec.env
        started = time.perf_counter()
        metrics = self.measure(should_stop=lambda: env.any(self.deadline.validation_window_closed()))
        if metrics is None:
            return None
        provisional = TrainState.from_dict(copy.deepcopy(state.to_dict()))
        improved = provisional.record_validation(metrics, self.spec.config.min_delta)
        if improved and env.is_main:
            self.checkpoints.save_provisional_best(provisional)
        found = {"step": state.step, "nll": metrics["nll"], "improved": improved}
        self.events("deadline_validation", seconds=time.perf_counter() - started, **found)
        if env.is_main:
            console(
                f"train: validated at the deadline, step {state.step}: nll {metrics['nll']:.4f} "
                + ("(best.pt until the run resumes)" if improved else f"(best {state.best_nll:.4f} stays)")
            )
        env.barrier()
        return found

    def measure(self, should_stop: Callable[[], bool]) -> dict[str, Any] | None:
        """Validation metrics from this rank's share of the batches, summed over ranks; None
        when `should_stop` cut it short."""
        env, config = self.spec.env, self.spec.config
        validation = self.spec.data.validation
        batches = eval_batches(validation.lengths(), config.validation_micro or 2 * config.micro)
        mine = batches[env.rank :: env.world_size]
        mine += [np.zeros(0, dtype=np.int64)] * (-(-len(batches) // env.world_size) - len(mine))
        totals = accumulate(
            self.model,
            validation,
            mine,
            device=env.device,
            bf16=self.spec.bf16,
            legality=legality_subset(len(validation), config.legality_eval_games),
            should_stop=should_stop,
        )
        return None if totals is None else Totals(env.all_reduce_sum(totals.tensor())).result()
