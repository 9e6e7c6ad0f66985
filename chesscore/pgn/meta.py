"""What a game's PGN tags say, read the way Lichess writes them.

    time_control_class("180+2")          # "blitz": Lichess's rule, base + 40 x increment seconds
    lichess_id("https://lichess.org/IW4ZfyAW")   # "IW4ZfyAW"
    utc_seconds("2021.10.01", "00:00:05")        # 1633046405

    columns(tag_table)                           # the same for a batch of games, as Arrow arrays

Unknown or malformed values ("?", "????.??.??", "", "-" for a rating) read as None.
"""

from __future__ import annotations

import datetime as dt
import functools
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from chesscore.pgn.tags import TagTable

# Lichess's classes by estimated game duration in seconds (base + 40 x increment), upper bounds.
TIME_CONTROL_CLASSES = (("ultrabullet", 29), ("bullet", 179), ("blitz", 479), ("rapid", 1499), ("classical", None))
ALL_CLASSES = tuple(name for name, _ in TIME_CONTROL_CLASSES) + ("correspondence", "unknown")
STANDARD_VARIANTS = {"standard", "chess", "classical", "normal"}
_LICHESS_ID = re.compile(r"https?://(?:[a-z]+\.)?lichess\.org/([A-Za-z0-9]{8})(?:[A-Za-z0-9]{4})?/?$")
_UNKNOWN = {"", "?", "-", "??", "????.??.??"}
MAX_RATING = (1 << 15) - 1  # ratings are stored as int16: a larger one reads as unknown
MAX_SECONDS = (1 << 31) - 1  # base and increment are stored as int32
_UNKNOWN_ARRAY = pa.array(sorted(_UNKNOWN))
# Tags kept as they are (unknown values as null): column name -> tag.
TEXT_TAGS = {
    "event": "Event",
    "white": "White",
    "black": "Black",
    "white_title": "WhiteTitle",
    "black_title": "BlackTitle",
    "termination": "Termination",
    "eco": "ECO",
    "opening": "Opening",
}


def known(value: str | None) -> str | None:
    return None if value is None or value in _UNKNOWN else value


@functools.lru_cache(maxsize=4096)
def parse_time_control(value: str | None) -> tuple[int | None, int | None, str]:
    """(base seconds, increment seconds, class) of a TimeControl tag."""
    if value is None:
        return None, None, "unknown"
    value = value.strip()
    if value == "-":
        return None, None, "correspondence"
    base, plus, increment = value.partition("+")
    if not (_seconds(base) and (not plus or _seconds(increment))):
        return None, None, "unknown"
    base_s, increment_s = int(base), int(increment or 0)
    if base_s > MAX_SECONDS or increment_s > MAX_SECONDS:  # the columns are int32: a value past it is no clock
        return None, None, "unknown"
    return base_s, increment_s, time_control_class_of(base_s, increment_s)


def _seconds(text: str) -> bool:
    return 0 < len(text) <= 12 and _digits(text)


