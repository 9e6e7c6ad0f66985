"""The strength curve (chesscore.play.strength) and the arena's told rating: Spearman over
average ranks, the rise and separation verdicts, the prefix each arena game's player reads, and
that a player's prefix changes the model's move."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from dataclasses import replace

import chess
import pytest
import torch

from chesscore import checkpoint, failures
from chesscore.model import CONFIGS, GPT
from chesscore.play import engines
from chesscore.play.arena import ArenaConfig, Opponent, play_match
from chesscore.play.moves import ModelPlayer
from chesscore.play.opponents import OpponentSpec
from chesscore.play.strength import average_ranks, curve_text, spearman, strength_curve
from chesscore.tokens import (
    BOS,
    RATING_UNKNOWN,
    TIME_CONTROL_UNKNOWN,
    UNKNOWN_PREFIX,
    conditioning_prefix,
    rating_token,
)
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.trainer import train
from tests.inprocess import run_module
from tests.train.test_conditioning import CONFIG, HIGH, LOW, synthetic


def test_ranks_and_spearman():
    assert average_ranks([30, 10, 20, 10]) == [4.0, 1.5, 3.0, 1.5]
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [5, 1, 0]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1], [1]) is None and spearman([1, 2], [3, 3]) is None
    with pytest.raises(ValueError, match="3 x values for 2"):
        spearman([1, 2, 3], [1, 2])


def _summary(elo, low, high, anchored=True):
    rating = {"rating": elo, "low": low, "high": high} if anchored else None
    opponents = [
        {"name": "random", "anchor_elo": None, "games": 8, "elo": elo, "low": low, "high": high},
        {"name": "sf-skill0", "anchor_elo": 1320.0, "games": 6, "elo": None, "low": None, "high": None},
    ]
    return {"rating": rating, "games": 14, "opponents": opponents}


def test_the_curve_says_whether_strength_rises_and_the_intervals_separate():
    curve = strength_curve([(1800, _summary(1500, 1400, 1600)), (1000, _summary(900, 800, 1000))])
    assert [p["told"] for p in curve["points"]] == [1000, 1800]  # sorted by the told rating
    assert curve["rises"] and curve["separated"] and curve["spearman"] == pytest.approx(1.0)
    assert curve["scale"] == "anchored on Stockfish"
    assert [p["games"] for p in curve["points"]] == [6, 6]  # the anchors' games, not every told game
    overlapping = strength_curve([(1000, _summary(900, 700, 1300)), (1800, _summary(1000, 800, 1200))])
    assert overlapping["rises"] and not overlapping["separated"]
    falling = strength_curve(
        [(1000, _summary(900, 800, 1000)), (1400, _summary(None, 1200, None)), (1800, _summary(700, 600, 800))]
    )
    assert not falling["rises"] and falling["spearman"] == pytest.approx(-0.5)  # +inf ranks highest
    assert "told  1400: +inf [1200, +inf]" in curve_text(falling)
    unanchored = strength_curve([(1000, _summary(10, -50, 60, anchored=False))])
    assert unanchored["scale"] == "Elo difference vs random" and unanchored["spearman"] is None
    assert unanchored["points"][0]["games"] == 8  # the first opponent's games: its Elo's
    with pytest.raises(ValueError, match="different scales"):
        strength_curve([(1000, _summary(1, 0, 2)), (1400, _summary(1, 0, 2, anchored=False))])


@pytest.fixture(scope="module")
def conditioned(tmp_path_factory) -> GPT:
    output = tmp_path_factory.mktemp("arena-conditioned")
    train(CONFIG, TrainData(synthetic(32), synthetic(4), fingerprint="synthetic"), output, setup("cpu"))
    return checkpoint.load_model(output / "best.pt")[0]


def test_the_arena_tells_the_model_its_rating(monkeypatch):
    # Which prefix each game's model player reads (test_a_player_reads_each_rows_prefix shows a
    # prefix changes the moves): its own rating on its colour's side, the opponent's unknown.
    made: list[list[list[int]]] = []

    class Recording(engines.ModelPlayer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append([list(p) for p in self.prefixes])

    monkeypatch.setattr(engines, "ModelPlayer", Recording)  # the ModelTable makes every player
    torch.manual_seed(0)
    model = GPT(replace(CONFIGS["tiny"], conditioning=True)).eval()
    config = ArenaConfig(games=4, max_plies=12, adjudication=replace(ArenaConfig().adjudication, enabled=False))
    games = play_match(model, Opponent.random(), config, rating=LOW)
    own = rating_token(LOW)
    expected = [
        [own, RATING_UNKNOWN, TIME_CONTROL_UNKNOWN] if g.model_white else [RATING_UNKNOWN, own, TIME_CONTROL_UNKNOWN]
        for g in games
    ]
    assert made == [expected] and {g.model_white for g in games} == {True, False}
    play_match(model, Opponent.random(), config)
    assert made[-1] == [list(UNKNOWN_PREFIX)] * 4
    with pytest.raises(ValueError, match="reads no ratings"):
        play_match(GPT(CONFIGS["tiny"]).eval(), Opponent.random(), config, rating=LOW)


def test_a_player_reads_each_rows_prefix(conditioned):
    prefixes = [conditioning_prefix(LOW, LOW, "blitz"), conditioning_prefix(HIGH, HIGH, "blitz"), UNKNOWN_PREFIX]
    player = ModelPlayer(conditioned, 3, prefixes=prefixes)
    assert [chess.square_name(int(t)) for t in player.logits[:2].argmax(-1)] == ["e2", "d2"]
    player.keep([1])
    player.prefill([[BOS]])
    assert chess.square_name(int(player.logits[0].argmax())) == "d2"  # the kept row keeps its prefix


@pytest.mark.slow
def test_the_arena_stage_reports_the_strength_curve(stockfish, tmp_path):
    torch.manual_seed(0)
    checkpoint.save(
        checkpoint.model_payload(GPT(replace(CONFIGS["tiny"], conditioning=True)), {"seed": 0}), tmp_path / "v2.pt"
    )
    checkpoint.save(checkpoint.model_payload(GPT(CONFIGS["tiny"]), {"seed": 0}), tmp_path / "v1.pt")
    (tmp_path / "params.yaml").write_text(f"""
