"""The one-screen summary's conditioning lines (issue 16): top-1 told the true ratings vs told
"unknown" under evaluate, the measured Elo [95%] at each told rating under arena, and neither
for a v1 run. (tests/pipeline/test_repro.py checks them on a real pipeline run.)"""

from chesscore.pipeline.summary import lines, render_text
from chesscore.play.strength import strength_curve


def _arena_summary(elo, low, high) -> dict:
    return {
        "rating": None,
        "games": 16,
        "opponents": [{"name": "random", "games": 16, "elo": elo, "low": low, "high": high}],
    }


def _facts(conditioned: bool) -> dict:
    evaluation = {
        "free_running": {"top1": 0.2, "top3": 0.4, "move_legal": 0.9},
        "teacher_forced": {"nll": 1.5},
        "test_split": {"games_evaluated": 100},
    }
    arena = {"rating": {}, "illegal_attempt_rate": 0.1, "opponents": {}}
    if conditioned:
        evaluation["conditioning"] = {
            "positions": {"1000": 300, "2000": 200},
            "overall": {"told true": 0.1846, "told unknown": 0.1712, "told 1000": 0.15},
        }
        curve = strength_curve([(2000, _arena_summary(250.4, 60.2, None)), (1000, _arena_summary(None, None, -190.6))])
        arena["strength"] = {**curve, "opponents": ["random"]}
    return {"evaluate": evaluation, "arena": arena, "report": None, "arena_report": "data/arena/report.md"}


def test_a_conditioned_run_shows_true_vs_unknown_and_the_elo_at_each_told_rating():
    text = render_text(_facts(conditioned=True))
    assert "conditioning: top-1 told the true ratings 18.5%, told unknown 17.1% (500 rated moves)" in text
    assert (
        "  told 1000 -inf [-inf, -191], told 2000 +250 [+60, +inf] (Elo difference vs random, 16 games each);"
        " rises with the rating: yes"
    ) in text


def test_a_v1_run_has_neither_line():
    text = "\n".join(line for _, line in lines(_facts(conditioned=False)))
    assert "evaluate" in render_text(_facts(conditioned=False))
    assert "conditioning:" not in text and "told 1000" not in text
