"""Checkpoint files: tensors plus JSON-able metadata, always loaded with weights_only=True.

Every checkpoint (supervised training, self-play RL) is one dict:

    {"format": "chesscore-checkpoint/1",
     "config": {...GPTConfig fields...},
     "model": state_dict,
     "identity": {...what decides whether a resume is allowed; JSON-able...},
     ...anything else the writer needs (optimizer, scheduler, rng, cursor, metrics)}

    model, payload = load_model("data/train/best.pt")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from chesscore.failures import Refused
from chesscore.fileio import atomic_write
from chesscore.model import GPT, GPTConfig

FORMAT = "chesscore-checkpoint/1"


class CheckpointError(Refused, ValueError):
    """A checkpoint that is missing, unreadable, or not of our format."""


def save(payload: dict[str, Any], path: str | os.PathLike) -> None:
    """Write atomically: a killed process leaves the previous file, never a half one."""
    atomic_write(path, lambda f: torch.save(payload, f))


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises several kinds for a damaged file
        raise CheckpointError(f"{path}: not a loadable checkpoint ({error})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a {FORMAT} file")
    return payload


def model_payload(model: GPT, identity: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The minimal checkpoint of a model (unwrap DDP/compile before calling)."""
    return {
        "format": FORMAT,
        "config": model.config.to_dict(),
        "model": model.state_dict(),
        "identity": identity,
        **extra,
    }


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> tuple[GPT, dict[str, Any]]:
    """The model of a checkpoint, in eval mode on `device`, and the whole payload."""
    payload = load(path, map_location=device)
    model = GPT(GPTConfig(**payload["config"]))
    model.load_state_dict(payload["model"])
    return model.to(device).eval(), payload
