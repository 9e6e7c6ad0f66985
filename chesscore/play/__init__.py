"""Playing games with a model: move choice, how games end, Stockfish, the arena, Elo, UCI.

    players = ModelPlayer(model); moves = choose_moves(...)        # batched, under the legal mask
    end = termination(board, legal_moves, max_plies)               # checkmate, ..., ply_cap
    games = play_match(model, opponent, ArenaConfig(games=8))      # vs random, Stockfish, a checkpoint
    python -m chesscore.play.uci --checkpoint data/train/best.pt   # the model as a UCI engine

Modules: `moves` (sampling and the key/value cache across many games, and how many plies fit a
model's context), `best` (the exact most likely legal move, best-first), `loop` (the one game
loop of the arena and self-play), `engines` (who moves in it: a model or checkpoint, the random
mover, Stockfish), `endings` (the rules that end a game), `adjudication` (the
Stockfish judge: resign, draw and ply-cap verdicts), `engine` (Stockfish over UCI, reproducible
handicaps), `opponents` (the arena's opponents from params), `arena` (matches and their PGN),
`report` (the arena's report files and console table), `elo` (Elo from scores, anchored
ratings), `uci` (the engine for GUIs and bots).
"""

from chesscore.play.arena import ArenaConfig, Opponent, play_match
from chesscore.play.elo import elo_difference
from chesscore.play.endings import TERMINATIONS, termination
from chesscore.play.engine import Stockfish, StockfishMissing, find_stockfish
from chesscore.play.moves import ModelPlayer, Sampler, choose_moves

__all__ = [
    "ArenaConfig",
    "ModelPlayer",
    "Opponent",
    "Sampler",
    "Stockfish",
    "StockfishMissing",
    "TERMINATIONS",
    "choose_moves",
    "elo_difference",
    "find_stockfish",
    "play_match",
    "termination",
]
