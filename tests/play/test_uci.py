"""The model as a UCI engine: a real subprocess driven by python-chess and by raw lines."""

import io
import random
import subprocess
import sys
from pathlib import Path

import chess
import chess.engine
import pytest
import torch

from chesscore import checkpoint
from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.engine import Stockfish, StockfishLevel
from chesscore.play.fallback import fallback_move
from chesscore.play.uci import UCIEngine
from chesscore.tokens import encode_game

ROOT = Path(__file__).resolve().parents[2]
# Seconds python-chess waits for `uciok`: importing torch and loading the checkpoint took more
# than its default 10 s while the suite ran beside other engineers' pipelines on 2 cores.
STARTUP = 120


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("uci") / "tiny.pt"
    checkpoint.save(checkpoint.model_payload(GPT(CONFIGS["tiny"]), {"seed": 0}), path)
    return path


def _command(path: Path) -> list[str]:
    return [sys.executable, "-m", "chesscore.play.uci", "--checkpoint", str(path)]


def _engine(model=None, **kwargs) -> tuple[UCIEngine, io.StringIO]:
    torch.manual_seed(1)
    out = io.StringIO()
    return UCIEngine(model or GPT(CONFIGS["tiny"]).eval(), "test", out, **kwargs), out


def _bestmove(out: io.StringIO) -> str:
    return [line for line in out.getvalue().splitlines() if line.startswith("bestmove")][-1].split()[1]


@pytest.mark.slow
def test_full_games_through_python_chess_against_random_and_stockfish(tiny_checkpoint, stockfish):
    rng = random.Random(3)
    stockfish = Stockfish(stockfish, StockfishLevel("sf", skill=0, movetime_ms=5))
    with chess.engine.SimpleEngine.popen_uci(_command(tiny_checkpoint), cwd=ROOT, timeout=STARTUP) as engine, stockfish:
        assert engine.id["name"].startswith("chesscore tiny.pt")
        engine.configure({"Temperature": "1.0", "Seed": 5})
        for opponent, model_white in (("random", True), ("random", False), ("stockfish", True)):
            board, noted = chess.Board(), []
            while not board.is_game_over(claim_draw=True) and board.ply() < 400:
                if board.turn == model_white:
                    game = opponent + str(model_white)
                    result = engine.play(board, chess.engine.Limit(time=0.5), game=game, info=chess.engine.INFO_BASIC)
                    assert result.move in board.legal_moves
                    noted.append((board.ply(), "longer than the model's context" in result.info.get("string", "")))
                    move = result.move
                elif opponent == "random":
                    move = rng.choice(list(board.legal_moves))
                else:
                    move, _ = stockfish.play(board)
                board.push(move)
            assert all(past == (ply > 340) for ply, past in noted)  # past tiny's context it says so, then falls back
            if opponent == "stockfish":
                assert board.outcome(claim_draw=True).winner is not model_white  # random weights lose


