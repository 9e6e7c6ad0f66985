"""Seeds for each use of a run's seed, derived by hashing, so that uses never share a stream.

    derive_seed(config.seed, "init")                 # the model's initial weights
    derive_seed(config.seed, opponent.name, round)   # one arena game's random mover

Every component that needs randomness (training, the arena, self-play) asks for a seed here with
labels that say what it is for; the same labels give the same 63-bit seed on any machine.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["derive_seed"]


def derive_seed(seed: int, *labels: Any) -> int:
    """A 63-bit seed from a run's seed and labels (strings and numbers)."""
    text = json.dumps([seed, *labels], default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1
