"""The device check: the GPU profile's paths on one device, each against the same work on the CPU
in the same run. One command, about 10 minutes on one GPU (`make gpu-check`):

    python bench/gpu.py                                # cuda: the baseline probe at micro 8-64, ...
    python bench/gpu.py --device cpu --model tiny --micro 1 2 --probe-tokens 64 --board-model demo-board \\
        --train-model tiny --train-steps 4 --no-compile --eval-games 2 --selfplay-games 2 --selfplay-workers 2 \\
        --max-plies 8 --uci-moves 3
                                                       # CPU-only: tiny sizes, runs to the end (the test)

Sections, each on --device and then on the CPU, whose side runs at --cpu-threads (2, the CI
machine's cores, so that ratios are against the 2-core rate the targets name):
  probe     chesscore.train.probe: --model (baseline: 85.9M) at each --micro on the longest game:
            step time, useful tokens/s, MFU against the card's dense bf16 peak (probe's table of
            known cards; n/a for another card or the CPU), peak memory; a size that does not fit
            is reported out of memory. Then the best size once more, torch.compiled
            (--probe-compile), and once more with --board-model (baseline-board: the baseline
            that sees the board), eager, beside the host's time to make its features for that
            batch (over the device's step: under 1, a training run's host keeps up). The CPU
            runs --cpu-micro.
  train     a short run of chesscore.train.trainer: --train-model (demo-moves) on the demo dataset
            (data/dataset, else the one `dvc repro convert` writes, built in a temporary folder:
            bench/train.py's load), --precision (bf16 autocast), torch.compile with batches
            padded to --pad-to-multiple; its loss curve, step time, the host's share of it spent
            assembling batches, compilations and graph breaks, and nvidia-smi's utilisation,
            memory and power while it trained. The CPU runs
            the same steps eager (inductor's compile time on a CPU would swamp the comparison) in
            the same precision; the two loss curves are compared.
  evaluate  chesscore.eval.moves.analyse_games (evaluate's free-running top-k and legality) of the
            trained model on --eval-games games: positions/s.
  selfplay  chesscore.selfplay.parallel.SelfPlayPool, no judge: --selfplay-workers shards of
            --selfplay-games games, in one process on the device (fp32, and once more with bf16
            weights), over --selfplay-workers processes
            sharing the device, and over --cpu-threads one-thread CPU workers (the stage's
            default on the 2-core machine): moves/s, and whether one process and the workers played the
            same games.
  uci       chesscore.play.uci.UCIEngine (the model as a UCI engine): `position` + `go` for
            --uci-moves moves of one game against itself: ms per move.
Each section's figures go to --out (bench/out/gpu.json) as soon as it ends, so a run cut short
keeps what it measured. A section that fails (a compile error, a driver fault) holds its error
and traceback in its place and the run goes on to the next one (the compiled probe apart from
the eager one; play with an untrained model if training failed), since a lent device is one
short call: the exit status is then 1. The run ends with the headline figures against the
targets. A machine without network: bench/README.md, "bench/gpu.py".
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import io
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chess
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.train import load  # noqa: E402
from chesscore.eval.moves import analyse_games  # noqa: E402
from chesscore.features import replayed  # noqa: E402
from chesscore.model import CONFIGS, GPT, pick_device  # noqa: E402
from chesscore.play.adjudication import Adjudication  # noqa: E402
from chesscore.play.uci import UCIEngine  # noqa: E402
from chesscore.selfplay.games import SelfPlayConfig  # noqa: E402
from chesscore.selfplay.parallel import SelfPlayPool  # noqa: E402
from chesscore.tokens import PAD  # noqa: E402
from chesscore.train.batching import GameSource, TokenList, collate  # noqa: E402
from chesscore.train.config import TrainConfig  # noqa: E402
from chesscore.train.data import TrainData  # noqa: E402
from chesscore.train.distributed import DistEnv  # noqa: E402
from chesscore.train.probe import describe, peak_flops, probe  # noqa: E402
from chesscore.train.report import telemetry_line  # noqa: E402
from chesscore.train.run import open_run  # noqa: E402
from chesscore.train.trainer import Trainer  # noqa: E402

CPU = torch.device("cpu")


def env_of(device: torch.device) -> DistEnv:
    return DistEnv(rank=0, world_size=1, local_rank=0, device=device)


@contextlib.contextmanager
def cpu_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to `threads` (None: left as they are) for the block: the CPU side
    runs at the CI machine's 2 cores by default, so its ratios are against the rate the
    project's targets name, whatever the device machine's CPU."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def timed(device: torch.device, work: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of `work`, the device's queue drained before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started, result


class Failed(dict):
    """What a section (or part of one) that raised leaves in the report: the error and the end
    of its traceback."""


def attempt(work: Callable[[], Any]) -> Any:
    """work(), or a Failed record of the exception it raised (printed): a lent device is one
    short call, so one part's failure must not cost the parts after it. KeyboardInterrupt (the
    machine's time running out) still ends the run."""
    try:
        return work()
    except Exception as error:  # noqa: BLE001 - recorded with its traceback, and the run goes on
        failed = Failed(error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc(limit=-6))
        print(f"!! failed: {failed['error']}\n{failed['traceback']}", file=sys.stderr, flush=True)
        return failed