@pytest.mark.slow
def test_raw_protocol_survives_garbage_and_answers_every_case(tiny_checkpoint):
    fen = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # unreachable from the start; Ra8 mates
    lines = [
        "uci",
        "isready",
        "garbage line ~~~",
        "setoption name Nope value 1",
        "setoption nonsense",
        "position fen " + fen,
        "go movetime 50",
        "position startpos moves e2e4 e7e5 g1f3 zz b8c6",
        "go wtime x btime 1000",
        "position fen not a fen",
        "go",
        "position startpos moves d2d4",
        "go infinite",
        "isready",
        "stop",
        "position startpos",
        "go searchmoves a2a3 h2h4 e1e2",
        "",
        "quit",
    ]
    done = subprocess.run(
        _command(tiny_checkpoint), input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[out.index("uciok") + 1] == "readyok"
    assert any("unknown command: garbage line" in line for line in out)
    assert any("no option named 'nope'" in line for line in out)
    bestmoves = [line.split()[1] for line in out if line.startswith("bestmove")]
    assert len(bestmoves) == 5
    assert bestmoves[0] == "a1a8"  # fallback for an unreachable FEN: mate in one
    assert any("not the start position" in line for line in out)
    assert any("illegal move zz" in line for line in out)
    board = chess.Board()
    for uci in ("e2e4", "e7e5", "g1f3"):
        board.push_uci(uci)
    assert chess.Move.from_uci(bestmoves[1]) in board.legal_moves  # the list ended before zz
    assert bestmoves[2] == "0000"  # no valid position
    ready = out.index("readyok", out.index("uciok") + 2)  # isready during `go infinite`
    assert out[ready - 1].startswith("info depth") and out[ready + 1].startswith("bestmove")  # held until stop
    assert (
        chess.Move.from_uci(bestmoves[3])
        in chess.Board("rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - 0 1").legal_moves
    )
    assert bestmoves[4] in ("a2a3", "h2h4")  # e1e2 is illegal and dropped

    missing = subprocess.run(
        _command(tiny_checkpoint.parent / "missing.pt"),
        input="uci\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert missing.returncode == 78 and "missing.pt: no such checkpoint" in missing.stderr


@torch.no_grad()
def test_incremental_positions_and_takebacks_match_a_fresh_forward():
    engine, out = _engine()
    game = ["e2e4", "c7c5", "g1f3", "d7d6", "d2d4", "c5d4", "f3d4", "g8f6"]
    for moves in (game[:3], game[:6], game[:6] + ["b1c3"], game, game[:2]):
        engine.handle("position startpos moves " + " ".join(moves))
        engine.handle("go")
        fed = [m.uci() for m in engine.fed]
        assert fed[: len(moves)] == moves and len(fed) == len(moves) + 1
        expected = engine.model(torch.tensor([encode_game(fed)[:-1]]))[0, -1]
        torch.testing.assert_close(engine.player.logits[0], expected, atol=1e-5, rtol=1e-5)


def test_seed_and_temperature_make_games_repeatable():
    def moves(seed: int) -> list[str]:
        engine, out = _engine()
        engine.handle("setoption name Temperature value 1.5")
        engine.handle(f"setoption name Seed value {seed}")
        engine.handle("ucinewgame")
        played = []
        for _ in range(12):
            engine.handle("position startpos moves " + " ".join(played))
            engine.handle("go movetime 10")
            played.append(_bestmove(out))
        return played

    assert moves(7) == moves(7)
    assert moves(7) != moves(8)
    greedy, out = _engine()
    greedy.handle("position startpos")
    for _ in range(3):
        greedy.handle("go")
    assert len({line for line in out.getvalue().splitlines() if line.startswith("bestmove")}) == 1


def test_games_longer_than_the_context_get_a_legal_fallback_move():
    torch.manual_seed(0)
    short = GPT(GPTConfig(n_layer=1, n_head=1, n_embd=8, block_size=32)).eval()
    engine, out = _engine(short)
    moves = ["g1f3", "g8f6", "f3g1", "f6g8"] * 3  # 12 plies > (32 - 1) // 3 - 1 = 9
    engine.handle("position startpos moves " + " ".join(moves))
    engine.handle("go")
    assert "longer than the model's context" in out.getvalue()
    board = chess.Board()
    for uci in moves:
        board.push_uci(uci)
    assert chess.Move.from_uci(_bestmove(out)) in board.legal_moves


def test_fallback_prefers_mate_then_the_biggest_capture():
    rng = random.Random(0)
    assert fallback_move(chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"), rng).uci() == "a1a8"
    board = chess.Board("4k3/8/8/3q1p2/4P3/8/8/4K3 w - - 0 1")  # exd5 (queen) beats exf5 (pawn)
    assert fallback_move(board, rng).uci() == "e4d5"
    assert fallback_move(chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"), rng) is None  # stalemate


# lichess-bot's stock config.yml: `uci_options` (Move Overhead, Threads, Hash) and `ponder: true`;
# python-chess refuses to configure an option the engine did not declare.
LICHESS_BOT_OPTIONS = {"Move Overhead": 100, "Threads": 2, "Hash": 256}


def test_lichess_bot_options_through_python_chess(tiny_checkpoint):
    board = chess.Board()
    with chess.engine.SimpleEngine.popen_uci(_command(tiny_checkpoint), cwd=ROOT, timeout=STARTUP) as engine:
        for name in ("Hash", "Move Overhead", "Ponder", "MultiPV", "Debug", "Threads"):
            assert name in engine.options, name
        engine.configure(LICHESS_BOT_OPTIONS)
        for _ in range(6):  # as lichess-bot plays: a clock, pondering on
            limit = chess.engine.Limit(white_clock=60, black_clock=60, white_inc=1, black_inc=1)
            result = engine.play(board, limit, ponder=True, info=chess.engine.INFO_ALL)
            assert result.move in board.legal_moves
            board.push(result.move)
        # MultiPV: the N most likely moves, distinct and legal; the move played is the first.
        infos = engine.analyse(board, chess.engine.Limit(time=1), multipv=3)
        moves = [info["pv"][0] for info in infos]
        assert len(set(moves)) == 3 and all(move in board.legal_moves for move in moves)
        assert engine.play(board, chess.engine.Limit(time=1)).move == moves[0]
        with pytest.raises(chess.engine.EngineError):
            engine.configure({"Hash": "lots"})  # a malformed value still fails


def test_illegal_choice_notes_only_with_debug():
    def notes(engine, out) -> int:
        board = chess.Board()
        for _ in range(12):  # an untrained model's unmasked choice is often illegal
            engine.handle("position startpos moves " + " ".join(m.uci() for m in board.move_stack))
            engine.handle("go movetime 10")
            board.push_uci(_bestmove(out))
        return out.getvalue().count("unmasked choice was illegal")

    quiet, out = _engine()
    assert notes(quiet, out) == 0
    for switch in ("setoption name Debug value true", "debug on"):
        loud, out = _engine()
        loud.handle(switch)
        assert notes(loud, out) > 0
    loud.handle("debug off")
    before = out.getvalue().count("unmasked")
    loud.handle("position startpos moves e2e4")
    loud.handle("go")
    assert out.getvalue().count("unmasked") == before
