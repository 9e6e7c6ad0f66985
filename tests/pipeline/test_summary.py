"""The one-screen summary's conditioning lines (issue 16): top-1 told the true ratings vs told
"unknown" under evaluate, the measured Elo [95%] at each told rating under arena, and neither
for a v1 run; the times line from the stages' run.json. (tests/pipeline/test_repro.py checks
them on a real pipeline run.)"""

import json

from chesscore.pipeline.summary import collect, lines, render_text
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


def test_the_times_line_reads_each_stages_run_record_and_is_absent_without_one(tmp_path):
    records = {
        "train": {"wall_seconds": 100.4, "throughput": {"useful_tokens_per_second": 17795.9}},
        "selfplay": {
            "wall_seconds": 28.0,
            "moves_per_second": 913.6,
            "execution": {"workers": 2},
            "judge_share_of_play": 0.3127,
        },
        "arena": {"seconds": 15.35, "judge_seconds": 1.85, "judge_share": 0.1208},
    }
    for stage, record in records.items():
        (tmp_path / "data" / stage).mkdir(parents=True)
        (tmp_path / "data" / stage / "run.json").write_text(json.dumps(record))
    facts = collect(tmp_path)  # no params.yaml: each stage's default folder
    assert dict(lines(facts))["times"] == (
        "train 100 s (17,796 useful tokens/s), selfplay 28 s (914 moves/s over 2 workers; judge 31% of play), "
        "arena 15 s (judge 12%) on this machine"
    )
    (tmp_path / "data" / "train" / "run.json").unlink()
    assert dict(lines(collect(tmp_path)))["times"].startswith("selfplay 28 s")
    for stage in ("selfplay", "arena"):
        (tmp_path / "data" / stage / "run.json").unlink()
    assert "times" not in dict(lines(collect(tmp_path)))  # a clone without a run: no line
