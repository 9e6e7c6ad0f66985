"""torch.compile that holds on any batch: a bounded set of shapes, and the compilations and graph
breaks of a run counted from torch._dynamo's own counters.

    python -m stages.train --model baseline --compile --pad-to-multiple 64 --precision bf16

Length-bucketed batches (chesscore.train.batching) each have their own width, and a model
compiled for fixed shapes recompiles for every new one until torch's recompile limit (8) sends
it back to eager. Two ways out, picked by `pad_to_multiple`:

  > 0   every batch is padded to a multiple of it (capped at the context) and to `micro` rows
        (batching.pad_to_width), the model compiled with dynamic=False: one compilation per width
        met, at most ceil(block_size / pad_to_multiple) (16 for 1024 and 64), and the recompile
        limit raised to that so none falls back to eager. Static shapes are what CUDA graphs and
        the fastest kernels want, at the cost of the padding (the share is in the train events).
  0     no padding; the model is compiled with dynamic=True (sizes marked dynamic): one
        compilation for every width, plus one for the one-token dummy batch of an empty rank
        (torch specialises sizes 0 and 1).

The demo-moves and demo-board models replay the board in numpy (chesscore.features). Training
makes those features with each batch and hands them to forward as tensors, so its compiled
forward is one graph; a forward given none replays itself at a `torch.compiler.disable`d call,
one graph break per compilation. Under torchrun the compiled module is DistributedDataParallel,
whose own forward dynamo leaves untraced: a few breaks around the model per compilation, and its
frames compile once per width too. EXPLAINED names these; CompileCount lists any other as
unexplained.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._dynamo
from torch._dynamo.utils import counters

# The graph breaks a run expects, by a marker in the reason torch._dynamo records: what each is.
EXPLAINED = {
    # The feature replay inside a forward that was given no features (chesscore.features).
    "torch.compiler.disable": "a torch.compiler.disable'd call",
    # Under torchrun the compiled module is DistributedDataParallel: dynamo does not trace DDP's
    # own forward (its bucket and logging bookkeeping) and compiles the model it wraps in between
    # (torch's DDPOptimizer, which splits the graph at the gradient buckets).
    "_inside_ddp_forward": "DistributedDataParallel's wrapper",
    "_rebuild_buckets": "DistributedDataParallel's wrapper",
    "set_runtime_stats_and_log": "DistributedDataParallel's wrapper",
}


def explanation(reason: str) -> str | None:
    """What a graph break of this (full) reason is, where EXPLAINED knows it."""
    return next((what for marker, what in EXPLAINED.items() if marker in reason), None)


def width_count(pad_to_multiple: int, block_size: int) -> int | None:
    """How many batch widths padding to `pad_to_multiple` can give (None: no padding, no bound)."""
    return -(-block_size // pad_to_multiple) if pad_to_multiple else None


def compile_model(module: torch.nn.Module, pad_to_multiple: int, block_size: int) -> Any:
    """The module compiled for the shapes this padding gives (see the module docstring)."""
    if pad_to_multiple:
        # One cache entry per width (and per resumed frame after a graph break): never eager.
        limit = -(-block_size // pad_to_multiple)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, limit)
        return torch.compile(module, dynamic=False)
    return torch.compile(module, dynamic=True)


def _breaks() -> Counter:
    """Graph breaks by (the first line of their reason, its explanation or None): the rest of a
    reason names objects by address."""
    found: Counter = Counter()
    for reason, n in counters["graph_break"].items():
        found[(str(reason).splitlines()[0].strip(), explanation(str(reason)))] += int(n)
    return found


@dataclass
class CompileCount:
    """torch._dynamo's counters from the moment this is made: graphs compiled, frames compiled
    (a frame compiles again for each new shape it is not dynamic over) and graph breaks by
    reason. The counters are the process's, so another compiled model in the same process
    between `start` and `report` is counted too."""

    graphs: int = field(default_factory=lambda: int(counters["stats"]["unique_graphs"]))
    frames: int = field(default_factory=lambda: int(counters["frames"]["ok"]))
    breaks: Counter = field(default_factory=_breaks)

    def report(self) -> dict[str, Any]:
        breaks = _breaks() - self.breaks
        reasons: Counter = Counter()
        explained: Counter = Counter()
        unexplained: Counter = Counter()
        for (reason, what), n in breaks.items():
            reasons[reason] += n
            if what is None:
                unexplained[reason] += n
            else:
                explained[what] += n
        return {
            "graphs": int(counters["stats"]["unique_graphs"]) - self.graphs,
            "frames": int(counters["frames"]["ok"]) - self.frames,
            "graph_breaks": sum(breaks.values()),
            "graph_break_reasons": dict(sorted(reasons.items())),
            "explained_graph_breaks": dict(sorted(explained.items())),
            "unexplained_graph_breaks": dict(sorted(unexplained.items())),
        }


def describe(report: dict[str, Any], widths: int | None) -> str:
    """One console line: `train: torch.compile: 3 graphs ...`."""
    bound = f" (at most {widths} batch widths)" if widths else " (dynamic shapes)"
    explained = ", ".join(f"{n} at {what}" for what, n in report["explained_graph_breaks"].items())
    unexplained = report["unexplained_graph_breaks"]
    odd = f", {sum(unexplained.values())} not explained: {unexplained}" if unexplained else ""
    return (
        f"train: torch.compile: {report['graphs']} graphs compiled in {report['frames']} frame compilations"
        f"{bound}; {report['graph_breaks']} graph breaks{f' ({explained})' if explained else ''}{odd}"
    )
