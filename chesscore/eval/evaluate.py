"""Evaluate a checkpoint on the dataset's test split: teacher-forced and free-running metrics,
each broken down by the mover's rating, the time-control class and the game phase.

    check_dataset(payload, manifest(dataset_dir), allow_other=False)  # refuse a foreign checkpoint
    games, split_size = sample_test_games(dataset_dir, n=200, seed=0)  # the only reader of `test`
    results = evaluate(model, games, EvalConfig())

Teacher-forced metrics are chesscore.train.metrics's (the ones training validates with), over a
full forward of each batch; a breakdown bucket scores only its own targets. Free-running
metrics (top-1 / top-k move matching under the legal mask, raw legality of the model's own
greedy move) come from chesscore.evaluate_moves. A target or position belongs to:
- rating: the mover's rating (white's at even plies, black's at odd), in `rating_bin` bins;
- time control: the game's Lichess class (bullet, blitz, ...);
- phase: by ply number (1-based): opening up to `opening_until_ply`, middlegame up to
  `middlegame_until_ply`, endgame after. (EOS counts at the ply after the last move.)
The teacher-forced legality metrics replay whole games, so their breakdown is by time control
only (the free-running legality is broken down everywhere).
"""

from __future__ import annotations

import heapq
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from chesscore import ranges
from chesscore.conditioning import ConditionedSource, prefix_of
from chesscore.data import dataset
from chesscore.eval.moves import PositionResult, analyse_games
from chesscore.failures import Refused
from chesscore.fileio import sha256_bytes
from chesscore.model import GPT
from chesscore.tokens import PAD, PREFIX_LENGTH, VERSIONS, VOCAB_SIZE
from chesscore.train import metrics
from chesscore.train.batching import IGNORE, TokenList, collate, device_inputs, eval_batches

DIMENSIONS = ("rating", "time_control", "phase")
PHASE_NAMES = ("opening", "middlegame", "endgame")
UNKNOWN = "unknown"


class DatasetMismatch(Refused, ValueError):
    """The checkpoint was not trained on the dataset given (its test split may have leaked)."""


@dataclass(frozen=True)
class EvalConfig:
    games: int | None = 100  # test games sampled (bottom-k by keyed hash of game id); None: all
    batch_size: int = 64  # games per batch (one row of the key/value cache each)
    top_k: int = 3  # move matching reports top-1 and top-k
    seed: int = 0  # keys the sample
    rating_bin: int = 100  # width of a rating bucket
    opening_until_ply: int = 20  # plies 1..20 are the opening
    middlegame_until_ply: int = 60  # plies 21..60 the middlegame, later ones the endgame
    conditioning_ratings: tuple[int, ...] = (1000, 1400, 1800, 2200)  # triples-v2 models: the told ratings

    def __post_init__(self) -> None:
        ranges.check(self, counts=("games", "batch_size", "top_k", "rating_bin"), whole=("seed", "opening_until_ply"))
        ranges.at_most("top_k", self.top_k, VOCAB_SIZE)
        ranges.at_least("middlegame_until_ply", self.middlegame_until_ply, self.opening_until_ply + 1, integer=True)
        if len(set(self.conditioning_ratings)) < 2 or min(self.conditioning_ratings) < 0:
            raise ValueError(
                f"conditioning_ratings must be two or more ratings >= 0, got {list(self.conditioning_ratings)}"
            )


def _fingerprints(identity: Any) -> set[str]:
    """Every `dataset_fingerprint` in a (possibly nested) identity, e.g. a self-play
    checkpoint's identity holds its supervised reference's."""
    found = set()
    if isinstance(identity, dict):
        for key, value in identity.items():
            if key == "dataset_fingerprint" and isinstance(value, str):
                found.add(value)
            else:
                found |= _fingerprints(value)
    elif isinstance(identity, list):
        for value in identity:
            found |= _fingerprints(value)
    return found


