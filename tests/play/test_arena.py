"""Arena: matches against a random mover, real Stockfish and another checkpoint; the stage."""

import io
import json
import random
import subprocess
from dataclasses import replace
from pathlib import Path

import chess
import chess.pgn
import pytest
import torch

from chesscore import checkpoint, failures
from chesscore.model import CONFIGS, GPT
from chesscore.play import engine
from chesscore.play.adjudication import Adjudication
from chesscore.play.arena import OPENINGS, ArenaConfig, Opponent, pgn_text, play_match, summarise
from chesscore.play.engine import Stockfish, StockfishLevel, StockfishMissing, find_stockfish, pick_handicapped
from chesscore.play.moves import play_mask
from chesscore.tokens import State, encode_game
from tests.inprocess import run_module
from tests.tiny_models import trained_tiny

# Pairing, legality and batching need no judge (test_arena_adjudication.py judges): the ply cap is a draw.
NO_JUDGE = Adjudication(enabled=False)

ROOT = Path(__file__).resolve().parents[2]
BOOK = dict(OPENINGS)


@pytest.fixture(scope="module")
def model():
    return trained_tiny()


def _replay(moves) -> chess.Board:
    board = chess.Board()
    for uci in moves:
        move = chess.Move.from_uci(uci)
        assert move in board.legal_moves, (uci, board.fen())
        board.push(move)
    return board


def _check_game(game, max_plies: int) -> None:
    board = _replay(game.moves)
    assert " ".join(game.moves).startswith(BOOK[game.opening])
    if game.termination == "checkmate":
        assert board.is_checkmate() and game.result == ("0-1" if board.turn == chess.WHITE else "1-0")
    elif game.termination in ("resign_rule", "ply_cap") and game.result != "1/2-1/2":  # the judge decided
        assert not board.is_game_over(claim_draw=True)
    else:
        assert game.result == "1/2-1/2"
    assert game.termination != "ply_cap" or len(game.moves) == max_plies
    opening_plies = len(BOOK[game.opening].split())
    model_turns = [ply for ply in range(opening_plies, len(game.moves)) if (ply % 2 == 0) == game.model_white]
    assert game.model_moves == len(model_turns)


@pytest.mark.slow
def test_random_match_is_legal_paired_alternating_and_reproducible(model):
    config = ArenaConfig(
        games=6, max_plies=40, seed=3, concurrency=4, adjudication=NO_JUDGE
    )  # two batches: 4 + 2 games
    games = play_match(model, Opponent.random(), config)
    assert games == play_match(model, Opponent.random(), config)
    assert [g.moves for g in play_match(model, Opponent.random(), replace(config, seed=4))] != [g.moves for g in games]
    assert [g.round for g in games] == [1, 2, 3, 4, 5, 6]
    assert [g.model_white for g in games] == [True, False] * 3
    assert [g.opening for g in games[::2]] == [g.opening for g in games[1::2]]  # a pair shares its opening
    assert len({g.opening for g in games}) == 3
    for game in games:
        _check_game(game, 40)
    parsed = chess.pgn.read_game(io.StringIO(pgn_text([(Opponent.random(), games)], "tiny")))
    assert parsed.headers["White"] == "tiny" and parsed.headers["Result"] == games[0].result
    assert parsed.headers["Opening"] == games[0].opening and parsed.headers["Round"] == "1"
    assert [m.uci() for m in parsed.mainline_moves()] == list(games[0].moves)
    assert parsed.headers["WhiteIllegalAttempts"] == str(games[0].illegal_attempts)


