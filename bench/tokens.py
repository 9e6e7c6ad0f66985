"""Cost of the legal masks of one move against one python-chess legal-move generation.

    python bench/tokens.py [--games 200]

For every position of real games (bench/_inputs.py: the sample, after the corpus), on the same
position: (a) baseline `list(board.legal_moves)`; (b) our three masks of the move played
(source mask, feed source, destination mask, feed destination, promotion mask) on a State
that has not seen the position yet; (c) a naive automaton that generates the legal moves
again for each of the three masks. Target: (b) / (a) <= 1.5.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import chess
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._inputs import describe, mainlines  # noqa: E402
from chesscore.tokens import BOS, State, encode_move  # noqa: E402


def naive_masks(board: chess.Board, move: chess.Move) -> None:
    """What a per-token automaton does: a full move generation for every mask."""
    for keep in (
        lambda m: True,
        lambda m: m.from_square == move.from_square,
        lambda m: m.from_square == move.from_square and m.to_square == move.to_square,
    ):
        mask = np.zeros(128, dtype=bool)
        mask[[m.to_square for m in board.legal_moves if keep(m)]] = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=200, help="games to take positions from")
    args = parser.parse_args()
    games = mainlines(args.games)
    clock = time.perf_counter_ns
    generation = ours = naive = 0
    positions = 0
    for moves in games:
        state = State()
        state.feed(BOS)
        for move in moves:
            source, destination, promotion = encode_move(move)
            fresh, board = state.copy(), state.board.copy(stack=False)
            t0 = clock()
            list(board.legal_moves)
            t1 = clock()
            fresh.mask()
            fresh.feed(source)
            fresh.mask()
            fresh.feed(destination)
            fresh.mask()
            t2 = clock()
            naive_masks(board, move)
            t3 = clock()
            generation, ours, naive = generation + t1 - t0, ours + t2 - t1, naive + t3 - t2
            positions += 1
            for token in (source, destination, promotion):
                state.feed(token)

    def per(ns: float) -> float:
        return ns / positions / 1000

    print(f"positions: {positions} from {len(games)} games of {describe()}")
    print(f"baseline list(board.legal_moves):       {per(generation):7.1f} us/position")
    print(
        f"ours, three masks of a move:            {per(ours):7.1f} us/position   "
        f"ratio {ours / generation:.2f}x (target <= 1.5x)"
    )
    print(f"naive, a move generation per mask:      {per(naive):7.1f} us/position   ratio {naive / generation:.2f}x")
    sys.exit(0 if ours / generation <= 1.5 else 1)


if __name__ == "__main__":
    main()
