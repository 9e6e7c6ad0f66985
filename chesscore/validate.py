"""Validation rules and the per-batch worker: raw game texts in, game rows and rejects out.

    config = ValidateConfig(min_plies=2, exclude_bots=True)
    result = validate_batch(BatchJob(config, "data/raw/x.pgn", sha256, raw_games))
    result.rows          # pyarrow RecordBatch, chesscore.shards.SCHEMA, accepted games in order
    result.rejects       # [(game index, byte offset, game id, reason, detail)], in order

Rules, in the order they are checked (the first that fails is the reject reason):
  unparsable         no game in the text, invalid UTF-8, or a text too large
  variant            a Variant other than standard chess
  setup_position     a FEN / SetUp start other than the standard position
  null_move, illegal_move   a move python-chess cannot play (it decides for the fast parser)
  no_moves           no mainline move
  no_result          Result header missing or "*", or no result token after the moves
  result_mismatch    the movetext's result token, or a final mate/stalemate, disagrees with Result
  too_short, too_long   fewer than min_plies, or more plies than fit context_tokens
  filtered:<rule>    the optional filters: unrated, rating, time_control, termination, bot
Duplicates are found across batches and files by the caller (chesscore.validate_run).
"""

from __future__ import annotations

import gc
import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

import chess
import numpy as np
import pyarrow as pa

from chesscore import pgn_meta as meta
from chesscore import tokens
from chesscore.pgn_parse import ParsedBatch, parse_batch
from chesscore.pgn_split import RawGame
from chesscore.shards import SCHEMA, tokens_array

RESULTS = ("1-0", "0-1", "1/2-1/2")


@dataclass(frozen=True)
class ValidateConfig:
    """What makes a game acceptable. Every field changes which games pass (so it is recorded
    in the dataset manifest); how the work is spread over processes is not here."""

    min_plies: int = 2  # fewer plies: too_short (a 1-ply game is nearly always an abort)
    context_tokens: int = 1024  # the model's context; longer games (2 + 3 x plies tokens): too_long
    rated_only: bool = False  # drop casual games (Event "Casual ...") and unknown ones
    min_rating: int | None = None  # both players at least this (a missing rating fails)
    max_rating: int | None = None  # both players at most this
    time_control_classes: tuple[str, ...] | None = None  # keep only these Lichess classes; None: all
    exclude_terminations: tuple[str, ...] = ("Abandoned", "Rules infraction")  # Termination tag values
    exclude_bots: bool = False  # drop games with a BOT-titled player

    @property
    def max_plies(self) -> int:
        return (self.context_tokens - 2) // 3

    def __post_init__(self) -> None:
        unknown = set(self.time_control_classes or ()) - set(meta.ALL_CLASSES)
        if unknown:
            raise ValueError(f"unknown time control classes {sorted(unknown)}; known: {meta.ALL_CLASSES}")


class BatchJob(NamedTuple):
    config: ValidateConfig
    source_path: str
    source_sha256: str
    games: list[RawGame]


@dataclass
class BatchResult:
    rows: pa.RecordBatch
    id_keys: np.ndarray  # uint64 hash of each row's Lichess id (0 where it has none)
    move_keys: np.ndarray  # uint64 hash of each row's tokens
    rejects: list[tuple[int, int, str | None, str, str]] = field(default_factory=list)
    seen: int = 0
    reference_reads: int = 0  # games the fast parser gave to python-chess


def tags_verdict(headers: dict[str, str]) -> tuple[str, str] | None:
    """The rules the tags alone decide, before any move: not standard chess."""
    variant = headers.get("Variant")
    if variant and variant.lower() not in meta.STANDARD_VARIANTS and variant.lower() != "from position":
        return "variant", f"Variant {variant!r}"
    fen = headers.get("FEN")
    if (fen and fen.strip() != chess.STARTING_FEN) or (variant or "").lower() == "from position" \
            or (not fen and headers.get("SetUp") == "1"):
        return "setup_position", f"starts from FEN {fen!r}"
    return None


def judge(config: ValidateConfig, headers: dict[str, str], plies: int, result_token: str | None,
          checkmate: bool, stalemate: bool, error: tuple[str, str] | None) -> tuple[str, str] | None:
    """(reason, detail) of the first rule a parsed game breaks, or None when it is accepted."""
    verdict = tags_verdict(headers)
    if verdict is not None:
        return verdict
    if error is not None:
        return error
    if plies == 0:
        if not headers and result_token is None:
            return "unparsable", "neither tags nor moves"
        return "no_moves", "no mainline moves"
    result = headers.get("Result")
    if result not in RESULTS:
        return "no_result", f"Result header {result!r}"
    if result_token is None:
        return "no_result", "no result token after the moves"
    if result_token != result:
        return "result_mismatch", f"Result header {result} but the moves end with {result_token}"
    if checkmate and result != ("0-1" if plies % 2 == 0 else "1-0"):
        return "result_mismatch", f"checkmate after ply {plies} but Result {result}"
    if stalemate and result != "1/2-1/2":
        return "result_mismatch", f"stalemate after ply {plies} but Result {result}"
    if plies < config.min_plies:
        return "too_short", f"{plies} plies, fewer than {config.min_plies}"
    if plies > config.max_plies:
        return "too_long", f"{plies} plies, more than {config.max_plies} ({config.context_tokens} tokens)"
    return _filtered(config, headers)


