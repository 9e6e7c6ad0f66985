"""The microbatches of an epoch plan, assembled on the host ahead of the steps that train on them.

    assembly = Assembly(data.train, lengths, model_config, rank=0, world_size=1, micro=16, pad_to_multiple=64)
    for microbatch in microbatches(assembly, plan, from_step=12, workers=4, pin=True):
        microbatch = microbatch.to(device)          # non-blocking from pinned memory to a GPU
        logits = model(microbatch.inputs, features=microbatch.features)

Assembling a microbatch (this rank's share of the games, collate, padding to a bounded width,
the model's replayed board features: chesscore.features) is host work that a GPU waits for: on
this machine the board features of 16 games of 644 tokens take about 16 ms, more than the 14 ms
a baseline step of that size takes on an H100 at 45% MFU (by GPT.flops_per_token). Assembly is a
pure function of the plan's game indices, so `workers` processes (torch's DataLoader) make the
next microbatches while the device trains on this one, across the optimizer step's
synchronisation too, and the batches (and so the weights) are the same bytes as with none.
Workers are forked: they share the memory-mapped tables instead of copying them, and never touch
the device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from chesscore.features import Features
from chesscore.model import GPTConfig, row_features
from chesscore.tokens import PAD
from chesscore.train.batching import GameSource, collate, dummy_batch, pad_to_width, rank_share, to_device


@dataclass(frozen=True)
class Microbatch:
    """One rank's microbatch as the step trains on it, and the target counts the log reports."""

    inputs: torch.Tensor  # (n, L) int64
    targets: torch.Tensor  # (n, L) int64, IGNORE where nothing is taught
    features: Features | None  # row_features(inputs), for a model that replays
    useful: int  # target positions of the rank's own games
    padded: int  # target positions trained over, padding included (0 for a dummy batch)

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Microbatch:
        features = self.features.map(fn) if self.features is not None else None
        return replace(self, inputs=fn(self.inputs), targets=fn(self.targets), features=features)

    def pin_memory(self) -> Microbatch:
        """Called by the DataLoader's pinning thread (pin=True), so the copy to a GPU need not wait."""
        return self.map(torch.Tensor.pin_memory)

    def to(self, device: torch.device) -> Microbatch:
        return self.map(lambda tensor: to_device(tensor, device))


@dataclass(frozen=True)
class Assembly:
    """How a global microbatch of game indices becomes this rank's Microbatch."""

    source: GameSource
    lengths: np.ndarray  # tokens per game of `source`
    model_config: GPTConfig
    rank: int
    world_size: int
    micro: int  # rows a padded batch is filled to (pad_to_multiple only)
    pad_to_multiple: int  # 0: widths as they come

    def __call__(self, batch: np.ndarray) -> Microbatch:
        share = rank_share(batch, self.rank, self.world_size)
        # A rank with no game of a partial batch still runs forward and backward (dummy_batch).
        inputs, targets = collate(self.source.batch(share, pad=PAD)) if len(share) else dummy_batch()
        if self.pad_to_multiple:  # a bounded set of shapes for a compiled model (padding counted)
            inputs, targets = pad_to_width(
                inputs, targets, self.pad_to_multiple, self.model_config.block_size, rows=self.micro
            )
        return Microbatch(
            inputs,
            targets,
            row_features(self.model_config, inputs),
            useful=int(self.lengths[share].sum() - len(share)),
            padded=targets.numel() if len(share) else 0,
        )


class _Planned(Dataset):
    """The flat sequence of an epoch's microbatches from one step on, for the DataLoader."""

    def __init__(self, assembly: Assembly, batches: list[np.ndarray]) -> None:
        self.assembly, self.batches = assembly, batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> Microbatch:
        return self.assembly(self.batches[index])


def microbatches(
    assembly: Assembly, plan: list[list[np.ndarray]], from_step: int, workers: int, pin: bool
) -> Iterator[Microbatch]:
    """The plan's microbatches, step by step, from step `from_step` to the epoch's end, in order:
    made in this process (workers=0) or by `workers` forked processes, each keeping two ahead."""
    batches = [batch for step in plan[from_step:] for batch in step]
    loader = DataLoader(
        _Planned(assembly, batches),
        batch_size=None,  # each item is already a batch
        num_workers=workers,
        pin_memory=pin,
        prefetch_factor=2 if workers else None,
        multiprocessing_context="fork" if workers else None,
        # Its own generator: a DataLoader otherwise draws its worker seed from torch's global RNG,
        # which the run's dropout (and a resume's restored RNG state) must keep to itself.
        generator=torch.Generator().manual_seed(0),
    )
    return iter(loader)
