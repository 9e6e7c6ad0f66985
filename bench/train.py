"""Length buckets against random batches: padding, and useful tokens/s of a small model on CPU.

    python bench/train.py                      # the embedded sample's dataset (dvc repro convert)
    python bench/train.py --dataset DIR --config demo --steps 40 --threads 1
    python bench/train.py --models demo-board --micro 32 --steps 8 --rounds 5   # model configs
    python bench/train.py --config demo-board --workers 2 --steps 8 --rounds 4  # loader workers

Input: the train split of a converted dataset (default data/dataset, the embedded sample's);
where that is absent, the one `dvc repro convert` would write, built in a temporary folder
(bench/train.py's `load`, which bench/gpu.py reads too). Measured in this run:

  padding   share of padded target positions over whole epochs, seeded length buckets
            (bucket_pool_batches=64) against the baseline of shuffled batches (no pool;
            for speed a pool of 1 batch, whose sort changes no batch),
            for 1 rank x 16 games and 2 ranks x 8 games. Target: buckets <= 5%.
  speed     useful (non-padding) target tokens/s of real training steps (chesscore.train.trainer,
            forward + backward + AdamW) of the model config, with buckets against shuffled
            batches, the same steps of the same plan positions.
  models    with --models: useful tokens/s of the same training steps of each named model
            config against --baseline (demo-moves), alternating blocks of --steps steps per
            model over --rounds rounds (each round's ratio, then median and range), so
            load on a shared machine hits both alike. Target (issue 42, demo-board): >= 0.7x.
  workers   with --workers N: the same for --config's model with train.loader_workers N
            against 0 (chesscore.train.loader), and the share of each block's step time the
            training process waited for its batches. No target on a CPU, where the workers
            take cores from the steps; on a GPU the wait is what they remove.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chesscore.train.batching import epoch_plan, padding_fraction  # noqa: E402
from chesscore.train.config import TrainConfig  # noqa: E402
from chesscore.train.data import TrainData, open_dataset  # noqa: E402
from chesscore.train.distributed import setup  # noqa: E402
from chesscore.train.run import open_run  # noqa: E402
from chesscore.train.trainer import Trainer  # noqa: E402


def load(dataset: Path, scratch: Path) -> tuple[TrainData, str]:
    """The converted dataset at `dataset`; where there is none (a fresh checkout, a GPU node's
    copy of one), the one `dvc repro convert` writes from params.yaml and data/raw, built in
    `scratch` by the same two stage commands, their outputs redirected (seconds for the sample)."""
    if (dataset / "manifest.json").exists():
        data = open_dataset(dataset)
        return data, f"{dataset} (train split, {len(data.train)} games)"
    validated, built = scratch / "validated", scratch / "dataset"
    print(f"{dataset} not found: validating and converting as `dvc repro convert` does, into {scratch}")
    for stage, *flags in (
        ("stages.validate", "--out", str(validated)),
        ("stages.convert", "--validated", str(validated), "--out", str(built)),
    ):
        subprocess.run([sys.executable, "-m", stage, *flags, "--no-progress"], cwd=ROOT, check=True)
    data = open_dataset(built)
    return data, f"data/raw converted as `dvc repro convert` does (train split, {len(data.train)} games)"


def padding(lengths: np.ndarray, micro: int, world: int, pool: int, epochs: int = 3) -> float:
    return float(
        np.mean(
            [
                padding_fraction(
                    epoch_plan(lengths, seed=2026, epoch=e, micro=micro, world_size=world, accum=1, pool_batches=pool),
                    lengths,
                    world,
                )
                for e in range(epochs)
            ]
        )
    )


def reset_totals(trainer: Trainer) -> None:
    """Zero the run log's throughput totals, so what follows is timed alone."""
    trainer.log.totals = {key: type(value)() for key, value in trainer.log.totals.items()}


def tokens_per_second(data: TrainData, config: TrainConfig, steps: int) -> tuple[float, float, float]:
    """(useful/s, padded/s, useful per CPU second) over `steps` real steps after 3 warm-up
    steps. CPU time (all threads) is what a shared machine cannot inflate."""
    with tempfile.TemporaryDirectory() as output:
        trainer = Trainer(*open_run(config, data, Path(output), setup("cpu"), resume="none"))
        bar = tqdm(disable=True)
        for _ in range(3):
            trainer.train_step(bar)
        reset_totals(trainer)
        cpu = time.process_time()
        for _ in range(steps):
            trainer.train_step(bar)
        cpu = time.process_time() - cpu
        t = trainer.log.totals
        return t["useful"] / t["seconds"], t["padded"] / t["seconds"], t["useful"] / cpu


