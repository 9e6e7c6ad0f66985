"""Stage `arena`: a checkpoint against Stockfish levels, a random mover and other checkpoints.

    python -m stages.arena                                    # every option from params.yaml
    python -m stages.arena --checkpoint data/train/best.pt --out data/arena --games 20

Per opponent: W/D/L, score, Elo difference with its 95% interval, the share of games decided by
the rules, by adjudication and drawn, the raw model's illegal attempts; overall: a rating
anchored on the Stockfish levels (CCRL 40/4 scale, see chesscore/play/elo.py). A Stockfish
judge adjudicates the games (`arena.adjudication`, chesscore/play/adjudication.py). Writes
OUT/metrics.json (DVC metric: the rating and the score against the random mover), OUT/arena.json
(everything), OUT/results.csv (a row per opponent), OUT/games.pgn, OUT/games.csv
(a row per game), OUT/report.md and OUT/timing.json (the stage's and the judge's seconds).
Stockfish comes from Debian's `stockfish` package; where it is missing the stage stops and says
how to install it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from chesscore.checkpoint import load_model
from chesscore.cli.outlock import hold_output
from chesscore.cli.params import stage_settings
from chesscore.cli.runner import run_stage
from chesscore.config import flat
from chesscore.fileio import atomic_write_json, atomic_write_text, csv_text, metrics_text, sha256_file
from chesscore.model import pick_device
from chesscore.play.adjudication import Judge
from chesscore.play.arena import (
    STOCKFISH,
    ArenaConfig,
    ArenaGame,
    Opponent,
    game_rows,
    pgn_text,
    play_match,
    summarise,
)
from chesscore.play.engine import find_stockfish
from chesscore.play.opponents import OpponentSpec, StockfishSearch, build_opponents, check_names
from chesscore.progress import progress_bar

TIMING = "timing.json"  # seconds of the stage and of its judge: they differ run to run
METRICS = "metrics.json"  # the DVC metric: the anchored rating and the score against the random mover


@dataclass(frozen=True)
class Settings:
    """params.yaml's `arena:` section; every key is also a flag (`--games 20`, `--stockfish-nodes 2000`)."""

    checkpoint: Path = Path("data/train/best.pt")  # the model under test
    out: Path = Path("data/arena")  # arena.json, results.csv, games.pgn, games.csv, report.md
    device: Literal["auto", "cpu", "cuda"] = "cpu"  # auto: cuda when present
    threads: int = 1  # torch CPU threads (Stockfish takes the other core)
    stockfish: StockfishSearch = StockfishSearch()  # how every Stockfish opponent searches
    opponents: tuple[OpponentSpec, ...] = (OpponentSpec("random", "random"),)  # who the model plays, in order
    match: ArenaConfig = flat(ArenaConfig)  # games per opponent, temperature, ply cap, seed

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not self.opponents:
            raise ValueError("opponents: the arena needs at least one opponent")
        check_names(self.opponents)


def _elo_text(row: dict[str, Any], keys=("elo", "low", "high")) -> str:
    value, low, high = (row[k] for k in keys)

    def fmt(x, inf):
        return inf if x is None else f"{x:+.0f}"

    centre = fmt(value, "-inf" if row.get("score", 0.5) == 0 else "+inf")
    return f"{centre} [{fmt(low, '-inf')}, {fmt(high, '+inf')}]"


def _rating_text(rating: dict[str, Any] | None) -> str:
    if rating is None:
        return "no Stockfish opponent: no anchored rating"
    if rating["rating"] is None:
        bound = "upper" if rating["score"] == 0 else "lower"
        value = rating["high"] if rating["score"] == 0 else rating["low"]
        return (
            f"{'<' if bound == 'upper' else '>'} {value:.0f} (95% {bound} bound; every anchored game "
            f"{'lost' if bound == 'upper' else 'won'})"
        )
    return f"{rating['rating']:.0f} [{rating['low']:.0f}, {rating['high']:.0f}] (95%)"


def _decided_text(counts: dict[str, int]) -> str:
    """The shares of games decided by the rules, by adjudication and drawn, as "25/50/25%"."""
    games = max(1, sum(counts.values()))
    return "/".join(f"{100 * counts[how] / games:.0f}" for how in ("rules", "adjudication", "draw")) + "%"


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """metrics.json: what people compare across experiments (arena.json holds the rest)."""
    metrics = {"rating": (summary["rating"] or {}).get("rating")}
    versus_random = [row["score"] for row in summary["opponents"] if row["kind"] == "random"]
    if versus_random:
        metrics["vs_random"] = versus_random[0]
    return metrics


