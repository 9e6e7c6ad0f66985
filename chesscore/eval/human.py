"""Human-move prediction on real Lichess games: how often a model picks the move a human
played, beside two baselines measured in the same run on the same positions.

    python -m chesscore.eval.human --checkpoint data/train/best.pt              # evaluation half
    python -m chesscore.eval.human --checkpoint data/train/best.pt --half validation

- the model: top-1 / top-k of its legal-masked move ranking (chesscore.eval.moves, the Maia
  measure); a triples-v2 model is told each game's true ratings and time control;
- Stockfish at `stockfish_depth` (one thread, 16 MB hash, a fresh `ucinewgame` per position,
  MultiPV k): its first line is its top-1, its k lines its top-k;
- the uniform random mover: its expected top-1 is 1 / (legal moves), top-k min(k, n) / n.

The real games (data/real: 999 games of the 2021-10 Lichess dump, CC0) never enter a
dataset's splits. Each is put in one half by a keyed hash of its Site id
(chesscore.eval.real_games, which reads them and can write the validation half out for
training): `validation`, for choosing settings and checkpoints, and `evaluation`, which nothing
is trained or tuned on; the evaluate stage reports the evaluation half. Games that are not
standard chess from the start position, have no moves, or have a BOT player are skipped and
counted by reason. Intervals are 95%
percentile bootstraps over games (positions of one game are not independent), with a fixed
seed; `model_minus_stockfish` is the paired difference of top-1 on the same positions.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import chess
import chess.engine
import numpy as np
import torch

from chesscore import ranges
from chesscore.conditioning import prefix_of, with_prefix
from chesscore.eval.evaluate import PHASE_NAMES, EvalConfig, phase_of
from chesscore.eval.moves import analyse_games
from chesscore.eval.real_games import HALVES, RealGame, choose, half_of, read_real_games
from chesscore.model import GPT
from chesscore.play.engine import find_stockfish
from chesscore.train.batching import eval_batches

MEASURERS = ("model", "stockfish", "random")


@dataclass(frozen=True)
class HumanConfig:
    human_games: int | None = 200  # real games measured: the smallest sha256(seed:id) of the half; 0: none, null: all
    human_rating_bands: tuple[int, ...] = (1200, 1600, 2000)  # band edges of the mover's rating (Maia-like bands)
    stockfish_depth: int = 1  # the engine baseline's search depth (one thread, MultiPV top_k)
    bootstrap: int = 1000  # resamples of the games for the 95% intervals

    def __post_init__(self) -> None:
        ranges.check(self, whole=("human_games",), counts=("stockfish_depth", "bootstrap"))
        if list(self.human_rating_bands) != sorted(set(self.human_rating_bands)):
            raise ValueError(f"human_rating_bands must rise, got {list(self.human_rating_bands)}")


def model_ranks(model: GPT, games: Sequence[RealGame], top_k: int, batch_size: int) -> list[list[int | None]]:
    """Per game, per ply: the human move's rank among the model's top-k (None: not in it)."""
    tokens = [with_prefix(g.tokens, prefix_of(g.meta)) if model.config.conditioning else g.tokens for g in games]
    ranks: list[list[int | None]] = [[] for _ in games]
    model.eval()
    for batch in eval_batches(np.array([len(t) for t in tokens]), batch_size):
        for result in analyse_games(model, [tokens[int(i)] for i in batch], top_k):
            ranks[int(batch[result.game])].append(result.rank)
    return ranks


def stockfish_ranks(
    games: Sequence[RealGame], depth: int, top_k: int, path: str | None = None
) -> tuple[list[list[int | None]], str]:
    """Per game, per ply: the human move's rank among Stockfish's top-k lines at `depth`."""
    engine = chess.engine.SimpleEngine.popen_uci(find_stockfish(path))
    try:
        engine.configure({"Threads": 1, "Hash": 16})
        version = engine.id.get("name", "Stockfish")
        ranks = []
        for g in games:
            board, ranked_game = chess.Board(), []
            for move in g.moves:
                infos = engine.analyse(board, chess.engine.Limit(depth=depth), multipv=top_k, game=object())
                lines = [info["pv"][0] for info in infos if info.get("pv")]
                ranked_game.append(lines.index(move) + 1 if move in lines else None)
                board.push(move)
            ranks.append(ranked_game)
        return ranks, version
    finally:
        engine.quit()


def legal_counts(games: Sequence[RealGame]) -> list[list[int]]:
    """Per game, per ply: the number of legal moves (what the uniform random mover draws from)."""
    counts = []
    for g in games:
        board, game_counts = chess.Board(), []
        for move in g.moves:
            game_counts.append(board.legal_moves.count())
            board.push(move)
        counts.append(game_counts)
    return counts


def band_of(rating: int | None, edges: Sequence[int]) -> str:
    """The rating band of a mover: below the first edge, between two, or at the last and above."""
    if rating is None:
        return "unknown"
    above = [e for e in edges if e <= rating]
    if not above:
        return f"<{edges[0]}"
    if len(above) == len(edges):
        return f"{edges[-1]}+"
    return f"{above[-1]}-{edges[len(above)] - 1}"


def bands(edges: Sequence[int]) -> list[str]:
    """Every band, lowest first, then "unknown"."""
    return [band_of(edges[0] - 1, edges), *(band_of(e, edges) for e in edges), "unknown"]


def measure(
    model: GPT,
    games: Sequence[RealGame],
    config: HumanConfig,
    evaluation: EvalConfig,
    stockfish_path: str | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Top-1 / top-k of the model, Stockfish and the random mover on every ply of `games`,
    overall, by the mover's rating band and by phase (evaluation's phases), with 95%
    bootstrap intervals over games."""
    if not games:
        raise ValueError("no real games to measure")
    k = evaluation.top_k
    say(f"human moves: the model on {len(games)} real games")
    model_r = model_ranks(model, games, k, evaluation.batch_size)
    say(f"human moves: Stockfish depth {config.stockfish_depth} on the same positions")
    engine_r, version = stockfish_ranks(games, config.stockfish_depth, k, stockfish_path)
    legal = legal_counts(games)
    game_of, band, phase, hits = [], [], [], []  # per position
    for index, g in enumerate(games):
        for ply, (m, s, n) in enumerate(zip(model_r[index], engine_r[index], legal[index], strict=True)):
            game_of.append(index)
            band.append(
                band_of(g.meta["white_elo"] if ply % 2 == 0 else g.meta["black_elo"], config.human_rating_bands)
            )
            phase.append(phase_of(ply + 1, evaluation))
            hits.append((m == 1, m is not None, s == 1, s is not None, 1.0 / n, min(k, n) / n))
    table, game_of = np.array(hits, dtype=np.float64), np.array(game_of)
    rng = np.random.default_rng(evaluation.seed)
    draws = rng.integers(0, len(games), (config.bootstrap, len(games)))
    columns = [(who, name) for who in MEASURERS for name in ("top1", f"top{k}")]

    def summary(mask: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {"positions": int(mask.sum()), "games": len(set(game_of[mask].tolist()))}
        if not mask.any():
            return out
        sums = np.zeros((len(games), table.shape[1]))
        np.add.at(sums, game_of[mask], table[mask])
        counts = np.bincount(game_of[mask], minlength=len(games)).astype(np.float64)
        resampled = sums[draws].sum(1) / np.maximum(counts[draws].sum(1), 1.0)[:, None]
        value = sums.sum(0) / counts.sum()
        low, high = np.percentile(resampled, [2.5, 97.5], axis=0)
        for column, (who, name) in enumerate(columns):
            out.setdefault(who, {})[name] = _round(value[column])
            out[who][f"{name}_ci95"] = [_round(low[column]), _round(high[column])]
        difference = resampled[:, 0] - resampled[:, 2]  # model top-1 - Stockfish top-1, paired
        out["model_minus_stockfish_top1"] = {
            "value": _round(value[0] - value[2]),
            "ci95": [_round(x) for x in np.percentile(difference, [2.5, 97.5])],
        }
        return out

    band, phase = np.array(band), np.array(phase)
    return {
        "config": asdict(config),
        "top_k": k,
        "stockfish": {"version": version, "depth": config.stockfish_depth, "threads": 1, "multipv": k},
        "overall": summary(np.ones(len(game_of), dtype=bool)),
        "by_rating": [{"bucket": b, **summary(band == b)} for b in bands(config.human_rating_bands)],
        "by_phase": [{"bucket": p, **summary(phase == p)} for p in PHASE_NAMES],
    }


def _round(value: float) -> float:
    return round(float(value), 6)


def human_eval(
    model: GPT,
    path: str | os.PathLike,
    config: HumanConfig,
    evaluation: EvalConfig,
    half: str = "evaluation",
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole record: `measure` on the half's sample, and the real games' source."""
    games, source = read_real_games(path)
    chosen = choose(games, half, config.human_games, evaluation.seed)
    record = measure(model, chosen, config, evaluation, say=say)
    halves = Counter(half_of(g.game_id) for g in games)
    record["source"] = {
        **source,
        "halves": {h: halves[h] for h in HALVES},
        "half": half,
        "games_measured": len(chosen),
        "sample": f"the {len(chosen)} smallest sha256(seed:id) of the {half} half, seed {evaluation.seed}",
    }
    return record


def headline(record: dict[str, Any]) -> str:
    """One line per measurer: top-1 and top-k with intervals."""
    k, overall = record["top_k"], record["overall"]
    names = {"model": "model", "stockfish": f"Stockfish depth {record['stockfish']['depth']}", "random": "random mover"}
    lines = [f"human moves on {overall['positions']:,} positions of {overall['games']} real games:"]
    for who in MEASURERS:
        m = overall[who]
        lines.append(
            f"  {names[who]:<20} top-1 {_pct(m['top1'])} [{_pct(m['top1_ci95'][0])}, {_pct(m['top1_ci95'][1])}]"
            f"  top-{k} {_pct(m[f'top{k}'])}"
        )
    d = overall["model_minus_stockfish_top1"]
    lines.append(
        f"  model - Stockfish top-1 {_points(d['value'])} points [{_points(d['ci95'][0])}, {_points(d['ci95'][1])}]"
    )
    return "\n".join(lines)


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def main(argv: list[str] | None = None) -> int:
    from chesscore.checkpoint import load_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="any chesscore checkpoint")
    parser.add_argument("--real-games", type=Path, default=Path("data/real"), help="a PGN file or folder of real games")
    parser.add_argument("--half", choices=HALVES, default="evaluation", help="validation: for choosing settings")
    parser.add_argument("--games", type=int, default=HumanConfig.human_games, help="games measured (0: all)")
    parser.add_argument("--depth", type=int, default=HumanConfig.stockfish_depth, help="Stockfish's depth")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, _ = load_model(args.checkpoint, "cpu")
    config = HumanConfig(human_games=args.games or None, stockfish_depth=args.depth)  # 0 means all here
    print(headline(human_eval(model, args.real_games, config, EvalConfig(), args.half)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
