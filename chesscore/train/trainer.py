"""The training loop: length-bucketed DDP steps, validation, checkpoints, stopping.

    data = open_dataset("data/dataset")                       # chesscore.train.data
    results = train(TrainConfig(model="demo"), data, Path("data/train"), setup("cpu"))

One process, or one per device under torchrun (the same call; see chesscore.train.distributed).
`train` opens the run first (chesscore.train.run: identity, the last.pt it resumes from), and a
run that last.pt shows finished is a no-op there (finished_run) that builds nothing. Any other
gets a Trainer: its model, optimizer and schedule, fresh or resumed, then `Trainer.run`.

Each loop turn first runs a validation that is owed (step 0, an epoch end, every K steps),
then asks whether to stop, then takes one optimizer step. A stop that ends the run (max_updates,
max_epochs, time budget, early stop) validates this step's weights first unless the last
validation was at this step, so best.pt is always the best validated model. The deadline's soft
stop validates them too, in the first half of its margin, as a provisional result: best.pt is the
best validated model while the run waits, and the resumed run puts the scheduled best back
(SCHEDULED_BEST) and goes on as if never stopped, to the bytes of an uninterrupted run.

Kept apart: checkpoints (chesscore.train.checkpoints), validation (chesscore.train.validation),
what the loop reports (chesscore.train.runlog), the assembly of each step's microbatches, ahead
of the step where train.loader_workers asks (chesscore.train.loader).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from chesscore.model import GPT, GPTConfig
from chesscore.runtime.seeds import derive_seed
from chesscore.train.batching import IGNORE, epoch_plan
from chesscore.train.checkpoints import SCHEDULED_BEST, Checkpoints
from chesscore.train.compiled import CompileCount, compile_model
from chesscore.train.config import TrainConfig
from chesscore.train.data import TrainData
from chesscore.train.deadline import Budget, Deadline
from chesscore.train.distributed import DistEnv
from chesscore.train.loader import Assembly, Microbatch, microbatches
from chesscore.train.optim import adamw, clip_gradients, warmup_cosine
from chesscore.train.report import EventLog
from chesscore.train.run import RunSpec, finished_run, open_run
from chesscore.train.runlog import RunLog
from chesscore.train.state import TrainState, set_rng_state, terminal_status
from chesscore.train.validation import Validator

__all__ = ["FINISHING", "SCHEDULED_BEST", "Trainer", "train"]

# The stops after which DVC records the stage as done and later stages read best.pt. The
# deadline's soft stop is not among them: it exits 75 and its resumed run goes on as if never
# stopped, so its own validation (Validator.at_deadline) is provisional.
FINISHING = ("early_stop", "max_updates", "max_epochs", "time_budget")


def train(
    config: TrainConfig,
    data: TrainData,
    output: Path,
    env: DistEnv,
    *,
    resume: str = "auto",
    model_config: GPTConfig | None = None,
    code_files: tuple[Path, ...] = (),
    deadline: Deadline | None = None,
) -> dict[str, Any]:
    """Train (or resume, or confirm a finished run) and return results.json's and run.json's content (a
    finished run's: its receipt)."""
    spec, payload = open_run(config, data, output, env, resume=resume, model_config=model_config, code_files=code_files)
    receipt = finished_run(spec, payload)
    if receipt is not None:
        return receipt
    return Trainer(spec, payload, deadline=deadline).run()


class Trainer:
    """A run with training left to do (never a finished one: see finished_run): its model,
    optimizer and schedule, fresh or resumed from last.pt, and the loop."""

    def __init__(self, spec: RunSpec, payload: dict[str, Any] | None, *, deadline: Deadline | None = None) -> None:
        config, env = spec.config, spec.env
        self.spec = spec
        self.deadline = deadline or Deadline.parse(config.deadline, config.deadline_margin_seconds)
        # The model, its optimizer and schedule: fresh, or as last.pt left them.
        torch.manual_seed(derive_seed(config.seed, "init"))  # the same weights on every rank
        self.model = GPT(spec.model_config).to(env.device)
        self.optimizer = adamw(self.model, config.optim, env.device)
        schedule = spec.identity["schedule"]
        self.scheduler = warmup_cosine(
            self.optimizer, schedule["warmup_steps"], schedule["schedule_steps"], config.optim.min_lr_ratio
        )
        self.checkpoints = Checkpoints(spec.output, env, spec.identity, self.model, self.optimizer, self.scheduler)
        if payload is None:
            self.state = TrainState()
            torch.manual_seed(derive_seed(config.seed, "rank", env.rank))
        else:
            self.state = self.checkpoints.resume(spec.resume_path, payload)
        # What the steps call: the model under DDP across ranks, compiled where asked.
        self.ddp = (
            DistributedDataParallel(
                self.model,
                device_ids=[env.device.index] if env.device.type == "cuda" else None,
                gradient_as_bucket_view=True,
            )
            if env.distributed
            else None
        )
        wrapped = self.ddp or self.model
        self.compile_count = CompileCount() if config.compile else None
        block_size = spec.model_config.block_size
        self.forward = compile_model(wrapped, config.pad_to_multiple, block_size) if config.compile else wrapped
        if payload is not None:
            set_rng_state(payload["rng"][env.rank], env.device)
        # Kept apart: validation, checkpoints, what the loop reports.
        events = EventLog(spec.output / "events.jsonl", env.is_main, fresh=payload is None)
        self.validator = Validator(spec, self.model, self.deadline, events, self.checkpoints)
        self.log = RunLog(spec, events)
        self.budget = Budget(config.max_seconds)
        self._plan: tuple[int, list] | None = None
        self.assembly = Assembly(
            spec.data.train,
            spec.lengths,
            spec.model_config,
            env.rank,
            env.world_size,
            micro=config.micro,
            pad_to_multiple=config.pad_to_multiple,
        )
        # The microbatches being assembled ahead, and the (epoch, step) their next one belongs to.
        self._ahead: tuple[tuple[int, int], Iterator[Microbatch]] | None = None

    def run(self) -> dict[str, Any]:
        """Train until a stop; results.json's and run.json's content."""
        started = time.perf_counter()
        fresh = self.spec.resumed_from is None
        self.checkpoints.prepare(fresh)
        if fresh:
            self.checkpoints.save(self.state, improved=False, status=None)  # a loadable last.pt from the first moment
        self.log.start(self.state, self.model.num_parameters())
        deadline_validation = None
        with self.log.running(self.state) as bar:
            while True:
                if self.state.validation_due and not self.validator.validate(self.state):
                    status = "deadline_soft_stop"  # cut short: still due, the resumed run does it
                    break
                status = self.stop_reason()
                if status in FINISHING and not self.validated_at_this_step():
                    # best.pt must be the best *validated* model when the run ends: the weights
                    # of this step are validated first (the loop then asks again).
                    self.state.validation_due = True
                    continue
                if status is not None:
                    break
                self.train_step(bar)
            self.close_loader()
            if status == "deadline_soft_stop" and not self.state.validation_due and not self.validated_at_this_step():
                deadline_validation = self.validator.at_deadline(self.state)
        self.checkpoints.save(self.state, improved=False, status=status)
        return self.log.finish(
            self.state,
            status,
            time.perf_counter() - started,
            compile_count=self.compile_count,
            deadline_validation=deadline_validation,
        )

    def train_step(self, bar: Any) -> None:
        """One optimizer update over the plan's next step; the cursor moves on, the log counts it."""
        config, state = self.spec.config, self.state
        step_batches = self.plan()[state.next_step]
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        started = time.perf_counter()
        loss_sum, useful, padded, assembly = self.forward_backward(step_batches, self.step_microbatches())
        lr = self.scheduler.get_last_lr()[0]
        norm = clip_gradients(self.model, config.optim.grad_clip, state.step)
        self.optimizer.step()
        self.scheduler.step()
        if self.spec.env.device.type == "cuda":
            torch.cuda.synchronize(self.spec.env.device)
        seconds = time.perf_counter() - started
        state.step += 1
        state.next_step += 1
        if state.next_step == len(self.plan()):
            state.epoch, state.next_step, state.validation_due = state.epoch + 1, 0, True
        if config.validation_every_steps and state.step % config.validation_every_steps == 0:
            state.validation_due = True
        self.log.step(
            state,
            bar,
            loss_sum=loss_sum,
            useful=useful,
            padded=padded,
            seconds=seconds,
            assembly_seconds=assembly,
            lr=lr,
            grad_norm=norm,
        )

    def forward_backward(
        self, step_batches: list[np.ndarray], assembled: Iterator[Microbatch]
    ) -> tuple[torch.Tensor, int, int, float]:
        """Gradients of one step's microbatches (DDP syncs at the last); the summed loss, this
        rank's useful and padded target counts, and the seconds the host spent waiting for the
        batches to be assembled and sent (on a GPU that overlaps the device's work queued before:
        a share of the step time near 1 means the host, not the device, sets the pace)."""
        env, lengths = self.spec.env, self.spec.lengths
        # Every rank knows every game's length, so the global target count needs no collective:
        # each rank's loss is scaled so DDP's gradient average is the mean over all targets.
        scale = env.world_size / sum(int((lengths[b] - 1).sum()) for b in step_batches)
        loss_sum = torch.zeros((), device=env.device)
        useful = padded = 0
        assembly = 0.0
        for index in range(len(step_batches)):
            assembling = time.perf_counter()
            batch = next(assembled).to(env.device)
            assembly += time.perf_counter() - assembling
            useful, padded = useful + batch.useful, padded + batch.padded
            last = index == len(step_batches) - 1
            sync = contextlib.nullcontext() if last or self.ddp is None else self.ddp.no_sync()
            with sync:
                with torch.autocast(env.device.type, dtype=torch.bfloat16, enabled=self.spec.bf16):
                    logits = self.forward(batch.inputs, features=batch.features)
                loss = F.cross_entropy(
                    logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE, reduction="sum"
                )
                (loss * scale).backward()
            loss_sum += loss.detach()
        return loss_sum, useful, padded, assembly

    def step_microbatches(self) -> Iterator[Microbatch]:
        """The assembled microbatches of the cursor's step: those made ahead when the cursor
        follows on from the last step, else (a new epoch, a resume) a new loader's from here."""
        state, config = self.state, self.spec.config
        cursor = (state.epoch, state.next_step)
        if self._ahead is None or self._ahead[0] != cursor:
            self.close_loader()
            loader = microbatches(
                self.assembly, self.plan(), state.next_step, config.loader_workers, self.spec.env.device.type == "cuda"
            )
            self._ahead = (cursor, loader)
        loader = self._ahead[1]
        self._ahead = ((state.epoch, state.next_step + 1), loader)
        return loader

    def close_loader(self) -> None:
        """Drops the loader made ahead: its iterator stops its workers (if any) as it goes."""
        self._ahead = None

    def stop_reason(self) -> str | None:
        status = terminal_status(self.state, self.spec.config)
        if status is not None:
            return status
        clocks = torch.tensor([self.deadline.soft_stop(), self.budget.spent()], dtype=torch.float64)
        deadline_hit, budget_spent = (bool(v > 0) for v in self.spec.env.all_reduce_sum(clocks))
        return "deadline_soft_stop" if deadline_hit else "time_budget" if budget_spent else None

    def validated_at_this_step(self) -> bool:
        return bool(self.state.history) and self.state.history[-1]["step"] == self.state.step

    def plan(self) -> list[list[np.ndarray]]:
        """This epoch's steps, each a list of microbatches of game indices."""
        config, epoch = self.spec.config, self.state.epoch
        if self._plan is None or self._plan[0] != epoch:
            plan = epoch_plan(
                self.spec.lengths,
                seed=config.seed,
                epoch=epoch,
                micro=config.micro,
                world_size=self.spec.env.world_size,
                accum=config.accum,
                pool_batches=config.bucket_pool_batches,
            )
            self._plan = (epoch, plan)
        return self._plan[1]
