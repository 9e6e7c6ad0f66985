"""Free-running move metrics at every position of real games, batched with a branching cache.

At each position of a game the model has read the gold moves before it. Two questions:

- Move matching (the Maia measure): is the human's move the model's top-1 / among its top-k
  moves, ranked by the model's probability of the whole move under the legal mask,
  p(source) p(destination | source) p(promotion | source, destination), each factor
  renormalised over the legal tokens? The exact top-k is found best-first: a partial move's
  probability bounds every completion, so sources are expanded in order of probability until
  k complete moves are found (a trained model needs few expansions).
- Raw legality of the model's own move: its unmasked greedy source; if that is a legal
  source, its unmasked greedy destination after it; if legal, its unmasked greedy promotion
  token after both. Reported per sub-token and for the whole move.

Both need the model's logits after token prefixes that leave the gold game (a source other
than the gold one, ...). The key/value cache keeps one row per game; a branch rewinds the row
to the position, feeds one or two tokens, and is rewound again (the gold tokens are fed last,
overwriting the branch). Every game of a batch sits at the same ply, so each branch round is
one batched forward. Legal moves are generated once per position (chesscore.tokens.State).

    rows = analyse_games(model, [tokens_a, tokens_b], top_k=3)   # one PositionResult per ply
"""

from __future__ import annotations

import heapq
from collections.abc import Generator, Sequence
from dataclasses import dataclass

import chess
import numpy as np
import torch

from chesscore.model import GPT
from chesscore.tokens import PAD, PROMOTION_TOKEN, State, decode_move, prefix_length

Node = tuple[int, ...]  # tokens of a partial move: (source,) or (source, destination)


@dataclass(frozen=True)
class PositionResult:
    game: int  # index in the list given to analyse_games
    ply: int  # 0-based: the move played at this position is the game's ply+1-th
    rank: int | None  # 1-based rank of the gold move among the model's top-k (None: not in it)
    source_legal: bool  # the model's unmasked greedy source is a legal source square
    destination_legal: bool | None  # its greedy destination after that source (None: source illegal)
    promotion_legal: bool | None  # its greedy promotion token after both (None: not reached)
    expansions: int  # branch forwards this position needed

    @property
    def move_legal(self) -> bool:
        return bool(self.promotion_legal)


def _masked_log_softmax(logits: torch.Tensor, tokens: Sequence[int]) -> dict[int, float]:
    """log p(token) over `tokens` only (the legal ones), from the raw logits."""
    index = torch.as_tensor(list(tokens), dtype=torch.long)
    values = torch.log_softmax(logits.float()[index], dim=0)
    return dict(zip(index.tolist(), values.tolist()))


def analyse_position(
    source_logits: torch.Tensor, legal: Sequence[chess.Move], gold: chess.Move, top_k: int
) -> Generator[Node, torch.Tensor, PositionResult]:
    """A generator: yields each node whose next-token logits it needs, receives them, and
    returns the position's result (game and ply are filled in by the caller)."""
    moves: dict[Node, dict[int, int]] = {}  # (s,) -> {d: 1}; (s, d) -> {promotion token: 1}
    for move in legal:
        moves.setdefault((move.from_square,), {})[move.to_square] = 1
        moves.setdefault((move.from_square, move.to_square), {})[PROMOTION_TOKEN[move.promotion]] = 1
    memo: dict[Node, torch.Tensor] = {}

    def logits_of(node: Node) -> Generator[Node, torch.Tensor, torch.Tensor]:
        if node not in memo:
            memo[node] = yield node
        return memo[node]

    # The model's own unmasked greedy move, sub-token by sub-token.
    source = int(source_logits.argmax())
    source_legal = (source,) in moves
    destination_legal = promotion_legal = None
    if source_legal:
        destination = int((yield from logits_of((source,))).argmax())
        destination_legal = destination in moves[(source,)]
        if destination_legal:
            promotion = int((yield from logits_of((source, destination))).argmax())
            promotion_legal = promotion in moves[(source, destination)]

    # Exact top-k legal moves by masked probability, best-first.
    sources = [node[0] for node in moves if len(node) == 1]
    heap = [(-lp, (s,)) for s, lp in _masked_log_softmax(source_logits, sources).items()]
    heapq.heapify(heap)
    ranked: list[Node] = []
    while heap and len(ranked) < top_k:
        negative, node = heapq.heappop(heap)
        if len(node) == 3:
            ranked.append(node)
            continue
        children = list(moves[node])
        if len(children) == 1:  # probability 1 under the mask: no forward needed
            heapq.heappush(heap, (negative, (*node, children[0])))
            continue
        for child, lp in _masked_log_softmax((yield from logits_of(node)), children).items():
            heapq.heappush(heap, (negative - lp, (*node, child)))
    gold_triple = (gold.from_square, gold.to_square, PROMOTION_TOKEN[gold.promotion])
    rank = ranked.index(gold_triple) + 1 if gold_triple in ranked else None
    return PositionResult(-1, -1, rank, source_legal, destination_legal, promotion_legal, len(memo))


