"""Policy gradient on self-play games: REINFORCE with a baseline, plus a KL penalty that keeps
the policy near the frozen supervised reference.

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
    metrics = policy_gradient_step(model, reference, optimizer, records, PGConfig(kl_coef=0.1))
    policy_gradient_step(model, reference, optimizer, records, cfg, prefix=(83, 83, 107))  # a v2 model told 1800

The policy is what played: softmax(logits / temperature) under the legal mask (EOS never
legal), one factor per move token (source, destination, promotion). For every side the model
played, its reward (win 1, draw 0, loss -1, the judge's verdicts included; or shaped_reward,
which gives a draw the judge scored a value in (-1, 1)) minus the baseline (the batch's mean
reward) weighs the log-probability of each of its moves. The KL term is exact per token,
KL(pi || pi_ref) over the legal tokens, summed along the played moves (an unbiased estimate
of the games' KL, since the moves were sampled from pi), averaged per move like the policy
term. One optimizer step per call, the gradient accumulated over minibatches of games; a
game is one row, so a self-play game teaches both colours from one forward.

The forward runs in eval mode: the gradient must be of the policy that played (no dropout).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from chesscore.conditioning import with_prefix
from chesscore.features import Features
from chesscore.model import GPT
from chesscore.play.moves import play_mask
from chesscore.selfplay.games import MODEL, GameRecord
from chesscore.tokens import BOS, PAD, PREFIX_LENGTH, UNKNOWN_PREFIX, State, encode_move

Reward = Callable[[GameRecord, bool], float]  # (game, the model played white) -> reward


REWARDS = ("outcome", "shaped")


def outcome_reward(record: GameRecord, white: bool) -> float:
    """1 for a win, 0 for a draw, -1 for a loss: by the rules or by the judge's verdict."""
    score = {"1-0": 1.0, "0-1": -1.0}.get(record.result, 0.0)
    return score if white else -score


def shaped_reward(scale_cp: float) -> Reward:
    """The outcome, except that a draw the judge scored (at the ply cap, or by its draw rule)
    earns its score as an expected result: 2 / (1 + 10^(-cp / scale_cp)) - 1, in (-1, 1), from
    the side's view (at scale_cp 400 a 100 cp edge earns 0.28, 300 cp 0.70). Draws by the rules
    (repetition, stalemate, ...) stay 0: the judge did not see their final position."""
    if scale_cp <= 0:
        raise ValueError(f"reward_scale_cp must be > 0, got {scale_cp}")

    def reward(record: GameRecord, white: bool) -> float:
        if record.result != "1/2-1/2" or record.judge_score is None:
            return outcome_reward(record, white)
        value = 2.0 / (1.0 + 10.0 ** (-record.judge_score / scale_cp)) - 1.0
        return value if white else -value

    return reward


def make_reward(kind: str, scale_cp: float) -> Reward:
    """The reward function a run's config names (REWARDS)."""
    if kind == "outcome":
        return outcome_reward
    if kind == "shaped":
        return shaped_reward(scale_cp)
    raise ValueError(f"reward {kind!r} is not one of {REWARDS}")


