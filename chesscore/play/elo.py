"""Elo estimates from game results: a difference with a 95% interval per opponent, and one
rating anchored on opponents of known strength (the Stockfish levels of the arena).

    >>> est = elo_difference(wins=60, draws=20, losses=20)
    >>> round(est.elo, 1), round(est.low, 1), round(est.high, 1)
    (147.2, 86.2, 218.3)

Difference (as cutechess-cli and fastchess print it): score s = (W + D/2) / N, Elo = -400
log10(1/s - 1); the interval maps s +- 1.96 standard errors through the same curve, with the
per-game variance of a trinomial outcome (win 1, draw 1/2, loss 0). When every game has the
same result that variance is zero and says nothing, so the interval falls back to the Wilson
score interval (binomial, draws as half points), which stays finite at 0% and 100%; the point
estimate is then -inf or +inf (written as null in JSON).

Anchored rating (as Ordo does with fixed anchors): the maximum-likelihood rating R of the
player given its results against opponents of fixed ratings A_i, with expected score
1 / (1 + 10^((A_i - R) / 400)) and draws as half a win and half a loss; the 95% interval is
where the log-likelihood lies within 1.92 (chi-square, 1 degree of freedom, / 2) of its
maximum. A player that lost (or won) every game has no finite maximum: the estimate is
-inf (+inf) and the interval is one-sided but finite.

Stockfish anchors. Stockfish 15.1 (Debian's package) turns UCI_Elo into a fractional Skill
Level, level = ((UCI_Elo - 1346.6) / 143.4) ^ (1 / 0.806), clamped to 0..20, a fit made by
its developers of Ordo ratings from games at 60s+0.6s, 1 thread, anchored on the CCRL 40/4
list (goldfish 1.13 = 2000; Stockfish PR #2225). So a level's anchor is that curve's value:
UCI_Elo N stands for N, and Skill Level L for 1346.6 + 143.4 L^0.806 (L = 0: 1347, 1: 1490,
3: 1694, 5: 1871, 10: 2264). These are CCRL (engine-list) Elo, not Lichess or FIDE ratings. The
handicap picks its move from a MultiPV 4 search to depth 1 + level; chesscore.play.engine runs that
search and that pick itself, with a seeded generator, so arena games are reproducible (the
arena records the depth Stockfish reported).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

Z95 = 1.959963984540054  # two-sided 95% normal quantile
CHI2_95_HALF = 1.9207294103470994  # half the 95% quantile of chi-square with 1 degree of freedom

SF_ELO_OFFSET, SF_ELO_SCALE, SF_ELO_POWER = 1346.6, 143.4, 0.806  # Stockfish 15.1 search.cpp
SF_MIN_UCI_ELO, SF_MAX_UCI_ELO = 1350, 2850


def elo_from_score(score: float) -> float:
    """The Elo difference at which this expected score is reached (+-inf at 1 and 0)."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return 400.0 * math.log10(score / (1.0 - score))


def expected_score(difference: float) -> float:
    """Expected score of a player `difference` Elo above its opponent."""
    return 1.0 / (1.0 + 10.0 ** (-difference / 400.0))


def stockfish_skill_elo(level: float) -> float:
    """The Elo (CCRL 40/4) Stockfish 15.1 gives a Skill Level: the inverse of its UCI_Elo map."""
    if not 0 <= level <= 20:
        raise ValueError(f"Stockfish Skill Level {level} is outside 0..20")
    return SF_ELO_OFFSET + SF_ELO_SCALE * level**SF_ELO_POWER


def stockfish_uci_elo_level(uci_elo: float) -> float:
    """The fractional Skill Level Stockfish 15.1 plays a UCI_Elo at (search.cpp's Skill)."""
    return min(max(((uci_elo - SF_ELO_OFFSET) / SF_ELO_SCALE) ** (1 / SF_ELO_POWER), 0.0), 20.0)


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class EloEstimate:
    """Elo difference of a player against one opponent, with its 95% interval."""

    wins: int
    draws: int
    losses: int
    score: float  # points per game, 0..1
    elo: float  # -inf / +inf when every game was lost / won
    low: float  # 95% interval (may be -inf / +inf at one end)
    high: float
    error: float  # cutechess-style +-: half the interval's width (inf when open)
    los: float  # likelihood of superiority, from wins and losses only (as cutechess)
    interval: str  # "trinomial-normal" or "wilson" (every game had one result)

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def to_dict(self) -> dict:
        """JSON-able: infinities become null."""
        out = asdict(self)
        for key in ("elo", "low", "high", "error"):
            out[key] = _finite_or_none(out[key])
        out["games"] = self.games
        out["draw_ratio"] = self.draws / self.games
        return out


