"""Read a converted dataset: verified before use, memory-mapped for training.

    receipt = verify("data/dataset", "data/train/receipt.json")   # hashes every shard once
    tables = load("data/dataset", receipt)                          # train + validation, never test
    x = tables["train"].batch([0, 5, 9])                            # uint8 (3, longest), PAD-filled

    for tokens, meta in games("data/dataset", "test"):              # verifies, then one game at a time
        ...

Every reader checks the whole dataset against manifest.json first: the manifest's fingerprint,
each shard's sha256, no shard missing, none extra, no path that leaves the dataset folder. Any
failure raises IntegrityError naming the file. `load` trusts a receipt from `verify` for the
hashes (so each training process need not re-hash gigabytes) but still checks that the receipt
belongs to this manifest and that every shard is present with its recorded size.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pyarrow as pa

from chesscore import tokens
from chesscore.data.shards import FORMAT, MANIFEST, SCHEMA, SHARDS, SPLITS, fingerprint
from chesscore.data.structure import check_structure
from chesscore.failures import BadInput
from chesscore.fileio import atomic_write_json, sha256_file

RECEIPT_FORMAT = "chesscore-dataset-receipt/1"
TRAINING_SPLITS = ("train", "validation")


class IntegrityError(BadInput):
    """The dataset on disk is not the one its manifest (or a receipt) describes."""


def manifest(dataset_dir: str | os.PathLike) -> dict[str, Any]:
    """The parsed manifest, after checking its format, tokenizer, fingerprint and shard paths."""
    return _read_manifest(Path(dataset_dir))[0]


def verify(dataset_dir: str | os.PathLike, receipt_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Hash every shard of every split against the manifest; return (and optionally write) the
    integrity receipt: the manifest's sha256 and fingerprint and each verified shard's sha256."""
    root = Path(dataset_dir)
    meta, manifest_sha = _read_manifest(root)
    _check_files(root, meta, rehash=True)
    receipt = {
        "format": RECEIPT_FORMAT,
        "manifest_sha256": manifest_sha,
        "fingerprint": meta["fingerprint"],
        "shards": {shard["path"]: shard["sha256"] for shard in meta["shards"]},
    }
    if receipt_path is not None:
        atomic_write_json(receipt_path, receipt)
    return receipt


def open_split(dataset_dir: str | os.PathLike, split: str, receipt: dict[str, Any] | str | os.PathLike) -> TokenTable:
    """One split as a TokenTable, after checking `receipt` (from verify) still matches."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {SPLITS}")
    root = Path(dataset_dir)
    meta, manifest_sha = _read_manifest(root)
    receipt = _read_receipt(receipt)
    if receipt.get("format") != RECEIPT_FORMAT:
        raise IntegrityError(f"receipt is not a {RECEIPT_FORMAT} receipt")
    if receipt.get("manifest_sha256") != manifest_sha:
        raise IntegrityError(
            f"{root / MANIFEST}: the receipt was made for another manifest "
            f"(receipt {receipt.get('manifest_sha256')}, manifest {manifest_sha})"
        )
    listed = {shard["path"]: shard["sha256"] for shard in meta["shards"]}
    if receipt.get("shards") != listed:
        raise IntegrityError(f"{root / MANIFEST}: the receipt's shards differ from the manifest's")
    _check_files(root, meta, rehash=False)
    chosen = [shard for shard in meta["shards"] if shard["split"] == split]
    return TokenTable(
        [root / shard["path"] for shard in chosen],
        split,
        meta["fingerprint"],
        [shard["sha256"] for shard in chosen],
        [shard["rows"] for shard in chosen],
    )


def load(dataset_dir: str | os.PathLike, receipt: dict[str, Any] | str | os.PathLike) -> dict[str, TokenTable]:
    """{"train": TokenTable, "validation": TokenTable}; the test split is for evaluate alone."""
    receipt = _read_receipt(receipt)
    return {split: open_split(dataset_dir, split, receipt) for split in TRAINING_SPLITS}


def games(dataset_dir: str | os.PathLike, split: str) -> Iterator[tuple[np.ndarray, dict[str, Any]]]:
    """(tokens, meta) for every game of a split, in manifest order. Every shard of every split
    is verified before the first game is yielded. tokens is a read-only uint8 array."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {SPLITS}")
    yield from open_split(dataset_dir, split, verify(dataset_dir)).iter_games()


