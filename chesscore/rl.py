"""Policy gradient on self-play games: REINFORCE with a baseline, plus a KL penalty that keeps
the policy near the frozen supervised reference.

    optimizer = adamw(model, OptimConfig(lr=1e-5, weight_decay=0.0), device)
    metrics = policy_gradient_step(model, reference, optimizer, records, PGConfig(kl_coef=0.1))

The policy is what played: softmax(logits / temperature) under the legal mask (EOS never
legal), one factor per move token (source, destination, promotion). For every side the model
played, its reward (win 1, draw 0, loss -1 by default) minus the baseline (the batch's mean
reward) weighs the log-probability of each of its moves. The KL term is exact per token,
KL(pi || pi_ref) over the legal tokens, summed along the played moves (an unbiased estimate
of the games' KL, since the moves were sampled from pi), averaged per move like the policy
term. One optimizer step per call, the gradient accumulated over minibatches of games.

The forward runs in eval mode: the gradient must be of the policy that played (no dropout).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from chesscore.model import GPT
from chesscore.play import play_mask
from chesscore.selfplay import MODEL, GameRecord
from chesscore.tokens import BOS, PAD, State, encode_move

Reward = Callable[[GameRecord, bool], float]  # (game, the model played white) -> reward


def outcome_reward(record: GameRecord, white: bool) -> float:
    """1 for a win, 0 for a draw (the ply cap included), -1 for a loss."""
    score = {"1-0": 1.0, "0-1": -1.0}.get(record.result, 0.0)
    return score if white else -score


@dataclass(frozen=True)
class PGConfig:
    temperature: float = 1.0  # must be the temperature the games were played at (> 0)
    kl_coef: float = 0.1  # weight of KL(pi || pi_ref) per move
    batch_games: int = 16  # sides per forward/backward (memory); one optimizer step per call
    grad_clip: float = 1.0  # max global gradient norm

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(f"policy gradient needs temperature > 0, got {self.temperature}")
        if self.batch_games < 1 or self.kl_coef < 0:
            raise ValueError(f"need batch_games >= 1 and kl_coef >= 0: {self}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SideBatch:
    """Teacher-forced tensors for some (game, side) samples: inputs, targets, the legal mask
    at every target, and which targets are the side's own move tokens."""

    inputs: torch.Tensor  # (B, T) long
    targets: torch.Tensor  # (B, T) long
    legal: torch.Tensor  # (B, T, vocab) bool
    own: torch.Tensor  # (B, T) bool


def model_sides(records: Sequence[GameRecord]) -> list[tuple[GameRecord, bool]]:
    """Every (game, white?) the model played and moved in at least once."""
    sides = []
    for record in records:
        if record.white == MODEL and record.plies >= 1:
            sides.append((record, True))
        if record.black == MODEL and record.plies >= 2:
            sides.append((record, False))
    return sides


def side_batch(sides: Sequence[tuple[GameRecord, bool]], vocab_size: int) -> SideBatch:
    width = max(3 * record.plies for record, _ in sides)
    inputs = np.full((len(sides), width), PAD, dtype=np.int64)
    targets = np.full((len(sides), width), PAD, dtype=np.int64)
    legal = np.zeros((len(sides), width, vocab_size), dtype=bool)
    legal[..., PAD] = True  # padding and the opponent's tokens: any mask with a legal token
    own = np.zeros((len(sides), width), dtype=bool)
    for row, (record, white) in enumerate(sides):
        state = State.from_moves([])
        tokens = [BOS]
        for ply, uci in enumerate(record.moves):
            mine = (ply % 2 == 0) == white
            for token in encode_move(state.board.parse_uci(uci)):
                i = len(tokens) - 1
                if mine:
                    legal[row, i] = play_mask(state)
                    own[row, i] = True
                state.feed(token)
                tokens.append(token)
        inputs[row, :len(tokens) - 1] = tokens[:-1]
        targets[row, :len(tokens) - 1] = tokens[1:]
    return SideBatch(*(torch.from_numpy(a) for a in (inputs, targets, legal, own)))


def _masked_log_probs(model: GPT, batch: SideBatch, temperature: float) -> torch.Tensor:
    logits = model(batch.inputs).float() / temperature
    return F.log_softmax(logits.masked_fill(~batch.legal, float("-inf")), dim=-1)


def side_log_probs(model: GPT, batch: SideBatch, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probability of each side's own moves, summed per side (B,); the full masked
    log-probabilities (B, T, vocab))."""
    log_probs = _masked_log_probs(model, batch, temperature)
    taken = log_probs.gather(-1, batch.targets[..., None])[..., 0]
    return torch.where(batch.own, taken, 0.0).sum(dim=1), log_probs


def kl_to_reference(log_probs: torch.Tensor, reference_log_probs: torch.Tensor, batch: SideBatch) -> torch.Tensor:
    """KL(pi || pi_ref) at each own token, summed per side (B,)."""
    # Zero the illegal tokens' -inf before any arithmetic: 0 * (-inf - -inf) would be NaN, and
    # a NaN reaches the gradient even through a torch.where that discards it.
    log_p = torch.where(batch.legal, log_probs, 0.0)
    log_ref = torch.where(batch.legal, reference_log_probs, 0.0)
    per_token = (log_p.exp() * batch.legal * (log_p - log_ref)).sum(dim=-1)
    return torch.where(batch.own, per_token, 0.0).sum(dim=1)


def policy_gradient_step(model: GPT, reference: GPT, optimizer: torch.optim.Optimizer,
                         records: Sequence[GameRecord], cfg: PGConfig,
                         reward: Reward = outcome_reward) -> dict:
    """One REINFORCE update from the model's sides of these games; the step's metrics."""
    sides = model_sides(records)
    if not sides:
        raise ValueError("no game in which the model made a move: nothing to learn from")
    rewards = torch.tensor([reward(record, white) for record, white in sides], dtype=torch.float32)
    baseline = rewards.mean()
    advantages = rewards - baseline
    moves = sum((record.plies + white) // 2 for record, white in sides)
    model.eval()
    reference.eval()
    optimizer.zero_grad(set_to_none=True)
    total_pg = total_kl = 0.0
    for start in range(0, len(sides), cfg.batch_games):
        chunk = slice(start, start + cfg.batch_games)
        batch = side_batch(sides[chunk], model.config.vocab_size)
        logp, log_probs = side_log_probs(model, batch, cfg.temperature)
        with torch.no_grad():
            reference_log_probs = _masked_log_probs(reference, batch, cfg.temperature)
        kl = kl_to_reference(log_probs, reference_log_probs, batch)
        pg_loss = -(advantages[chunk] * logp).sum() / moves
        kl_loss = kl.sum() / moves
        (pg_loss + cfg.kl_coef * kl_loss).backward()
        total_pg += pg_loss.item()
        total_kl += kl_loss.item()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    if not torch.isfinite(grad_norm):
        raise FloatingPointError(f"policy gradient norm is {float(grad_norm)}")
    optimizer.step()
    return {"sides": len(sides), "moves": moves, "mean_reward": float(baseline),
            "pg_loss": total_pg, "kl_per_move": total_kl, "loss": total_pg + cfg.kl_coef * total_kl,
            "grad_norm": float(grad_norm)}