def _wilson(score: float, n: int, z: float) -> tuple[float, float]:
    center = (score + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(score * (1 - score) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def elo_difference(wins: int, draws: int, losses: int, z: float = Z95) -> EloEstimate:
    """Elo difference from a player's wins, draws and losses against one opponent."""
    if min(wins, draws, losses) < 0:
        raise ValueError(f"negative game counts: W={wins} D={draws} L={losses}")
    n = wins + draws + losses
    if n == 0:
        raise ValueError("no games: an Elo difference needs at least one game")
    score = (wins + 0.5 * draws) / n
    w, d, l = wins / n, draws / n, losses / n
    variance = w * (1 - score) ** 2 + d * (0.5 - score) ** 2 + l * score**2
    if variance > 0:
        spread = z * math.sqrt(variance / n)
        score_low, score_high, interval = score - spread, score + spread, "trinomial-normal"
    else:
        (score_low, score_high), interval = _wilson(score, n, z), "wilson"
    low, high = elo_from_score(score_low), elo_from_score(score_high)
    los = 0.5 if wins + losses == 0 else 0.5 * (1 + math.erf((wins - losses) / math.sqrt(2 * (wins + losses))))
    return EloEstimate(wins, draws, losses, score, elo_from_score(score), low, high, (high - low) / 2, los, interval)


@dataclass(frozen=True)
class AnchoredResult:
    """A player's results against one opponent whose rating is fixed (an anchor)."""

    anchor: float
    wins: int
    draws: int
    losses: int


@dataclass(frozen=True)
class Rating:
    """A rating on the anchors' scale, with its 95% likelihood-ratio interval."""

    rating: float  # -inf / +inf when every game was lost / won
    low: float
    high: float
    games: int
    score: float
    method: str = "maximum likelihood with fixed anchors, 95% likelihood-ratio interval"

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("rating", "low", "high"):
            out[key] = _finite_or_none(out[key])
        return out


def _log_likelihood(rating: float, results: Sequence[AnchoredResult]) -> float:
    total = 0.0
    for r in results:
        # log E and log(1 - E) computed stably from the difference
        x = (r.anchor - rating) * math.log(10) / 400.0  # E = 1 / (1 + e^x)
        log_e = -_softplus(x)
        log_not_e = -_softplus(-x)
        total += (r.wins + 0.5 * r.draws) * log_e + (r.losses + 0.5 * r.draws) * log_not_e
    return total


def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def _bisect(f, low: float, high: float, iterations: int = 80) -> float:
    """The root of a decreasing f between low and high (f(low) > 0 > f(high))."""
    for _ in range(iterations):
        mid = (low + high) / 2
        if f(mid) > 0:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def anchored_rating(results: Sequence[AnchoredResult]) -> Rating:
    """Maximum-likelihood rating of a player from its results against fixed anchors."""
    results = [r for r in results if r.wins + r.draws + r.losses > 0]
    if not results:
        raise ValueError("no games against an anchored opponent")
    games = sum(r.wins + r.draws + r.losses for r in results)
    points = sum(r.wins + 0.5 * r.draws for r in results)
    span_low = min(r.anchor for r in results) - 4000.0
    span_high = max(r.anchor for r in results) + 4000.0

    def gradient(rating: float) -> float:  # d logL / dR, up to a positive factor; decreasing
        return points - sum((r.wins + r.draws + r.losses) * expected_score(rating - r.anchor) for r in results)

    if points == 0:
        best, best_ll = -math.inf, 0.0  # the likelihood rises to 1 as R -> -inf
    elif points == games:
        best, best_ll = math.inf, 0.0
    else:
        best = _bisect(gradient, span_low, span_high)
        best_ll = _log_likelihood(best, results)

    def inside(rating: float) -> float:  # > 0 inside the interval
        return _log_likelihood(rating, results) - best_ll + CHI2_95_HALF

    low = (
        -math.inf
        if best == -math.inf
        else _bisect(lambda r: -inside(r), span_low, best if math.isfinite(best) else span_high)
    )
    high = math.inf if best == math.inf else _bisect(inside, best if math.isfinite(best) else span_low, span_high)
    return Rating(best, low, high, games, points / games)
