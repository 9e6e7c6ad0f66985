"""Does strength follow the rating in a dataset? The results of its rated games by rating gap: the
higher-rated side's wins, draws and losses, the Elo difference they imply (95% interval), and the
score the Elo formula expects of the gap. It reads the train and validation splits only (the test
split is evaluate's).

    python -m chesscore.eval.ratings data/dataset
    python -m chesscore.eval.ratings data/dataset --band 200 --json ratings.json

Why: a rating-conditioned model (docs/conditioning.md) can learn to play stronger when told a
higher rating only from games that the higher-rated side wins more often. Where the implied Elo
difference is far below the rating gap, the ratings carry little about strength, and no model
trained on those games can make a strength knob of them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from statistics import fmean
from typing import Any

from chesscore.data import games
from chesscore.fileio import atomic_write_json
from chesscore.play.elo import elo_difference, expected_score

SPLITS = ("train", "validation")
POINTS = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}  # (white's, black's)


@dataclass(frozen=True)
class GapRow:
    gap: str  # the higher rating minus the lower: "0-99", ..., and the open last band, "400+"
    games: int
    wins: int  # of the higher-rated side (at equal ratings: white)
    draws: int
    losses: int
    score: float  # the higher-rated side's points per game
    elo: float | None  # the Elo difference the score implies (None: every game won, or lost)
    low: float | None  # its 95% interval (None: open at that end)
    high: float | None
    mean_gap: float  # the games' mean rating gap
    expected: float  # the score the Elo formula expects of that mean gap


@dataclass(frozen=True)
class GapTable:
    rows: list[GapRow]
    seen: int  # every game read
    unrated: int  # a rating missing (not counted in the rows)
    unfinished: int  # no result (not counted in the rows)


def gap_table(metas: Iterable[Mapping[str, Any]], band: int = 100, top: int = 400) -> GapTable:
    """The table over game metadata (white_elo, black_elo, result), in bands of `band` points up
    to `top` and one open band above."""
    if band < 1 or top < band:
        raise ValueError(f"band must be at least 1 and top at least band; got band {band}, top {top}")
    seen = unrated = unfinished = 0
    tallies: dict[int, list[tuple[int, float]]] = {}
    for meta in metas:
        seen += 1
        white, black = meta.get("white_elo"), meta.get("black_elo")
        if white is None or black is None:
            unrated += 1
            continue
        if meta.get("result") not in POINTS:
            unfinished += 1
            continue
        white_points, black_points = POINTS[meta["result"]]
        gap, points = (white - black, white_points) if white >= black else (black - white, black_points)
        tallies.setdefault(min(gap // band * band, top), []).append((gap, points))
    rows = []
    for start in sorted(tallies):
        tally = tallies[start]
        wins = sum(points == 1.0 for _, points in tally)
        draws = sum(points == 0.5 for _, points in tally)
        estimate = elo_difference(wins, draws, len(tally) - wins - draws).to_dict()  # infinities: None
        mean_gap = fmean(gap for gap, _ in tally)
        rows.append(
            GapRow(
                gap=f"{start}+" if start == top else f"{start}-{start + band - 1}",
                **{key: estimate[key] for key in ("games", "wins", "draws", "losses", "score", "elo", "low", "high")},
                mean_gap=mean_gap,
                expected=expected_score(mean_gap),
            )
        )
    return GapTable(rows, seen, unrated, unfinished)


def _signed(value: float | None, open_end: str) -> str:
    return open_end if value is None else f"{value:+.0f}"


def text(table: GapTable) -> str:
    """The one-screen table the CLI prints."""
    counted = sum(row.games for row in table.rows)
    lines = [
        f"{table.seen:,} games: {counted:,} rated with a result, {table.unrated:,} without both ratings, "
        f"{table.unfinished:,} without a result",
        f"{'rating gap':<11}{'games':>7}  {'W-D-L of the higher rated':<26}{'score':>6}  "
        f"{'implies Elo [95%]':<22}{'the Elo formula expects':>24}",
    ]
    for row in table.rows:
        implied = f"{_signed(row.elo, '-inf' if row.score == 0 else '+inf')} [{_signed(row.low, '-inf')}, "
        implied += f"{_signed(row.high, '+inf')}]"
        lines.append(
            f"{row.gap:<11}{row.games:>7,}  {f'{row.wins}-{row.draws}-{row.losses}':<26}{row.score:>6.3f}  "
            f"{implied:<22}{f'{row.expected:.3f} (mean gap {row.mean_gap:.0f})':>24}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chesscore.eval.ratings",
        description="Does strength follow the rating? Results of a dataset's rated games by rating gap "
        "(train and validation splits).",
    )
    parser.add_argument("dataset", help="a dataset folder (the convert stage's output)")
    parser.add_argument("--band", type=int, default=100, help="width of a rating-gap band (default 100)")
    parser.add_argument("--top", type=int, default=400, help="the open last band starts here (default 400)")
    parser.add_argument("--json", metavar="PATH", help="also write the table as JSON here")
    args = parser.parse_args(argv)
    metas = (meta for split in SPLITS for _, meta in games(args.dataset, split))
    table = gap_table(metas, args.band, args.top)
    print(text(table))
    if args.json:
        atomic_write_json(args.json, asdict(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
