"""The selfplay stage's engine: iterations of self-play and a policy-gradient update, the win
rate against the frozen supervised model after each, a checkpoint with identity and resume.

    summary = run_selfplay(Path("data/train/best.pt"), Path("data/selfplay"), RunConfig(iterations=3),
                           Execution(workers=2))

Iteration k: play cfg.games games against the opponent (the model itself by default) in
shards, update the model from its own moves (chesscore.selfplay.rl), then (every eval_every
iterations and after the last one asked for) play cfg.eval_games games against the frozen
supervised model and record W/D/L, score and Elo difference. (So extending a finished run adds
iterations after one that was evaluated as the last: the only difference from a run asked for
all of them at once, whose weights and games are the same.) After every
iteration out/rl.pt is written: the model, the optimizer, the history and every game so far
(as canonical JSON text), plus the identity (checkpoint played from, config, code, tokenizer). A rerun resumes from it
when its identity matches, as training does; `iterations` is not part of the identity, so a
finished run can be extended. Seeds derive from (seed, "play"|"eval", k): the games, the
checkpoint, the dataset and stats.json are the same bytes whatever the worker count or backend;
how fast and where they were played goes to run.json beside them (RUN_KEYS), not a DVC output.

A triples-v2 (conditioned) model reads told_prefix(cfg) after BOS in every game and update: both
sides at cfg.conditioning_rating (None: unknown), the time control unknown; stats.json, the
identity and the dataset's rating columns record it (docs/conditioning.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from chesscore import checkpoint, ranges, tokens
from chesscore.failures import Refused
from chesscore.fileio import (
    atomic_write_text,
    canonical_json,
    code_sha256,
    metrics_text,
    sha256_file,
    sha256_json,
    write_record,
)
from chesscore.model import GPT, pick_device
from chesscore.play.adjudication import Adjudication
from chesscore.play.elo import elo_difference
from chesscore.resume import canonical, find_resume
from chesscore.runtime.seeds import derive_seed
from chesscore.selfplay.export import PlayedGame, write_games
from chesscore.selfplay.games import GameRecord, SelfPlayConfig, summarise
from chesscore.selfplay.parallel import SelfPlayPool
from chesscore.selfplay.rl import REWARDS, PGConfig, make_reward, policy_gradient_step

CHECKPOINT = "rl.pt"
STATS = "stats.json"
# What this call and machine decide, written to run.json rather than stats.json (fileio.write_record).
RUN_KEYS = (
    "seconds",
    "moves_per_second",
    "judge_seconds",
    "judge_share_of_play",
    "timings",
    "execution",
    "wall_seconds",
)
PLOT = "plots/iterations.csv"  # a DVC plot
METRICS = "metrics.json"  # the DVC metric: the last evaluation's score against the supervised model
LIBRARY = Path(__file__).resolve().parents[1]  # chesscore/
# The code the games and the update depend on (folders: every file in them).
CODE = (
    LIBRARY / "tokens.py",
    LIBRARY / "conditioning.py",
    LIBRARY / "model.py",
    LIBRARY / "boards.py",
    LIBRARY / "features.py",
    LIBRARY / "play",
    LIBRARY / "selfplay",
    LIBRARY / "resume.py",
    LIBRARY / "runtime" / "seeds.py",
)
# How fast and where the games were played: kept out of the checkpoint, whose bytes must not
# depend on the machine or the worker count (the history's play stats go without them).
MACHINE_KEYS = (
    "seconds",
    "moves_per_second",
    "workers",
    "threads_per_worker",
    "backend",
    "worker_device",
    "shard_seconds",
    "judge_seconds",
)


@dataclass(frozen=True)
class RunConfig:
    iterations: int = 2  # play + update rounds (not in the identity: a run can be extended)
    games: int = 64  # self-play games per iteration
    opponent: str = "self"  # "self", or the path of a checkpoint the model plays against
    temperature: float = 1.0  # sampling temperature of the self-play games (and of the policy)
    max_plies: int = 120  # ply cap: the judge's score of the final position decides (a draw without one)
    shard_games: int = 32  # games per shard (one seed each); the output depends on it
    lr: float = 0.001  # AdamW, no weight decay: the KL term keeps the weights near the reference
    kl_coef: float = 0.05  # weight of KL(policy || supervised) per move
    batch_games: int = 16  # sides per forward/backward of the update
    grad_clip: float = 1.0  # max global gradient norm of an update
    eval_games: int = 32  # games against the frozen supervised model after an update (0: none)
    eval_every: int = 1  # evaluate after every k-th iteration, and after the last one of a run
    eval_temperature: float = 1.0  # > 0, or every evaluation game with one colour is the same
    seed: int = 0  # shard s of iteration i plays with a seed derived from it: the same seed, the same games
    adjudication: Adjudication = field(default_factory=Adjudication)  # the judge and its rules (games and eval)
    reward: Literal["outcome", "shaped"] = (
        "outcome"  # outcome: win 1, draw 0, loss -1; shaped: a judged draw earns its score
    )
    reward_scale_cp: float = 400.0  # shaped: centipawns at which a draw earns 2/(1+10^-1) - 1 = 0.82
    conditioning_rating: int | None = (
        None  # triples-v2 models: both sides told this rating (time control unknown); null: unknown
    )

    def __post_init__(self) -> None:
        ranges.check(
            self,
            counts=("games", "shard_games", "max_plies", "batch_games", "eval_every"),
            whole=("iterations", "eval_games", "seed"),
            positive=(
                "lr",
                "grad_clip",
                "temperature",
                "reward_scale_cp",
            ),  # the policy gradient needs a temperature > 0
            non_negative=("kl_coef",),
        )
        ranges.one_of("reward", self.reward, REWARDS)
        if self.conditioning_rating is not None and self.conditioning_rating < 0:
            raise ValueError(f"conditioning_rating must be a rating >= 0 or null, got {self.conditioning_rating}")
        if self.eval_games:  # else every evaluation game with one colour is the same game
            ranges.above("eval_temperature", self.eval_temperature, 0)

    def identity_part(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "iterations"}


@dataclass(frozen=True)
class Execution:
    """How the games are played: changes the speed, never the output."""

    workers: int = 2  # worker processes (0: in this process); the output is the same for any count
    threads_per_worker: int = 1  # torch threads in each worker
    backend: Literal["process", "ray"] = "process"  # ray: the shards on the Ray cluster of RAY_ADDRESS
    device: Literal["auto", "cpu", "cuda"] = "cpu"  # of the update and of the games (in every process worker)
    stockfish: str | None = None  # the judge's Stockfish executable; null: PATH, then /usr/games/stockfish

    def __post_init__(self) -> None:
        if self.workers < 0 or self.threads_per_worker < 1:
            raise ValueError(
                f"workers must be >= 0 and threads_per_worker >= 1, got {self.workers}, {self.threads_per_worker}"
            )


def told_prefix(cfg: RunConfig) -> tuple[int, int, int]:
    """What a triples-v2 model reads in every game and update: both sides at
    cfg.conditioning_rating (unknown when None), the time control unknown."""
    return tokens.conditioning_prefix(cfg.conditioning_rating, cfg.conditioning_rating, None)


def conditioning_facts(cfg: RunConfig, conditioned: bool) -> dict[str, Any] | None:
    """What the self-play games are conditioned on (None for a triples-v1 model)."""
    if not conditioned:
        return None
    prefix = told_prefix(cfg)
    return {
        "white_rating": cfg.conditioning_rating,
        "black_rating": cfg.conditioning_rating,
        "time_control_class": "unknown",
        "prefix": list(prefix),
        "labels": [tokens.rating_label(prefix[0]), tokens.rating_label(prefix[1]), "unknown"],
    }


def run_identity(cfg: RunConfig, checkpoint_path: Path, supervised: dict[str, Any]) -> dict[str, Any]:
    opponent = cfg.opponent if cfg.opponent == "self" else {"sha256": sha256_file(cfg.opponent)}
    conditioned = bool(supervised["config"].get("conditioning"))
    version = tokens.CONDITIONED_VERSION if conditioned else tokens.VERSION
    return {
        "kind": "chesscore-selfplay-rl/1",
        "tokenizer": {"version": version, "sha256": tokens.tokenizer_sha256(version)},
        "conditioning": conditioning_facts(cfg, conditioned),
        "model": supervised["config"],
        "reference": {"sha256": sha256_file(checkpoint_path), "identity": supervised.get("identity")},
        "opponent": opponent,
        "config": cfg.identity_part(),
        "code": code_sha256(CODE),
        "torch": str(torch.__version__),
    }


def _versus(stats: dict) -> dict[str, Any]:
    m = stats["model"]
    return {**elo_difference(m["wins"], m["draws"], m["losses"]).to_dict(), "win_rate": m["wins"] / stats["games"]}


def _records(saved_games: list[list[dict]]) -> list[list[GameRecord]]:
    return [[GameRecord(**{**g, "moves": tuple(g["moves"])}) for g in games] for games in saved_games]


def run_selfplay(
    checkpoint_path: Path,
    out: Path,
    cfg: RunConfig,
    execution: Execution = Execution(),
    resume: str = "auto",
    log: Callable[[str], None] = print,
    progress: bool = False,
) -> dict[str, Any]:
    """Run (or continue) the iterations; write out/rl.pt, games.pgn, dataset/, stats.json,
    plots/iterations.csv; return the stats."""
    started = time.perf_counter()
    out = Path(out)
    device = pick_device(execution.device)
    model, supervised = checkpoint.load_model(checkpoint_path, device)
    if cfg.conditioning_rating is not None and not model.config.conditioning:
        raise Refused(
            f"selfplay.conditioning_rating {cfg.conditioning_rating}: {checkpoint_path} reads no ratings (triples-v1)"
        )
    reference, _ = checkpoint.load_model(checkpoint_path, device)  # frozen: the KL anchor, the eval opponent
    opponent = None if cfg.opponent == "self" else checkpoint.load_model(cfg.opponent, device)[0]
    identity = run_identity(cfg, Path(checkpoint_path), supervised)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    history: list[dict] = []
    games: list[list[dict]] = []

    def too_far(payload: dict[str, Any]) -> str | None:  # a run cannot be shortened after the fact
        done = len(json.loads(payload.get("history_json", "[]")))
        return f"{done} iterations done, only {cfg.iterations} asked for" if done > cfg.iterations else None

    saved, note, source = find_resume(resume, out / CHECKPOINT, identity, refuse=too_far)
    if saved is None and resume == "auto" and source.exists():
        log(note)
    if saved is not None:
        checkpoint.check_weights(source, model, saved.get("model"))
        try:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            history, games = json.loads(saved["history_json"]), json.loads(saved["games_json"])
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            raise checkpoint.CheckpointError(f"{source}: cannot resume from it ({error})") from None
        log(f"resuming after iteration {len(history)} of {cfg.iterations}")
    timings: dict[int, dict] = {}
    if len(history) < cfg.iterations:
        with SelfPlayPool(
            execution.workers, execution.threads_per_worker, execution.backend, progress, device=str(device)
        ) as pool:
            pool.pids()  # wait for the workers to start, so the first iteration's moves/s is honest
            for k in range(len(history), cfg.iterations):
                entry, records, timings[k] = _iteration(
                    k, pool, model, reference, opponent, optimizer, cfg, execution.stockfish
                )
                history.append(entry)
                games.append([{**asdict(r), "moves": list(r.moves)} for r in records])
                payload = checkpoint.model_payload(
                    model,
                    identity,
                    optimizer=optimizer.state_dict(),
                    history_json=canonical_json(history),
                    games_json=canonical_json(games),
                )
                checkpoint.save(canonical(payload), out / CHECKPOINT)
                log(_line(entry, timings[k]))
    opponent_name = "self" if cfg.opponent == "self" else Path(cfg.opponent).name
    played = [
        PlayedGame(record, k, f"rl-iteration-{k}", opponent_name)
        for k, records in enumerate(_records(games))
        for record in records
    ]
    run_id = sha256_json(identity)
    conditioning = conditioning_facts(cfg, model.config.conditioning)
    manifest = write_games(
        out, played, run_id, {"identity_sha256": run_id, **asdict(cfg)}, rating=cfg.conditioning_rating
    )
    stats = summarise([game.record for game in played], seconds=0.0)
    seconds = sum(t["play_seconds"] for t in timings.values())  # this call's games only: a resume
    stats["seconds"] = seconds  # does not replay the earlier ones
    stats["moves_per_second"] = sum(t["plies"] for t in timings.values()) / seconds if seconds else None
    last = history[-1].get("vs_reference", {}) if history else {}
    stats.update(
        iterations=len(history),
        checkpoint=str(checkpoint_path),
        run_id=run_id,
        dataset_fingerprint=manifest["fingerprint"],
        dataset_splits=manifest["splits"],
        win_rate_vs_reference=last.get("win_rate"),
        score_vs_reference=last.get("score"),
        vs_supervised=last or None,
        reward=cfg.reward,
        conditioning=conditioning,
        nonzero_reward_share=_nonzero_share(history),
        judge={"rules": cfg.adjudication.describe(), "positions": stats["judged_positions"]},
        **_judge_time(timings),
        per_iteration=history,
        timings=timings,
        execution=asdict(execution),
        wall_seconds=time.perf_counter() - started,
    )
    write_record(out / STATS, stats, RUN_KEYS)
    atomic_write_text(out / PLOT, _plot_csv(history))
    atomic_write_text(out / METRICS, metrics_text({"rl_score": stats["score_vs_reference"]}))
    return stats


def _nonzero_share(history: list[dict]) -> float | None:
    """The share of the model's sides (over every iteration) whose reward was not zero."""
    sides = sum(entry["update"]["sides"] for entry in history)
    nonzero = sum(entry["update"]["nonzero_reward_share"] * entry["update"]["sides"] for entry in history)
    return nonzero / sides if sides else None