@dataclass(frozen=True)
class PGConfig:
    temperature: float = 1.0  # must be the temperature the games were played at (> 0)
    kl_coef: float = 0.1  # weight of KL(pi || pi_ref) per move
    batch_games: int = 16  # games per forward/backward (memory); one optimizer step per call
    grad_clip: float = 1.0  # max global gradient norm

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(f"policy gradient needs temperature > 0, got {self.temperature}")
        if self.batch_games < 1 or self.kl_coef < 0:
            raise ValueError(f"need batch_games >= 1 and kl_coef >= 0: {self}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GameBatch:
    """Teacher-forced tensors for some games: inputs, targets, the legal mask at every target,
    which targets are the model's own move tokens, and which are white's."""

    inputs: torch.Tensor  # (B, T) long
    targets: torch.Tensor  # (B, T) long
    legal: torch.Tensor  # (B, T, vocab) bool
    own: torch.Tensor  # (B, T) bool
    white: torch.Tensor  # (B, T) bool

    def to(self, device: torch.device) -> GameBatch:
        return GameBatch(*(t.to(device) for t in (self.inputs, self.targets, self.legal, self.own, self.white)))


def model_colours(record: GameRecord) -> list[bool]:
    """The colours (True: white) the model played in this game and moved with at least once."""
    return ([True] if record.white == MODEL and record.plies >= 1 else []) + (
        [False] if record.black == MODEL and record.plies >= 2 else []
    )


def game_batch(records: Sequence[GameRecord], vocab_size: int, prefix: Sequence[int] | None = None) -> GameBatch:
    """One row per game: self-play games teach both colours from a single forward. With `prefix`
    (a triples-v2 model: what it was told while it played) each row reads BOS, the prefix, the
    moves (chesscore.conditioning.with_prefix); the prefix's targets are nobody's move, so no
    loss or KL is computed on them."""
    offset = 0 if prefix is None else PREFIX_LENGTH
    width = max(3 * record.plies for record in records) + offset
    inputs = np.full((len(records), width), PAD, dtype=np.int64)
    targets = np.full((len(records), width), PAD, dtype=np.int64)
    legal = np.zeros((len(records), width, vocab_size), dtype=bool)
    legal[..., PAD] = True  # padding, the prefix and the opponent's tokens: any mask with a legal token
    own = np.zeros((len(records), width), dtype=bool)
    white = np.zeros((len(records), width), dtype=bool)
    for row, record in enumerate(records):
        colours = model_colours(record)
        state = State.from_moves([])
        tokens = [BOS]
        for ply, uci in enumerate(record.moves):
            mine = (ply % 2 == 0) in colours
            for token in encode_move(state.board.parse_uci(uci)):
                i = len(tokens) - 1 + offset  # the target's place in the (prefixed) row
                white[row, i] = ply % 2 == 0
                if mine:
                    legal[row, i] = play_mask(state)
                    own[row, i] = True
                state.feed(token)
                tokens.append(token)
        if prefix is not None:
            tokens = with_prefix(tokens, prefix).tolist()
        inputs[row, : len(tokens) - 1] = tokens[:-1]
        targets[row, : len(tokens) - 1] = tokens[1:]
    return GameBatch(*(torch.from_numpy(a) for a in (inputs, targets, legal, own, white)))


def _masked_log_probs(
    model: GPT, batch: GameBatch, temperature: float, features: Features | None = None
) -> torch.Tensor:
    logits = model(batch.inputs, features=features).float() / temperature
    return F.log_softmax(logits.masked_fill(~batch.legal, float("-inf")), dim=-1)


def token_log_probs(
    model: GPT, batch: GameBatch, temperature: float, features: Features | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probability of each own token taken, 0 elsewhere (B, T); the full masked
    log-probabilities (B, T, vocab)). `features`: model.row_features(batch.inputs), made ahead."""
    log_probs = _masked_log_probs(model, batch, temperature, features)
    taken = log_probs.gather(-1, batch.targets[..., None])[..., 0]
    return torch.where(batch.own, taken, 0.0), log_probs


def kl_to_reference(log_probs: torch.Tensor, reference_log_probs: torch.Tensor, batch: GameBatch) -> torch.Tensor:
    """KL(pi || pi_ref) at each own token, 0 elsewhere (B, T)."""
    # Zero the illegal tokens' -inf before any arithmetic: 0 * (-inf - -inf) would be NaN, and
    # a NaN reaches the gradient even through a torch.where that discards it.
    log_p = torch.where(batch.legal, log_probs, 0.0)
    log_ref = torch.where(batch.legal, reference_log_probs, 0.0)
    per_token = (log_p.exp() * batch.legal * (log_p - log_ref)).sum(dim=-1)
    return torch.where(batch.own, per_token, 0.0)


def policy_gradient_step(
    model: GPT,
    reference: GPT,
    optimizer: torch.optim.Optimizer,
    records: Sequence[GameRecord],
    cfg: PGConfig,
    reward: Reward = outcome_reward,
    prefix: Sequence[int] | None = None,
) -> dict:
    """One REINFORCE update from the model's sides of these games; the step's metrics. A
    triples-v2 model (and its reference) read `prefix`, the one the games were played with
    (SelfPlayConfig.prefix); a v1 model reads none."""
    if model.config.conditioning != reference.config.conditioning:
        raise ValueError("the model and its reference must both read the conditioning prefix, or neither")
    if (model.config.move_features, model.config.board_readout) != (
        reference.config.move_features,
        reference.config.board_readout,
    ):
        raise ValueError("the model and its reference must read the same board features (one replay serves both)")
    if prefix is None and model.config.conditioning:
        prefix = UNKNOWN_PREFIX
    games = [record for record in records if model_colours(record)]
    if not games:
        raise ValueError("no game in which the model made a move: nothing to learn from")
    device = model.lm_head.weight.device
    # Per game, the reward of (white, black); None for a colour the model did not play.
    table = [[reward(r, white) if white in model_colours(r) else None for white in (True, False)] for r in games]
    values = [value for row in table for value in row if value is not None]
    baseline = sum(values) / len(values)
    advantages = torch.tensor(
        [[0.0 if v is None else v - baseline for v in row] for row in table], dtype=torch.float32, device=device
    )
    moves = sum((r.plies + white) // 2 for r in games for white in model_colours(r))
    model.eval()
    reference.eval()
    optimizer.zero_grad(set_to_none=True)
    total_pg = total_kl = total_entropy = 0.0
    for start in range(0, len(games), cfg.batch_games):
        chunk = slice(start, start + cfg.batch_games)
        batch = game_batch(games[chunk], model.config.vocab_size, prefix if model.config.conditioning else None)
        features = model.row_features(batch.inputs)  # on the host, one replay for both forwards
        batch = batch.to(device)
        features = features.map(lambda t: t.to(device)) if features is not None else None
        advantage = torch.where(batch.white, advantages[chunk, :1], advantages[chunk, 1:])
        taken, log_probs = token_log_probs(model, batch, cfg.temperature, features)
        with torch.no_grad():
            reference_log_probs = _masked_log_probs(reference, batch, cfg.temperature, features)
        pg_loss = -(advantage * taken).sum() / moves
        kl_loss = kl_to_reference(log_probs, reference_log_probs, batch).sum() / moves
        (pg_loss + cfg.kl_coef * kl_loss).backward()
        total_pg += pg_loss.item()
        total_kl += kl_loss.item()
        with torch.no_grad():  # the policy's entropy: collapsing towards one move shows here
            log_p = torch.where(batch.legal, log_probs, 0.0)
            total_entropy += float(-(log_p.exp() * log_p).sum(-1)[batch.own].sum()) / moves
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    if not torch.isfinite(grad_norm):
        raise FloatingPointError(f"policy gradient norm is {float(grad_norm)}")
    optimizer.step()
    return {
        "games": len(games),
        "sides": len(values),
        "moves": moves,
        "mean_reward": baseline,
        "nonzero_reward_share": sum(value != 0 for value in values) / len(values),
        "pg_loss": total_pg,
        "kl_per_move": total_kl,
        "entropy_per_move": total_entropy,
        "loss": total_pg + cfg.kl_coef * total_kl,
        "grad_norm": float(grad_norm),
    }
