"""The one game loop: a batch of games played to their ends, whoever plays them.

    games = [Game(i, sides=(white, black), state=State.from_moves(opening), key=(name, i),
                  adjudicator=GameAdjudicator(rules, judge)) for i in ...]
    play_batch(games, max_plies=300, sampler=Sampler(0.0, seed))   # each game's .end is set

The arena (chesscore.play.arena) and self-play (chesscore.selfplay.games) both play through
here, so a game ends the same way in both: by the rules, by the judge's resign or draw rule, or
at the ply cap (chesscore.play.endings), the cap lowered to what every model's context holds
(chesscore.play.moves.fit_plies). Each step every live game makes one move: the engine to move
there plays it (chesscore.play.engines; all model seats of the batch choose together, in one
batched forward per token), the others are told it, then every game is checked for its end, and
ended games leave the batch so they stop costing compute. What a game counts as it goes (moves
played, illegal attempts, depths) is kept on its one Game record, which callers turn into
their own results.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import chess

from chesscore.play.adjudication import GameAdjudicator
from chesscore.play.endings import Ending, termination
from chesscore.play.engines import Engine, ModelEngine, ModelTable
from chesscore.play.moves import Sampler, fit_plies
from chesscore.tokens import State, encode_move

Side = Engine | ModelEngine  # a ModelEngine is played by the batch's ModelTable


@dataclass(eq=False)  # compared by identity: engines key their per-game state by the game
class Game:
    """One game of a batch and all it counts while it is played."""

    index: int  # its place in the batch (ModelEngine.prefixes are read by it)
    sides: tuple[Side, Side]  # White's, Black's; the same engine twice plays both colours
    state: State = field(default_factory=lambda: State.from_moves([]))  # an opening may be in it
    key: Hashable = ()  # names the game to seeded engines (a tuple: the random mover's seed labels)
    adjudicator: GameAdjudicator | None = None  # the judge's rules; None: the rules of chess and a drawn cap
    played: list[int] = field(default_factory=lambda: [0, 0])  # per colour: moves played (not the opening)
    illegal: list[int] = field(default_factory=lambda: [0, 0])  # per colour: a model's illegal unmasked choices
    depths: list[int] = field(default_factory=list)  # depths a Stockfish engine reported
    end: Ending | None = None  # set when the game ends

    @property
    def colour(self) -> int:
        """0 while White is to move, 1 while Black is."""
        return 0 if self.state.board.turn == chess.WHITE else 1

    def to_move(self) -> Side:
        return self.sides[self.colour]

    def push(self, move: chess.Move) -> None:
        """Play `move` on the game's state (its three tokens)."""
        for token in encode_move(move):
            self.state.feed(token)


def play_batch(
    games: Sequence[Game], max_plies: int, sampler: Sampler, on_end: Callable[[Game], None] | None = None
) -> None:
    """Play every game to its end (Game.end); `sampler` draws the model seats' moves, `on_end`
    hears of each game as it ends. Engines are asked in a fixed order, the models first."""
    seats = list(dict.fromkeys(side for game in games for side in game.sides if isinstance(side, ModelEngine)))
    table = ModelTable(seats, sampler)
    others = dict.fromkeys(side for game in games for side in game.sides if not isinstance(side, ModelEngine))
    engines: list[Engine] = ([table] if seats else []) + list(others)
    max_plies = fit_plies(max_plies, [seat.model for seat in seats])
    for engine in engines:
        engine.open(games, max_plies)
    live = list(games)
    while live:
        colours = [game.colour for game in live]
        movers = [table if isinstance(side, ModelEngine) else side for side in (g.to_move() for g in live)]
        for engine in engines:
            if any(mover is engine for mover in movers):
                engine.play([game if mover is engine else None for game, mover in zip(live, movers)])
        for engine in engines:
            if any(mover is not engine for mover in movers):
                engine.observe([game if mover is not engine else None for game, mover in zip(live, movers)])
        for game, colour in zip(live, colours):
            game.played[colour] += 1
            game.end = termination(game.state.board, game.state.legal_moves(), max_plies, game.adjudicator)
            if game.end is not None and on_end is not None:
                on_end(game)
        rows = [row for row, game in enumerate(live) if game.end is None]
        if rows and len(rows) < len(live):
            for engine in engines:
                engine.keep(rows)
        live = [live[row] for row in rows]
