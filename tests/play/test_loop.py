"""The one game loop (chesscore.play.loop) with every kind of engine, and the context-fit rule."""

import chess
import pytest
import torch

from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.play.endings import RULES
from chesscore.play.engine import Stockfish, StockfishLevel
from chesscore.play.engines import ModelEngine, RandomEngine, StockfishEngine
from chesscore.play.loop import Game, play_batch
from chesscore.play.moves import Sampler, context_plies, fit_plies
from chesscore.play.uci import UCIEngine
from chesscore.tokens import State


def _model(seed: int, **config) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**vars(CONFIGS["tiny"]), **config})).eval()


def _games(white, black, n: int = 4, opening: str = "") -> list[Game]:
    """n games, the colours swapped in odd ones; each keyed apart for the seeded engines."""
    sides = [(white, black) if i % 2 == 0 else (black, white) for i in range(n)]
    return [Game(i, sides[i], state=State.from_moves(opening.split()), key=("t", i)) for i in range(n)]


def _check(games: list[Game], max_plies: int, opening_plies: int = 0) -> None:
    for game in games:
        plies = len(game.state.board.move_stack)
        assert game.end is not None and plies <= max_plies
        assert game.end.termination in RULES or (game.end.termination == "ply_cap" and plies == max_plies)
        assert sum(game.played) == plies - opening_plies  # every move after the opening counted once


def test_the_context_fit_rule_leaves_room_for_one_more_move_and_clamps():
    v1, v2 = _model(0).config, _model(0, conditioning=True).config
    assert context_plies(GPTConfig(block_size=1024)) == 340  # 1 + 3 x 340 + 3 = 1024
    assert context_plies(GPTConfig(block_size=1024, conditioning=True)) == 339  # the prefix's 3 on top
    assert context_plies(v2) == context_plies(v1) - 1
    small = _model(0, block_size=32)
    assert fit_plies(300, [small]) == 9 and fit_plies(5, [small]) == 5 and fit_plies(300, []) == 300
    assert UCIEngine(small, "t").context_plies == 9  # the UCI engine falls back by the same rule


def test_a_cap_beyond_the_context_ends_games_where_the_context_does():
    small = ModelEngine(_model(1, block_size=32))
    games = _games(small, RandomEngine(0))
    play_batch(games, 300, Sampler(1.0, seed=2))
    _check(games, 9)
    assert any(game.end.termination == "ply_cap" for game in games)


@pytest.mark.parametrize("kind", ["random", "checkpoint", "itself"])
def test_a_model_plays_each_engine_kind_to_the_end(kind):
    me = ModelEngine(_model(2))
    other = {"random": RandomEngine(3), "checkpoint": ModelEngine(_model(3)), "itself": me}[kind]
    games = _games(me, other, n=5, opening="e2e4 e7e5")
    play_batch(games, 24, Sampler(1.0, seed=4))
    _check(games, 24, opening_plies=2)
    if kind == "random":  # only models count illegal attempts
        assert all(game.illegal[1 - game.index % 2] == 0 for game in games)
    again = _games(me, other, n=5, opening="e2e4 e7e5")
    play_batch(again, 24, Sampler(1.0, seed=4))
    assert [g.state.board.move_stack for g in again] == [g.state.board.move_stack for g in games]


def test_engines_without_a_model_play_too(stockfish):
    with Stockfish(stockfish, StockfishLevel("weak", skill=0)) as process:
        games = _games(RandomEngine(5), StockfishEngine(process), n=2)
        play_batch(games, 40, Sampler(0.0))
    _check(games, 40)
    assert all(game.depths for game in games)  # Stockfish's reported depths are kept on the game


def test_the_rules_end_a_game(stockfish):
    # Black to move mates with Qh4; full-strength Stockfish finds it, the rules end the game.
    with Stockfish(stockfish, StockfishLevel("full", skill=20, movetime_ms=None, nodes=200)) as process:
        games = _games(RandomEngine(0), StockfishEngine(process), n=1, opening="f2f3 e7e5 g2g4")
        play_batch(games, 40, Sampler(0.0))
    [game] = games
    assert game.state.board.peek() == chess.Move.from_uci("d8h4")
    assert (game.end.result, game.end.termination) == ("0-1", "checkmate") and game.played == [0, 1]
