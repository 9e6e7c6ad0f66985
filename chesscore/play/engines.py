"""Who moves in a batch of games: a model (the one under test, or a checkpoint opponent), a
uniform random mover, Stockfish. The one game loop (chesscore.play.loop) asks them for moves
through one protocol, `Engine`, as cutechess asks every player the same way whatever it is.

    me = ModelEngine(model, prefixes=[told] * n)     # a model's side, told its conditioning prefix
    them = RandomEngine(seed) | StockfishEngine(stockfish) | ModelEngine(checkpoint)
    games = [Game(i, sides=(me, them) if i % 2 == 0 else (them, me)) for i in range(n)]

Models are the exception that shapes the protocol: a batch's models choose together, one
batched forward per token over every game where any of them is to move (chesscore.play.moves),
so that two models in one game stay in step and the sampler draws once for all of them. A
ModelEngine is therefore only a seat; the loop plays every seat of a batch through one
ModelTable, which is the Engine. Random and Stockfish engines move game by game.

(Not chesscore.play.engine: that module drives the Stockfish process this one wraps.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from chesscore.model import GPT
from chesscore.play.engine import Stockfish
from chesscore.play.moves import ModelPlayer, Sampler, cache_length, choose_moves
from chesscore.runtime.seeds import derive_seed
from chesscore.tokens import PAD, encode_game, encode_move

if TYPE_CHECKING:  # chesscore.play.loop imports this module
    from chesscore.play.loop import Game


class Engine(Protocol):
    """What the loop asks of whoever moves in a batch of games. Every call gets the live games
    in batch-row order, None where the call does not concern a game; a game moves once per step."""

    def open(self, games: Sequence[Game], max_plies: int) -> None:
        """Get ready for a batch (all of its games, before the first move)."""

    def play(self, games: Sequence[Game | None]) -> None:
        """Make one move in every game given (this engine is to move there) on game.state."""

    def observe(self, games: Sequence[Game | None]) -> None:
        """Take in the move other engines just made in every game given."""

    def keep(self, rows: Sequence[int]) -> None:
        """Only these rows of the live games go on (in this order): the others have ended."""


@dataclass(eq=False)
class ModelEngine:
    """A model's seat: the net, and the conditioning prefix it reads in each game of the batch
    (by Game.index; None: "unknown" everywhere, and a triples-v1 model reads none)."""

    model: GPT
    prefixes: Sequence[Sequence[int]] | None = None


class ModelTable:
    """The Engine of every model seat in a batch: one ModelPlayer (cache and logits over the
    batch's rows) per seat; each step, every game a model is to move in gets its move from one
    choose_moves call, and every player reads every move, its own or not."""

    def __init__(self, seats: Sequence[ModelEngine], sampler: Sampler) -> None:
        self.seats, self.sampler = list(seats), sampler
        self.players: list[ModelPlayer] = []

    def open(self, games: Sequence[Game], max_plies: int) -> None:
        n = len(games)
        self.players = [ModelPlayer(s.model, n, cache_length(max_plies), prefixes=s.prefixes) for s in self.seats]
        if any(game.state.board.move_stack for game in games):  # an opening: read it in one forward
            openings = [encode_game(game.state.board.move_stack)[:-1] for game in games]
            for player in self.players:
                player.prefill(openings)

    def play(self, games: Sequence[Game | None]) -> None:
        states = [game.state if game is not None else None for game in games]
        movers = [self.seats.index(game.to_move()) if game is not None else 0 for game in games]
        colours = [game.colour if game is not None else 0 for game in games]
        _, flags = choose_moves(states, self.players, movers, self.sampler)
        for game, colour, flag in zip(games, colours, flags):
            if game is not None:
                game.illegal[colour] += flag

    def observe(self, games: Sequence[Game | None]) -> None:
        tokens = torch.full((len(games), 3), PAD, dtype=torch.long)
        rows = [row for row, game in enumerate(games) if game is not None]
        if rows:  # one tensor for every game's move, not one per game
            tokens[rows] = torch.tensor([encode_move(games[row].state.board.peek()) for row in rows])
        moved = torch.tensor([game is not None for game in games])
        for player in self.players:
            player.feed(tokens, moved)

    def keep(self, rows: Sequence[int]) -> None:
        for player in self.players:
            player.keep(rows)


class _ByPosition:
    """An engine that moves game by game from the board alone: it takes in nothing."""

    def open(self, games: Sequence[Game], max_plies: int) -> None:
        pass

    def observe(self, games: Sequence[Game | None]) -> None:
        pass

    def keep(self, rows: Sequence[int]) -> None:
        pass


class RandomEngine(_ByPosition):
    """Uniformly random legal moves, from a generator per game seeded by `seed` and Game.key,
    so a game's moves do not depend on what else is in its batch."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rngs: dict[Game, random.Random] = {}

    def open(self, games: Sequence[Game], max_plies: int) -> None:
        self.rngs = {game: random.Random(derive_seed(self.seed, *game.key)) for game in games if self in game.sides}

    def play(self, games: Sequence[Game | None]) -> None:
        for game in games:
            if game is not None:
                game.push(self.rngs[game].choice(game.state.legal_moves()))


class StockfishEngine(_ByPosition):
    """A Stockfish level (chesscore.play.engine): its handicapped pick is seeded by Game.key;
    the depths it reports are kept on the game (Game.depths)."""

    def __init__(self, stockfish: Stockfish) -> None:
        self.stockfish = stockfish

    def play(self, games: Sequence[Game | None]) -> None:
        for game in games:
            if game is not None:
                move, depth = self.stockfish.play(game.state.board, game=game.key)
                if depth is not None:
                    game.depths.append(depth)
                game.push(move)
