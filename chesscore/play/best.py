"""The model's most likely legal move, exactly, for many games at once: what temperature 0 plays.

Picking the greedy source, then the greedy destination after it, is not the most likely move: a
piece with many plausible moves collects source mass that no single move of it has. A move's
probability is p(source) p(destination | source) p(promotion | both), each factor renormalised
over the legal tokens; it is at most the probability of any prefix of it, so a best-first search
over prefixes finds the exact maximum: expand the most likely open prefix (one branch forward for
it: feed its tokens, read the logits, rewind the row) until the most likely node is a complete
move (chesscore.eval.moves ranks moves the same way). A trained model needs one or two
expansions; every round is one batched forward per player.

    moves = best_moves([s.legal_moves() for s in states], players, movers)   # tokens of each game's move
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING

import chess
import torch

from chesscore.tokens import encode_move

if TYPE_CHECKING:  # chesscore.play.moves imports this module
    from chesscore.play.moves import ModelPlayer

Move = tuple[int, int, int]


def _log_softmax(logits: torch.Tensor, tokens: Sequence[int]) -> dict[int, float]:
    """Log-probabilities of `tokens`, renormalised over them, from one row of host logits."""
    index = torch.as_tensor(sorted(tokens), dtype=torch.long)
    return dict(zip(index.tolist(), torch.log_softmax(logits[index], dim=0).tolist()))


def _children(prefix: tuple[int, ...], legal: list[Move]) -> set[int]:
    """The tokens that continue `prefix` toward a legal move."""
    return {move[len(prefix)] for move in legal if move[: len(prefix)] == prefix}


def best_moves(
    candidates: Sequence[Sequence[chess.Move] | None], players: Sequence[ModelPlayer], movers: Sequence[int]
) -> list[Move | None]:
    """Per game (None where its candidates are None), the tokens of the mover's most likely move
    among its candidates (the legal moves, or a UCI `go searchmoves` subset). The players are
    left as they were: same cache lengths, same logits."""
    ranked = ranked_moves(candidates, players, movers, 1)
    return [moves[0][0] if moves else None for moves in ranked]


def ranked_moves(
    candidates: Sequence[Sequence[chess.Move] | None],
    players: Sequence[ModelPlayer],
    movers: Sequence[int],
    count: int,
) -> list[list[tuple[Move, float]]]:
    """Per game, the mover's `count` most likely candidates (fewer where it has fewer), most
    likely first, each with its log-probability (UCI MultiPV). Players are left as they were."""
    legal: dict[int, list[Move]] = {}
    heaps: dict[int, list[tuple[float, tuple[int, ...]]]] = {}
    # Logits come to the host once per player and round, not once per game: on a GPU each
    # copy is a sync, and the search reads many rows of each.
    host = [player.logits.float().cpu() for player in players]
    for g, moves in enumerate(candidates):
        if not moves:
            continue
        legal[g] = [tuple(encode_move(move)) for move in moves]
        sources = _log_softmax(host[movers[g]][g], _children((), legal[g]))
        heaps[g] = [(-lp, (source,)) for source, lp in sources.items()]
        heapq.heapify(heaps[g])
    chosen: dict[int, list[tuple[Move, float]]] = {g: [] for g in heaps}

    def done(g: int) -> bool:
        return len(chosen[g]) >= min(count, len(legal[g]))

    while not all(done(g) for g in heaps):
        expand: dict[tuple[int, int], list[tuple[int, float, tuple[int, ...]]]] = {}
        for g, heap in heaps.items():
            while not done(g) and len(heap[0][1]) == 3:  # complete moves come out in order
                cost, prefix = heapq.heappop(heap)
                chosen[g].append((prefix, -cost))
            if done(g):
                continue
            cost, prefix = heapq.heappop(heap)
            options = _children(prefix, legal[g])
            if len(prefix) == 2 and len(options) == 1:  # no promotion choice: the move is complete
                heapq.heappush(heap, (cost, (*prefix, next(iter(options)))))
                continue
            expand.setdefault((movers[g], len(prefix)), []).append((g, -cost, prefix))
        for (mover, length), rows in expand.items():
            logits = _branch(players[mover], rows, length).float().cpu()
            for g, lp, prefix in rows:
                for token, step in _log_softmax(logits[g], _children(prefix, legal[g])).items():
                    heapq.heappush(heaps[g], (-(lp + step), (*prefix, token)))
    return [chosen.get(g, []) for g in range(len(candidates))]


def _branch(player: ModelPlayer, rows: list[tuple[int, float, tuple[int, ...]]], length: int) -> torch.Tensor:
    """The player's next-token logits after each row's prefix (`length` tokens), every row put
    back where it was."""
    tokens = torch.zeros((player.n_games, length), dtype=torch.long)
    active = torch.zeros(player.n_games, dtype=torch.bool)
    for g, _, prefix in rows:
        tokens[g] = torch.tensor(prefix)
        active[g] = True
    lengths, logits = player.cache.lengths.clone(), player.logits.clone()
    player.feed(tokens, active)
    after = player.logits
    player.cache.lengths, player.logits = lengths, logits
    return after