def probe_section(args: argparse.Namespace, data: TrainData, device: torch.device, out: Path) -> dict[str, Any]:
    """The probe on the device at each --micro (eager), once more compiled at the micro with the
    most useful tokens/s, then on the CPU (at --cpu-threads) at --cpu-micro."""
    games = data.train
    if args.probe_tokens:  # the longest game, cut: the CPU-only run's small sizes
        games = TokenList([data.train[i][: args.probe_tokens] for i in range(len(data.train))])

    def run(
        name: str, on: torch.device, micro: list[int], repeats: int, compile: bool, model: str | None = None
    ) -> dict[str, Any]:
        model = model or args.model
        (out / f"probe-{name}").mkdir(parents=True, exist_ok=True)
        print(f"\n== probe, {name} ({on}): model {model}, micro {micro}{', compiled' if compile else ''}")
        return probe(CONFIGS[model], games, env_of(on), micro, out / f"probe-{name}", repeats, compile, args.precision)

    def board(micro: int) -> dict[str, Any]:
        """--board-model at `micro`, eager, and the host's seconds to make its features for that
        batch (what training does before each microbatch, chesscore.features)."""
        side = run("device-board", device, [micro], args.repeats, compile=False, model=args.board_model)
        result = side["results"][0]
        if not result.get("out_of_memory"):
            result["host_feature_seconds"] = feature_seconds(games, micro, CONFIGS[args.board_model].board_readout)
            step = sum(result["step_seconds"]) / result["timed_steps"]
            result["host_to_device"] = result["host_feature_seconds"] / step
            print(
                f"  its features on the host: {result['host_feature_seconds'] * 1000:.1f} ms a microbatch, "
                f"{result['host_to_device']:.2f}x the device's step (under 1: the device sets the pace)"
            )
        return side

    sides = {"device": run("device", device, args.micro, args.repeats, compile=False)}
    fitted = [r for r in sides["device"]["results"] if not r.get("out_of_memory")]
    best = max(fitted, key=lambda r: r["useful_tokens_per_second"])["micro_per_rank"] if fitted else None
    if args.probe_compile and best:
        sides["device-compiled"] = attempt(lambda: run("device-compiled", device, [best], args.repeats, compile=True))
    if args.board_model and best:
        sides["device-board"] = attempt(lambda: board(best))
    with cpu_threads(args.cpu_threads):
        sides["cpu"] = run("cpu", CPU, [args.cpu_micro], 1, compile=False)
    return sides


def feature_seconds(games: GameSource, micro: int, board: bool, repeats: int = 3) -> float:
    """The fastest of `repeats` host replays (chesscore.features.replayed) of the probe's batch:
    `micro` copies of the longest game."""
    longest = int(games.lengths().argmax())
    inputs, _ = collate(games.batch([longest] * micro, pad=PAD))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        replayed(inputs, board=board)
        times.append(time.perf_counter() - started)
    return min(times)