@torch.no_grad()
def analyse_games(model: GPT, games: Sequence[np.ndarray], top_k: int = 3) -> list[PositionResult]:
    """One PositionResult per ply of every game (token arrays BOS ... EOS, or triples-v2's BOS,
    prefix, moves, EOS for a conditioned model), in game order. The games are analysed together,
    so give a batch of similar lengths (and of one version)."""
    device = model.lm_head.weight.device
    offset = prefix_length(games[0])  # the conditioning prefix is read with BOS, before ply 1
    if any(prefix_length(tokens) != offset for tokens in games):
        raise ValueError("a batch mixes games with and without the conditioning prefix")
    plies = [(len(tokens) - 2 - offset) // 3 for tokens in games]
    longest = max(plies)
    rows = list(range(len(games)))  # the game in each row of the cache
    cache = model.new_cache(len(rows), max_len=3 * longest + 2 + offset)
    start = torch.tensor(np.array([tokens[: 1 + offset] for tokens in games], dtype=np.int64), device=device)
    source_logits = model(start, cache=cache)[:, -1].cpu()
    states = []
    for tokens in games:
        state = State(conditioned=bool(offset))
        for token in tokens[: 1 + offset]:
            state.feed(int(token))
        states.append(state)
    results: list[PositionResult] = []
    for ply in range(longest):
        live = [row for row, g in enumerate(rows) if plies[g] > ply]
        if len(live) < 0.75 * len(rows):  # drop finished games from the batch
            cache = cache.select(torch.tensor(live, device=device))
            source_logits, rows = source_logits[live], [rows[row] for row in live]
            live = list(range(len(rows)))
        position = 1 + offset + 3 * ply  # cache length before this ply's move
        gold = torch.full((len(rows), 3), PAD, dtype=torch.long)
        running = {}
        for row in live:
            g = rows[row]
            gold[row] = torch.as_tensor(games[g][position : position + 3].astype(np.int64))
            running[row] = analyse_position(
                source_logits[row], states[g].legal_moves(), decode_move(gold[row].tolist()), top_k
            )
        requests: dict[int, Node] = {}
        for row, generator in running.items():
            _advance(generator, None, rows[row], row, requests, results, ply)
        while requests:
            for width in sorted({len(node) for node in requests.values()}):
                asking = [row for row, node in requests.items() if len(node) == width]
                tokens = torch.full((len(rows), width), PAD, dtype=torch.long)
                for row in asking:
                    tokens[row] = torch.tensor(requests[row])
                cache.lengths.fill_(position)
                logits = model(tokens.to(device), cache=cache)[:, -1].cpu()
                for row in asking:
                    del requests[row]
                    _advance(running[row], logits[row], rows[row], row, requests, results, ply)
        for row in live:
            for token in gold[row].tolist():
                states[rows[row]].feed(token)
        cache.lengths.fill_(position)
        source_logits = model(gold.to(device), cache=cache)[:, -1].cpu()
    results.sort(key=lambda r: (r.game, r.ply))
    return results


def _advance(
    generator: Generator[Node, torch.Tensor, PositionResult],
    value: torch.Tensor | None,
    game: int,
    row: int,
    requests: dict[int, Node],
    results: list[PositionResult],
    ply: int,
) -> None:
    """Send `value` into a position's generator: record its next request (by cache row), or
    its result (by game)."""
    try:
        requests[row] = generator.send(value)
    except StopIteration as done:
        result: PositionResult = done.value
        results.append(
            PositionResult(
                game,
                ply,
                result.rank,
                result.source_legal,
                result.destination_legal,
                result.promotion_legal,
                result.expansions,
            )
        )
