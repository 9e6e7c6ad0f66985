"""Teacher-forced metrics of a model over whole games (validation in training, evaluate).

The model reads each game's gold prefix and is scored on the next token, over the raw 128
logits (nothing masked or renormalised):

- nll: mean negative log-likelihood per target token (nats), and per phase.
- phase accuracy: argmax == gold at source, destination and promotion targets, and at EOS.
- teacher-forced triple legality: the argmax source, destination and promotion of each move
  form a legal move. Destination and promotion are read with the GOLD source (and
  destination) before them, so this is not a free-running legal-move rate.
- reserved probability: mass on tokens 72..127, which are never a target (the conditioning
  prefix of triples-v2 and the reserved tokens).
- illegal probability: mass on tokens that may not come next in the game's position.

A triples-v2 game's prefix targets are IGNORE (chesscore.train.batching.collate) and the
legality metrics start at its first move, so no metric counts the prefix. The legality metrics
replay games with python-chess; `legality_games` limits them to that many evenly spaced games.
Sums are kept in a `Totals` vector, so ranks can all-reduce them.

    metrics = evaluate(model, table, micro=32, device="cpu", legality_games=200)
    metrics["nll"], metrics["phase_accuracy"]["destination"]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import chess
import numpy as np
import torch
import torch.nn.functional as F

from chesscore.model import GPT
from chesscore.tokens import EOS, PAD, RESERVED_START, State, decode_move, prefix_length
from chesscore.train.batching import IGNORE, GameSource, collate, device_inputs, eval_batches

PHASES = ("source", "destination", "promotion", "eos")
PROTOCOL = (
    "raw 128-token teacher-forced next-token logits; triple destination/promotion "
    "conditioned on the gold prefix; not free-running"
)
KEYS = (
    "games",
    "targets",
    "nll_sum",
    "reserved_sum",
    "legality_games",
    "legality_targets",
    "illegal_sum",
    "moves",
    "legal_moves",
    *(f"{phase}_{what}" for phase in PHASES for what in ("n", "correct", "nll_sum")),
)


class Totals:
    """Sums of everything the metrics divide; add batches, all-reduce `tensor`, `result`."""

    def __init__(self, values: torch.Tensor | None = None) -> None:
        self.values = torch.zeros(len(KEYS), dtype=torch.float64) if values is None else values

    def __getitem__(self, key: str) -> float:
        return float(self.values[KEYS.index(key)])

    def add(self, key: str, value: float) -> None:
        self.values[KEYS.index(key)] += value

    def tensor(self) -> torch.Tensor:
        return self.values

    def result(self) -> dict:
        def ratio(a: str, b: str) -> float | None:
            return self[a] / self[b] if self[b] else None

        return {
            "nll": ratio("nll_sum", "targets"),
            "games": int(self["games"]),
            "targets": int(self["targets"]),
            "phase_accuracy": {p: ratio(f"{p}_correct", f"{p}_n") for p in PHASES},
            "phase_nll": {p: ratio(f"{p}_nll_sum", f"{p}_n") for p in PHASES},
            "phase_counts": {p: int(self[f"{p}_n"]) for p in PHASES},
            "teacher_forced_triple_legality": ratio("legal_moves", "moves"),
            "reserved_probability": ratio("reserved_sum", "targets"),
            "illegal_probability": ratio("illegal_sum", "legality_targets"),
            "legality_games": int(self["legality_games"]),
            "legality_targets": int(self["legality_targets"]),
            "protocol": PROTOCOL,
        }


def legality_subset(n_games: int, legality_games: int | None) -> set[int]:
    """`legality_games` evenly spaced game indices (all games when None)."""
    if legality_games is None or legality_games >= n_games:
        return set(range(n_games))
    if legality_games < 1:
        raise ValueError(f"legality_games must be positive, got {legality_games}")
    return {i * n_games // legality_games for i in range(legality_games)}


def legal_masks(tokens: Sequence[int]) -> np.ndarray:
    """(len-1, 128) bool: row i is what may legally follow tokens[:i+1] (a v2 prefix included)."""
    state, masks = State(conditioned=prefix_length(tokens) > 0), []
    state.feed(tokens[0])
    for token in tokens[1:]:
        masks.append(state.mask(legal=True))
        state.feed(int(token))
    return np.stack(masks)


def _add_legality(totals: Totals, tokens: np.ndarray, probs: np.ndarray, pred: np.ndarray) -> None:
    """Illegal-token mass and teacher-forced triple legality of one game (from its first move:
    a v2 prefix is not a target)."""
    masks = legal_masks(tokens)
    n, first = len(masks), prefix_length(tokens)
    totals.add("legality_games", 1)
    totals.add("legality_targets", n - first)
    totals.add("illegal_sum", float(np.where(masks[first:], 0.0, probs[first:n]).sum()))
    board = chess.Board()
    for start in range(first, n - 1, 3):  # target index of each move's source token
        if tokens[start + 1] == EOS:
            break
        totals.add("moves", 1)
        try:
            totals.add("legal_moves", float(board.is_legal(decode_move(pred[start : start + 3]))))
        except ValueError:
            pass  # not even a well-formed move: counted as illegal
        board.push(decode_move(tokens[start + 1 : start + 4]))


def add_batch(totals: Totals, logits: torch.Tensor, targets: torch.Tensor, games: Sequence[np.ndarray | None]) -> None:
    """Add one batch: logits (B, T, 128) for targets (B, T) with IGNORE padding; games[b] is
    row b's tokens when the row is in the legality subset, else None."""
    logits = logits.float()
    valid = targets != IGNORE
    nll = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE, reduction="none")
    log_probs = logits.log_softmax(-1)
    probs = log_probs.exp()
    pred = logits.argmax(-1)
    totals.add("games", len(games))
    totals.add("targets", int(valid.sum()))
    totals.add("nll_sum", float(nll.sum()))
    totals.add("reserved_sum", float(probs[..., RESERVED_START:].sum(-1)[valid].sum()))
    position = torch.arange(targets.shape[1], device=targets.device).expand_as(targets) % 3
    is_eos = targets == EOS
    for phase, selected in (
        ("source", valid & (position == 0) & ~is_eos),
        ("destination", valid & (position == 1)),
        ("promotion", valid & (position == 2)),
        ("eos", valid & is_eos),
    ):
        totals.add(f"{phase}_n", int(selected.sum()))
        totals.add(f"{phase}_correct", int((selected & (pred == targets)).sum()))
        totals.add(f"{phase}_nll_sum", float(nll[selected].sum()))
    for row, tokens in enumerate(games):
        if tokens is not None:
            _add_legality(totals, tokens, probs[row].cpu().numpy(), pred[row].cpu().numpy())


