"""Stage `arena`: a checkpoint against Stockfish levels, a random mover and other checkpoints.

    python -m stages.arena                                    # every option from params.yaml
    python -m stages.arena --checkpoint data/train/best.pt --out data/arena --games 20

Per opponent: W/D/L, score, Elo difference with its 95% interval, the share of games decided by
the rules, by adjudication and drawn, the raw model's illegal attempts; overall: a rating
anchored on the Stockfish levels (CCRL 40/4 scale, see chesscore/play/elo.py). A Stockfish
judge adjudicates the games (`arena.adjudication`, chesscore/play/adjudication.py). Writes
OUT/metrics.json (DVC metric: the rating and the score against the random mover), OUT/arena.json
(everything), OUT/results.csv (a row per opponent), OUT/games.pgn, OUT/games.csv
(a row per game) and OUT/report.md; beside them OUT/run.json (the stage's and the judge's seconds,
not a DVC output: they differ run to run). With
`conditioning_ratings` a triples-v2 model also plays every opponent (or those named in
`conditioning_opponents`, `conditioning_games` games each) told each of those ratings:
arena.json's `strength` holds the measured Elo of each with its 95% interval, the rank correlation
and whether the intervals separate (chesscore.play.strength); games.pgn and games.csv hold those
games too, after the matches' own, each with the rating it was told.
Stockfish comes from Debian's `stockfish` package; where it is missing the stage stops and says
how to install it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

import torch

from chesscore import failures
from chesscore.checkpoint import load_model
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings
from chesscore.cli.runner import run_stage
from chesscore.config import flat
from chesscore.fileio import RUN_RECORD, atomic_write_json, sha256_file
from chesscore.model import pick_device
from chesscore.play.adjudication import Judge
from chesscore.play.arena import (
    STOCKFISH,
    ArenaConfig,
    ArenaGame,
    Opponent,
    play_match,
    summarise,
)
from chesscore.play.engine import find_stockfish
from chesscore.play.opponents import OpponentSpec, StockfishSearch, build_opponents, check_names
from chesscore.play.report import console_text, write_outputs
from chesscore.play.strength import curve_text, strength_curve
from chesscore.runtime.progress import progress_bar


@dataclass(frozen=True)
class Settings:
    """params.yaml's `arena:` section; every key is also a flag (`--games 20`, `--stockfish-nodes 2000`)."""

    checkpoint: Path = Path("data/train/best.pt")  # the model under test
    out: Path = Path("data/arena")  # arena.json, results.csv, games.pgn, games.csv, report.md
    device: Literal["auto", "cpu", "cuda"] = "cpu"  # auto: cuda when present
    threads: int = 1  # torch CPU threads (Stockfish takes the other core)
    stockfish: StockfishSearch = StockfishSearch()  # how every Stockfish opponent searches
    opponents: tuple[OpponentSpec, ...] = (  # who the model plays, in order
        OpponentSpec("random", "random"),
        OpponentSpec("stockfish-skill0", "stockfish", skill=0),
        OpponentSpec("stockfish-elo1500", "stockfish", uci_elo=1500),
        OpponentSpec("selfplay-rl", "checkpoint", path=Path("data/selfplay/rl.pt")),
    )
    conditioning_ratings: tuple[int, ...] = (1000, 2000)  # triples-v2 models: also play every opponent told each rating
    conditioning_opponents: tuple[str, ...] = ("random",)  # the told matches' opponents (names); empty: every one
    conditioning_games: int | None = 16  # games per opponent and told rating; null: `games`
    match: ArenaConfig = flat(ArenaConfig)  # games per opponent, temperature, ply cap, seed

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not self.opponents:
            raise ValueError("opponents: the arena needs at least one opponent")
        check_names(self.opponents)
        if any(rating < 0 for rating in self.conditioning_ratings):
            raise ValueError(f"conditioning_ratings must be ratings >= 0, got {list(self.conditioning_ratings)}")
        unknown = sorted(set(self.conditioning_opponents) - {spec.name for spec in self.opponents})
        if unknown:
            raise ValueError(f"conditioning_opponents names no opponent: {unknown}")
        if self.conditioning_games is not None and self.conditioning_games < 1:
            raise ValueError(f"conditioning_games must be >= 1 or null, got {self.conditioning_games}")


