"""Elo differences with 95% intervals, and ratings anchored on opponents of known strength."""

import math

import numpy as np
import pytest

from chesscore.play.elo import (
    AnchoredResult,
    anchored_rating,
    elo_difference,
    elo_from_score,
    expected_score,
    stockfish_skill_elo,
)


def test_even_results_are_zero_and_mirrored_results_mirror():
    even = elo_difference(7, 6, 7)
    assert even.elo == 0 and even.los == 0.5 and even.low == pytest.approx(-even.high)
    a, b = elo_difference(30, 10, 12), elo_difference(12, 10, 30)
    assert a.elo == pytest.approx(-b.elo) and a.low == pytest.approx(-b.high)
    assert a.low < a.elo < a.high and a.los > 0.99 and b.los < 0.01
    assert a.score == pytest.approx(35 / 52) and a.interval == "trinomial-normal"


def test_score_and_elo_curves_are_inverse():
    for diff in (-700.0, -120.5, 0.0, 33.0, 400.0):
        assert elo_from_score(expected_score(diff)) == pytest.approx(diff)
    assert elo_from_score(0.75) == pytest.approx(190.848, abs=1e-3)  # 400 log10 3


def test_more_games_narrow_the_interval():
    small, large = elo_difference(6, 2, 2), elo_difference(60, 20, 20)
    assert small.elo == pytest.approx(large.elo)
    assert large.error < small.error / 3  # ~ 1 / sqrt(10)


def test_all_losses_give_a_finite_one_sided_bound_and_json_nulls():
    est = elo_difference(0, 0, 20)
    assert est.elo == -math.inf and est.low == -math.inf and est.interval == "wilson"
    assert -400 < est.high < -200  # Wilson: 3.84 / 23.84 points per game
    record = est.to_dict()
    assert record["elo"] is None and record["low"] is None and record["high"] == pytest.approx(est.high)
    assert record["games"] == 20 and record["draw_ratio"] == 0
    all_draws = elo_difference(0, 10, 0)
    assert all_draws.elo == 0 and all_draws.low < -100 and all_draws.high > 100


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="no games"):
        elo_difference(0, 0, 0)
    with pytest.raises(ValueError, match="negative"):
        elo_difference(-1, 2, 3)


@pytest.mark.parametrize("p_win,p_draw", [(0.45, 0.30), (0.20, 0.10), (0.60, 0.35)])
def test_interval_covers_the_true_difference_95_percent_of_the_time(p_win, p_draw):
    rng = np.random.default_rng(11)
    true_elo = elo_from_score(p_win + p_draw / 2)
    matches = rng.multinomial(200, [p_win, p_draw, 1 - p_win - p_draw], size=2000)
    covered = [elo_difference(*map(int, m)) for m in matches]
    rate = np.mean([e.low <= true_elo <= e.high for e in covered])
    assert 0.93 <= rate <= 0.97, rate


def test_one_anchor_rating_is_anchor_plus_difference():
    rating = anchored_rating([AnchoredResult(1500, 60, 20, 20)])
    assert rating.rating == pytest.approx(1500 + elo_difference(60, 20, 20).elo, abs=0.01)
    assert rating.low < rating.rating < rating.high and rating.games == 100


def test_symmetric_results_around_two_anchors_meet_in_the_middle():
    rating = anchored_rating([AnchoredResult(1400, 14, 4, 2), AnchoredResult(1800, 2, 4, 14)])
    assert rating.rating == pytest.approx(1600, abs=0.01)
    assert rating.high - 1600 == pytest.approx(1600 - rating.low, abs=0.01)


def test_a_player_that_lost_everything_gets_an_upper_bound_below_the_anchors():
    rating = anchored_rating([AnchoredResult(1350, 0, 0, 10), AnchoredResult(1694, 0, 0, 10)])
    assert rating.rating == -math.inf and rating.low == -math.inf
    assert 700 < rating.high < 1350
    assert rating.to_dict()["rating"] is None
    assert anchored_rating([AnchoredResult(1350, 10, 0, 0)]).rating == math.inf


def test_anchored_interval_covers_the_true_rating_about_95_percent():
    rng = np.random.default_rng(5)
    true, anchors = 1600.0, (1347.0, 1694.0, 1871.0)
    hits = 0
    for _ in range(400):
        results = []
        for anchor in anchors:
            p = expected_score(true - anchor)
            p_draw = 0.2 * min(p, 1 - p) * 2
            w, d, l = rng.multinomial(40, [p - p_draw / 2, p_draw, 1 - p - p_draw / 2])
            results.append(AnchoredResult(anchor, int(w), int(d), int(l)))
        estimate = anchored_rating(results)
        hits += estimate.low <= true <= estimate.high
    assert 0.92 <= hits / 400 <= 0.99  # draws as half points: slightly conservative


def test_stockfish_skill_levels_invert_its_uci_elo_map():
    assert stockfish_skill_elo(0) == pytest.approx(1346.6)
    for elo in (1350, 1800, 2400):
        level = ((elo - 1346.6) / 143.4) ** (1 / 0.806)  # Stockfish 15.1, search.cpp
        assert stockfish_skill_elo(level) == pytest.approx(elo)
    with pytest.raises(ValueError, match="Skill Level"):
        stockfish_skill_elo(21)