@torch.no_grad()
def accumulate(
    model: GPT,
    source: GameSource,
    batches: Iterable[np.ndarray],
    *,
    legality: set[int],
    device: torch.device | str = "cpu",
    bf16: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> Totals | None:
    """Totals over these batches of game indices, or None when should_stop() said stop before
    a batch (a partial result must never be mistaken for a whole one). An empty batch only
    calls should_stop, so ranks with fewer batches keep in step with the others."""
    was_training = model.training
    model.eval()
    totals = Totals()
    try:
        for batch in batches:
            if should_stop is not None and should_stop():
                return None
            if len(batch) == 0:
                continue
            rows = source.batch(batch, pad=PAD)
            inputs, targets = collate(rows)
            inputs, features = device_inputs(model, inputs, device)
            targets = targets.to(device)
            with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
                logits = model(inputs, features=features)
            lengths = (rows != PAD).sum(1)
            games = [rows[r, : lengths[r]] if int(i) in legality else None for r, i in enumerate(batch)]
            add_batch(totals, logits, targets, games)
    finally:
        model.train(was_training)
    return totals


def evaluate(
    model: GPT,
    source: GameSource,
    *,
    micro: int = 32,
    device: torch.device | str = "cpu",
    legality_games: int | None = None,
    bf16: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> dict | None:
    """Every metric over all games of `source` in one process (None if stopped early)."""
    if len(source) == 0:
        raise ValueError("no games to evaluate")
    totals = accumulate(
        model,
        source,
        eval_batches(source.lengths(), micro),
        legality=legality_subset(len(source), legality_games),
        device=device,
        bf16=bf16,
        should_stop=should_stop,
    )
    return None if totals is None else totals.result()