@torch.no_grad()
def test_illegal_attempts_are_the_models_own_unmasked_choices(model):
    games = play_match(model, Opponent.random(), ArenaConfig(games=4, max_plies=60, seed=1, adjudication=NO_JUDGE))
    total = 0
    for game in games:
        logits = model(torch.tensor([encode_game(game.moves)[:-1]]))[0]
        tokens = encode_game(game.moves)
        state, expected = State(), 0
        state.feed(tokens[0])
        for ply in range(len(game.moves)):
            mine = ply >= len(BOOK[game.opening].split()) and (ply % 2 == 0) == game.model_white
            bad = False
            for step in range(3):
                index = 3 * ply + step  # logits at index predict token index + 1
                bad |= not play_mask(state)[int(logits[index].argmax())]
                state.feed(tokens[index + 1])
            expected += mine and bad
        assert game.illegal_attempts == expected
        total += expected
    assert 0 < total <= sum(g.model_moves for g in games)


def test_stockfish_beats_a_tiny_model_and_anchors_an_upper_bound(model, stockfish):
    level = StockfishLevel("sf-skill0", skill=0, movetime_ms=None, nodes=400)
    opponent = Opponent.stockfish(level)
    games = play_match(model, opponent, ArenaConfig(games=4, max_plies=200), stockfish)
    for game in games:
        _check_game(game, 200)
        assert game.model_score == 0.0 and game.termination in ("checkmate", "resign_rule")  # mated, or judged lost
        assert game.stockfish_min_depth >= 1
    summary = summarise([(opponent, games)])
    row = summary["opponents"][0]
    assert (row["wins"], row["draws"], row["losses"]) == (0, 0, 4) and row["elo"] is None and row["high"] < 0
    assert summary["rating"]["rating"] is None and summary["rating"]["high"] < level.anchor
    parsed = chess.pgn.read_game(io.StringIO(pgn_text([(opponent, games)], "tiny")))
    assert parsed.headers["BlackElo"] == "1347"
    assert parsed.headers["Termination"] == ("normal" if games[0].termination == "checkmate" else "adjudication")


def test_the_handicap_pick_follows_stockfish_formula():
    a, b, c, d = (chess.Move.from_uci(u) for u in ("e2e4", "d2d4", "g1f3", "a2a3"))
    # Equal scores: every push is zero, and the last of equals wins, as in Skill::pick_best.
    assert pick_handicapped([(a, 10), (b, 10)], 0.0, random.Random(0)) == b

    def picks(lines, level):
        return [pick_handicapped(lines, level, random.Random(seed)) for seed in range(400)]

    # A close second: the weakest level picks it about as often as the best; a blunder 3 pawns
    # down (378 internal units) is nearly never picked at level 19 and sometimes at level 0.
    close = picks([(a, 50), (b, 40), (c, 30), (d, -400)], 0.0)
    assert 0.25 < close.count(b) / len(close) < 0.6 and close.count(a) > 0
    blunder = [(a, 0), (b, -378)]
    assert picks(blunder, 19.0).count(b) == 0 < picks(blunder, 0.0).count(b)


def test_handicapped_stockfish_is_reproducible_and_weaker(stockfish):
    """Stockfish's own handicap is clock-seeded; ours gives the same move for the same game and
    position in any process, and at level 0 often not the engine's best."""
    positions, board, rng = [], chess.Board(), random.Random(3)
    while len(positions) < 30 and not board.is_game_over():
        positions.append(board.copy())
        board.push(rng.choice(list(board.legal_moves)))
    level = StockfishLevel("sf-skill0", skill=0)
    runs = []
    for _ in range(2):
        with Stockfish(stockfish, level) as engine_run:
            runs.append(
                [engine_run.play(p, game="g")[0] for p in reversed(positions) if p.ply() % 2 == 0]
                + [engine_run.play(p, game="g")[0] for p in positions]
            )
    assert runs[0] == runs[1]
    evens = sum(p.ply() % 2 == 0 for p in positions)  # asked first, backwards: the order does not matter
    forwards = [move for p, move in zip(positions, runs[0][evens:]) if p.ply() % 2 == 0]
    assert runs[0][:evens][::-1] == forwards
    with Stockfish(stockfish, StockfishLevel("full", skill=20, movetime_ms=None, nodes=2000)) as strongest:
        best = [strongest.engine.analyse(p, chess.engine.Limit(depth=1))["pv"][0] for p in positions]
    assert sum(mine != top for mine, top in zip(runs[0][-len(positions) :], best)) >= 3
    with Stockfish(stockfish, level) as again:  # another game name: another draw of the generator
        other = [again.play(p, game="h")[0] for p in positions]
    assert other != runs[0][-len(positions) :]


