"""One process or many: the process group torchrun describes, and the few collectives the
trainer needs, which are no-ops in a single process.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; without them this
is a single process and no process group is made. The backend is NCCL on CUDA, gloo on CPU.

    dist_env = setup("auto")        # cuda:LOCAL_RANK when CUDA is there, else cpu
    total = dist_env.all_reduce_sum(torch.tensor([loss_sum, targets]))
    stop = dist_env.any(deadline.soft_stop())
    teardown()
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from chesscore.model import pick_device


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def bf16(self) -> bool:
        """bf16 autocast on CUDA (weights stay FP32); plain FP32 on CPU."""
        return self.device.type == "cuda"

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Sum over ranks (returned on the CPU)."""
        if not self.distributed:
            return values.cpu()
        on_device = values.to(self._comm_device())
        dist.all_reduce(on_device, op=dist.ReduceOp.SUM)
        return on_device.cpu()

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any: stop decisions that ranks must share."""
        return bool(self.all_reduce_sum(torch.tensor([float(flag)]))[0] > 0)

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's object, in rank order, on every rank."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def _comm_device(self) -> torch.device:
        return self.device if dist.get_backend() == "nccl" else torch.device("cpu")


def setup(device: str = "auto", timeout_seconds: float = 600) -> DistEnv:
    """The process group of this run (made here when torchrun launched us) and our device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    chosen = pick_device(device, local_rank)
    if chosen.type == "cuda":
        torch.cuda.set_device(chosen)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(
            "nccl" if chosen.type == "cuda" else "gloo",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_seconds),
            device_id=chosen if chosen.type == "cuda" else None,
        )
    return DistEnv(rank, world_size, local_rank, chosen)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
