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
(SCHEDULED_BEST) and goes on as if never stopped, to the bytes of an uninterrupted run. A
validation cut short by the deadline changes nothing: the cursor keeps `validation_due` and the
resumed run does it.
last.pt is saved after every validation and at the stop, best.pt (before last.pt) whenever
validation NLL improves, both atomically, so a killed run always leaves a loadable pair.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from chesscore import checkpoint, progress
from chesscore.fileio import atomic_write_json, sha256_json
from chesscore.model import GPT, GPTConfig
from chesscore.progress import progress_bar
from chesscore.seeds import derive_seed
from chesscore.tokens import PAD
from chesscore.train.batching import IGNORE, collate, dummy_batch, epoch_plan, eval_batches, pad_to_width, rank_share
from chesscore.train.compiled import CompileCount, compile_model, describe, width_count
from chesscore.train.config import TrainConfig
from chesscore.train.data import TrainData
from chesscore.train.deadline import Budget, Deadline
from chesscore.train.distributed import DistEnv
from chesscore.train.metrics import Totals, accumulate, legality_subset
from chesscore.train.optim import adamw, clip_gradients, warmup_cosine
from chesscore.train.report import (
    OUTPUTS,
    EventLog,
    GpuTelemetry,
    console,
    peak_memory,
    run_results,
    summary,
    write_results,
)
from chesscore.train.run import RunSpec, finished_run, open_run
from chesscore.train.state import TrainState, best_payload, last_payload, rng_state, set_rng_state, terminal_status

# The stops after which DVC records the stage as done and later stages read best.pt. The
# deadline's soft stop is not among them: it exits 75 and its resumed run goes on as if never
# stopped, so its own validation (validate_at_deadline) is provisional.
FINISHING = ("early_stop", "max_updates", "max_epochs", "time_budget")
# Where a provisional best.pt (from the deadline's validation) moves the scheduled one aside;
# a resumed run moves it back, a fresh one deletes it.
SCHEDULED_BEST = "best.scheduled.pt"


