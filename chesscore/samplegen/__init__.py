"""The embedded sample in data/raw/: Lichess-dump-format games made by Stockfish, seeded.

Regenerate the committed sample byte for byte (Stockfish 15.1 from Debian; about 10 minutes
and 10 CPU-minutes on the project's 2-core machine):

    python -m chesscore.samplegen --out data/raw/lichess_sample.pgn.zst

Modules: openings (named opening lines), people (players, events, time controls),
engine_game (Stockfish moves, clock, how a game ends), games (one game from its seed),
rejects (the games a validator must reject), pgn (the dump's text format), generate (the
whole file), report (summary tables).
"""

from .generate import STOCKFISH_VERSION, SampleConfig, Summary, generate

__all__ = ["STOCKFISH_VERSION", "SampleConfig", "Summary", "generate"]
