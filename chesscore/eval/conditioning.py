"""Does the conditioning matter? Maia-2's test for a triples-v2 model: move matching (top-1,
legal-masked) per actual rating band of the mover, with the model told the true ratings, told
"unknown", and told each of a few fixed ratings (both sides) instead.

    matrix = conditioning_matrix(model, games, ratings=(1000, 1400, 1800, 2200), batch_size=32)
    matrix["top1"]["told 1400"]["1400"]        # told 1400, movers nearest to 1400
    matrix["diagonal_not_best"]                 # bands where another told rating matched better
    matrix["overall"]["told true"]              # top-1 over every rated mover, told the true ratings
    write_png(path, matrix)                     # the heat map: told rating (rows) x actual band (columns)

A mover belongs to the band of the fixed rating nearest to its own (ties to the lower one);
movers without a rating are left out. The time-control token stays the game's own throughout.
The diagonal cell of a band is "told" that band's rating; the best fixed row of each column is
reported, and the columns where it is not the diagonal are listed.
"""

from __future__ import annotations

import struct
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chesscore.conditioning import prefix_of, with_prefix
from chesscore.eval.moves import analyse_games
from chesscore.fileio import atomic_write
from chesscore.model import GPT
from chesscore.tokens import UNKNOWN_PREFIX, rating_token
from chesscore.train.batching import eval_batches

TRUE, UNKNOWN = "told true", "told unknown"


def band_of(rating: int | None, ratings: Sequence[int]) -> str | None:
    if rating is None:
        return None
    return str(min(ratings, key=lambda r: (abs(r - rating), r)))


def conditions(ratings: Sequence[int]) -> list[str]:
    return [TRUE, UNKNOWN, *(f"told {r}" for r in ratings)]


def _prefix(condition: str, meta: dict[str, Any]) -> tuple[int, int, int]:
    true = prefix_of(meta)
    if condition == TRUE:
        return true
    if condition == UNKNOWN:
        return UNKNOWN_PREFIX
    told = rating_token(int(condition.split()[1]))
    return told, told, true[2]


def conditioning_matrix(
    model: GPT, games: Sequence[tuple[np.ndarray, dict]], ratings: Sequence[int], batch_size: int
) -> dict[str, Any]:
    """Top-1 per (condition, band) over `games` (v1 tokens and their metadata)."""
    if not model.config.conditioning:
        raise ValueError("the conditioning matrix needs a triples-v2 model (GPTConfig.conditioning)")
    ratings = sorted(set(int(r) for r in ratings))
    bands = [str(r) for r in ratings]
    hits = {c: defaultdict(int) for c in conditions(ratings)}
    positions: dict[str, int] = defaultdict(int)
    lengths = np.array([len(tokens) for tokens, _ in games])
    for condition in hits:
        for batch in eval_batches(lengths, batch_size):
            rows = []
            for i in batch:
                tokens, meta = games[int(i)]
                rows.append(with_prefix(tokens, _prefix(condition, meta)))
            for result in analyse_games(model, rows, top_k=1):
                meta = games[int(batch[result.game])][1]
                band = band_of(meta.get("white_elo") if result.ply % 2 == 0 else meta.get("black_elo"), ratings)
                if band is None:
                    continue
                hits[condition][band] += result.rank == 1
                if condition == TRUE:
                    positions[band] += 1
    top1 = {c: {b: hits[c][b] / positions[b] if positions[b] else None for b in bands} for c in hits}
    everyone = sum(positions.values())
    overall = {c: sum(hits[c].values()) / everyone if everyone else None for c in hits}  # over every band
    best = {}
    for band in bands:
        scored = [(top1[f"told {r}"][band], f"told {r}") for r in ratings if top1[f"told {r}"][band] is not None]
        best[band] = max(scored)[1] if scored else None
    return {
        "ratings": ratings,
        "bands": bands,
        "conditions": list(hits),
        "positions": {b: positions[b] for b in bands},
        "top1": top1,
        "overall": overall,
        "best_told": best,
        "diagonal_not_best": [b for b in bands if best[b] is not None and best[b] != f"told {b}"],
        "protocol": "top-1 legal-masked move matching; band: the fixed rating nearest the mover's; "
        "told R: both rating tokens R, the game's own time control",
    }


def plot_rows(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per actual band, a column per condition (the DVC plot)."""
    return [
        {"actual": int(band), **{c.replace(" ", "_"): matrix["top1"][c][band] for c in matrix["conditions"]}}
        for band in matrix["bands"]
    ]


# The heat map of a model that reads no ratings (triples-v1): one empty, grey cell.
NO_MATRIX: dict[str, Any] = {"conditions": ["none"], "bands": [0], "top1": {"none": {0: None}}}


def write_png(path: str | Path, matrix: dict[str, Any], cell: int = 24) -> None:
    """The heat map as a PNG (no plotting library: zlib and struct): a row per condition (true,
    unknown, then the told ratings from low to high), a column per actual band from low to high,
    dark blue for the lowest top-1 of the table and yellow for the highest; grey where empty."""
    values = np.array(
        [[np.nan if (v := matrix["top1"][c][b]) is None else v for b in matrix["bands"]] for c in matrix["conditions"]]
    )
    finite = values[np.isfinite(values)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    scale = np.clip((values - low) / (high - low or 1.0), 0, 1)
    colours = np.stack([68 + 185 * scale, 1 + 230 * scale, 84 - 47 * scale], axis=-1)  # viridis' ends
    colours[~np.isfinite(values)] = 128
    image = np.repeat(np.repeat(colours.astype(np.uint8), cell, axis=0), cell, axis=1)
    raw = b"".join(b"\x00" + row.tobytes() for row in image)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    atomic_write(path, lambda f: f.write(png))