class Trainer:
    """A run with training left to do (never a finished one: see finished_run): its model,
    optimizer and schedule, fresh or resumed from last.pt, and the loop."""

    def __init__(self, spec: RunSpec, payload: dict[str, Any] | None, *, deadline: Deadline | None = None) -> None:
        config, env = spec.config, spec.env
        self.spec = spec
        # Until the rest of the Trainer reads the spec:
        self.config, self.data, self.output, self.env = config, spec.data, spec.output, env
        self.model_config, self.lengths, self.identity = spec.model_config, spec.lengths, spec.identity
        self.bf16, self.steps_per_epoch = spec.bf16, spec.steps_per_epoch
        self.resume_note, self.resume_path, self.resumed_from = spec.resume_note, spec.resume_path, spec.resumed_from
        self.deadline = deadline or Deadline.parse(config.deadline, config.deadline_margin_seconds)
        torch.manual_seed(derive_seed(config.seed, "init"))  # the same weights on every rank
        self.model = GPT(self.model_config).to(env.device)
        self.deadline_validation: dict[str, Any] | None = None  # the deadline's provisional one
        self.optimizer = adamw(self.model, config.optim, env.device)
        schedule = self.identity["schedule"]
        self.scheduler = warmup_cosine(
            self.optimizer, schedule["warmup_steps"], schedule["schedule_steps"], config.optim.min_lr_ratio
        )
        if payload is None:
            self.state = TrainState()
            torch.manual_seed(derive_seed(config.seed, "rank", env.rank))
        else:
            checkpoint.check_weights(self.resume_path, self.model, payload.get("model"))
            try:
                self.model.load_state_dict(payload["model"])
                self.optimizer.load_state_dict(payload["optimizer"])
                self.scheduler.load_state_dict(payload["scheduler"])
                self.state = TrainState.from_dict(payload["train_state"])
            except (KeyError, TypeError, ValueError, RuntimeError) as error:
                raise checkpoint.CheckpointError(f"{self.resume_path}: cannot resume from it ({error})") from None
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
        block_size = self.model_config.block_size
        self.compile_count = CompileCount() if config.compile else None
        self.forward = compile_model(wrapped, config.pad_to_multiple, block_size) if config.compile else wrapped
        if payload is not None:
            set_rng_state(payload["rng"][env.rank], env.device)
        self.events = EventLog(self.output / "events.jsonl", env.is_main, fresh=payload is None)
        self._plan: tuple[int, list] | None = None
        self.budget = Budget(config.max_seconds)
        self.totals = {"useful": 0.0, "padded": 0.0, "seconds": 0.0, "updates": 0}

    # -- the loop ----------------------------------------------------------------------------

    def _start_outputs(self, fresh: bool) -> None:
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

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        self._start_outputs(fresh=self.resumed_from is None)
        if self.resumed_from is None:
            self.save(improved=False, status=None)  # a loadable last.pt from the first moment
        self.events(
            "start",
            note=self.resume_note,
            step=self.state.step,
            world_size=self.env.world_size,
            parameters=self.model.num_parameters(),
            device=str(self.env.device),
            train_games=len(self.lengths),
            validation_games=len(self.data.validation),
            steps_per_epoch=self.steps_per_epoch,
            identity_sha256=sha256_json(self.identity),
        )
        if self.env.is_main:
            console(f"train: {self.resume_note}")
        if self.env.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.env.device)
        status = None
        planned = self.config.epochs * self.steps_per_epoch
        planned = min(planned, self.config.max_updates or planned)
        bar = progress_bar(
            self.env.is_main, total=planned, initial=self.state.step, unit="step", dynamic_ncols=True, desc="train"
        )
        telemetry = (
            GpuTelemetry(self.output / "gpu-telemetry.jsonl", self.config.telemetry_seconds)
            if self.env.is_main
            else contextlib.nullcontext()
        )
        with bar, telemetry:
            while status is None:
                if self.state.validation_due and not self.validate():
                    status = "deadline_soft_stop"
                    break
                status = self.stop_reason()
                if status in FINISHING and not self.validated_at_this_step():
                    # best.pt must be the best *validated* model when the run ends: the weights
                    # of this step are validated first (the loop then asks again).
                    self.state.validation_due, status = True, None
                elif status is None:
                    self.train_step(bar)
            if status == "deadline_soft_stop" and not self.state.validation_due and not self.validated_at_this_step():
                self.validate_at_deadline()
        self.save(improved=False, status=status)
        return self.finish(status, time.perf_counter() - started)

    def validated_at_this_step(self) -> bool:
        return bool(self.state.history) and self.state.history[-1]["step"] == self.state.step

    def stop_reason(self) -> str | None:
        status = terminal_status(self.state, self.config)
        if status is not None:
            return status
        clocks = torch.tensor([self.deadline.soft_stop(), self.budget.spent()], dtype=torch.float64)
        deadline_hit, budget_spent = (bool(v > 0) for v in self.env.all_reduce_sum(clocks))
        return "deadline_soft_stop" if deadline_hit else "time_budget" if budget_spent else None

    def plan(self) -> list[list[np.ndarray]]:
        epoch = self.state.epoch
        if self._plan is None or self._plan[0] != epoch:
            self._plan = (
                epoch,
                epoch_plan(
                    self.lengths,
                    seed=self.config.seed,
                    epoch=epoch,
                    micro=self.config.micro,
                    world_size=self.env.world_size,
                    accum=self.config.accum,
                    pool_batches=self.config.bucket_pool_batches,
                ),
            )
        return self._plan[1]

    def train_step(self, bar: Any) -> None:
        env, state, config = self.env, self.state, self.config
        step_batches = self.plan()[state.next_step]
        # Every rank knows every game's length, so the global target count needs no collective:
        # each rank's loss is scaled so DDP's gradient average is the mean over all targets.
        targets_total = sum(int((self.lengths[b] - 1).sum()) for b in step_batches)
        scale = env.world_size / targets_total
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        started = time.perf_counter()
        loss_sum = torch.zeros((), device=env.device)
        useful = padded = 0
        for index, batch in enumerate(step_batches):
            share = rank_share(batch, env.rank, env.world_size)
            inputs, targets = collate(self.data.train.batch(share, pad=PAD)) if len(share) else dummy_batch()
            if config.pad_to_multiple:  # a bounded set of shapes for a compiled model (padding counted)
                inputs, targets = pad_to_width(
                    inputs, targets, config.pad_to_multiple, self.model_config.block_size, rows=config.micro
                )
            useful += int(self.lengths[share].sum() - len(share))
            padded += targets.numel() if len(share) else 0
            inputs, targets = inputs.to(env.device, non_blocking=True), targets.to(env.device, non_blocking=True)
            last = index == len(step_batches) - 1
            sync = contextlib.nullcontext() if last or self.ddp is None else self.ddp.no_sync()
            with sync:
                with torch.autocast(env.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                    logits = self.forward(inputs)
                loss = F.cross_entropy(
                    logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum"
                )
                (loss * scale).backward()
            loss_sum += loss.detach()
        lr = self.scheduler.get_last_lr()[0]
        norm = clip_gradients(self.model, config.optim.grad_clip, state.step)
        self.optimizer.step()
        self.scheduler.step()
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)
        elapsed = time.perf_counter() - started
        self.totals["useful"] += useful
        self.totals["padded"] += padded
        self.totals["seconds"] += elapsed
        self.totals["updates"] += 1
        state.step += 1
        state.next_step += 1
        if state.next_step == len(self.plan()):
            state.epoch, state.next_step, state.validation_due = state.epoch + 1, 0, True
        if config.validation_every_steps and state.step % config.validation_every_steps == 0:
            state.validation_due = True
        bar.update(1)
        if state.step % config.log_every_steps == 0:
            total = env.all_reduce_sum(torch.tensor([float(loss_sum), useful, padded], dtype=torch.float64))
            nll, tokens_per_second = float(total[0] / total[1]), float(total[1]) / elapsed
            record = {
                "step": state.step,
                "nll": nll,
                "lr": lr,
                "grad_norm": norm,
                "padding_fraction": 1 - float(total[1] / total[2]),
            }
            state.train_log.append(record)
            self.events(
                "train",
                epoch=state.epoch,
                useful_tokens_per_second=tokens_per_second,
                padded_tokens_per_second=float(total[2]) / elapsed,
                step_seconds=elapsed,
                **record,
            )
            bar.set_postfix(
                nll=f"{nll:.3f}",
                lr=f"{lr:.2e}",
                gnorm=f"{norm:.2f}",
                tok_s=f"{tokens_per_second:.0f}",
                pad=f"{record['padding_fraction']:.1%}",
            )

    # -- validation and checkpoints ----------------------------------------------------------

    def validate(self) -> bool:
        """Validate and record it (best, patience, checkpoints). False (and nothing recorded)
        when the deadline cut it short."""
        started = time.perf_counter()
        metrics = self.measure(should_stop=lambda: self.env.any(self.deadline.soft_stop()))
        if metrics is None:
            self.events("validation_cut_short", step=self.state.step, seconds=time.perf_counter() - started)
            if self.env.is_main:
                console(
                    f"train: validation at step {self.state.step} cut short by the deadline; "
                    "best and patience unchanged"
                )
            return False
        improved = self.state.record_validation(metrics, self.config.min_delta)
        self.events(
            "validation",
            step=self.state.step,
            epoch=self.state.epoch,
            improved=improved,
            best_nll=self.state.best_nll,
            bad_checks=self.state.bad_checks,
            seconds=time.perf_counter() - started,
            **metrics,
        )
        if self.env.is_main:
            progress.write(
                f"validation @ step {self.state.step}: nll {metrics['nll']:.4f} "
                f"(best {self.state.best_nll:.4f} @ {self.state.best_step}, "
                f"{self.state.bad_checks}/{self.config.patience} without improvement)"
            )
        self.save(improved=improved, status=None)
        return True

    def validate_at_deadline(self) -> None:
        """Validate the weights the deadline stops with, without recording it in the state the
        resumed run continues from. When they beat the best, best.pt becomes theirs and the
        scheduled best moves to SCHEDULED_BEST, which the resumed run moves back."""
        started = time.perf_counter()
        metrics = self.measure(should_stop=lambda: self.env.any(self.deadline.validation_window_closed()))
        if metrics is None:
            return
        provisional = TrainState.from_dict(copy.deepcopy(self.state.to_dict()))
        improved = provisional.record_validation(metrics, self.config.min_delta)
        if improved and self.env.is_main:
            best = self.output / "best.pt"
            if best.exists():
                best.replace(self.output / SCHEDULED_BEST)
            checkpoint.save(best_payload(self.model, self.identity, provisional), best)
        self.deadline_validation = {"step": self.state.step, "nll": metrics["nll"], "improved": improved}
        self.events("deadline_validation", seconds=time.perf_counter() - started, **self.deadline_validation)
        if self.env.is_main:
            console(
                f"train: validated at the deadline, step {self.state.step}: nll {metrics['nll']:.4f} "
                + ("(best.pt until the run resumes)" if improved else f"(best {self.state.best_nll:.4f} stays)")
            )
        self.env.barrier()

    def measure(self, should_stop: Callable[[], bool]) -> dict[str, Any] | None:
        """Validation metrics from this rank's share of the batches, summed over ranks; None
        when `should_stop` cut it short."""
        env, config = self.env, self.config
        validation = self.data.validation
        batches = eval_batches(validation.lengths(), config.validation_micro or 2 * config.micro)
        mine = batches[env.rank :: env.world_size]
        mine += [np.zeros(0, dtype=np.int64)] * (-(-len(batches) // env.world_size) - len(mine))
        totals = accumulate(
            self.model,
            validation,
            mine,
            device=env.device,
            bf16=self.bf16,
            legality=legality_subset(len(validation), config.legality_eval_games),
            should_stop=should_stop,
        )
        return None if totals is None else Totals(env.all_reduce_sum(totals.tensor())).result()

    def save(self, improved: bool, status: str | None) -> None:
        """best.pt first, then last.pt: a kill between them leaves a last.pt that has not
        yet seen this best, so its resume redoes the validation and rewrites best.pt."""
        rngs = self.env.gather(rng_state(self.env.device))
        if self.env.is_main:
            if improved:
                checkpoint.save(best_payload(self.model, self.identity, self.state), self.output / "best.pt")
            checkpoint.save(
                last_payload(self.model, self.identity, self.optimizer, self.scheduler, rngs, self.state, status),
                self.output / "last.pt",
            )
        self.env.barrier()

    def finish(self, status: str, wall_seconds: float) -> dict[str, Any]:
        env = self.env
        sums = env.all_reduce_sum(torch.tensor([self.totals["useful"], self.totals["padded"]], dtype=torch.float64))
        memory = env.gather({"rank": env.rank, **peak_memory(env.device)})
        run = run_results(
            self.state,
            status,
            useful=float(sums[0]),
            padded=float(sums[1]),
            seconds=self.totals["seconds"],
            updates=self.totals["updates"],
        )
        results = self.spec.results(
            run,
            note=self.resume_note,
            memory=memory,
            wall_seconds=wall_seconds,
            deadline_validation=self.deadline_validation,
        )
        if self.compile_count is not None:  # only then: an eager run's results.json keeps its keys
            widths = width_count(self.config.pad_to_multiple, self.model_config.block_size)
            results["compile"] = {
                **self.compile_count.report(),
                "pad_to_multiple": self.config.pad_to_multiple,
                "max_widths": widths,
            }
            if env.is_main:
                console(describe(results["compile"], results["compile"]["max_widths"]))
        if env.is_main:
            write_results(self.output, results, self.state)
            self.events(
                "stop",
                status=status,
                step=self.state.step,
                best_step=self.state.best_step,
                best_nll=self.state.best_nll,
                wall_seconds=wall_seconds,
            )
            print(summary(results), flush=True)
        return results


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
    """Train (or resume, or confirm a finished run) and return results.json's content (a
    finished run's: its receipt)."""
    spec, payload = open_run(config, data, output, env, resume=resume, model_config=model_config, code_files=code_files)
    receipt = finished_run(spec, payload)
    if receipt is not None:
        return receipt
    return Trainer(spec, payload, deadline=deadline).run()
