"""Reading raw PGN: input files (compressed or not), games split out of them, moves parsed.

    for path in find_inputs([Path("data/raw")]):                  # .pgn, .pgn.zst, .gz, .bz2
        for block in read_blocks(path): ...                        # decompressed bytes, streamed
    games = split_games(blocks)                                    # RawGame: text, offset, index
    batch = parse_batch(games)                                     # Rust parser, python-chess decides

Modules: `inputs` (files, compression, InputError), `split` and `fastsplit` (game boundaries in
real-world files), `parse` (moves), `tags` and `meta` (header tags as Arrow columns: ratings,
time controls, Lichess ids).
"""

from chesscore.pgn.inputs import InputError, find_inputs, read_blocks
from chesscore.pgn.parse import ParsedBatch, parse_batch
from chesscore.pgn.split import RawGame, split_games
from chesscore.pgn.tags import TagTable

__all__ = [
    "InputError",
    "ParsedBatch",
    "RawGame",
    "TagTable",
    "find_inputs",
    "parse_batch",
    "read_blocks",
    "split_games",
]