def _digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes "²" (which int() refuses) and other scripts'
    digits (which int() reads), and int() itself takes " 1", "+1" and "1_0"."""
    return text.isascii() and text.isdigit()


def time_control_class_of(base: int, increment: int) -> str:
    estimate = base + 40 * increment
    for name, upper in TIME_CONTROL_CLASSES:
        if upper is None or estimate <= upper:
            return name
    raise AssertionError("unreachable: the last class has no upper bound")


def time_control_class(value: str | None) -> str:
    return parse_time_control(value)[2]


def lichess_id(headers: dict[str, str]) -> str | None:
    """The 8-character Lichess game id from Site (or GameId / LichessURL), else None."""
    site = headers.get("Site")
    if site and site.startswith("https://lichess.org/") and len(site) == 28 and _ascii_alnum(site[20:]):
        return site[20:]  # the usual form, without a regex
    game_id = headers.get("GameId")
    if game_id and len(game_id) == 8 and _ascii_alnum(game_id):
        return game_id
    for tag in ("Site", "LichessURL"):
        match = _LICHESS_ID.match(headers.get(tag, ""))
        if match:
            return match.group(1)
    return None


def _ascii_alnum(text: str) -> bool:
    return text.isascii() and text.isalnum()  # Lichess ids are [A-Za-z0-9]: str.isalnum takes any script


def rating(value: str | None) -> int | None:
    if value is None or not (_digits(value) and len(value) <= 18):
        return None
    number = int(value)
    return number if number <= MAX_RATING else None


def rated(event: str | None) -> bool | None:
    """Lichess Event names start with "Rated" or "Casual"; anything else is not known."""
    if not event:
        return None
    head = event[:6].lower()
    return True if head == "rated " else False if head == "casual" else None


@functools.lru_cache(maxsize=1 << 12)
def _day(date: str) -> int | None:
    try:
        return (
            (dt.date(int(date[0:4]), int(date[5:7]), int(date[8:10])) - dt.date(1970, 1, 1)).days
            if len(date) == 10 and date[4] == date[7] == "." and _digits(date[:4] + date[5:7] + date[8:])
            else None
        )
    except ValueError:
        return None


@functools.lru_cache(maxsize=1 << 17)
def _second_of_day(time: str) -> int | None:
    if len(time) != 8 or time[2] != ":" or time[5] != ":" or not _digits(time[:2] + time[3:5] + time[6:]):
        return None
    hours, minutes, seconds = int(time[:2]), int(time[3:5]), int(time[6:])
    return hours * 3600 + minutes * 60 + seconds if hours < 24 and minutes < 60 and seconds < 60 else None


def utc_seconds(date: str | None, time: str | None) -> int | None:
    """Seconds since 1970 (UTC) of UTCDate + UTCTime; None unless both are well formed."""
    if date is None or time is None:
        return None
    day, second = _day(date), _second_of_day(time)
    return None if day is None or second is None else day * 86400 + second


def is_bot(headers: dict[str, str]) -> bool:
    return headers.get("WhiteTitle") == "BOT" or headers.get("BlackTitle") == "BOT"


def columns(tags: TagTable) -> dict[str, pa.Array]:
    """The metadata columns of chesscore.data.shards.SCHEMA for a batch of games' tags, computed a
    column at a time (the same values as the functions above, game by game)."""
    tag = {
        name: tags.column(name)
        for name in set(TEXT_TAGS.values()) | {"Result", "WhiteElo", "BlackElo", "UTCDate", "UTCTime", "TimeControl"}
    }
    out = {column: _known_array(tag[name]) for column, name in TEXT_TAGS.items()}
    out["result"], out["time_control"] = tag["Result"], tag["TimeControl"]  # "-" is correspondence
    out["white_elo"], out["black_elo"] = rating_array(tag["WhiteElo"]), rating_array(tag["BlackElo"])
    out.update(
        _per_value(
            out["time_control"],
            parse_time_control,
            {"base_seconds": pa.int32(), "increment_seconds": pa.int32(), "time_control_class": pa.string()},
        )
    )
    out.update(_per_value(out["event"], lambda e: (rated(e),), {"rated": pa.bool_()}))
    # A dump has a few dozen dates: each is checked once; times are checked column-wise.
    day = _per_value(tag["UTCDate"], lambda date: (None if date is None else _day(date),), {"day": pa.int64()})["day"]
    well_formed = pc.match_substring_regex(tag["UTCTime"], r"^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$")
    time = pc.if_else(well_formed, tag["UTCTime"], pa.scalar(None, pa.string()))
    hours, minutes, seconds = (
        pc.cast(pc.utf8_slice_codeunits(time, start, start + 2), pa.int64()) for start in (0, 3, 6)
    )
    of_day = pc.add(pc.add(pc.multiply(hours, 3600), pc.multiply(minutes, 60)), seconds)
    stamp = pc.add(pc.multiply(day, 86400), of_day)
    out["utc_datetime"] = stamp.cast(pa.timestamp("s", tz="UTC"))
    return out


def _known_array(values: pa.Array) -> pa.Array:
    return pc.if_else(pc.is_in(values, value_set=_UNKNOWN_ARRAY), pa.scalar(None, pa.string()), values)


def lichess_ids(tags: TagTable) -> pa.Array:
    """lichess_id of every game (null where none): the usual Site form column-wise, the rest one
    by one."""
    site = tags.column("Site")
    usual = pc.and_(
        pc.and_(pc.starts_with(site, "https://lichess.org/"), pc.equal(pc.binary_length(site), 28)),
        pc.utf8_is_alnum(pc.utf8_slice_codeunits(site, 20, 28)),
    )  # 28 bytes: ASCII alone
    ids = pc.if_else(usual, pc.utf8_slice_codeunits(site, 20, 28), pa.scalar(None, pa.string()))
    missing = np.flatnonzero(~pc.fill_null(usual, False).to_numpy(zero_copy_only=False))
    if len(missing):
        others = {
            name: tags.column(name).take(pa.array(missing)).to_pylist() for name in ("Site", "GameId", "LichessURL")
        }
        found = [
            lichess_id({name: values[n] for name, values in others.items() if values[n] is not None})
            for n in range(len(missing))
        ]
        mask = np.zeros(len(ids), bool)
        mask[missing] = True
        ids = pc.replace_with_mask(ids, pa.array(mask), pa.array(found, pa.string()))
    return ids


def id_keys(ids: pa.Array) -> np.ndarray:
    """Each Lichess id's 8 ASCII characters read as one uint64, 0 where a game has none: a key
    per id for dedup, with no hashing and no collisions."""
    packed = pc.fill_null(ids, "\0" * 8).cast(pa.binary(8))
    return np.frombuffer(packed.buffers()[1], np.uint64, count=len(packed), offset=8 * packed.offset)


def time_control_classes(values: pa.Array) -> pa.Array:
    """time_control_class of each TimeControl value."""
    return _per_value(values, lambda value: (parse_time_control(value)[2],), {"kind": pa.string()})["kind"]


def rating_array(values: pa.Array) -> pa.Array:
    """rating() of each value (int16, null where it gives None)."""
    digits = pc.and_(
        pc.and_(pc.string_is_ascii(values), pc.utf8_is_digit(values)), pc.less_equal(pc.utf8_length(values), 18)
    )
    numbers = pc.cast(pc.if_else(digits, values, pa.scalar(None, pa.string())), pa.int64())
    return pc.if_else(pc.less_equal(numbers, MAX_RATING), numbers, pa.scalar(None, pa.int64())).cast(pa.int16())


def _per_value(values: pa.Array, function, types: dict[str, pa.DataType]) -> dict[str, pa.Array]:
    """Apply a per-value function once per distinct value (there are few) and spread the results."""
    distinct = pc.unique(values)
    results = [function(value) for value in distinct.to_pylist()]
    where = pc.index_in(values, value_set=distinct)  # null values have an index too (nulls match)
    return {name: pa.array([r[i] for r in results], kind).take(where) for i, (name, kind) in enumerate(types.items())}