def _judge_time(timings: dict[int, dict]) -> dict[str, Any]:
    """This call's time in the judge, and its share of the time the workers spent playing
    (games and evaluation, summed over workers)."""
    seconds = sum(t["judge_seconds"] for t in timings.values())
    playing = sum(t["shard_seconds"] for t in timings.values())
    return {"judge_seconds": seconds, "judge_share_of_play": seconds / playing if playing else None}


def _plot_csv(history: list[dict]) -> str:
    """One row per iteration, for `dvc plots show`: how the RL run went."""
    rows = ["iteration,score_vs_supervised,mean_reward,kl_per_move,entropy_per_move,illegal_attempt_rate"]
    for entry in history:
        versus, update = entry.get("vs_reference") or {}, entry["update"]
        score = versus.get("score")
        rows.append(
            f"{entry['iteration']},{'' if score is None else f'{score:.6f}'},{update['mean_reward']:.6f},"
            f"{update['kl_per_move']:.8f},{update['entropy_per_move']:.6f},"
            f"{entry['play']['illegal_attempt_rate']:.6f}"
        )
    return "\n".join(rows) + "\n"


def _iteration(
    k: int,
    pool: SelfPlayPool,
    model: GPT,
    reference: GPT,
    opponent: GPT | None,
    optimizer: torch.optim.Optimizer,
    cfg: RunConfig,
    stockfish: str | None = None,
) -> tuple[dict, list[GameRecord], dict]:
    """Play, update, evaluate: the history entry (no timings), the games, the timings."""
    play = SelfPlayConfig(
        games=cfg.games,
        temperature=cfg.temperature,
        max_plies=cfg.max_plies,
        seed=derive_seed(cfg.seed, "play", k),
        adjudication=cfg.adjudication,
        stockfish=stockfish,
        prefix=told_prefix(cfg),
    )
    records, stats = pool.play(model, opponent, play, cfg.shard_games)
    pg = PGConfig(
        temperature=cfg.temperature, kl_coef=cfg.kl_coef, batch_games=cfg.batch_games, grad_clip=cfg.grad_clip
    )
    update = policy_gradient_step(
        model, reference, optimizer, records, pg, make_reward(cfg.reward, cfg.reward_scale_cp), play.prefix
    )
    entry = {"iteration": k, "play": {key: v for key, v in stats.items() if key not in MACHINE_KEYS}, "update": update}
    timing = {
        "play_seconds": stats["seconds"],
        "plies": stats["plies"]["total"],
        "moves_per_second": stats["moves_per_second"],
        "shard_seconds": stats["shard_seconds"],
        "judge_seconds": stats["judge_seconds"],
    }
    if cfg.eval_games and ((k + 1) % cfg.eval_every == 0 or k + 1 == cfg.iterations):
        evaluation = replace(
            play, games=cfg.eval_games, temperature=cfg.eval_temperature, seed=derive_seed(cfg.seed, "eval", k)
        )
        eval_stats = pool.play(model, reference, evaluation, cfg.shard_games)[1]
        entry["vs_reference"] = {
            **_versus(eval_stats),
            "decided_by": eval_stats["decided_by"],
            "terminations": {name: n for name, n in eval_stats["terminations"].items() if n},
        }
        timing["shard_seconds"] += eval_stats["shard_seconds"]
        timing["judge_seconds"] += eval_stats["judge_seconds"]
    return entry, records, timing


def _line(entry: dict, timing: dict) -> str:
    play, update, versus = entry["play"], entry["update"], entry.get("vs_reference")
    decisive = play["white_wins"] + play["black_wins"]
    return (
        f"iteration {entry['iteration']}: {play['games']} games ({decisive} decisive), "
        f"{timing['moves_per_second']:.0f} moves/s, mean reward {update['mean_reward']:+.3f}, "
        f"KL/move {update['kl_per_move']:.4f}, entropy/move {update['entropy_per_move']:.2f}"
        + (f", score vs supervised {versus['score']:.3f}" if versus else "")
    )
