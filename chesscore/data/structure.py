"""The structure of a dataset manifest, checked before any of its fields is used.

    check_structure(Path("data/dataset/manifest.json"), meta)   # IntegrityError naming the field

The fingerprint proves that nothing changed since it was computed, not that the manifest was
well made: one edited by hand and re-fingerprinted (a shard path `5`, `shards` a string) made
the readers fail with TypeError or KeyError. Here every field the readers use has its type and
range, and the split summary must be the one its shards add up to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chesscore.data.shards import SPLITS, split_summary
from chesscore.failures import BadInput

_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_structure(path: Path, meta: dict[str, Any], error: type[BadInput] = BadInput) -> None:
    """Raise `error` (the caller's IntegrityError) naming the first malformed field."""

    def fail(where: str, what: str) -> None:
        raise error(f"{path}: {where} {what}")

    tokenizer = meta.get("tokenizer")
    if not isinstance(tokenizer, dict) or not isinstance(tokenizer.get("version"), str):
        fail("tokenizer", "must be a mapping with a `version` text")
    shards = meta.get("shards")
    if not isinstance(shards, list):
        fail("shards", f"must be a list, not {type(shards).__name__}")
    seen: set[str] = set()
    for number, shard in enumerate(shards):
        where = f"shards[{number}]"
        if not isinstance(shard, dict):
            fail(where, f"must be a mapping, not {type(shard).__name__}")
        if not isinstance(shard.get("path"), str) or not shard["path"]:
            fail(f"{where}.path", f"must be a text, not {shard.get('path')!r}")
        if shard["path"] in seen:
            fail(f"{where}.path", f"{shard['path']!r} is listed twice")
        seen.add(shard["path"])
        if not isinstance(shard.get("sha256"), str) or not _SHA256.fullmatch(shard["sha256"]):
            fail(f"{where}.sha256", f"must be 64 lowercase hex digits, not {shard.get('sha256')!r}")
        if shard.get("split") not in SPLITS:
            fail(f"{where}.split", f"{shard.get('split')!r} is not one of {', '.join(SPLITS)}")
        for name in ("rows", "tokens", "bytes"):
            value = shard.get(name, 0 if name == "bytes" else None)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                fail(f"{where}.{name}", f"must be a whole number, not {value!r}")
    if meta.get("splits") != split_summary(shards):
        fail("splits", "do not add up to the shards listed (games, tokens and shards per split)")
    inputs = meta.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(i, dict) and isinstance(i.get("path"), str) for i in inputs):
        fail("inputs", "must be a list of mappings, each with a `path` text")
