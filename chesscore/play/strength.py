"""Does the measured strength follow the knob? The arena's results of a triples-v2 model told
several ratings (chesscore.play.arena.play_match(rating=...)), reduced to one measured Elo per
told rating, with its 95% interval, the rank correlation between told and measured, and whether
consecutive intervals separate.

    curve = strength_curve([(1000, summarise(matches_1000)), (1800, summarise(matches_1800)), ...])
    curve["spearman"], curve["rises"], curve["separated"], curve["points"][0]["elo"]

The measured Elo is the rating anchored on the Stockfish levels where the matches had one (the
CCRL 40/4 scale); without Stockfish opponents it is the Elo difference against the first
opponent, and `scale` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks; ties share the average of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's over average ranks); None when undefined."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values for {len(ys)} y values")
    if len(xs) < 2:
        return None
    rx, ry = average_ranks(xs), average_ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx and vy else None


def _measured(summary: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The told rating's Elo and interval, the games they rest on, and their scale: the rating
    anchored on the Stockfish opponents, else the Elo difference against the first opponent."""
    opponents = summary["opponents"]
    if summary.get("rating"):
        rating = summary["rating"]
        games = sum(o["games"] for o in opponents if o["anchor_elo"] is not None)
        measured = {"elo": rating["rating"], "low": rating["low"], "high": rating["high"], "games": games}
        return measured, "anchored on Stockfish"
    first = opponents[0]
    measured = {"elo": first["elo"], "low": first["low"], "high": first["high"], "games": first["games"]}
    return measured, f"Elo difference vs {first['name']}"


def strength_curve(points: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """One row per told rating (sorted), Spearman over the Elos, and whether the Elo rises and the
    intervals separate from each told rating to the next. An Elo or interval end of None is
    infinite (every game won or lost) and counts as such in the ranks and comparisons."""
    rows, scales = [], set()
    for told, summary in sorted(points, key=lambda point: point[0]):
        measured, scale = _measured(summary)
        scales.add(scale)
        rows.append({"told": told, **measured})
    if len(scales) > 1:
        raise ValueError(f"the told ratings were measured on different scales: {sorted(scales)}")

    elo = [_signed_elo(row) for row in rows]
    low = [float("-inf") if row["low"] is None else row["low"] for row in rows]
    high = [float("inf") if row["high"] is None else row["high"] for row in rows]
    pairs = range(len(rows) - 1)
    return {
        "scale": scales.pop() if scales else None,
        "points": rows,
        "spearman": spearman([row["told"] for row in rows], elo),
        "rises": all(elo[i + 1] > elo[i] for i in pairs),
        "separated": all(low[i + 1] > high[i] for i in pairs),
    }


def _signed_elo(row: dict[str, Any]) -> float:
    """The Elo, or the infinity its open interval end shows (every game won: high is None)."""
    if row["elo"] is not None:
        return float(row["elo"])
    return float("inf") if row["high"] is None else float("-inf")


def curve_text(curve: dict[str, Any]) -> str:
    """The console lines: told rating -> measured Elo [95%], then the verdict."""

    def number(x: float | None, sign: str) -> str:
        return f"{sign}inf" if x is None else f"{x:.0f}"

    lines = [f"strength by told rating ({curve['scale']}):"]
    for row in curve["points"]:
        lines.append(
            f"  told {row['told']:>5}: {number(row['elo'], '+')} [{number(row['low'], '-')}, "
            f"{number(row['high'], '+')}] over {row['games']} games"
        )
    rho = "-" if curve["spearman"] is None else f"{curve['spearman']:.2f}"
    lines.append(
        f"  Spearman {rho}; rises with the setting: {'yes' if curve['rises'] else 'no'}; "
        f"intervals separate: {'yes' if curve['separated'] else 'no'}"
    )
    return "\n".join(lines)