def report_markdown(summary: dict[str, Any], checkpoint: str, config: ArenaConfig) -> str:
    lines = [
        f"# Arena: {checkpoint}",
        "",
        f"{summary['games']} games, {config.games} per opponent in pairs (each opening once with "
        f"each colour), model temperature {config.temperature:g}, ply cap {config.max_plies}, seed {config.seed}.",
        f"Adjudication: {config.adjudication.describe()} ({summary['judge']['positions']:,} positions judged).",
        "",
        f"**Rating anchored on the Stockfish levels** (CCRL 40/4 scale): {_rating_text(summary['rating'])}",
        "",
        "| opponent | anchor Elo | games | W | D | L | score | Elo difference [95%] | LOS "
        "| decided by rules / adjudication / drawn | illegal attempts |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary["opponents"]:
        anchor = "-" if row["anchor_elo"] is None else f"{row['anchor_elo']:.0f}"
        rate = (
            "-"
            if row["illegal_attempt_rate"] is None
            else f"{row['illegal_attempts']} ({row['illegal_attempt_rate']:.1%})"
        )
        lines.append(
            f"| {row['name']}: {row['description']} | {anchor} | {row['games']} | {row['wins']} | "
            f"{row['draws']} | {row['losses']} | {row['score']:.3f} | {_elo_text(row)} | "
            f"{row['los']:.2f} | {_decided_text(row['decided_by'])} | {rate} |"
        )
    lines += [
        "",
        "Elo differences are the model's, from its score (W + D/2) / N; the interval is the "
        "trinomial normal approximation of cutechess-cli / fastchess (Wilson where every game had "
        "one result). Illegal attempts: the model's moves whose own unmasked choice was illegal "
        "(the legal mask played a legal one). Stockfish anchors: UCI_Elo N stands for N; Skill "
        "Level L for 1346.6 + 143.4 L^0.806 (Stockfish 15.1's calibration at 60s+0.6s, anchored "
        "on CCRL 40/4). Decided by the rules: checkmate; by adjudication: a win the judge gave (its "
        "resign rule, or its score at the ply cap); drawn: by the rules or by the judge. Games: games.pgn "
        "(Termination, AdjudicationRule and JudgeScore tags).",
        "",
    ]
    return "\n".join(lines)


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
    opponents = build_opponents(settings.opponents, settings.stockfish, device)
    started = time.perf_counter()
    matches: list[tuple[Opponent, list[ArenaGame]]] = []
    with contextlib.ExitStack() as stack:
        judge = stack.enter_context(Judge(stockfish, config.adjudication)) if config.adjudication.enabled else None
        with progress_bar(total=config.games * len(opponents), desc="arena", unit="game") as bar:
            for opponent in opponents:
                bar.set_postfix_str(opponent.name)
                games = play_match(model, opponent, config, stockfish, lambda _: bar.update(), judge)
                matches.append((opponent, games))
    seconds = time.perf_counter() - started
    checkpoint = str(settings.checkpoint)
    summary = summarise(matches)
    summary["judge"] = {
        "rules": config.adjudication.describe(),
        "engine": judge.version if judge is not None else None,
        "positions": judge.positions if judge is not None else 0,
    }
    # Wall-clock facts apart from arena.json, whose bytes repeat for a seed.
    judge_seconds = judge.seconds if judge is not None else 0.0
    timing = {"seconds": seconds, "judge_seconds": judge_seconds, "judge_share": judge_seconds / seconds}
    record = {
        "checkpoint": {"path": checkpoint, "sha256": sha256_file(settings.checkpoint)},
        "config": asdict(config),
        **summary,
        # keyed by name, so `dvc metrics show` lists every opponent's numbers
        "opponents": {row["name"]: row for row in summary["opponents"]},
    }
    out = settings.out
    atomic_write_json(out / "arena.json", record)
    atomic_write_text(out / METRICS, metrics_text(headline(summary)))
    atomic_write_text(out / "games.pgn", pgn_text(matches, checkpoint))
    game_table = game_rows(matches)
    atomic_write_text(out / "games.csv", csv_text(game_table, list(game_table[0])))
    atomic_write_text(
        out / "results.csv",
        csv_text(
            summary["opponents"],
            [
                "name",
                "kind",
                "anchor_elo",
                "games",
                "wins",
                "draws",
                "losses",
                "score",
                "elo",
                "low",
                "high",
                "los",
                "draw_ratio",
                "mean_plies",
                "illegal_attempts",
                "model_moves",
                "illegal_attempt_rate",
            ],
        ),
    )
    atomic_write_text(out / "report.md", report_markdown(summary, checkpoint, config))
    atomic_write_json(out / TIMING, timing)

    print(
        f"\narena: {checkpoint}: {summary['games']} games in {seconds:.1f} s ({summary['games'] / seconds:.2f} games/s)"
    )
    print(
        f"{'opponent':<22}{'anchor':>7}{'W':>5}{'D':>5}{'L':>5}{'score':>7}  {'Elo diff [95%]':<22}"
        f"{'rules/adj/draw':>16}{'illegal':>9}"
    )
    for row in summary["opponents"]:
        anchor = "-" if row["anchor_elo"] is None else f"{row['anchor_elo']:.0f}"
        rate = "-" if row["illegal_attempt_rate"] is None else f"{row['illegal_attempt_rate']:.1%}"
        print(
            f"{row['name'][:21]:<22}{anchor:>7}{row['wins']:>5}{row['draws']:>5}{row['losses']:>5}"
            f"{row['score']:>7.3f}  {_elo_text(row):<22}{_decided_text(row['decided_by']):>16}{rate:>9}"
        )
    print(f"rating anchored on Stockfish (CCRL 40/4): {_rating_text(summary['rating'])}")
    judge = summary["judge"]
    print(
        f"judge: {judge['rules']}; {judge['positions']:,} positions in {judge_seconds:.1f} s"
        f" ({timing['judge_share']:.0%} of the stage's {seconds:.1f} s)"
    )
    print(f"outputs: {out}/metrics.json, arena.json, results.csv, games.pgn, games.csv, report.md, {TIMING}")
    return 0


if __name__ == "__main__":
    run_stage("arena", main)