class TokenTable:
    """All games of one split over memory-mapped shards: the token values and offsets of the
    list<uint8> column are used in place, so forming a batch creates no per-game objects."""

    def __init__(
        self, paths: Sequence[Path], split: str, fingerprint: str, shard_sha256: Sequence[str], rows: Sequence[int]
    ) -> None:
        self.split = split
        self.fingerprint = fingerprint  # the manifest's: record it in a training identity
        self.shards = list(shard_sha256)
        self._tables: list[pa.Table] = []
        self._values: list[np.ndarray] = []
        self._offsets: list[np.ndarray] = []
        self._chunk_rows: list[tuple[int, int]] = []  # (table, first row) of each tokens chunk
        for path, expected_rows in zip(paths, rows):
            table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
            if table.num_rows != expected_rows:
                raise IntegrityError(f"{path}: {table.num_rows} rows, the manifest says {expected_rows}")
            self._tables.append(table)
            first_row = 0
            for chunk in table["tokens"].chunks:
                self._chunk_rows.append((len(self._tables) - 1, first_row))
                first_row += len(chunk)
                # values is the whole child array; offsets already account for any slice.
                self._values.append(chunk.values.to_numpy(zero_copy_only=True))
                self._offsets.append(chunk.offsets.to_numpy(zero_copy_only=True))
        counts = [len(offsets) - 1 for offsets in self._offsets]
        self._chunk_starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self._lengths = (
            np.concatenate([np.diff(o).astype(np.int64) for o in self._offsets])
            if self._offsets
            else np.zeros(0, np.int64)
        )
        self._lengths.flags.writeable = False

    def __len__(self) -> int:
        return int(self._chunk_starts[-1])

    def lengths(self) -> np.ndarray:
        """Tokens per game (int64, read-only)."""
        return self._lengths

    @property
    def num_tokens(self) -> int:
        return int(self._lengths.sum())

    def _locate(self, index: int) -> tuple[int, int]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"game {index} of a {len(self)}-game {self.split} split")
        index %= len(self)
        chunk = int(np.searchsorted(self._chunk_starts, index, side="right")) - 1
        return chunk, index - int(self._chunk_starts[chunk])

    def __getitem__(self, index: int) -> np.ndarray:
        chunk, row = self._locate(int(index))
        offsets = self._offsets[chunk]
        return self._values[chunk][offsets[row] : offsets[row + 1]]

    def batch(self, indices: Sequence[int] | np.ndarray, pad: int = tokens.PAD, width: int | None = None) -> np.ndarray:
        """uint8 array (len(indices), width or the longest game), each game right-padded."""
        index = np.asarray(indices, dtype=np.int64).reshape(-1)
        if index.size and (index.min() < -len(self) or index.max() >= len(self)):
            raise IndexError(f"batch index out of range for a {len(self)}-game {self.split} split")
        index = index % max(len(self), 1)
        lengths = self._lengths[index]
        longest = int(lengths.max()) if index.size else 0
        width = longest if width is None else width
        if longest > width:
            raise ValueError(f"a game of {longest} tokens does not fit width {width}")
        out = np.full((index.size, width), pad, dtype=np.uint8)
        chunk_of = np.searchsorted(self._chunk_starts, index, side="right") - 1
        columns = np.arange(width)
        for chunk in np.unique(chunk_of):
            rows = np.flatnonzero(chunk_of == chunk)
            starts = self._offsets[chunk][index[rows] - self._chunk_starts[chunk]].astype(np.int64)
            row, column = np.nonzero(columns[None, :] < lengths[rows, None])
            out[rows[row], column] = self._values[chunk][starts[row] + column]
        return out

    def column(self, name: str) -> pa.ChunkedArray:
        """A metadata column over the whole split (e.g. "white_elo", "time_control_class")."""
        return pa.chunked_array(
            [chunk for table in self._tables for chunk in table[name].chunks],
            type=(self._tables[0].schema if self._tables else SCHEMA).field(name).type,  # a split may be empty
        )

    def meta(self, index: int) -> dict[str, Any]:
        """The metadata of one game as a dict (everything but the tokens)."""
        chunk, row = self._locate(int(index))
        table, first_row = self._chunk_rows[chunk]
        return self._tables[table].slice(first_row + row, 1).drop_columns(["tokens"]).to_pylist()[0]

    def iter_games(self, rows_per_step: int = 4096) -> Iterator[tuple[np.ndarray, dict[str, Any]]]:
        """(tokens, meta) for every game in order; metadata is converted a slice at a time."""
        for chunk, (table, first_row) in enumerate(self._chunk_rows):
            values, offsets = self._values[chunk], self._offsets[chunk]
            for start in range(0, len(offsets) - 1, rows_per_step):
                part = self._tables[table].slice(first_row + start, rows_per_step).drop_columns(["tokens"])
                for row, meta in enumerate(part.to_pylist(), start):
                    yield values[offsets[row] : offsets[row + 1]], meta

    def __repr__(self) -> str:
        return f"TokenTable(split={self.split!r}, games={len(self)}, shards={len(self.shards)})"