def check_dataset(
    payload: dict[str, Any], manifest: dict[str, Any], allow_other: bool = False, name: str = "checkpoint"
) -> str:
    """Refuse a checkpoint whose identity names another dataset (or none). Returns how the
    check went: "match" or "overridden"."""
    identity = payload.get("identity") or {}
    tokenizer = (identity.get("tokenizer") or {}).get("version")
    if tokenizer not in (None, *VERSIONS):
        raise DatasetMismatch(f"{name}: tokenizer {tokenizer!r}, this code reads {' and '.join(VERSIONS)}")
    found, expected = _fingerprints(identity), manifest["fingerprint"]
    if found == {expected}:
        return "match"
    if allow_other:
        return "overridden"
    if not found:
        raise DatasetMismatch(
            f"{name}: its identity names no dataset_fingerprint, so it cannot be shown "
            f"not to have trained on this test split (pass --allow-other-dataset to "
            f"evaluate it anyway)"
        )
    raise DatasetMismatch(
        f"{name}: trained on dataset {', '.join(sorted(found))}, not {expected} given; "
        f"its test split may hold training games (pass --allow-other-dataset to override)"
    )


def sample_test_games(
    dataset_dir: str | os.PathLike, n: int | None, seed: int
) -> tuple[list[tuple[np.ndarray, dict]], int]:
    """The test split's n games of smallest sha256(seed:game_id) (all when n is None), in
    that order, and the split's size. Every shard is verified first (chesscore.data.dataset);
    memory holds n games. The sample is stable when the split grows: a game stays in it
    unless a new game's key is smaller."""
    heap: list[tuple[str, int, np.ndarray, dict]] = []  # max-heap on the key via negation trick
    total = 0
    for index, (tokens, meta) in enumerate(dataset.games(dataset_dir, "test")):
        total += 1
        key = sha256_bytes(f"{seed}:{meta['game_id']}".encode())
        item = (_Desc(key), index, tokens, meta)
        if n is None or len(heap) < n:
            heapq.heappush(heap, item)
        elif key < heap[0][0].key:
            heapq.heapreplace(heap, item)
    chosen = sorted(heap, key=lambda item: item[0].key)
    return [(np.array(tokens), meta) for _, _, tokens, meta in chosen], total


