"""Rows of the game table for the accepted games of a parsed batch (chesscore.ingest.validate's last step).

    rows, id_keys, move_keys = accepted_rows(parsed, raws, picks)

Tokens, clocks and metadata are built column-wise from the parser's flat arrays and the tag
table; the keys the caller dedups on are each row's Lichess id packed in 64 bits (0: none) and a
64-bit hash of its tokens (chesscore.data.shards.move_hashes).
"""

from __future__ import annotations

import chess
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chesscore import tokens
from chesscore.data.shards import SCHEMA, move_hashes, tokens_array
from chesscore.pgn import meta
from chesscore.pgn.parse import ParsedBatch
from chesscore.pgn.split import RawGame


def _gather(offsets: np.ndarray, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions of the picked ragged rows, and the picked rows' new offsets."""
    lengths = offsets[picks + 1] - offsets[picks]
    new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    positions = np.arange(new_offsets[-1], dtype=np.int64) + np.repeat(offsets[picks] - new_offsets[:-1], lengths)
    return positions, new_offsets


def _token_values(
    parsed: ParsedBatch, positions: np.ndarray, move_offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """triples-v1 tokens of the picked games: BOS, (from, to, promotion) per ply, EOS."""
    plies = np.diff(move_offsets)
    token_offsets = np.concatenate([[0], np.cumsum(3 * plies + 2)]).astype(np.int64)
    values = np.empty(token_offsets[-1], np.uint8)
    values[token_offsets[:-1]] = tokens.BOS
    values[token_offsets[1:] - 1] = tokens.EOS
    game_of_move = np.repeat(np.arange(len(plies)), plies)
    at = token_offsets[:-1][game_of_move] + 1 + 3 * (np.arange(len(positions)) - move_offsets[:-1][game_of_move])
    promotions = parsed.promotions[positions].astype(np.int16)
    values[at] = parsed.from_squares[positions]
    values[at + 1] = parsed.to_squares[positions]
    values[at + 2] = np.where(promotions < 0, tokens.NO_PROMOTION, promotions + (tokens.KNIGHT - chess.KNIGHT))
    return values, token_offsets


def accepted_rows(
    parsed: ParsedBatch, raws: list[RawGame], picks: np.ndarray
) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray]:
    """Table rows of games `picks` (indices into parsed and raws), and their id and move keys.
    source_sha256 is left empty: the main process sets it as it writes (chesscore.ingest.hashes)."""
    positions, move_offsets = _gather(parsed.offsets, picks)
    values, token_offsets = _token_values(parsed, positions, move_offsets)
    token_lists = tokens_array(values, token_offsets)
    move_keys = move_hashes(token_lists)
    chosen = pa.array(picks)
    ids = meta.lichess_ids(parsed.tags).take(chosen)
    arrays = {name: array.take(chosen) for name, array in meta.columns(parsed.tags).items()}
    arrays["game_id"] = ids
    if ids.null_count:  # no Lichess id: the moves name the game
        no_id = ids.is_null()
        names = [f"moves:{key:016x}" for key in move_keys[no_id.to_numpy(zero_copy_only=False)].tolist()]
        arrays["game_id"] = pc.replace_with_mask(ids, no_id, pa.array(names, pa.string()))
    arrays["source_sha256"] = pa.array([""] * len(picks), pa.string())
    arrays["source_index"] = pa.array([raws[k].index for k in picks.tolist()], pa.int64())
    arrays["source_offset"] = pa.array([raws[k].offset for k in picks.tolist()], pa.int64())
    arrays["plies"] = pa.array(np.diff(move_offsets).astype(np.int16))
    clocks = parsed.clocks[positions]
    has_clock = np.add.reduceat(~np.isnan(clocks), move_offsets[:-1]) > 0 if len(picks) else np.zeros(0, bool)
    arrays["tokens"] = token_lists
    arrays["clocks"] = pa.ListArray.from_arrays(
        pa.array(move_offsets, pa.int32()), pa.array(clocks, pa.float32()), mask=pa.array(~has_clock)
    )
    batch = pa.RecordBatch.from_arrays([arrays[name] for name in SCHEMA.names], schema=SCHEMA)
    return batch, meta.id_keys(ids), move_keys