def compare(
    data: TrainData, variants: dict[str, TrainConfig], baseline: str, steps: int, rounds: int, target: float | None
) -> None:
    """Useful tokens/s (and the share of step time spent waiting for batches) of each variant
    against the baseline variant, alternating blocks of the same steps over `rounds` rounds."""
    bar = tqdm(disable=True)
    with tempfile.TemporaryDirectory() as output:
        trainers = {}
        for n, (name, config) in enumerate(variants.items()):
            trainers[name] = Trainer(*open_run(config, data, Path(output) / str(n), setup("cpu"), resume="none"))
            for _ in range(3):  # warm-up
                trainers[name].train_step(bar)
        rates: dict[str, list[float]] = {name: [] for name in trainers}
        for round_ in range(rounds):
            waits = {}
            for name, trainer in trainers.items():
                # Each round times the next block of the plan, which no variant changes (it is a
                # function of the lengths, seed and micro): every variant trains on the same batches,
                # and a loader's workers live on across rounds, as they do across a run's steps.
                reset_totals(trainer)
                for _ in range(steps):
                    trainer.train_step(bar)
                totals = trainer.log.totals
                rates[name].append(totals["useful"] / totals["seconds"])
                waits[name] = totals["assembly_seconds"] / totals["seconds"]
            print(
                f"  round {round_ + 1}: "
                + "  ".join(f"{name} {rates[name][-1]:7.0f}/s (waits {waits[name]:.1%})" for name in trainers)
                + "  "
                + "  ".join(
                    f"{name}/{baseline} {rates[name][-1] / rates[baseline][-1]:.2f}x"
                    for name in trainers
                    if name != baseline
                )
            )
        for name in variants:
            if name == baseline:
                continue
            ratios = np.array(rates[name]) / np.array(rates[baseline])
            verdict = (
                ""
                if target is None
                else f"; target >= {target}x: " + ("ok" if np.median(ratios) >= target else "BELOW TARGET")
            )
            print(
                f"  -> {name}: {np.median(ratios):.2f}x the useful tokens/s of {baseline} (baseline), median of "
                f"{rounds} rounds, range {ratios.min():.2f}-{ratios.max():.2f}{verdict}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=ROOT / "data" / "dataset")
    parser.add_argument("--config", default="demo", help="model config for the speed part")
    parser.add_argument("--micro", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40, help="timed steps per variant")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (1 makes CPU seconds exact on a shared machine)"
    )
    parser.add_argument("--models", default="", help="comma-separated model configs to time against --baseline")
    parser.add_argument("--baseline", default="demo-moves", help="the model config --models are compared with")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of --models or --workers")
    parser.add_argument(
        "--workers", type=int, default=0, help="time train.loader_workers=N against 0 with --config's model"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        return measure(args, *load(args.dataset, Path(scratch)))


def measure(args: argparse.Namespace, data: TrainData, source: str) -> int:
    lengths = np.asarray(data.train.lengths())
    print(f"input: {source}; tokens per game: median {int(np.median(lengths))}, max {int(lengths.max())}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.models:
        names = [args.baseline, *args.models.split(",")]
        print(f"\nuseful tokens/s against {args.baseline}, {args.micro} games per step, {args.steps} steps per block")
        variants = {name: TrainConfig(model=name, micro=args.micro, epochs=1, seed=2026) for name in names}
        compare(data, variants, args.baseline, args.steps, args.rounds, target=0.7)
        return 0
    if args.workers:
        print(
            f"\nuseful tokens/s of {args.config}, microbatches assembled by {args.workers} loader workers against "
            f"none (the training process itself), {args.micro} games per step, {args.steps} steps per block"
        )
        variants = {
            f"{n} workers": TrainConfig(model=args.config, micro=args.micro, epochs=1, seed=2026, loader_workers=n)
            for n in (0, args.workers)
        }
        compare(data, variants, "0 workers", args.steps, args.rounds, target=None)
        return 0
    print("\npadded share of target positions (3 epochs)")
    for micro, world in ((16, 1), (8, 2)):
        bucketed, shuffled = padding(lengths, micro, world, 64), padding(lengths, micro, world, 0)
        verdict = "ok" if bucketed <= 0.05 else "ABOVE TARGET"
        print(
            f"  {world} rank(s) x {micro:2d} games: buckets {bucketed:6.2%}  shuffled (baseline) {shuffled:6.2%}  "
            f"-> {shuffled / max(bucketed, 1e-9):5.1f}x less padding; target <= 5%: {verdict}"
        )
    print(f"\nuseful tokens/s, model {args.config}, {args.micro} games per step, {args.steps} steps each")
    base = TrainConfig(model=args.config, micro=args.micro, epochs=1, seed=2026)
    useful_b, padded_b, cpu_b = tokens_per_second(data, base, args.steps)
    shuffled = TrainConfig(model=args.config, micro=args.micro, epochs=1, seed=2026, bucket_pool_batches=1)
    useful_s, padded_s, cpu_s = tokens_per_second(data, shuffled, args.steps)
    print(
        f"  length buckets        {useful_b:9.0f} useful/s  ({padded_b:9.0f} padded/s)  {cpu_b:9.0f} useful per CPU s"
    )
    print(
        f"  shuffled (baseline)   {useful_s:9.0f} useful/s  ({padded_s:9.0f} padded/s)  {cpu_s:9.0f} useful per CPU s"
    )
    print(f"  -> {useful_b / useful_s:.2f}x useful tokens/s, {cpu_b / cpu_s:.2f}x per CPU second, with buckets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