class _Desc:
    """Orders keys in reverse, so heapq's min-heap keeps the largest kept key on top."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return self.key > other.key


def phase_of(ply_number: int, config: EvalConfig) -> str:
    if ply_number <= config.opening_until_ply:
        return "opening"
    return "middlegame" if ply_number <= config.middlegame_until_ply else "endgame"


def rating_bucket(rating: int | None, width: int) -> str:
    if rating is None:
        return UNKNOWN
    low = int(rating) // width * width
    return f"{low}-{low + width - 1}"


def buckets_of(meta: dict[str, Any], ply: int, config: EvalConfig) -> dict[str, str]:
    """The bucket of each dimension for the move at 0-based `ply` of this game."""
    rating = meta.get("white_elo") if ply % 2 == 0 else meta.get("black_elo")
    return {
        "rating": rating_bucket(rating, config.rating_bin),
        "time_control": meta.get("time_control_class") or UNKNOWN,
        "phase": phase_of(ply + 1, config),
    }


FREE_KEYS = (
    "positions",
    "top1",
    "topk",
    "source_legal",
    "source_legal_n",
    "destination_legal",
    "destination_legal_n",
    "promotion_legal",
    "move_legal",
    "expansions",
)


def _free_add(totals: dict[str, float], result: PositionResult) -> None:
    totals["positions"] += 1
    totals["top1"] += result.rank == 1
    totals["topk"] += result.rank is not None
    totals["source_legal"] += result.source_legal
    if result.source_legal:
        totals["source_legal_n"] += 1  # positions where a destination was asked for
        totals["destination_legal"] += bool(result.destination_legal)
        if result.destination_legal:
            totals["destination_legal_n"] += 1
            totals["promotion_legal"] += bool(result.promotion_legal)
    totals["move_legal"] += result.move_legal
    totals["expansions"] += result.expansions


def free_running_result(totals: dict[str, float], top_k: int) -> dict[str, Any]:
    def ratio(a: str, b: str) -> float | None:
        return totals[a] / totals[b] if totals[b] else None

    return {
        "positions": int(totals["positions"]),
        "top1": ratio("top1", "positions"),
        f"top{top_k}": ratio("topk", "positions"),
        "source_legal": ratio("source_legal", "positions"),
        "destination_legal": ratio("destination_legal", "source_legal_n"),
        "promotion_legal": ratio("promotion_legal", "destination_legal_n"),
        "move_legal": ratio("move_legal", "positions"),
        "expansions_per_position": ratio("expansions", "positions"),
    }


def _target_buckets(metas: Sequence[dict], width: int, config: EvalConfig, offset: int = 0) -> dict[str, np.ndarray]:
    """Per dimension, the bucket label of every target (batch rows x width); the first `offset`
    targets (a conditioning prefix) belong to none."""
    labels = {dim: np.full((len(metas), width), "", dtype=object) for dim in DIMENSIONS}
    for row, meta in enumerate(metas):
        n_targets = 3 * int(meta["plies"]) + 1
        for index in range(min(n_targets, width - offset)):
            for dim, label in buckets_of(meta, index // 3, config).items():
                labels[dim][row, offset + index] = label
    return labels


@torch.no_grad()
def evaluate(
    model: GPT,
    games: Sequence[tuple[np.ndarray, dict]],
    config: EvalConfig,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every metric over `games`, overall and per bucket; progress(games, positions) per batch."""
    device = model.lm_head.weight.device
    model.eval()
    source = TokenList([tokens for tokens, _ in games])
    offset = PREFIX_LENGTH if model.config.conditioning else 0
    if offset:  # triples-v2: each game told its true ratings and time control
        source = ConditionedSource(source, [prefix_of(meta) for _, meta in games])
    tf_buckets: dict[str, dict[str, metrics.Totals]] = {dim: defaultdict(metrics.Totals) for dim in DIMENSIONS}
    free = defaultdict(float)
    free_buckets = {dim: defaultdict(lambda: defaultdict(float)) for dim in DIMENSIONS}
    bucket_games = {dim: defaultdict(set) for dim in DIMENSIONS}
    for batch in eval_batches(source.lengths(), config.batch_size):
        rows = source.batch(batch, pad=PAD)
        metas = [games[int(i)][1] for i in batch]
        tokens = [source[int(i)] for i in batch]
        inputs, targets = collate(rows)
        on_device, features = device_inputs(model, inputs, device)
        logits = model(on_device, features=features).float().cpu()
        labels = _target_buckets(metas, targets.shape[1], config, offset)
        for dim in DIMENSIONS:
            for label in sorted(set(labels[dim][labels[dim] != ""])):
                selected = torch.from_numpy((labels[dim] == label).astype(bool))
                # Whole-game legality where a bucket holds whole games (time control).
                legality = (
                    [
                        t if buckets_of(meta, 0, config)["time_control"] == label else None
                        for t, meta in zip(tokens, metas)
                    ]
                    if dim == "time_control"
                    else [None] * len(batch)
                )
                metrics.add_batch(tf_buckets[dim][label], logits, targets.masked_fill(~selected, IGNORE), legality)
        for result in analyse_games(model, tokens, config.top_k):
            meta = metas[result.game]
            _free_add(free, result)
            for dim, label in buckets_of(meta, result.ply, config).items():
                _free_add(free_buckets[dim][label], result)
                bucket_games[dim][label].add(int(batch[result.game]))
        if progress is not None:
            progress(len(batch), sum(int(m["plies"]) for m in metas))
    # Every target and game lies in exactly one time-control bucket: their sum is the whole.
    overall = metrics.Totals(sum((t.tensor() for t in tf_buckets["time_control"].values()), metrics.Totals().tensor()))
    overall.add("games", len(games) - overall["games"])
    tables = {}
    for dim in DIMENSIONS:
        rows_out = []
        for label in _ordered(dim, set(free_buckets[dim]) | set(tf_buckets[dim])):
            tf = tf_buckets[dim][label].result()
            row = {
                "bucket": label,
                "games": len(bucket_games[dim][label]),
                **free_running_result(free_buckets[dim][label], config.top_k),
                "targets": tf["targets"],
                "nll": tf["nll"],
                **{f"accuracy_{phase}": tf["phase_accuracy"][phase] for phase in metrics.PHASES},
                "reserved_probability": tf["reserved_probability"],
            }
            if dim == "time_control":
                row["illegal_probability"] = tf["illegal_probability"]
                row["teacher_forced_triple_legality"] = tf["teacher_forced_triple_legality"]
            rows_out.append(row)
        tables[dim] = rows_out
    return {
        "config": asdict(config),
        "games": len(games),
        "teacher_forced": overall.result(),
        "free_running": free_running_result(free, config.top_k),
        "breakdowns": tables,
    }


def _ordered(dim: str, labels: Iterable[str]) -> list[str]:
    labels = set(labels)
    if dim == "phase":
        return [p for p in PHASE_NAMES if p in labels]
    if dim == "rating":
        known = sorted((label for label in labels if label != UNKNOWN), key=lambda s: int(s.split("-")[0]))
        return known + ([UNKNOWN] if UNKNOWN in labels else [])
    return sorted(labels)