def _read_receipt(receipt: dict[str, Any] | str | os.PathLike) -> dict[str, Any]:
    if isinstance(receipt, dict):
        return receipt
    try:
        return json.loads(Path(receipt).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise IntegrityError(f"{receipt}: cannot read the receipt: {error}") from None


def _read_manifest(root: Path) -> tuple[dict[str, Any], str]:
    path = root / MANIFEST
    try:
        raw = path.read_bytes()
        meta = json.loads(raw)
    except (OSError, ValueError) as error:
        raise IntegrityError(f"{path}: cannot read the manifest: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise IntegrityError(f"{path}: not a {FORMAT} manifest")
    if meta.get("fingerprint") != fingerprint(meta):
        raise IntegrityError(f"{path}: the fingerprint does not match the manifest's content")
    check_structure(path, meta, IntegrityError)
    version = meta["tokenizer"]["version"]
    if version != tokens.VERSION:
        raise IntegrityError(f"{path}: tokens are {version!r}, this code reads {tokens.VERSION!r}")
    for shard in meta["shards"]:
        _inside(root, shard["path"])
    return meta, hashlib.sha256(raw).hexdigest()


def _inside(root: Path, relative: str) -> Path:
    """root/relative, refusing anything that could point outside root/shards."""
    pure = PurePosixPath(relative)
    if (
        not isinstance(relative, str)
        or "\\" in relative
        or pure.is_absolute()
        or ".." in pure.parts
        or pure.parts[:1] != (SHARDS,)
        or len(pure.parts) < 2
    ):
        raise IntegrityError(f"{root / MANIFEST}: shard path {relative!r} leaves the dataset's {SHARDS}/ folder")
    full = root / pure
    if not full.resolve().is_relative_to((root / SHARDS).resolve()):
        raise IntegrityError(f"{full}: resolves outside the dataset folder (a link?)")
    return full


def _check_files(root: Path, meta: dict[str, Any], rehash: bool) -> None:
    listed = {}
    for shard in meta["shards"]:
        path = _inside(root, shard["path"])
        listed[path] = shard
        if not path.is_file():
            raise IntegrityError(f"{path}: shard listed in the manifest is missing")
        if path.name != f"{shard['split']}-{shard['sha256']}.arrow":
            raise IntegrityError(f"{path}: name does not carry its split and sha256")
        if "bytes" in shard and path.stat().st_size != shard["bytes"]:
            raise IntegrityError(f"{path}: {path.stat().st_size} bytes, the manifest says {shard['bytes']}")
        if rehash and sha256_file(path) != shard["sha256"]:
            raise IntegrityError(f"{path}: sha256 does not match the manifest")
    shard_dir = root / SHARDS
    present = sorted(p for p in shard_dir.rglob("*") if not p.is_dir()) if shard_dir.is_dir() else []
    for path in present:
        if path not in listed:
            raise IntegrityError(f"{path}: extra file among the shards, not in the manifest")
