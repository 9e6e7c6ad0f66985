"""The learning-curve driver: every experiment sets every value, the small budgets skimp on
self-play only, and the curve's figures come from the stages' reports."""

from pathlib import Path

from chesscore.pipeline import curve
from chesscore.pipeline.profile import profile_values
from chesscore.play.strength import strength_curve

PROJECT = Path(__file__).resolve().parents[2]


def test_each_budget_sets_the_whole_profile_and_only_the_largest_plays_its_self_play(capsys):
    values = profile_values("strength", PROJECT / "params.yaml")
    small, large = curve.overrides(values, 500, largest=False), curve.overrides(values, 2500, largest=True)
    assert set(values) <= set(small) and set(values) <= set(large)
    assert small["train.max_updates"] == 500 and large["train.max_updates"] == 2500
    assert small["selfplay.iterations"] == 1 and large["selfplay.iterations"] == values["selfplay.iterations"]
    assert small["validate.raw"] == large["validate.raw"] == "runs/strength/raw"
    curve.run("strength", [2000, 500], PROJECT / "unused.json", dry_run=True, params=PROJECT / "params.yaml")
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ ")]
    assert len(commands) == 2 and "-n strength-500" in commands[0] and "-n strength-2000" in commands[1]
    assert "-S train.max_updates=500" in commands[0] and "-S selfplay.iterations=1" in commands[0]
    assert "-S selfplay.iterations=1 " not in commands[1] + " "


def test_a_point_reads_the_verdicts_from_the_reports():
    versus = {"wins": 40, "draws": 4, "losses": 20, "score": 0.656, "elo": 112.0, "low": 30.0, "high": 200.0}
    facts = {
        "train": {"best_validation_nll": 1.7},
        "evaluate": {"free_running": {"top1": 0.21, "move_legal": 0.6}},
        "arena": {"opponents": {"sf": {"kind": "stockfish", "score": 0.0}, "rnd": {"kind": "random", **versus}}},
        "selfplay": {"vs_supervised": {**versus, "wins": 150, "decided_by": {"rules": 1}}},
    }
    point = curve.point(facts)
    assert point["top1"] == 0.21 and point["move_legal"] == 0.6 and point["best_validation_nll"] == 1.7
    assert point["vs_random"]["wins"] == 40 and point["vs_random"]["low"] == 30.0
    assert point["rl_vs_parent"]["wins"] == 150 and point["rl_vs_parent"]["decided_by"] == {"rules": 1}
    text = curve.row({"budget_updates": 500, "cpu_seconds": 10.0, "wall_seconds": 5.0, **point})
    assert "top-1 21.0%" in text and "vs random +40 =4 -20 score 0.656 Elo [+30, +200]" in text
    assert curve.point({})["vs_random"] is None and curve.point({})["rl_vs_parent"] is None
    assert curve.point({})["knob"] is None and "knob" not in curve.row(
        {"budget_updates": 500, "cpu_seconds": 10.0, "wall_seconds": 5.0, **point}
    )


def test_a_point_reports_the_strength_knob_of_a_conditioned_model():
    """The arena's strength curve (chesscore.play.strength) reaches the curve's JSON and its line."""

    def summary(elo: float) -> dict:
        return {
            "games": 64,
            "opponents": [{"name": "unconditioned", "games": 64, "elo": elo, "low": elo - 90, "high": elo + 90}],
        }

    knob = strength_curve([(2000, summary(40.0)), (1000, summary(-60.0)), (1500, summary(-70.0))])
    versus = {"wins": 1, "draws": 0, "losses": 0, "score": 1.0, "elo": None, "low": 1.0, "high": None}
    facts = {
        "evaluate": {"free_running": {"top1": 0.15, "move_legal": 0.8}},
        "arena": {"opponents": {"r": {"kind": "random", **versus}}, "strength": knob},
    }
    point = curve.point(facts)
    assert [p["told"] for p in point["knob"]["points"]] == [1000, 1500, 2000]
    text = curve.row({"budget_updates": 1600, "cpu_seconds": 1.0, "wall_seconds": 1.0, **point})
    knob = "\n".join(text.splitlines()[1:])
    assert "told  1000: -60 [-150, 30] over 64 games" in knob and "told  2000: 40 [-50, 130]" in knob
    assert "rises with the setting: no" in knob and "Spearman 0.50" in knob
    assert "intervals separate: no" in knob


def test_set_values_win_over_the_profile_and_keep_two_curves_apart(capsys):
    assert curve.main(["human", "--budgets", "150", "--set", "train.model=demo-board", "--dry-run"]) == 0
    command = capsys.readouterr().out.splitlines()[-1]
    assert "-n human-150-demo-board " in command and "-S train.model=demo-board" in command
    assert "-S train.model=demo-moves" not in command and "-S train.validation_every_steps=150" in command


def test_a_point_carries_the_three_top1s_on_real_games():
    overall = {
        who: {"top1": value, "top1_ci95": [value - 0.01, value + 0.01]}
        for who, value in (("model", 0.2), ("stockfish", 0.33), ("random", 0.06))
    }
    overall.update(positions=14000, model_minus_stockfish_top1={"value": -0.13, "ci95": [-0.15, -0.11]})
    facts = {"evaluate": {"free_running": {"top1": 0.2, "move_legal": 0.9}, "human": {"overall": overall}}}
    point = curve.point(facts)
    assert point["human"]["stockfish"] == {"top1": 0.33, "ci95": [0.32, 0.34]}
    assert point["human"]["model_minus_stockfish"]["value"] == -0.13 and curve.point({})["human"] is None
    text = curve.row({"budget_updates": 150, "cpu_seconds": 1.0, "wall_seconds": 1.0, "vs_random": None, **point})
    assert "real games top-1 model 20.0% [19.0%, 21.0%], stockfish 33.0% [32.0%, 34.0%], random 6.0%" in text