def test_another_checkpoint_plays_its_side_in_the_same_batches(model):
    torch.manual_seed(1)
    untrained = GPT(CONFIGS["tiny"]).eval()
    games = play_match(
        model,
        Opponent.checkpoint("untrained", untrained, "untrained tiny"),
        ArenaConfig(games=4, max_plies=40, seed=2, adjudication=NO_JUDGE),
    )
    for game in games:
        _check_game(game, 40)
        opponent_moves = len(game.moves) - len(BOOK[game.opening].split()) - game.model_moves
        assert 0 < game.opponent_illegal_attempts <= opponent_moves


def test_missing_stockfish_is_a_clear_error_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(engine, "DEBIAN_GAMES_DIR", tmp_path)
    with pytest.raises(StockfishMissing, match="apt-get install stockfish"):
        find_stockfish()
    with pytest.raises(ValueError, match="1350..2850"):
        StockfishLevel("too weak", uci_elo=1000)


def _arena(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return run_module("stages.arena", "--params", tmp_path / "params.yaml", *args)


@pytest.mark.slow
def test_arena_stage_writes_every_output(model, stockfish, tmp_path):
    checkpoint.save(checkpoint.model_payload(model, {"seed": 0}), tmp_path / "best.pt")
    torch.manual_seed(1)
    checkpoint.save(checkpoint.model_payload(GPT(CONFIGS["tiny"]), {"seed": 1}), tmp_path / "other.pt")
    (tmp_path / "params.yaml").write_text(f"""
arena:
  checkpoint: {tmp_path / "best.pt"}
  out: {tmp_path / "arena"}
  games: 8
  max_plies: 120
  conditioning_ratings: []  # a triples-v1 model: no told matches
  stockfish: {{movetime_ms: null, nodes: 300}}
  opponents:
    - {{name: random, kind: random}}
    - {{name: sf-skill0, kind: stockfish, skill: 0}}
    - {{name: untrained, kind: checkpoint, path: {tmp_path / "other.pt"}}}
""")
    done = _arena(tmp_path, "--games", "2")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "arena"
    record = json.loads((out / "arena.json").read_text())
    assert set(record["opponents"]) == {"random", "sf-skill0", "untrained"}
    assert all(o["games"] == 2 for o in record["opponents"].values()) and record["games"] == 6
    assert record["opponents"]["sf-skill0"]["wins"] == 0 and record["opponents"]["sf-skill0"]["anchor_elo"] == 1346.6
    assert record["rating"]["anchors"] == {"sf-skill0": pytest.approx(1346.6)}
    assert record["checkpoint"]["path"] == str(tmp_path / "best.pt")
    pgn = io.StringIO((out / "games.pgn").read_text())
    parsed = [chess.pgn.read_game(pgn) for _ in range(6)]
    assert all(g is not None and not g.errors for g in parsed) and chess.pgn.read_game(pgn) is None
    assert (out / "results.csv").read_text().count("\n") == 4
    assert (out / "games.csv").read_text().count("\n") == 7
    assert "| sf-skill0: Stockfish Skill Level=0 depth=1 multipv=4 | 1347 | 2 |" in (out / "report.md").read_text()
    assert "rating anchored on Stockfish" in done.stdout

    missing = _arena(tmp_path, "--stockfish-path", str(tmp_path / "no-stockfish"))
    assert missing.returncode == failures.REFUSED and "sudo apt-get install stockfish" in missing.stderr
    assert "Traceback" not in missing.stderr
