"""At which sampling temperature do a model's moves best fit the players of each rating band?
Temperature scaling, one scalar per band, fit on held-out games by the move NLL.

    python -m chesscore.eval.calibration data/train/best.pt data/dataset --split validation --games 200
    python -m chesscore.eval.calibration data/train/best.pt data/dataset --json calibration.json

A bot samples its moves (chesscore.play: temperature T, the legal mask at each of the move's three
tokens). The probability of a move under that sampling is p(source) p(destination | source)
p(promotion | source, destination), each factor a softmax of the logits divided by T over the
legal tokens only; this module scores each rated player's real moves so, for a grid of T, and
reports per band (the mover's rating, nearest of `--ratings`) the NLL at T = 1 and the best T.

A triples-v2 model is told what a bot is told (chesscore.play.arena, UCI_Elo): the mover's own
rating, the opponent's and the time control "unknown"; a triples-v1 model reads the game alone.

Why: a best T far from 1 says the model is over- (T > 1) or under-confident for that band's
players; best temperatures that differ between bands say whether sampling at the told rating's
temperature could make the bot weaker when told a lower rating (docs/strength-experiment.md).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from chesscore.checkpoint import load_model
from chesscore.conditioning import with_prefix
from chesscore.data import dataset
from chesscore.eval.conditioning import band_of
from chesscore.fileio import atomic_write_json
from chesscore.model import GPT
from chesscore.runtime.progress import progress_bar
from chesscore.tokens import PREFIX_LENGTH, PROMOTION_TOKEN, UNKNOWN_PREFIX, State, rating_token

RATINGS = (1000, 1400, 1800, 2200)  # evaluate's conditioning bands
TEMPERATURES = tuple(round(0.25 + 0.05 * i, 2) for i in range(56))  # 0.25 .. 3.0

Step = tuple[torch.Tensor, int]  # one token's logits over the legal tokens only, and the gold one's index


@torch.no_grad()
def move_steps(model: GPT, tokens: np.ndarray, side: int, rating: int | None) -> list[list[Step]]:
    """The steps of each move `side` (0 white, 1 black) plays in one game (v1 tokens), teacher
    forced; a step is left out where the mask leaves one token (probability 1 at any T)."""
    offset = PREFIX_LENGTH if model.config.conditioning else 0
    row = np.asarray(tokens)
    if offset:
        prefix = list(UNKNOWN_PREFIX)
        prefix[side] = rating_token(rating)
        row = with_prefix(row, prefix)
    device = model.lm_head.weight.device
    logits = model(torch.as_tensor(row[None].astype(np.int64), device=device))[0].float().cpu()
    state = State(conditioned=bool(offset))
    for token in row[: 1 + offset]:
        state.feed(int(token))
    moves = []
    for ply in range((len(row) - 2 - offset) // 3):
        at = 1 + offset + 3 * ply
        gold = [int(t) for t in row[at : at + 3]]
        if ply % 2 == side:
            legal = state.legal_moves()
            played = (gold[0], gold[1])
            choices = [
                sorted({m.from_square for m in legal}),
                sorted({m.to_square for m in legal if m.from_square == played[0]}),
                sorted({PROMOTION_TOKEN[m.promotion] for m in legal if (m.from_square, m.to_square) == played}),
            ]
            moves.append(
                [
                    (logits[at - 1 + i][allowed], allowed.index(gold[i]))
                    for i, allowed in enumerate(choices)
                    if len(allowed) > 1
                ]
            )
        for token in gold:
            state.feed(token)
    return moves


def move_nll(moves: Sequence[Sequence[Step]], temperatures: Sequence[float]) -> np.ndarray:
    """The mean NLL per move (nats) at each temperature."""
    inverse = 1.0 / torch.tensor(temperatures, dtype=torch.float64)[:, None]
    total = torch.zeros(len(temperatures), dtype=torch.float64)
    for logits, gold in itertools.chain.from_iterable(moves):
        total -= torch.log_softmax(logits.double()[None, :] * inverse, dim=1)[:, gold]
    return (total / max(len(moves), 1)).numpy()


def calibrate(
    model: GPT,
    games: Iterable[tuple[np.ndarray, dict[str, Any]]],
    ratings: Sequence[int] = RATINGS,
    temperatures: Sequence[float] = TEMPERATURES,
) -> dict[str, Any]:
    """Per band: moves, NLL at T = 1, the best T and its NLL. Unrated movers are left out."""
    if 1.0 not in temperatures:
        raise ValueError("the temperature grid must hold 1.0 (the model as trained)")
    by_band: dict[str, list[list[Step]]] = {str(r): [] for r in sorted(ratings)}
    for tokens, meta in games:
        for side, key in enumerate(("white_elo", "black_elo")):
            band = band_of(meta.get(key), ratings)
            if band is not None:
                by_band[band] += move_steps(model, tokens, side, meta[key])
    bands = {}
    for band, moves in by_band.items():
        if not moves:
            bands[band] = {"moves": 0}
            continue
        nll = move_nll(moves, temperatures)
        best = int(nll.argmin())
        bands[band] = {
            "moves": len(moves),
            "nll_at_1": float(nll[list(temperatures).index(1.0)]),
            "best_temperature": temperatures[best],
            "best_nll": float(nll[best]),
            "at_grid_edge": best in (0, len(temperatures) - 1),
        }
    return {
        "bands": bands,
        "temperatures": list(temperatures),
        "protocol": "move NLL under the legal mask at each token, logits / T; told the mover's rating, "
        "opponent and time control unknown (triples-v2); band: the nearest of the ratings",
    }


def text(result: dict[str, Any]) -> str:
    lines = [f"{'band':>6}{'moves':>8}{'NLL at T=1':>12}{'best T':>8}{'its NLL':>9}"]
    for band, row in result["bands"].items():
        if not row["moves"]:
            lines.append(f"{band:>6}{0:>8}  (no rated mover nearest this band)")
            continue
        edge = "  (the grid's edge)" if row["at_grid_edge"] else ""
        lines.append(
            f"{band:>6}{row['moves']:>8,}{row['nll_at_1']:>12.3f}{row['best_temperature']:>8.2f}"
            f"{row['best_nll']:>9.3f}{edge}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chesscore.eval.calibration",
        description="The sampling temperature that best fits each rating band's moves (temperature scaling).",
    )
    parser.add_argument("checkpoint", help="a checkpoint (best.pt)")
    parser.add_argument("dataset", help="a dataset folder (the convert stage's output)")
    parser.add_argument("--split", default="validation", choices=dataset.SPLITS, help="default: validation")
    parser.add_argument("--games", type=int, default=200, help="the split's first N games (default 200)")
    parser.add_argument(
        "--ratings", type=int, nargs="+", default=list(RATINGS), help=f"band centres (default {RATINGS})"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON here")
    args = parser.parse_args(argv)
    if args.games < 1:
        parser.error(f"--games must be at least 1, got {args.games}")
    torch.set_num_threads(args.threads)
    model, _ = load_model(args.checkpoint, "cpu")
    games = itertools.islice(dataset.games(args.dataset, args.split), args.games)
    with progress_bar(iterable=games, total=args.games, desc="calibrate", unit="game") as bar:
        result = calibrate(model, bar)
    result.update(checkpoint=str(args.checkpoint), dataset=str(args.dataset), split=args.split, games=args.games)
    print(text(result))
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