def train_run(
    args: argparse.Namespace, data: TrainData, device: torch.device, out: Path, compile: bool, loader_workers: int
) -> tuple[Trainer, dict]:
    config = TrainConfig(
        model=args.train_model,
        micro=args.train_micro,
        epochs=100,
        max_updates=args.train_steps,
        log_every_steps=1,
        legality_eval_games=8,
        compile=compile,
        pad_to_multiple=args.pad_to_multiple,
        loader_workers=loader_workers,
        precision=args.precision,
        device=device.type,
        seed=2026,
    )
    trainer = Trainer(*open_run(config, data, out, env_of(device), resume="none"))
    return trainer, trainer.run()


def train_section(args: argparse.Namespace, data: TrainData, device: torch.device, out: Path) -> dict[str, Any]:
    sides, trainers = {}, {}
    for name, on in (("device", device), ("cpu", CPU)):
        print(f"\n== train, {name} ({on}): {args.train_model}, {args.train_steps} steps of {args.train_micro} games")
        with cpu_threads(args.cpu_threads if name == "cpu" else None):
            trainer, results = train_run(
                args,
                data,
                on,
                out / f"train-{name}",
                compile=args.compile and name == "device",
                loader_workers=args.loader_workers if name == "device" else 0,  # the CPU's cores train
            )
        events = [json.loads(line) for line in (out / f"train-{name}" / "events.jsonl").read_text().splitlines()]
        steps = [e["step_seconds"] for e in events if e["event"] == "train"]
        sides[name] = {
            "device": str(on),
            "compile": results.get("compile"),
            "precision": trainer.spec.identity["precision"],
            "first_step_seconds": steps[0],
            "median_step_seconds": statistics.median(steps),
            "useful_tokens_per_second": results["throughput"]["useful_tokens_per_second"],
            # The share of the step time the training process spent getting its batches (assembled
            # there, features included, or waited for from its loader workers) and sending them.
            "assembly_fraction": results["throughput"]["assembly_fraction"],
            "loader_workers": trainer.spec.config.loader_workers,
            "loss_curve": [[r["step"], r["nll"]] for r in trainer.state.train_log],
            "validation_nll": [h["validation"]["nll"] for h in results["history"]],
            "gpu_telemetry": results.get("gpu_telemetry"),  # nvidia-smi's utilisation while it trained
        }
        trainers[name] = trainer
    curves = [np.array([nll for _, nll in sides[name]["loss_curve"]]) for name in ("device", "cpu")]
    sides["max_loss_difference"] = float(np.abs(curves[0] - curves[1]).max())
    every = max(1, args.train_steps // 10)
    for name in ("device", "cpu"):
        side = sides[name]
        curve = "  ".join(f"{s}:{nll:.3f}" for s, nll in side["loss_curve"][every - 1 :: every])
        print(
            f"  {name}: {side['precision']}, compile {bool(side['compile'])}; "
            f"first step {side['first_step_seconds']:.2f} s, median {side['median_step_seconds'] * 1000:.1f} ms; "
            f"{side['useful_tokens_per_second']:.0f} useful tokens/s, batch assembly {side['assembly_fraction']:.1%}"
            " of the step time"
        )
        print(f"    loss curve (step:nll)  {curve}")
        if side["gpu_telemetry"]:
            print(telemetry_line(side["gpu_telemetry"]))
    print(f"  loss curves differ by at most {sides['max_loss_difference']:.4f} nats per step")
    sides["model"] = trainers["device"].model.eval()
    return sides


def evaluate_side(model: GPT, games: list[np.ndarray], device: torch.device) -> dict[str, float]:
    seconds, results = timed(device, lambda: analyse_games(model, games, top_k=3))
    return {"positions": len(results), "seconds": seconds, "positions_per_second": len(results) / seconds}


def selfplay_sides(model: GPT, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """The same self-play games (--selfplay-workers shards of --selfplay-games, no judge) played
    four ways: in this process on the device, fp32 and bf16; by --selfplay-workers processes that share the
    device (SelfPlayPool(device=...)); by --cpu-threads one-thread CPU workers, as the stage's
    default execution plays them on the 2-core CI machine. moves/s of each, its pool started
    before the clock."""
    config = SelfPlayConfig(
        args.selfplay_games * args.selfplay_workers,
        max_plies=args.max_plies,
        seed=0,
        adjudication=Adjudication(enabled=False),
    )
    cpu_workers = args.cpu_threads or os.cpu_count() or 1
    ways = {  # (the model, the pool's workers, their device), each pool started when its turn comes
        "device": (model, 0, device),
        "device_workers": (model, args.selfplay_workers, device),
        # bf16 weights and cache (self-play plays fp32 today): whether halving the bytes that
        # attention reads per token is worth a setting; its games differ from fp32's.
        "device_bf16": (copy.deepcopy(model).to(torch.bfloat16), 0, device),
        "cpu": (copy.deepcopy(model).to(CPU), cpu_workers, CPU),
    }
    found: dict[str, Any] = {}
    played = {}
    for name, (net, workers, on) in ways.items():
        with SelfPlayPool(workers=workers, device=str(on)) as pool:
            pool.pids()
            seconds, (records, stats) = timed(
                device, functools.partial(pool.play, net, None, config, args.selfplay_games)
            )
        played[name] = records
        plies = stats["plies"]["total"]
        found[name] = {
            "processes": max(workers, 1),
            "plies": plies,
            "seconds": seconds,
            "moves_per_second": plies / seconds,
        }
    # The same shards with the same seeds on the same device: the worker count changes nothing.
    found["same_games_in_process_and_over_workers"] = played["device"] == played["device_workers"]
    return found


def uci_side(model: GPT, args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    """One game of the engine against itself, each move a `position startpos moves ...` + `go`."""
    out = io.StringIO()
    engine, board, times = UCIEngine(model, "bench", out), chess.Board(), []
    engine.handle("ucinewgame")
    while len(times) < args.uci_moves and not board.is_game_over():
        engine.handle("position startpos moves " + " ".join(m.uci() for m in board.move_stack))
        out.seek(0), out.truncate()
        seconds, _ = timed(device, lambda: engine.handle("go"))
        times.append(seconds)
        board.push_uci(out.getvalue().split("bestmove ")[-1].split()[0])
    return {"moves": len(times), "ms_per_move": 1000 * statistics.mean(times)}


def play_sections(args: argparse.Namespace, data: TrainData, model: GPT, device: torch.device) -> dict[str, Any]:
    pool = [data.validation[i] for i in range(len(data.validation))] + [data.train[i] for i in range(len(data.train))]
    games = [np.asarray(g) for g in pool[: args.eval_games]]
    models = {"device": model, "cpu": copy.deepcopy(model).to(CPU)}
    found: dict[str, dict[str, Any]] = {"evaluate": {}, "uci": {}}
    for name, net in models.items():
        on = next(net.parameters()).device
        with cpu_threads(args.cpu_threads if name == "cpu" else None):
            found["evaluate"][name] = evaluate_side(net, games, on)
            found["uci"][name] = uci_side(net, args, on)
    found["selfplay"] = attempt(lambda: selfplay_sides(model, args, device))  # the workers: the likeliest to fail
    shards = f"{args.selfplay_workers} x {args.selfplay_games} games, <= {args.max_plies} plies"
    rows = (
        ("evaluate", "device", "positions_per_second", "positions/s", f"{len(games)} games"),
        ("uci", "device", "ms_per_move", "ms per move", f"{args.uci_moves} moves"),
        ("selfplay", "device", "moves_per_second", "moves/s", f"{shards}, 1 process"),
        ("selfplay", "device_workers", "moves_per_second", "moves/s", f"{shards}, {args.selfplay_workers} workers"),
        ("selfplay", "device_bf16", "moves_per_second", "moves/s", f"{shards}, 1 process, bf16"),
    )
    print("\n== evaluate, UCI engine, self-play (the trained model); the CPU at --cpu-threads")
    for section, side, key, unit, what in rows:
        if isinstance(found[section], Failed):
            print(f"  {section:<9} {what:<38} failed: {found[section]['error']}")
            continue
        device_value, cpu_value = found[section][side][key], found[section]["cpu"][key]
        ratio = cpu_value / device_value if key == "ms_per_move" else device_value / cpu_value
        print(f"  {section:<9} {what:<38} device {device_value:10.1f}  cpu {cpu_value:10.1f} {unit:<12} {ratio:6.2f}x")
    if not isinstance(found["selfplay"], Failed):
        same = found["selfplay"]["same_games_in_process_and_over_workers"]
        print(f"  self-play: the same games in one process and over workers: {same}")
    return found


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/gpu.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--device", default="cuda", help="the device under test: cuda, or cpu (both sides on the CPU)")
    parser.add_argument(
        "--dataset",
        type=Path,
        default=ROOT / "data" / "dataset",
        help="a converted dataset; absent: data/raw validated and converted as `dvc repro convert` does",
    )
    parser.add_argument("--model", default="baseline", help="the probe's model config")
    parser.add_argument(
        "--board-model",
        default="baseline-board",
        help="a config that sees the board, probed at the best micro with its host feature time ('' skips it)",
    )
    parser.add_argument("--micro", type=int, nargs="+", default=[8, 16, 32, 64], help="the probe's microbatch sizes")
    parser.add_argument("--cpu-micro", type=int, default=1, help="the CPU probe's one microbatch size")
    parser.add_argument(
        "--cpu-threads", type=int, default=2, help="torch CPU threads of the CPU side (0: all; 2: the CI machine's)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed probe steps per size on the device")
    parser.add_argument("--probe-tokens", type=int, help="cut the probe's games to this many tokens (small runs)")
    parser.add_argument(
        "--probe-compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="probe the device's best microbatch once more, torch.compiled",
    )
    parser.add_argument("--precision", default="bf16", choices=["auto", "fp32", "bf16"], help="train.precision")
    parser.add_argument("--train-model", default="demo-moves", help="the training run's model config")
    parser.add_argument("--train-steps", type=int, default=150, help="optimizer steps of the training run")
    parser.add_argument("--train-micro", type=int, default=16, help="games per microbatch of the training run")
    parser.add_argument(
        "--pad-to-multiple", type=int, default=256, help="train.pad_to_multiple of the compiled run (4 widths)"
    )
    parser.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, default=True, help="torch.compile the device's run"
    )
    parser.add_argument(
        "--loader-workers", type=int, default=4, help="train.loader_workers of the device's run (the CPU's: 0)"
    )
    parser.add_argument("--eval-games", type=int, default=64, help="games analysed by evaluate")
    parser.add_argument("--selfplay-games", type=int, default=64, help="self-play games at once (a shard)")
    parser.add_argument(
        "--selfplay-workers", type=int, default=8, help="self-play worker processes sharing the device; also the shards"
    )
    parser.add_argument("--max-plies", type=int, default=100, help="self-play's ply cap")
    parser.add_argument("--uci-moves", type=int, default=40, help="moves the UCI engine plays")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gpu.json", help="the results file")
    return parser.parse_args(argv)


def machine(device: torch.device) -> dict[str, Any]:
    """What the figures were measured on."""
    found: dict[str, Any] = {
        "device": str(device),
        "torch": str(torch.__version__),
        "cpu_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        found |= {
            "device_name": props.name,
            "cuda": torch.version.cuda,
            "capability": f"{props.major}.{props.minor}",
            "memory_bytes": props.total_memory,
            "multiprocessors": props.multi_processor_count,
            "bf16_supported": torch.cuda.is_bf16_supported(),
            "peak_bf16_flops": peak_flops(device),
        }
    else:
        found["device_name"] = "cpu"
    return found


def headline(report: dict[str, Any]) -> list[str]:
    """The figures the README quotes, against the targets (issue 41): MFU >= 45% at the best
    microbatch on an H100, GPU self-play >= 20x the 2-core CPU rate."""
    lines = []
    for side in ("device", "device-compiled", "device-board"):
        for r in report.get("probe", {}).get(side, {}).get("results", []):
            lines.append(f"probe {side:<15} " + describe(r).removeprefix("probe: "))
            if "host_to_device" in r:
                lines.append(
                    f"  its features on the host: {r['host_feature_seconds'] * 1000:.1f} ms a microbatch, "
                    f"{r['host_to_device']:.2f}x the device's step"
                )
    train = report.get("train", {})
    if isinstance(train, dict) and "device" in train:
        side = train["device"]
        gpu = side["gpu_telemetry"] or {}
        utilisation = gpu.get("utilization_percent_mean")
        lines.append(
            f"train on the device: {side['median_step_seconds'] * 1000:.1f} ms a step (median), batch assembly "
            f"{side['assembly_fraction']:.1%} of the step time, GPU utilisation "
            + (f"{utilisation:.0f}%" if utilisation is not None else "n/a")
        )
    if "selfplay" in report and not isinstance(report["selfplay"], Failed):
        rates = {k: v["moves_per_second"] for k, v in report["selfplay"].items() if isinstance(v, dict)}
        cpu = report["selfplay"]["cpu"]["processes"]
        for way, what in (
            ("device", "1 process"),
            ("device_workers", f"{report['arguments']['selfplay_workers']} workers"),
            ("device_bf16", "1 process, bf16 weights"),
        ):
            lines.append(
                f"self-play on the device, {what}: {rates[way]:.0f} moves/s against {rates['cpu']:.0f} on {cpu} CPU "
                f"workers: {rates[way] / rates['cpu']:.1f}x (target >= 20x)"
            )
    for part, failed in failed_parts(report).items():
        lines.append(f"{part}: FAILED, {failed['error']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    device = pick_device(args.device)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        out = Path(work)
        data, source = load(args.dataset, out / "data")
        report: dict[str, Any] = {
            "machine": machine(device),
            "input": source,
            "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "section_seconds": {},
        }
        print(f"bench/gpu: {json.dumps(report['machine'])}")
        print(f"input: {source}")
        args.out.parent.mkdir(parents=True, exist_ok=True)

        def done(section: str, **found: dict[str, Any]) -> None:
            """Each section's figures are written as soon as it ends: a run cut short keeps them."""
            report.update(found)
            report["section_seconds"][section] = time.perf_counter() - started - sum(report["section_seconds"].values())
            args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
            print(f"-- {section} done at {time.perf_counter() - started:.0f} s")

        done("data")
        done("probe", probe=attempt(lambda: probe_section(args, data, device, out)))
        trained = attempt(lambda: train_section(args, data, device, out))
        model = trained.pop("model", None)
        if model is None:  # training failed: the play sections still measure, on an untrained model
            torch.manual_seed(0)
            model = GPT(CONFIGS[args.train_model]).to(device).eval()
            report["play_model"] = f"untrained {args.train_model} (the train section failed)"
        done("train", train=trained)
        played = attempt(lambda: play_sections(args, data, model, device))
        done("play", **(played if not isinstance(played, Failed) else {"play": played}))
    print("\n== headline")
    for line in headline(report):
        print("  " + line)
    failures = failed_parts(report)
    print(f"\nbench/gpu: done in {time.perf_counter() - started:.0f} s; results in {args.out}")
    if failures:
        print(
            f"bench/gpu: {len(failures)} part(s) failed: {', '.join(failures)} (errors and tracebacks in the results)"
        )
    return 1 if failures else 0


def failed_parts(report: dict[str, Any]) -> dict[str, Failed]:
    """The sections and parts that failed, by name, each with its Failed record."""
    parts = {name: report.get(name) for name in ("probe", "train", "play", "selfplay")}
    for side in ("device-compiled", "device-board"):
        parts[f"probe {side}"] = (report.get("probe") or {}).get(side)
    return {name: part for name, part in parts.items() if isinstance(part, Failed)}


if __name__ == "__main__":
    sys.exit(main())
