"""Free-running evaluation (exact legal-masked top-k + own-move legality) with the branching
key/value cache, against the obvious way without a cache, on the same positions.

    python bench/evaluate.py                          # demo-config model, real games (bench/_inputs.py)
    python bench/evaluate.py --checkpoint data/train/best.pt --games 64

  baseline  one full forward per prefix: for every position, the gold prefix plus each legal
            source (and each promoting source+destination), so every legal move's probability
            is exact; then the model's own greedy source/destination/promotion the same way
  ours      chesscore.eval.moves.analyse_games: every game of a batch at the same ply, a
            branch = rewind the cache row, feed 1-2 tokens; sources expanded best-first only
            until the top-k is certain

Both give the same ranks and legality flags (checked). Prints positions/s per CPU second for
each and the ratio; ours is also timed on a larger batch (its speed grows with the batch).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import chess
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._inputs import describe, mainlines  # noqa: E402
from chesscore.checkpoint import load_model  # noqa: E402
from chesscore.eval.moves import analyse_games  # noqa: E402
from chesscore.model import CONFIGS, GPT  # noqa: E402
from chesscore.tokens import BOS, PROMOTION_TOKEN, encode_game  # noqa: E402


@torch.no_grad()
def baseline(model: GPT, games: list[list[chess.Move]], top_k: int) -> list[tuple]:
    """(rank, source legal, destination legal, promotion legal) per position, full forwards only."""

    def last(prefix: list[int]) -> torch.Tensor:
        return model(torch.tensor([prefix]))[0, -1]

    out = []
    for moves in games:
        board, prefix = chess.Board(), [BOS]
        for gold in moves:
            triples = {(m.from_square, m.to_square, PROMOTION_TOKEN[m.promotion]) for m in board.legal_moves}
            source_logits = last(prefix)
            sources = sorted({s for s, _, _ in triples})
            lp_source = dict(zip(sources, torch.log_softmax(source_logits[sources], 0).tolist()))
            scores, branch = {}, {}
            for s in sources:
                branch[(s,)] = last(prefix + [s])
                dests = sorted({d for s2, d, _ in triples if s2 == s})
                lp_dest = dict(zip(dests, torch.log_softmax(branch[(s,)][dests], 0).tolist()))
                for d in dests:
                    promos = sorted({p for s2, d2, p in triples if (s2, d2) == (s, d)})
                    lp_promo = {promos[0]: 0.0}
                    if len(promos) > 1:
                        branch[(s, d)] = last(prefix + [s, d])
                        lp_promo = dict(zip(promos, torch.log_softmax(branch[(s, d)][promos], 0).tolist()))
                    for p in promos:
                        scores[(s, d, p)] = lp_source[s] + lp_dest[d] + lp_promo[p]
            ranked = sorted(scores, key=lambda t: -scores[t])[:top_k]
            triple = (gold.from_square, gold.to_square, PROMOTION_TOKEN[gold.promotion])
            own_s = int(source_logits.argmax())
            own_d = own_p = None
            if own_s in sources:
                own_d = int(branch[(own_s,)].argmax())
                if any((s, d) == (own_s, own_d) for s, d, _ in triples):
                    promo_logits = branch.get((own_s, own_d))
                    if promo_logits is None:
                        promo_logits = last(prefix + [own_s, own_d])
                    own_p = int(promo_logits.argmax())
            d_ok = None if own_d is None else any((s, d) == (own_s, own_d) for s, d, _ in triples)
            p_ok = None if own_p is None else (own_s, own_d, own_p) in triples
            out.append((ranked.index(triple) + 1 if triple in ranked else None, own_s in sources, d_ok, p_ok))
            prefix += list(triple)
            board.push(gold)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="default: an untrained demo-config model")
    parser.add_argument("--games", type=int, default=8, help="games for the comparison")
    parser.add_argument("--plies", type=int, default=40, help="plies of each game used")
    parser.add_argument("--batch-games", type=int, default=64, help="games for ours alone, one batch")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.checkpoint:
        model, _ = load_model(args.checkpoint)
        name = str(args.checkpoint)
    else:
        torch.manual_seed(0)
        model, name = GPT(CONFIGS["demo"]).eval(), "untrained demo config"
    games = mainlines(max(args.games, args.batch_games), max_plies=args.plies, min_plies=min(10, args.plies))
    compared = games[: args.games]
    tokens = [np.array(encode_game(g), dtype=np.uint8) for g in compared]
    positions = sum(len(g) for g in compared)

    start = time.process_time()
    expected = baseline(model, compared, 3)
    baseline_s = time.process_time() - start
    start = time.process_time()
    got = analyse_games(model, tokens, top_k=3)
    ours_s = time.process_time() - start
    same = [(r.rank, r.source_legal, r.destination_legal, r.promotion_legal) for r in got] == expected
    many = [np.array(encode_game(g), dtype=np.uint8) for g in games[: args.batch_games]]
    start = time.process_time()
    analyse_games(model, many, top_k=3)
    many_s = time.process_time() - start
    many_positions = sum(len(g) for g in games[: args.batch_games])

    print(
        f"bench/evaluate: {name}, {args.threads} thread(s); {len(compared)} real games x <= {args.plies} plies "
        f"= {positions} positions, from {describe()}"
    )
    print(f"  baseline (full forward per prefix)  {positions / baseline_s:8.1f} positions/CPU-s")
    print(
        f"  ours (branching cache), same games  {positions / ours_s:8.1f} positions/CPU-s   "
        f"ratio {baseline_s / ours_s:5.1f}x   results identical: {same}"
    )
    print(
        f"  ours, {len(many)} games in one batch     {many_positions / many_s:8.1f} positions/CPU-s   "
        f"ratio {baseline_s / positions * many_positions / many_s:5.1f}x"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