arena:
  out: {tmp_path / "arena"}
  games: 2
  max_plies: 30
  conditioning_ratings: [1800, 1000, 1400]
  conditioning_opponents: [sf-skill0]  # the told matches: this anchor only, 4 games each
  conditioning_games: 4
  stockfish: {{movetime_ms: null, nodes: 300}}
  opponents:
    - {{name: random, kind: random}}
    - {{name: sf-skill0, kind: stockfish, skill: 0}}
""")

    def arena_stage(name: str) -> subprocess.CompletedProcess:
        return run_module("stages.arena", "--params", tmp_path / "params.yaml", "--checkpoint", tmp_path / name)

    done = arena_stage("v2.pt")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "arena" / "arena.json").read_text())
    curve = record["strength"]
    assert [p["told"] for p in curve["points"]] == [1000, 1400, 1800] and curve["scale"] == "anchored on Stockfish"
    assert all(p["games"] == 4 for p in curve["points"]) and curve["opponents"] == ["sf-skill0"]
    assert record["games"] == 4  # the unconditioned matches: 2 games against each of the two opponents
    rows = list(csv.DictReader(io.StringIO((tmp_path / "arena" / "games.csv").read_text())))
    assert [row["told"] for row in rows] == [""] * 4 + ["1000"] * 4 + ["1400"] * 4 + ["1800"] * 4
    assert {row["opponent"] for row in rows[4:]} == {"sf-skill0"}  # every game played, the told ones last
    pgn = io.StringIO((tmp_path / "arena" / "games.pgn").read_text())
    games = list(iter(lambda: chess.pgn.read_game(pgn), None))
    assert len(games) == 16 and "Conditioning" not in str(games[3].headers)
    told = games[4].headers
    side = "White" if told["White"].endswith("v2.pt") else "Black"
    assert told[f"{side}Conditioning"] == "1000" and told["Event"].endswith("told 1000 vs sf-skill0")
    assert set(curve) >= {"spearman", "rises", "separated"} and "strength by told rating" in done.stdout
    refused = arena_stage("v1.pt")
    assert refused.returncode == failures.REFUSED and "reads no ratings (triples-v1)" in refused.stderr


def test_the_told_matches_name_existing_opponents():
    from stages.arena import Settings

    opponents = (OpponentSpec("random", "random"),)
    with pytest.raises(ValueError, match=r"conditioning_opponents names no opponent: \['sf'\]"):
        Settings(opponents=opponents, conditioning_ratings=(1000,), conditioning_opponents=("sf",))
    with pytest.raises(ValueError, match="conditioning_games must be >= 1"):
        Settings(opponents=opponents, conditioning_games=0)