def _filtered(config: ValidateConfig, headers: dict[str, str]) -> tuple[str, str] | None:
    if config.rated_only and meta.rated(headers.get("Event")) is not True:
        return "filtered:unrated", f"Event {headers.get('Event')!r}"
    if config.min_rating is not None or config.max_rating is not None:
        low, high = config.min_rating, config.max_rating
        for side in ("WhiteElo", "BlackElo"):
            value = meta.rating(headers.get(side))
            if value is None or (low is not None and value < low) or (high is not None and value > high):
                return "filtered:rating", f"{side} {headers.get(side)!r} outside [{low}, {high}]"
    if config.time_control_classes is not None:
        kind = meta.time_control_class(headers.get("TimeControl"))
        if kind not in config.time_control_classes:
            return "filtered:time_control", f"TimeControl {headers.get('TimeControl')!r} is {kind}"
    termination = headers.get("Termination")
    if termination in config.exclude_terminations:
        return "filtered:termination", f"Termination {termination!r}"
    if config.exclude_bots and meta.is_bot(headers):
        return "filtered:bot", f"{headers.get('White')} ({headers.get('WhiteTitle')}) vs " \
                               f"{headers.get('Black')} ({headers.get('BlackTitle')})"
    return None


def validate_batch(job: BatchJob) -> BatchResult:
    """Decode, parse and judge a batch of games of one file; build rows for the accepted."""
    # Nothing here makes reference cycles, so the cycle collector would only rescan the
    # thousands of fresh header dicts over and over (about a tenth of the time): pause it.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _validate_batch(job)
    finally:
        if paused:
            gc.enable()


def _validate_batch(job: BatchJob) -> BatchResult:
    texts, raws, rejects, movetext_at = [], [], [], []
    for game in job.games:
        if game.problem:
            rejects.append((game.index, game.offset, None, "unparsable", game.problem))
            continue
        try:
            texts.append(game.data.decode("utf-8"))
        except UnicodeDecodeError as error:
            rejects.append((game.index, game.offset, None, "unparsable",
                            f"invalid UTF-8 at byte {game.offset + error.start}"))
            continue
        raws.append(game)
        head = game.data[:game.movetext]  # where the movetext starts, in characters
        movetext_at.append(game.movetext if head.isascii() else len(head.decode("utf-8")))
    parsed = parse_batch(texts, [game.odd for game in raws], movetext_at,
                         rejected_by_tags=lambda headers: tags_verdict(headers) is not None)
    plies = parsed.plies()
    accepted = []
    for k, game in enumerate(raws):
        headers = parsed.headers[k]
        verdict = judge(job.config, headers, int(plies[k]), parsed.result_token[k],
                        bool(parsed.checkmate[k]), bool(parsed.stalemate[k]), parsed.error[k])
        if verdict is None:
            accepted.append(k)
        else:
            rejects.append((game.index, game.offset, meta.lichess_id(headers), *verdict))
    rejects.sort()
    rows, id_keys, move_keys = _rows(job, parsed, raws, np.array(accepted, np.int64))
    return BatchResult(rows, id_keys, move_keys, rejects, len(job.games), parsed.parser.count("python-chess"))


def _gather(offsets: np.ndarray, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions of the picked ragged rows, and the picked rows' new offsets."""
    lengths = offsets[picks + 1] - offsets[picks]
    new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    positions = np.arange(new_offsets[-1], dtype=np.int64) + np.repeat(offsets[picks] - new_offsets[:-1], lengths)
    return positions, new_offsets


def _token_values(parsed: ParsedBatch, positions: np.ndarray, move_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _rows(job: BatchJob, parsed: ParsedBatch, raws: list[RawGame],
          picks: np.ndarray) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray]:
    positions, move_offsets = _gather(parsed.offsets, picks)
    values, token_offsets = _token_values(parsed, positions, move_offsets)
    view = memoryview(values)
    move_keys = np.frombuffer(b"".join(hashlib.blake2b(view[s:e], digest_size=8).digest()
                                       for s, e in zip(token_offsets[:-1], token_offsets[1:])), np.uint64)
    headers = [parsed.headers[k] for k in picks.tolist()]
    lichess = [meta.lichess_id(h) for h in headers]
    id_digests = b"".join(hashlib.blake2b(i.encode(), digest_size=8).digest() if i else bytes(8) for i in lichess)
    arrays = meta.columns(headers)
    arrays["game_id"] = pa.array([i or f"moves:{key:016x}" for i, key in zip(lichess, move_keys.tolist())], pa.string())
    arrays["source_sha256"] = pa.array([job.source_sha256] * len(headers), pa.string())
    arrays["source_index"] = pa.array([raws[k].index for k in picks.tolist()], pa.int64())
    arrays["source_offset"] = pa.array([raws[k].offset for k in picks.tolist()], pa.int64())
    arrays["plies"] = pa.array(np.diff(move_offsets).astype(np.int16))
    clocks = parsed.clocks[positions]
    has_clock = np.add.reduceat(~np.isnan(clocks), move_offsets[:-1]) > 0 if len(picks) else np.zeros(0, bool)
    arrays["tokens"] = tokens_array(values, token_offsets)
    arrays["clocks"] = pa.ListArray.from_arrays(pa.array(move_offsets, pa.int32()), pa.array(clocks, pa.float32()),
                                                mask=pa.array(~has_clock))
    batch = pa.RecordBatch.from_arrays([arrays[name] for name in SCHEMA.names], schema=SCHEMA)
    return batch, np.frombuffer(id_digests, np.uint64), move_keys