def main(argv: list[str] | None = None) -> int:
    settings, _ = stage_settings(argv, "arena", Settings, __doc__)
    config = settings.match
    torch.set_num_threads(settings.threads)
    device = str(pick_device(settings.device))
    # Stockfish missing (StockfishMissing) or a checkpoint that is not ours (CheckpointError)
    # end the stage through run_stage: exit 78 with one line saying what to do.
    needs_stockfish = config.adjudication.enabled or any(spec.kind == STOCKFISH for spec in settings.opponents)
    stockfish = find_stockfish(settings.stockfish.path) if needs_stockfish else None
    hold_output(settings.out, "arena")
    model, _ = load_model(settings.checkpoint, device)
    told = sorted(set(settings.conditioning_ratings))
    if told and not model.config.conditioning:
        raise failures.Refused(f"arena.conditioning_ratings: {settings.checkpoint} reads no ratings (triples-v1)")
    opponents = build_opponents(settings.opponents, settings.stockfish, device)
    # The told matches: a subset of the opponents (the anchors) and of the games keeps their cost in check.
    told_opponents = [o for o in opponents if o.name in (settings.conditioning_opponents or {o.name})]
    told_config = replace(config, games=settings.conditioning_games or config.games)
    started = time.perf_counter()
    matches: list[tuple[Opponent, list[ArenaGame]]] = []
    told_played: list[tuple[Opponent, list[ArenaGame]]] = []
    with contextlib.ExitStack() as stack:
        judge = stack.enter_context(Judge(stockfish, config.adjudication)) if config.adjudication.enabled else None
        strength: list[tuple[int, dict]] = []
        total = config.games * len(opponents) + told_config.games * len(told_opponents) * len(told)
        with progress_bar(total=total, desc="arena", unit="game") as bar:
            for opponent in opponents:
                bar.set_postfix_str(opponent.name)
                games = play_match(model, opponent, config, stockfish, lambda _: bar.update(), judge)
                matches.append((opponent, games))
            for rating in told:  # the same matches, the model told its rating (chesscore.play.strength)
                told_matches = []
                for opponent in told_opponents:
                    bar.set_postfix_str(f"told {rating} vs {opponent.name}")
                    games = play_match(model, opponent, told_config, stockfish, lambda _: bar.update(), judge, rating)
                    told_matches.append((opponent, games))
                strength.append((rating, summarise(told_matches)))
                told_played += told_matches
    seconds = time.perf_counter() - started
    checkpoint = str(settings.checkpoint)
    summary = summarise(matches)
    summary["judge"] = {
        "rules": config.adjudication.describe(),
        "engine": judge.version if judge is not None else None,
        "positions": judge.positions if judge is not None else 0,
    }
    # Wall-clock facts apart from arena.json, whose bytes repeat for a seed: run.json, not a DVC output.
    judge_seconds = judge.seconds if judge is not None else 0.0
    timing = {"seconds": seconds, "judge_seconds": judge_seconds, "judge_share": judge_seconds / seconds}
    record = {
        "checkpoint": {"path": checkpoint, "sha256": sha256_file(settings.checkpoint)},
        "config": asdict(config),
        **summary,
        # keyed by name, so `dvc metrics show` lists every opponent's numbers
        "opponents": {row["name"]: row for row in summary["opponents"]},
        "strength": {**strength_curve(strength), "opponents": [o.name for o in told_opponents]} if strength else None,
    }
    write_outputs(settings.out, matches, summary, record, config, told_played)
    atomic_write_json(settings.out / RUN_RECORD, timing)
    print(console_text(summary, checkpoint, timing))
    if record["strength"]:
        print(curve_text(record["strength"]))
    print(f"outputs: {settings.out}/metrics.json, arena.json, results.csv, games.pgn, games.csv, report.md")
    print(f"beside them: {settings.out}/{RUN_RECORD} (the stage's and the judge's seconds)")
    return 0


if __name__ == "__main__":
    run_stage("arena", main)
