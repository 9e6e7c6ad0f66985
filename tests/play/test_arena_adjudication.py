"""Arena games under a Stockfish judge: verdicts that follow the judge's scores, PGN tags that say
which rule fired, the same games twice, and the stage refusing to run without Stockfish."""

import io
import json
from pathlib import Path

import chess
import chess.pgn
import pytest
import torch

from chesscore import checkpoint, failures
from chesscore.model import CONFIGS, GPT
from chesscore.play.adjudication import Adjudication, pgn_tags, score_text
from chesscore.play.arena import ArenaConfig, Opponent, pgn_text, play_match, summarise
from chesscore.play.endings import RULES as ENDINGS_BY_THE_RULES
from tests.inprocess import run_module
from tests.play.test_arena import _arena  # the stage, with tmp_path/params.yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = Adjudication(judge_nodes=300, every_plies=3, resign_moves=2, draw_from_move=20)


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.manual_seed(5)
    return GPT(CONFIGS["tiny"]).eval()  # all but uniform over the legal moves: it blunders like the random mover


@pytest.fixture(scope="module")
def games(model, stockfish):
    config = ArenaConfig(games=8, max_plies=120, seed=2, adjudication=RULES)
    return play_match(model, Opponent.random(), config, stockfish)


@pytest.mark.slow
def test_verdicts_follow_the_judge_and_repeat(model, stockfish, games):
    again = play_match(
        model, Opponent.random(), ArenaConfig(games=8, max_plies=120, seed=2, adjudication=RULES), stockfish
    )
    assert again == games
    kinds = {g.termination for g in games}
    assert "resign_rule" in kinds  # two near-random players: someone falls a piece behind
    for game in games:
        if game.termination == "resign_rule":
            assert abs(game.judge_score) >= RULES.resign_score_cp
            assert game.result == ("1-0" if game.judge_score > 0 else "0-1")
            assert len(game.moves) < 120 and len(game.moves) % 3 == 0  # judged every third ply
        elif game.termination == "ply_cap":
            assert len(game.moves) == 120
            ahead = abs(game.judge_score) >= RULES.cap_score_cp
            assert game.result == (("1-0" if game.judge_score > 0 else "0-1") if ahead else "1/2-1/2")
        elif game.termination == "draw_rule":
            assert game.result == "1/2-1/2" and abs(game.judge_score) <= RULES.draw_score_cp
        else:
            assert game.judge_score is None
        assert game.judged >= 1
    row = summarise([(Opponent.random(), games)])["opponents"][0]
    assert sum(row["decided_by"].values()) == 8 and row["decided_by"]["adjudication"] >= 1


def test_pgn_names_the_rule_and_the_judges_score(games):
    parsed = io.StringIO(pgn_text([(Opponent.random(), games)], "tiny"))
    adjudicated = 0
    for game in games:
        headers = chess.pgn.read_game(parsed).headers
        if game.termination in ("resign_rule", "draw_rule", "ply_cap"):
            rule = {"resign_rule": "resign", "draw_rule": "draw", "ply_cap": "ply_cap"}[game.termination]
            assert headers["Termination"] == "adjudication" and headers["AdjudicationRule"] == rule
            assert headers["JudgeScore"] == score_text(game.judge_score)
            adjudicated += 1
        else:
            assert headers["Termination"] == "normal" and "AdjudicationRule" not in headers
    assert adjudicated >= 1
    # The fixture's games are all adjudicated: the endings by the rules, tagged directly.
    for ending in ENDINGS_BY_THE_RULES:
        assert pgn_tags(ending, None) == {"Termination": "normal"}, ending


def test_without_a_judge_the_cap_is_a_draw_and_nothing_ends_early(model):
    config = ArenaConfig(games=2, max_plies=30, adjudication=Adjudication(enabled=False))
    games = play_match(model, Opponent.random(), config)  # no Stockfish needed at all
    assert all(g.judged == 0 and g.judge_score is None for g in games)
    for game in games:  # at the cap, or where the rules end the game: nothing earlier
        board = chess.Board()
        for move in game.moves:
            board.push_uci(move)
        if game.termination == "ply_cap":
            assert len(game.moves) == config.max_plies and game.result == "1/2-1/2"
        else:
            assert board.is_game_over(claim_draw=True), game.termination


@pytest.mark.slow
def test_the_stage_reports_the_judge_and_writes_the_same_games_twice(model, stockfish, tmp_path):
    checkpoint.save(checkpoint.model_payload(model, {"seed": 5}), tmp_path / "best.pt")
    (tmp_path / "params.yaml").write_text(f"""
arena:
  checkpoint: {tmp_path / "best.pt"}
  games: 4
  max_plies: 80
  conditioning_ratings: []  # a triples-v1 model: no told matches
  adjudication: {{judge_nodes: 300, every_plies: 3, resign_moves: 2}}
  opponents: [{{name: random, kind: random}}]
""")
    outs = []
    for name in ("a", "b"):
        done = _arena(tmp_path, "--out", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
        assert "judge: Stockfish judge at 300 nodes" in done.stdout and "of the stage's" in done.stdout
        outs.append(tmp_path / name)
    assert (outs[0] / "games.pgn").read_bytes() == (outs[1] / "games.pgn").read_bytes()
    assert (outs[0] / "arena.json").read_bytes() == (outs[1] / "arena.json").read_bytes()
    record = json.loads((outs[0] / "arena.json").read_text())
    assert record["config"]["adjudication"]["judge_nodes"] == 300 and record["judge"]["positions"] > 0
    timing = json.loads((outs[0] / "run.json").read_text())  # the times: not a DVC output
    assert 0 < timing["judge_seconds"] < timing["seconds"] and 0 < timing["judge_share"] < 1
    assert "decided by rules / adjudication / drawn" in (outs[0] / "report.md").read_text()

    # A judge needs Stockfish even against the random mover: refused, with the install command.
    missing = _arena(tmp_path, "--out", str(tmp_path / "c"), "--stockfish-path", str(tmp_path / "no-stockfish"))
    assert missing.returncode == failures.REFUSED and "sudo apt-get install stockfish" in missing.stderr
    assert "Traceback" not in missing.stderr

    bad = tmp_path / "bad.yaml"
    bad.write_text((tmp_path / "params.yaml").read_text().replace("judge_nodes: 300", "judge_nodes: 0"))
    refused = run_module("stages.arena", "--params", bad, cwd=ROOT)
    assert refused.returncode == failures.REFUSED and "arena.adjudication" in refused.stderr
    assert "judge_nodes must be >= 1" in refused.stderr
