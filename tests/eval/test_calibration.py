"""Temperature scaling per rating band (chesscore.eval.calibration): the fit finds the temperature
moves were drawn at, a move's steps are its legal choices as the bot is told them, and the CLI
scores each band's moves of a dataset folder."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from chesscore import checkpoint
from chesscore.conditioning import with_prefix
from chesscore.eval.calibration import TEMPERATURES, calibrate, move_nll, move_steps
from chesscore.model import CONFIGS, GPT
from chesscore.tokens import UNKNOWN_PREFIX, encode_game, rating_token
from tests.inprocess import run_module
from tests.training_data import write_dataset


@pytest.mark.parametrize("drawn_at", [0.6, 1.6])
def test_the_fit_finds_the_temperature_the_moves_were_drawn_at(drawn_at):
    rng = np.random.default_rng(0)
    moves = []
    for _ in range(4000):
        logits = torch.as_tensor(rng.normal(0, 2, size=int(rng.integers(2, 30))))
        p = torch.softmax(logits / drawn_at, 0).numpy()
        moves.append([(logits, int(rng.choice(len(p), p=p)))])
    nll = move_nll(moves, TEMPERATURES)
    assert abs(TEMPERATURES[int(nll.argmin())] - drawn_at) <= 0.1
    assert nll[TEMPERATURES.index(1.0)] > nll.min()  # T = 1 fits worse: the fit is not the identity


def tiny(conditioning: bool) -> GPT:
    torch.manual_seed(0)
    return GPT(replace(CONFIGS["tiny"], conditioning=conditioning)).eval()


def test_a_moves_steps_are_its_legal_choices_told_as_a_bot_is():
    tokens = np.array(encode_game("e2e4 e7e5 g1f3 b8c6".split()))
    model = tiny(conditioning=True)
    white = move_steps(model, tokens, side=0, rating=1500)
    assert len(white) == 2  # e2e4 and g1f3: black's moves are not white's
    (source, source_gold), (destination, destination_gold) = white[0]  # one promotion token: no step
    assert len(source) == 10 and source_gold == 6  # b1 g1 a2..h2, sorted: e2 is the 7th
    assert len(destination) == 2 and destination_gold == 1  # e3, e4
    # Black's moves read black's rating in the prefix, and nothing of white's or the clock.
    black = move_steps(model, tokens, side=1, rating=1200)
    row = with_prefix(tokens, (UNKNOWN_PREFIX[0], rating_token(1200), UNKNOWN_PREFIX[2]))
    with torch.no_grad():
        logits = model(torch.as_tensor(row[None].astype(np.int64)))[0]
    first_source = sorted({48 + i for i in range(8)} | {57, 62})  # after 1. e4: a7..h7 pawns, b8 g8
    assert torch.allclose(black[0][0][0], logits[6][first_source])  # BOS, prefix, e2 e4 _: the 7th token
    told_other = move_steps(model, tokens, side=1, rating=2200)
    assert not torch.allclose(black[0][0][0], told_other[0][0][0])  # the told rating reaches the logits
    # A triples-v1 model reads the game alone: the same steps, no prefix.
    assert [len(m) for m in move_steps(tiny(conditioning=False), tokens, 0, 1500)] == [2, 2]


def test_bands_count_their_movers_and_unrated_ones_are_left_out():
    tokens = np.array(encode_game("e2e4 e7e5 g1f3".split()))
    games = [(tokens, {"white_elo": 1050, "black_elo": 2300}), (tokens, {"white_elo": None, "black_elo": 1390})]
    result = calibrate(tiny(conditioning=True), games)
    assert {band: row["moves"] for band, row in result["bands"].items()} == {
        "1000": 2,
        "1400": 1,
        "1800": 0,
        "2200": 1,
    }
    assert result["bands"]["1000"]["best_nll"] <= result["bands"]["1000"]["nll_at_1"]
    with pytest.raises(ValueError, match="1.0"):
        calibrate(tiny(conditioning=True), games, temperatures=(0.5, 2.0))


def test_the_cli_prints_and_writes_each_bands_best_temperature(tmp_path):
    checkpoint.save(checkpoint.model_payload(tiny(conditioning=True), {"seed": 0}), tmp_path / "v2.pt")
    tokens = tuple(encode_game("d2d4 d7d5 c2c4 e7e6 b1c3".split()))
    rated = [{"white_elo": 1000, "black_elo": 2200}, {"white_elo": 1800, "black_elo": 1000}]
    write_dataset(tmp_path / "dataset", [tokens] * 2, [tokens] * 3, metas={"validation": rated + rated[:1]})
    done = run_module(
        "chesscore.eval.calibration",
        tmp_path / "v2.pt",
        tmp_path / "dataset",
        "--games",
        "2",
        "--json",
        tmp_path / "c.json",
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "c.json").read_text())
    assert written["games"] == 2 and written["split"] == "validation"
    assert {band: row["moves"] for band, row in written["bands"].items()} == {
        "1000": 3 + 2,  # white's three moves of the first game, black's two of the second
        "1400": 0,
        "1800": 3,
        "2200": 2,
    }
    assert written["bands"]["1000"]["best_temperature"] in TEMPERATURES
    assert "best T" in done.stdout and "no rated mover" in done.stdout
    assert "--ratings" in run_module("chesscore.eval.calibration", "--help").stdout
