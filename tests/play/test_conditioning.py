"""The strength knob over UCI: UCI_LimitStrength/UCI_Elo set the rating a triples-v2 model is told
for its own side, UCI_Opponent its opponent's; without them it is told "unknown"; the clock of
the game's first timed `go` sets the time-control class. Checked on the
model of tests/train/test_conditioning (two 'ratings' that play different openings), in process
and through python-chess's UCI client against the real engine process."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import chess
import chess.engine
import pytest
import torch

from chesscore import checkpoint
from chesscore.model import CONFIGS, GPT
from chesscore.play.uci import UCIEngine
from chesscore.play.uci_options import opponent_rating
from chesscore.tokens import RATING_UNKNOWN, TIME_CONTROL_UNKNOWN, UNKNOWN_PREFIX, rating_token, time_control_token
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.trainer import train
from tests.train.test_conditioning import CONFIG, HIGH, LOW, synthetic

STARTUP = 120  # seconds for `uciok` on a loaded machine (tests/play/test_uci.py)


@pytest.fixture(scope="module")
def conditioned(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("uci-conditioned")
    train(CONFIG, TrainData(synthetic(32), synthetic(4), fingerprint="synthetic"), output, setup("cpu"))
    return output / "best.pt"


def _engine(path: Path) -> tuple[UCIEngine, io.StringIO]:
    out = io.StringIO()
    return UCIEngine(checkpoint.load_model(path)[0], "test", out), out


def _play(engine: UCIEngine, out: io.StringIO, *lines: str) -> str:
    for line in lines:
        engine.handle(line)
    return [line for line in out.getvalue().splitlines() if line.startswith("bestmove")][-1].split()[1]


def test_uci_elo_picks_the_opening_of_that_rating_for_either_side(conditioned):
    engine, out = _engine(conditioned)
    engine.handle("uci")
    declared = out.getvalue()
    assert "option name UCI_LimitStrength type check" in declared and "option name UCI_Elo type spin" in declared
    assert "option name UCI_Opponent type string" in declared
    assert engine.prefix(chess.WHITE) == list(UNKNOWN_PREFIX)  # no knob: unknown
    engine.handle("setoption name UCI_Elo value 2000")
    assert engine.prefix(chess.WHITE) == list(UNKNOWN_PREFIX)  # UCI_Elo counts only under UCI_LimitStrength
    engine.handle("setoption name UCI_LimitStrength value true")
    for elo, first, reply in ((HIGH, "d2d4", "d7d5"), (LOW, "e2e4", "e7e5"), (HIGH, "d2d4", "d7d5")):
        engine.handle(f"setoption name UCI_Elo value {elo}")
        assert _play(engine, out, "position startpos", "go") == first
        assert _play(engine, out, f"position startpos moves {first}", "go") == reply  # now playing Black
    assert engine.prefix(chess.BLACK) == [RATING_UNKNOWN, rating_token(HIGH), TIME_CONTROL_UNKNOWN]


def test_uci_opponent_sets_the_other_sides_rating():
    torch.manual_seed(0)
    from dataclasses import replace

    engine = UCIEngine(GPT(replace(CONFIGS["tiny"], conditioning=True)).eval(), "test", io.StringIO())
    engine.handle("setoption name UCI_Opponent value GM 2650 human Magnus Carlsen")
    engine.handle("setoption name UCI_LimitStrength value true")
    engine.handle("setoption name UCI_Elo value 1234")
    assert engine.prefix(chess.WHITE) == [rating_token(1234), rating_token(2650), TIME_CONTROL_UNKNOWN]
    assert engine.prefix(chess.BLACK) == [rating_token(2650), rating_token(1234), TIME_CONTROL_UNKNOWN]
    assert opponent_rating("none none computer stockfish") is None
    out = io.StringIO()
    engine.out = out
    engine.handle("setoption name UCI_Opponent value 2650")
    engine.handle("setoption name UCI_Elo value 99")
    assert "UCI_Opponent: expected" in out.getvalue() and "UCI_Elo 99 is outside 500..3200" in out.getvalue()
    assert engine.prefix(chess.WHITE)[:2] == [rating_token(1234), rating_token(2650)]  # unchanged by bad values
    v1 = UCIEngine(GPT(CONFIGS["tiny"]).eval(), "test", out)
    v1.handle("setoption name UCI_Elo value 1500")
    assert "reads no ratings (triples-v1)" in out.getvalue()


def test_the_clock_of_the_games_first_timed_go_sets_the_time_control():
    torch.manual_seed(0)
    from dataclasses import replace

    engine = UCIEngine(GPT(replace(CONFIGS["tiny"], conditioning=True)).eval(), "test", io.StringIO())

    def told(*lines: str) -> int:
        for line in lines:
            engine.handle(line)
        return engine.prefix(engine.board.turn)[2]

    assert told("position startpos", "go movetime 10") == TIME_CONTROL_UNKNOWN  # no clock: unknown
    # 3+2 is 180 + 40 x 2 = 260 s: blitz, as Lichess classes it; Black's own clock is read.
    assert told("position startpos moves e2e4", "go wtime 180000 btime 180000 winc 2000 binc 2000") == (
        time_control_token("blitz")
    )
    assert told("position startpos moves e2e4 e7e5 g1f3", "go wtime 9000 btime 8000 winc 0 binc 0") == (
        time_control_token("blitz")  # the clock runs down during a game: the class stays
    )
    assert told("ucinewgame", "position startpos", "go wtime 60000 btime 60000") == time_control_token("bullet")
    assert told("ucinewgame", "position startpos", "go wtime 1800000 btime 1800000 winc 20000") == (
        time_control_token("classical")
    )
    assert told("ucinewgame", "position startpos", "go wtime -5 btime 10") == TIME_CONTROL_UNKNOWN


@pytest.mark.slow
def test_the_knob_through_python_chess_and_the_engine_process(conditioned):
    command = [sys.executable, "-m", "chesscore.play.uci", "--checkpoint", str(conditioned)]
    with chess.engine.SimpleEngine.popen_uci(command, timeout=STARTUP) as engine:
        for elo, first in ((LOW, "e2e4"), (HIGH, "d2d4")):
            engine.configure({"UCI_LimitStrength": True, "UCI_Elo": elo})
            assert engine.play(chess.Board(), chess.engine.Limit(time=1)).move.uci() == first
        # python-chess sends UCI_Opponent itself when told who the opponent is
        board = chess.Board()
        board.push_uci("d2d4")
        opponent = chess.engine.Opponent(name="x", title=None, rating=HIGH, is_engine=False)
        engine.configure({"UCI_LimitStrength": True, "UCI_Elo": HIGH})
        assert engine.play(board, chess.engine.Limit(time=1), opponent=opponent).move.uci() == "d7d5"
