"""Batches of whole games for training: seeded length buckets, epoch plans, collate.

An epoch plan is a pure function of (lengths, seed, epoch, micro, world size, accumulation):
every rank computes the same plan on its own, and a resumed run recomputes the plan of its
epoch and continues at its cursor. The plan is a list of optimizer steps; a step is a list
of up to `accum` global microbatches; a global microbatch holds up to `micro * world_size`
game indices of similar length, and rank r trains on `rank_share(batch, r, world_size)`.

    plan = epoch_plan(table.lengths(), seed=2026, epoch=0, micro=16, world_size=2, accum=4)
    for step in plan:
        for batch in step:
            inputs, targets = collate(table.batch(rank_share(batch, rank, 2), pad=PAD))
            inputs, features = device_inputs(model, inputs, device)
            logits = model(inputs, features=features)

Only the last global microbatch of an epoch may be partial; a rank whose share of it is
empty trains on `dummy_batch()` (one BOS, no target) so every rank runs the same collectives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from chesscore.tokens import BOS, PAD, RESERVED_START

if TYPE_CHECKING:
    from chesscore.features import Features
    from chesscore.model import GPT

IGNORE = -100  # target of a padding position: F.cross_entropy(ignore_index=IGNORE)


class GameSource(Protocol):
    """What training reads: the dataset's TokenTable, or `TokenList` in memory."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> np.ndarray: ...  # one game's tokens, unpadded
    def lengths(self) -> np.ndarray: ...  # tokens per game, int64
    def batch(self, indices: Sequence[int] | np.ndarray, pad: int = PAD) -> np.ndarray: ...


class TokenList:
    """Games held in memory (tests, benchmarks, self-play) behind the GameSource API."""

    def __init__(self, games: Sequence[Sequence[int]]) -> None:
        self.games = [np.asarray(game, dtype=np.uint8) for game in games]

    def __len__(self) -> int:
        return len(self.games)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.games[index]

    def lengths(self) -> np.ndarray:
        return np.array([len(game) for game in self.games], dtype=np.int64)

    def batch(self, indices: Sequence[int] | np.ndarray, pad: int = PAD) -> np.ndarray:
        rows = [self.games[int(i)] for i in indices]
        out = np.full((len(rows), max(len(r) for r in rows)), pad, dtype=np.uint8)
        for row, game in zip(out, rows):
            row[: len(game)] = game
        return out


def check_context(lengths: np.ndarray, block_size: int, split: str) -> None:
    """A game's inputs (all tokens but EOS) must fit the model's context."""
    too_long = np.flatnonzero(lengths - 1 > block_size)
    if len(too_long):
        first = int(too_long[0])
        raise ValueError(
            f"{split} split: {len(too_long)} games exceed the context of {block_size} "
            f"tokens (first: game {first} with {int(lengths[first])} tokens)"
        )


def global_batches(lengths: np.ndarray, *, seed: int, epoch: int, size: int, pool_batches: int) -> list[np.ndarray]:
    """Game indices of one epoch cut into batches of `size`, each of similar lengths.

    Games are shuffled, then sorted by length within pools of `pool_batches` batches (a
    stable sort, so games of equal length keep their shuffled order), cut into batches, and
    the batches shuffled; the one partial batch goes last. pool_batches=0 means no
    bucketing: batches of shuffled games (the baseline bench/train.py measures against)."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    if pool_batches > 0:
        pool = size * pool_batches
        order = np.concatenate(
            [
                chunk[np.argsort(lengths[chunk], kind="stable")]
                for chunk in np.split(order, range(pool, len(order), pool))
            ]
        )
    batches = np.split(order, range(size, len(order), size))
    full = [b for b in batches if len(b) == size]
    partial = [b for b in batches if 0 < len(b) < size]
    return [full[i] for i in rng.permutation(len(full))] + partial


def epoch_plan(
    lengths: np.ndarray, *, seed: int, epoch: int, micro: int, world_size: int, accum: int, pool_batches: int = 64
) -> list[list[np.ndarray]]:
    """Optimizer steps of one epoch: each a list of up to `accum` global microbatches."""
    if min(micro, world_size, accum) < 1:
        raise ValueError(f"micro {micro}, world size {world_size} and accum {accum} must be >= 1")
    if len(lengths) == 0:
        raise ValueError("no games to plan an epoch over")
    batches = global_batches(
        np.asarray(lengths), seed=seed, epoch=epoch, size=micro * world_size, pool_batches=pool_batches
    )
    return [batches[i : i + accum] for i in range(0, len(batches), accum)]


def steps_per_epoch(n_games: int, micro: int, world_size: int, accum: int) -> int:
    batches = -(-n_games // (micro * world_size))
    return -(-batches // accum)


def rank_share(batch: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """Rank r's games of a global microbatch: every world_size-th game from r. The batch is
    length-sorted within its pool, so the ranks get games of similar length."""
    return batch[rank::world_size]


def eval_batches(lengths: np.ndarray, micro: int) -> list[np.ndarray]:
    """Batches for validation: games sorted by length (least padding), in a fixed order."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return np.split(order, range(micro, len(order), micro))


