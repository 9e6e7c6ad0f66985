"""Human-move prediction on the embedded real Lichess games (data/real): what is read and
skipped, the two halves, and the three measurers checked against python-chess and Stockfish
queried directly."""

from __future__ import annotations

import chess
import chess.engine
import numpy as np
import pytest
import torch
import yaml

from chesscore.eval.evaluate import EvalConfig
from chesscore.eval.human import HumanConfig, band_of, bands, human_eval, measure
from chesscore.eval.real_games import HALVES, choose, half_of, read_real_games
from chesscore.model import CONFIGS, GPT
from chesscore.pgn.inputs import find_inputs
from chesscore.play.engine import find_stockfish
from chesscore.tokens import decode_game
from tests.imports import PROJECT

REAL = PROJECT / "data" / "real"


@pytest.fixture(scope="module")
def real():
    return read_real_games(REAL)


def test_every_real_game_is_read_and_each_skip_has_a_reason(real):
    games, source = real
    # 999 games: 13 abandoned before a move, 1 more with a BOT (the other BOT game has no moves).
    assert source["games_read"] == 999 and source["games_kept"] == len(games) == 985
    assert source["skipped"] == {"bot": 1, "no_moves": 13}
    assert len({g.game_id for g in games}) == len(games)
    for g in games[:50]:  # the tokens and the moves are the same legal game
        assert decode_game(g.tokens.tolist()) == list(g.moves)
        assert g.meta["plies"] == len(g.moves) and len(g.tokens) == 2 + 3 * len(g.moves)


def test_the_halves_are_disjoint_stable_and_the_sample_stays_in_its_half(real):
    games, _ = real
    ids = {h: {g.game_id for g in choose(games, h, None)} for h in HALVES}
    assert not ids["validation"] & ids["evaluation"]
    assert len(ids["validation"]) + len(ids["evaluation"]) == len(games)
    assert 400 < len(ids["evaluation"]) < 585  # a hash, not a cut of the file
    sample = choose(games, "evaluation", 20)
    assert [g.game_id for g in sample] == [g.game_id for g in choose(list(reversed(games)), "evaluation", 20)]
    assert all(half_of(g.game_id) == "evaluation" for g in sample)
    assert choose(games, "evaluation", 20, seed=1) != sample


def test_real_games_never_reach_the_generated_samples_splits():
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    read_by_validate = {p.resolve() for p in find_inputs([PROJECT / params["validate"]["raw"]])}
    assert read_by_validate and not any(REAL.resolve() in p.parents for p in read_by_validate)
    assert params["evaluate"]["real_games"] == "data/real"


def test_rating_bands():
    edges = (1200, 1600, 2000)
    assert [band_of(r, edges) for r in (None, 800, 1199, 1200, 1599, 1600, 1999, 2000, 2900)] == [
        "unknown",
        "<1200",
        "<1200",
        "1200-1599",
        "1200-1599",
        "1600-1999",
        "1600-1999",
        "2000+",
        "2000+",
    ]
    assert bands(edges) == ["<1200", "1200-1599", "1600-1999", "2000+", "unknown"]


def test_the_three_measurers_agree_with_python_chess_and_stockfish_asked_directly(real):
    games, _ = real
    chosen = [g for g in choose(games, "validation", None) if g.meta["plies"] <= 40][:4]
    torch.manual_seed(0)
    model = GPT(CONFIGS["tiny"])
    record = measure(model, chosen, HumanConfig(bootstrap=200), EvalConfig(), say=lambda _: None)
    overall = record["overall"]
    positions = sum(g.meta["plies"] for g in chosen)
    assert overall["positions"] == positions and overall["games"] == len(chosen)
    # The random mover: the mean of 1 / (legal moves), computed here from python-chess.
    inverse, engine_hits = [], []
    with chess.engine.SimpleEngine.popen_uci(find_stockfish()) as engine:
        engine.configure({"Threads": 1, "Hash": 16})
        for g in chosen:
            board = chess.Board()
            for move in g.moves:
                inverse.append(1 / board.legal_moves.count())
                best = engine.play(board, chess.engine.Limit(depth=1), game=object()).move
                engine_hits.append(best == move)
                board.push(move)
    assert overall["random"]["top1"] == pytest.approx(np.mean(inverse), abs=1e-6)
    # Stockfish's first MultiPV line at depth 1 is (almost always) its bestmove at depth 1.
    assert abs(overall["stockfish"]["top1"] - np.mean(engine_hits)) <= 2 / positions
    assert overall["stockfish"]["top1"] > 3 * overall["random"]["top1"]  # it knows chess; random does not
    for who in ("model", "stockfish", "random"):
        low, high = overall[who]["top1_ci95"]
        assert low <= overall[who]["top1"] <= high and overall[who]["top1"] <= overall[who]["top3"]
    d = overall["model_minus_stockfish_top1"]
    assert d["value"] == pytest.approx(overall["model"]["top1"] - overall["stockfish"]["top1"], abs=2e-6)
    assert sum(r["positions"] for r in record["by_rating"]) == positions
    assert sum(r["positions"] for r in record["by_phase"]) == positions


def test_a_record_is_the_same_bytes_twice_and_names_its_source():
    torch.manual_seed(0)
    model = GPT(CONFIGS["tiny"])
    config = HumanConfig(human_games=2, bootstrap=100)
    first = human_eval(model, REAL, config, EvalConfig(), say=lambda _: None)
    again = human_eval(model, REAL, config, EvalConfig(), say=lambda _: None)
    assert first == again
    source = first["source"]
    assert source["half"] == "evaluation" and source["games_measured"] == 2
    assert source["files"][0]["sha256"] == "9661c07e25ec3b33433218ae9e4c867744e1dac102ee1aa32eb7ce1715db27a6"
    assert sum(source["halves"].values()) == source["games_kept"]
