"""Validation rules and the per-batch worker: raw game texts in, game rows and rejects out.

    config = ValidateConfig(min_plies=2, exclude_bots=True)
    result = validate_batch(BatchJob(config, "data/raw/x.pgn", raw_games))
    result.rows          # pyarrow RecordBatch, chesscore.data.shards.SCHEMA, accepted games in order
    result.rejects       # [(game index, byte offset, game id, reason, detail)], in order

Rules, in the order they are checked (the first that fails is the reject reason):
  unparsable         no game in the text, invalid UTF-8, a NUL byte, or a text too large
  variant            a Variant other than standard chess
  setup_position     a FEN / SetUp start other than the standard position
  null_move, illegal_move   a move python-chess cannot play (it decides for the fast parser)
  no_moves           no mainline move
  no_result          Result header missing or "*", or no result token after the moves
  result_mismatch    the movetext's result token, or a final mate/stalemate, disagrees with Result
  too_short, too_long   fewer than min_plies, or more plies than fit context_tokens
  filtered:<rule>    the optional filters: unrated, rating, time_control, termination, bot
  internal_error     the reader itself failed on the game (a bug: the detail says how)
Duplicates are found across batches and files by the caller (chesscore.ingest.validate_run).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import NamedTuple

import chess
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chesscore import ranges
from chesscore.data.shards import SCHEMA
from chesscore.ingest.rows import accepted_rows
from chesscore.pgn import meta
from chesscore.pgn.parse import MAX_READ_PLIES, parse_batch
from chesscore.pgn.split import RawGame
from chesscore.pgn.tags import TagTable

RESULTS = ("1-0", "0-1", "1/2-1/2")
_RESULTS = pa.array(RESULTS)
_STANDARD = pa.array(sorted(meta.STANDARD_VARIANTS | {"from position"}))
MAX_PLIES = MAX_READ_PLIES - 1  # the plies column is int16
INTERNAL_ERROR = "internal_error"  # the reader failed on the game: a bug, never a verdict on the data


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
        ranges.check(self, counts=("min_plies",), whole=("min_rating", "max_rating"))
        # plies are stored as int16, ratings too: a bound past them would filter nothing.
        ranges.at_least("context_tokens", self.context_tokens, 2 + 3 * self.min_plies, integer=True)
        ranges.at_most("context_tokens", self.context_tokens, 2 + 3 * MAX_PLIES, integer=True)
        for name in ("min_rating", "max_rating"):
            ranges.at_most(name, getattr(self, name), meta.MAX_RATING)
        if self.min_rating is not None and self.max_rating is not None and self.min_rating > self.max_rating:
            raise ranges.InvalidSetting(f"min_rating {self.min_rating} is above max_rating {self.max_rating}")
        unknown = set(self.time_control_classes or ()) - set(meta.ALL_CLASSES)
        if unknown:
            raise ranges.InvalidSetting(
                f"time_control_classes: unknown time control classes {sorted(unknown)}; "
                f"known: {', '.join(meta.ALL_CLASSES)}"
            )


class BatchJob(NamedTuple):
    config: ValidateConfig
    source_path: str
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
    if (
        (fen and fen.strip() != chess.STARTING_FEN)
        or (variant or "").lower() == "from position"
        or (not fen and headers.get("SetUp") == "1")
    ):
        return "setup_position", f"starts from FEN {fen!r}"
    return None


def judge(
    config: ValidateConfig,
    headers: dict[str, str],
    plies: int,
    result_token: str | None,
    checkmate: bool,
    stalemate: bool,
    error: tuple[str, str] | None,
) -> tuple[str, str] | None:
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
        return (
            "filtered:bot",
            f"{headers.get('White')} ({headers.get('WhiteTitle')}) vs "
            f"{headers.get('Black')} ({headers.get('BlackTitle')})",
        )
    return None


def validate_batch(job: BatchJob) -> BatchResult:
    """Decode, parse and judge a batch of games of one file; build rows for the accepted.

    One game must never stop a run: if the batch fails, its games are judged one by one, and a
    game that fails alone is rejected as `internal_error` (with the error; a bug to report, which
    the fuzz tests look for). If every game fails alone, the fault is not in the data: it is raised."""
    # Nothing here makes reference cycles, so the cycle collector would only rescan the
    # thousands of fresh header dicts over and over (about a tenth of the time): pause it.
    paused = gc.isenabled()
    gc.disable()
    try:
        try:
            return _validate_batch(job)
        except MemoryError:
            raise
        except Exception as error:
            if len(job.games) == 1:
                raise
            return _one_by_one(job, error)
    finally:
        if paused:
            gc.enable()


def _one_by_one(job: BatchJob, batch_error: Exception) -> BatchResult:
    results, failed = [], 0
    for game in job.games:
        try:
            results.append(_validate_batch(job._replace(games=[game])))
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - recorded as this game's reject, not lost
            failed += 1
            detail = f"the reader failed on this game ({type(error).__name__}: {error}); please report it"
            results.append(rejected(game.index, game.offset, INTERNAL_ERROR, " ".join(detail.split())[:500]))
    if failed == len(job.games):
        raise batch_error
    return BatchResult(
        pa.concat_batches([r.rows for r in results]),
        np.concatenate([r.id_keys for r in results]),
        np.concatenate([r.move_keys for r in results]),
        [reject for r in results for reject in r.rejects],
        sum(r.seen for r in results),
        sum(r.reference_reads for r in results),
    )


def rejected(index: int, offset: int, reason: str, detail: str) -> BatchResult:
    """The result of one game (or one unreadable stretch of a file) seen and rejected."""
    empty = pa.RecordBatch.from_pylist([], schema=SCHEMA)
    none = np.zeros(0, np.uint64)
    return BatchResult(empty, none, none, [(index, offset, None, reason, detail)], seen=1)


def _validate_batch(job: BatchJob) -> BatchResult:
    texts, raws, rejects, movetext_at = [], [], [], []
    for game in job.games:
        if game.problem:
            rejects.append((game.index, game.offset, None, "unparsable", game.problem))
            continue
        nul = game.data.find(b"\x00")
        if nul >= 0:  # never in a PGN; python-chess would skip it and read "N\0c6" as c6
            rejects.append((game.index, game.offset, None, "unparsable", f"a NUL byte at byte {game.offset + nul}"))
            continue
        try:
            text = game.data.decode("utf-8")
        except UnicodeDecodeError as error:
            rejects.append(
                (game.index, game.offset, None, "unparsable", f"invalid UTF-8 at byte {game.offset + error.start}")
            )
            continue
        texts.append(text)
        raws.append(game)
        ascii_only = len(text) == len(game.data)  # where the movetext starts, in characters
        movetext_at.append(game.movetext if ascii_only else len(game.data[: game.movetext].decode("utf-8")))
    parsed = parse_batch(
        texts,
        [game.odd for game in raws],
        movetext_at,
        rejected_by_tags=lambda headers: tags_verdict(headers) is not None,
    )
    plies = parsed.plies()
    broken = broken_rules(
        job.config, parsed.tags, plies, parsed.result_token, parsed.checkmate, parsed.stalemate, parsed.error
    )
    accepted = np.flatnonzero(~broken)
    rejected = np.flatnonzero(broken).tolist()
    for k, headers in zip(rejected, parsed.tags.rows(rejected)):  # the reason and its detail, one by one
        verdict = judge(
            job.config,
            headers,
            int(plies[k]),
            parsed.result_token[k],
            bool(parsed.checkmate[k]),
            bool(parsed.stalemate[k]),
            parsed.error[k],
        )
        if verdict is None:
            raise AssertionError(
                f"{job.source_path}: game {raws[k].index}: the column-wise rules reject "
                f"it and the per-game rules do not"
            )
        rejects.append((raws[k].index, raws[k].offset, meta.lichess_id(headers), *verdict))
    rejects.sort()
    rows, id_keys, move_keys = accepted_rows(parsed, raws, accepted)
    return BatchResult(rows, id_keys, move_keys, rejects, len(job.games), parsed.parser.count("python-chess"))


def broken_rules(
    config: ValidateConfig,
    tags: TagTable,
    plies: np.ndarray,
    result_token: list[str | None],
    checkmate: np.ndarray,
    stalemate: np.ndarray,
    error: list,
) -> np.ndarray:
    """True for every game `judge` rejects, computed a rule at a time over the whole batch (a
    test holds the two equal); `judge` then names the reason of each rejected game."""

    def mask(array: pa.Array) -> np.ndarray:
        return pc.fill_null(array, False).to_numpy(zero_copy_only=False)

    def present(name: str) -> pa.Array:
        return pc.not_equal(pc.fill_null(tags.column(name), ""), "")

    variant = pc.utf8_lower(tags.column("Variant"))
    fen = tags.column("FEN")
    broken = mask(pc.and_(present("Variant"), pc.invert(pc.is_in(variant, value_set=_STANDARD))))
    broken |= mask(pc.and_(present("FEN"), pc.not_equal(pc.utf8_trim_whitespace(fen), chess.STARTING_FEN)))
    broken |= mask(pc.equal(variant, "from position"))
    broken |= mask(pc.and_(pc.invert(present("FEN")), pc.equal(tags.column("SetUp"), "1")))
    broken |= np.array([e is not None for e in error], bool) | (plies == 0)
    result, token = tags.column("Result"), pa.array(result_token, pa.string())
    broken |= ~mask(pc.is_in(result, value_set=_RESULTS)) | ~mask(pc.equal(token, result))
    mated = np.where(plies % 2 == 0, "0-1", "1-0")
    broken |= np.asarray(checkmate, bool) & ~mask(pc.equal(result, pa.array(mated)))
    broken |= np.asarray(stalemate, bool) & ~mask(pc.equal(result, "1/2-1/2"))
    broken |= (plies < config.min_plies) | (plies > config.max_plies)
    if config.rated_only:
        broken |= ~mask(pc.equal(pc.utf8_lower(pc.utf8_slice_codeunits(tags.column("Event"), 0, 6)), "rated "))
    for side in ("WhiteElo", "BlackElo"):
        if config.min_rating is not None or config.max_rating is not None:
            elo = meta.rating_array(tags.column(side))
            ok = pc.is_valid(elo)
            if config.min_rating is not None:
                ok = pc.and_(ok, pc.greater_equal(elo, config.min_rating))
            if config.max_rating is not None:
                ok = pc.and_(ok, pc.less_equal(elo, config.max_rating))
            broken |= ~mask(ok)
    if config.time_control_classes is not None:
        kind = meta.time_control_classes(tags.column("TimeControl"))
        broken |= ~mask(pc.is_in(kind, value_set=pa.array(config.time_control_classes, pa.string())))
    if config.exclude_terminations:
        broken |= mask(
            pc.is_in(tags.column("Termination"), value_set=pa.array(config.exclude_terminations, pa.string()))
        )
    if config.exclude_bots:
        broken |= mask(
            pc.or_kleene(pc.equal(tags.column("WhiteTitle"), "BOT"), pc.equal(tags.column("BlackTitle"), "BOT"))
        )
    return broken