def collate(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded games (n, L) of uint8 -> inputs (n, L-1) and targets (n, L-1), int64.

    Inputs are every token but the last; the target at i is token i+1. Padding inputs stay
    PAD (they only ever sit after a game's own tokens, so causal attention never lets a real
    position see them) and padding targets are IGNORE, and so are the conditioning prefix's
    (triples-v2: tokens 72.. are inputs, never something the model is taught to predict)."""
    tokens = torch.from_numpy(np.ascontiguousarray(rows)).long()
    inputs, targets = tokens[:, :-1], tokens[:, 1:].clone()
    targets[(targets == PAD) | (targets >= RESERVED_START)] = IGNORE
    return inputs.contiguous(), targets


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A batch tensor on the training device. To a GPU it goes through pinned memory, so the copy
    joins the queue without waiting for the work before it (a copy from pageable memory may), and
    the host goes on to assemble the next microbatch while the device works."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def device_inputs(model: GPT, inputs: torch.Tensor, device: torch.device | str) -> tuple[torch.Tensor, Features | None]:
    """Collated inputs made ready for `model` on `device`: the model's features of the rows made
    here on the host (GPT.row_features), so forward(inputs, features=...) never reads the tokens
    back from the device, and both moved there by to_device."""
    device = torch.device(device)
    features = model.row_features(inputs)
    return to_device(inputs, device), features.map(lambda t: to_device(t, device)) if features is not None else None


def dummy_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """One BOS and no target: a rank with no game of a partial batch still runs forward and
    backward (zero gradient), so the collectives of every rank line up."""
    return torch.tensor([[BOS]]), torch.tensor([[IGNORE]])


def padded_width(length: int, multiple: int, block_size: int) -> int:
    """The width a batch of `length` input positions is padded to: the next multiple of
    `multiple`, capped at the context (so at most ceil(block_size / multiple) widths exist)."""
    return min(-(-length // multiple) * multiple, block_size) if multiple else length


def pad_to_width(
    inputs: torch.Tensor, targets: torch.Tensor, multiple: int, block_size: int, rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets (n, L) padded to (max(n, rows), padded_width(L)): PAD inputs and
    IGNORE targets, as collate pads (added rows start with BOS). Positions after a game's own
    tokens are never seen by its real positions (causal attention) and carry no target, so the
    loss and the gradient are those of the unpadded batch; only the shapes a compiled model
    meets are fewer."""
    n, length = inputs.shape
    width = padded_width(length, multiple, block_size)
    extra_rows, extra_columns = max(rows - n, 0), width - length
    if not (extra_rows or extra_columns):
        return inputs, targets
    inputs = torch.nn.functional.pad(inputs, (0, extra_columns, 0, extra_rows), value=PAD)
    inputs[n:, 0] = BOS  # an added row is dummy_batch's: one BOS (what a board replay needs), no target
    targets = torch.nn.functional.pad(targets, (0, extra_columns, 0, extra_rows), value=IGNORE)
    return inputs, targets


def padding_fraction(plan: list[list[np.ndarray]], lengths: np.ndarray, world_size: int) -> float:
    """Share of padded target positions over the rank microbatches of a plan."""
    useful = padded = 0
    for step in plan:
        for batch in step:
            for rank in range(world_size):
                share = lengths[rank_share(batch, rank, world_size)] - 1
                if len(share):
                    useful += int(share.sum())
                    padded += int(share.max()) * len(share)
    return 1.0 - useful / padded
