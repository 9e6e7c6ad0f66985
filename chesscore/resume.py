"""Resuming a run from its checkpoint: which checkpoint, whether it may continue, stable bytes.

    payload, note, path = find_resume("auto", out / "last.pt", identity)   # None: a fresh start
    checkpoint.save(canonical(payload), path)                              # the same bytes on resume

Training (chesscore.train) and self-play (chesscore.selfplay) both follow these rules. A run's
*identity* is a JSON tree of everything its result depends on (config, data fingerprint, code
hash, ...); a checkpoint continues only under an equal identity. `resume` is

    auto   the run's own checkpoint when it exists and may continue; otherwise a fresh start,
           with a note saying why (params, code or data changed in the same output folder)
    none   a fresh start
    PATH   that checkpoint, or ResumeRefused (exit 78) naming the keys that differ
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chesscore import checkpoint
from chesscore.failures import Refused

__all__ = ["ResumeRefused", "canonical", "check_identity", "find_resume", "identity_diff"]


class ResumeRefused(Refused, ValueError):
    """A checkpoint that may not continue this run (another identity, or not a resumable one)."""


def identity_diff(saved: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ, e.g. ["hyperparameters.lr", "world_size"]."""
    keys = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            keys += identity_diff(a, b, f"{prefix}{key}.")
        elif a != b:
            keys.append(f"{prefix}{key}")
    return keys


def check_identity(path: Path, saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """ResumeRefused naming the keys (and their two values) where the identities differ."""
    keys = identity_diff(saved, current)
    if keys:
        shown = ", ".join(keys[:12]) + (f", ... ({len(keys) - 12} more)" if len(keys) > 12 else "")
        raise ResumeRefused(
            f"{path}: cannot resume, the identity differs in {len(keys)} key(s): "
            f"{shown} (details: {_describe(saved, current, keys)})"
        )


def _describe(saved: Mapping[str, Any], current: Mapping[str, Any], keys: list[str], limit: int = 6) -> str:
    def get(tree: Any, dotted: str) -> Any:
        # Keys may hold dots themselves (code.chesscore/model.py): take the longest key that fits.
        while dotted:
            if not isinstance(tree, Mapping):
                return "<absent>"
            key = max((k for k in tree if dotted == k or dotted.startswith(f"{k}.")), key=len, default=None)
            if key is None:
                return "<absent>"
            tree, dotted = tree[key], dotted[len(key) + 1 :]
        return tree

    parts = [f"{key}: checkpoint {get(saved, key)!r}, this run {get(current, key)!r}" for key in keys[:limit]]
    return "; ".join(parts) + ("; ..." if len(keys) > limit else "")


def find_resume(
    resume: str,
    own: Path,
    identity: Mapping[str, Any],
    refuse: Callable[[dict[str, Any]], str | None] = lambda payload: None,
) -> tuple[dict[str, Any] | None, str, Path]:
    """(the payload to continue from, or None for a fresh start; a note saying which; its path).

    `own` is the run's own checkpoint (what auto continues); `refuse(payload)` gives a reason a
    checkpoint of the same identity still may not continue (not a resumable checkpoint, more
    iterations done than asked for), or None."""
    path = own if resume in ("auto", "none") else Path(resume)
    if resume == "none":
        return None, "fresh start", path
    if resume == "auto" and not path.exists():
        return None, f"fresh start: no {path.name} yet", path
    payload = checkpoint.load(path)
    try:
        check_identity(path, payload.get("identity", {}), identity)
        reason = refuse(payload)
        if reason:
            raise ResumeRefused(f"{path}: {reason}")
    except ResumeRefused as refused:
        if resume != "auto":
            raise
        return None, f"fresh start, not resuming: {refused}", path
    return payload, f"resuming from {path}", path


def canonical(obj: Any) -> Any:
    """The same structure rebuilt with interned strings. Pickle shares repeated objects by
    identity, so without this a resumed run (whose optimizer keys were unpickled, not
    interned) would save equal content as different bytes."""
    if isinstance(obj, dict):
        return {canonical(key): canonical(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(canonical(value) for value in obj)
    if isinstance(obj, str):
        return sys.intern(obj)
    return obj
