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

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import torch

from chesscore.failures import Refused
from chesscore.fileio import atomic_write
from chesscore.model import GPT, GPTConfig

FORMAT = "chesscore-checkpoint/1"
_LAYER = re.compile(r"transformer\.h\.(\d+)\.")


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
    """The model of a checkpoint, in eval mode on `device`, and the whole payload. The config
    is checked against the tensors' shapes before any model is built (a config that does not
    match its weights could ask for gigabytes), so a bad checkpoint is a CheckpointError."""
    payload = load(path, map_location=device)
    config = model_config(path, payload)
    check_sizes(path, config, payload.get("model"))
    model = GPT(config)
    check_weights(path, model, payload.get("model"))
    model.load_state_dict(payload["model"])
    return model.to(device).eval(), payload


def model_config(path: str | os.PathLike, payload: dict[str, Any]) -> GPTConfig:
    """The checkpoint's GPTConfig: a mapping of known fields with values in range."""
    config = payload.get("config")
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: no model `config` mapping")
    known = {f.name for f in dataclasses.fields(GPTConfig)}
    unknown = sorted(map(str, set(config) - known))
    if unknown:
        raise CheckpointError(f"{path}: config has unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})")
    try:
        return GPTConfig(**config)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: config: {error}") from None


def check_sizes(path: str | os.PathLike, config: GPTConfig, state: Any) -> None:
    """Refuse weights whose layer count and widths (read off the tensors) are not the config's,
    before a model of the config's size is built."""
    if not isinstance(state, dict) or not state or not all(isinstance(t, torch.Tensor) for t in state.values()):
        raise CheckpointError(f"{path}: no `model` weights (a mapping of tensor names to tensors)")
    layers = {match[1] for key in state if (match := _LAYER.match(str(key)))}
    embedding = state.get("transformer.wte.weight")
    positions = state.get("transformer.wpe.weight")
    found = (
        len(layers),
        tuple(embedding.shape) if embedding is not None else None,
        tuple(positions.shape) if positions is not None else None,
    )
    wanted = (config.n_layer, (config.vocab_size, config.n_embd), (config.block_size, config.n_embd))
    if found != wanted:
        raise CheckpointError(
            f"{path}: the config does not match the weights: layers, token and position embeddings "
            f"{found} in the tensors, {wanted} in the config"
        )


def check_weights(path: str | os.PathLike, model: GPT, state: Any) -> None:
    """Refuse weights that do not fit `model`: other sizes (check_sizes), missing or extra
    tensors, other shapes, not floating point, or not finite. (The model is one already built:
    a model on the meta device would cost more, its initialisation importing torch._dynamo.)"""
    check_sizes(path, model.config, state)
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{path}: weights missing {missing[:4]}, unexpected {extra[:4]}")
    for name, shape in expected.items():
        tensor = state[name]
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"{path}: {name} has shape {tuple(tensor.shape)}, the config needs {shape}")
        if not tensor.is_floating_point() or not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{path}: {name} is not a finite floating-point tensor")
