"""Free-running move metrics with the branching cache, against a brute-force computation that
runs a full forward for every prefix of every legal move."""

import chess
import numpy as np
import pytest
import torch

from chesscore.eval.moves import analyse_games
from chesscore.model import CONFIGS, GPT
from chesscore.tokens import BOS, PROMOTION_TOKEN, encode_game
from tests.tiny_models import trained_tiny

GAMES = [  # different lengths (rows leave the batch), a capture-promotion at the last ply
    "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
    "d2d4 d7d5",
    "e2e4 d7d5 e4d5 g8f6 f1b5 c7c6 d5c6 d8d7 c6b7 e8d8 b7a8q",
    "g1f3 g8f6 c2c4 e7e6 b1c3 f8b4 d1c2 e8g8",
]


@torch.no_grad()
def _brute_force(model: GPT, moves: list[str], top_k: int) -> list[tuple]:
    """(rank, source legal, destination legal, promotion legal) per ply, from full forwards."""

    def step(prefix, allowed):
        logits = model(torch.tensor([prefix]))[0, -1]
        index = torch.tensor(sorted(allowed))
        return dict(zip(index.tolist(), torch.log_softmax(logits[index], 0).tolist())), int(logits.argmax())

    board, prefix, out = chess.Board(), [BOS], []
    for uci in moves:
        legal = list(board.legal_moves)
        triples = {(m.from_square, m.to_square, PROMOTION_TOKEN[m.promotion]) for m in legal}
        source_lp, source = step(prefix, {s for s, _, _ in triples})
        scores = {}
        for s, d, p in triples:
            dest_lp, _ = step(prefix + [s], {d2 for s2, d2, _ in triples if s2 == s})
            promo_lp, _ = step(prefix + [s, d], {p2 for s2, d2, p2 in triples if (s2, d2) == (s, d)})
            scores[(s, d, p)] = source_lp[s] + dest_lp[d] + promo_lp[p]
        ranked = sorted(scores, key=lambda t: -scores[t])[:top_k]
        gold = chess.Move.from_uci(uci)
        gold_triple = (gold.from_square, gold.to_square, PROMOTION_TOKEN[gold.promotion])
        rank = ranked.index(gold_triple) + 1 if gold_triple in ranked else None
        source_ok = any(s == source for s, _, _ in triples)
        dest_ok = promo_ok = None
        if source_ok:
            _, dest = step(prefix + [source], range(64))
            dest_ok = any((s, d) == (source, dest) for s, d, _ in triples)
            if dest_ok:
                _, promo = step(prefix + [source, dest], range(64, 69))
                promo_ok = (source, dest, promo) in triples
        out.append((rank, source_ok, dest_ok, promo_ok))
        prefix += list(gold_triple)
        board.push(gold)
    return out


@pytest.mark.parametrize("which", ["trained", "untrained"])
def test_branching_cache_matches_brute_force_at_every_position(which):
    torch.manual_seed(3)
    model = trained_tiny() if which == "trained" else GPT(CONFIGS["tiny"]).eval()
    games = [line.split() for line in GAMES]
    results = analyse_games(model, [np.array(encode_game(g), dtype=np.uint8) for g in games], top_k=3)
    assert [(r.game, r.ply) for r in results] == [(g, p) for g, moves in enumerate(games) for p in range(len(moves))]
    got = [(r.rank, r.source_legal, r.destination_legal, r.promotion_legal) for r in results]
    expected = [row for moves in games for row in _brute_force(model, moves, 3)]
    assert got == expected
    assert all(r.move_legal == bool(r.promotion_legal) for r in results)
    if which == "trained":  # the test says something only if some answers differ
        assert {r.rank for r in results} >= {1, None} and {r.source_legal for r in results} == {True, False}


def test_top_k_grows_with_k_and_a_single_legal_move_needs_no_forward():
    model = trained_tiny()
    game = [np.array(encode_game("e2e4 f7f6 d2d4 g7g5 d1h5".split()), dtype=np.uint8)]  # mate follows
    ranks = {k: [r.rank for r in analyse_games(model, game, top_k=k)] for k in (1, 3, 218)}
    for one, three, many in zip(ranks[1], ranks[3], ranks[218]):
        assert many is not None  # no position has more than 218 legal moves
        assert three == (many if many <= 3 else None) and one == (1 if many == 1 else None)
    forced = [np.array(encode_game("e2e4 f7f6 d1h5 g7g6 h5g6 h7g6".split()), dtype=np.uint8)]
    last = analyse_games(model, forced, top_k=3)[-1]  # after Qxg6+ only hxg6 is legal
    assert last.rank == 1
    assert last.expansions <= 2  # only the model's own greedy move may need forwards
