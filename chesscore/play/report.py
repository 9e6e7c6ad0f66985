"""The arena's reports: report.md, results.csv, games.csv and games.pgn, and the console table.

write_outputs(out, matches, summary, record, config)   # after chesscore.play.arena.summarise
print(console_text(summary, checkpoint, timing))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chesscore.fileio import atomic_write_json, atomic_write_text, csv_text, metrics_text
from chesscore.play.arena import ArenaConfig, ArenaGame, Opponent, game_rows, pgn_text

__all__ = ["METRICS", "RESULT_COLUMNS", "console_text", "headline", "report_markdown", "write_outputs"]

METRICS = "metrics.json"  # the DVC metric: the anchored rating and the score against the random mover

RESULT_COLUMNS = [  # results.csv: one row per opponent
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
]


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


def console_text(summary: dict[str, Any], checkpoint: str, timing: dict[str, float]) -> str:
    """The stage's closing table: one line per opponent, the anchored rating, the judge's share."""
    seconds = timing["seconds"]
    lines = [
        f"\narena: {checkpoint}: {summary['games']} games in {seconds:.1f} s "
        f"({summary['games'] / seconds:.2f} games/s)",
        f"{'opponent':<22}{'anchor':>7}{'W':>5}{'D':>5}{'L':>5}{'score':>7}  {'Elo diff [95%]':<22}"
        f"{'rules/adj/draw':>16}{'illegal':>9}",
    ]
    for row in summary["opponents"]:
        anchor = "-" if row["anchor_elo"] is None else f"{row['anchor_elo']:.0f}"
        rate = "-" if row["illegal_attempt_rate"] is None else f"{row['illegal_attempt_rate']:.1%}"
        lines.append(
            f"{row['name'][:21]:<22}{anchor:>7}{row['wins']:>5}{row['draws']:>5}{row['losses']:>5}"
            f"{row['score']:>7.3f}  {_elo_text(row):<22}{_decided_text(row['decided_by']):>16}{rate:>9}"
        )
    lines.append(f"rating anchored on Stockfish (CCRL 40/4): {_rating_text(summary['rating'])}")
    judge = summary["judge"]
    lines.append(
        f"judge: {judge['rules']}; {judge['positions']:,} positions in {timing['judge_seconds']:.1f} s"
        f" ({timing['judge_share']:.0%} of the stage's {seconds:.1f} s)"
    )
    return "\n".join(lines)


def write_outputs(
    out: Path,
    matches: list[tuple[Opponent, list[ArenaGame]]],
    summary: dict[str, Any],
    record: dict[str, Any],
    config: ArenaConfig,
    told: list[tuple[Opponent, list[ArenaGame]]] | None = None,
) -> None:
    """metrics.json (the DVC metric), arena.json (the record), games.pgn, games.csv, results.csv and
    report.md, each atomically. games.pgn and games.csv hold every game played: the matches, then
    the told matches (their `told` column and the model side's Conditioning tag set)."""
    checkpoint = record["checkpoint"]["path"]
    played = [*matches, *(told or [])]
    atomic_write_json(out / "arena.json", record)
    atomic_write_text(out / METRICS, metrics_text(headline(summary)))
    atomic_write_text(out / "games.pgn", pgn_text(played, checkpoint))
    game_table = game_rows(played)
    atomic_write_text(out / "games.csv", csv_text(game_table, list(game_table[0])))
    atomic_write_text(out / "results.csv", csv_text(summary["opponents"], RESULT_COLUMNS))
    atomic_write_text(out / "report.md", report_markdown(summary, checkpoint, config))
