"""What a game's PGN tags say, read the way Lichess writes them.

    time_control_class("180+2")          # "blitz": Lichess's rule, base + 40 x increment seconds
    lichess_id("https://lichess.org/IW4ZfyAW")   # "IW4ZfyAW"
    utc_seconds("2021.10.01", "00:00:05")        # 1633046405

Unknown or malformed values ("?", "????.??.??", "", "-" for a rating) read as None.
"""

from __future__ import annotations

import datetime as dt
import functools
import re

# Lichess's classes by estimated game duration in seconds (base + 40 x increment), upper bounds.
TIME_CONTROL_CLASSES = (("ultrabullet", 29), ("bullet", 179), ("blitz", 479), ("rapid", 1499),
                        ("classical", None))
ALL_CLASSES = tuple(name for name, _ in TIME_CONTROL_CLASSES) + ("correspondence", "unknown")
STANDARD_VARIANTS = {"standard", "chess", "classical", "normal"}
_LICHESS_ID = re.compile(r"https?://(?:[a-z]+\.)?lichess\.org/([A-Za-z0-9]{8})(?:[A-Za-z0-9]{4})?/?$")
_UNKNOWN = {"", "?", "-", "??", "????.??.??"}


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
    if not (base.isdigit() and (not plus or increment.isdigit())):
        return None, None, "unknown"
    base_s, increment_s = int(base), int(increment or 0)
    return base_s, increment_s, time_control_class_of(base_s, increment_s)


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
    if site and site.startswith("https://lichess.org/") and len(site) == 28 and site[20:].isalnum():
        return site[20:]  # the usual form, without a regex
    game_id = headers.get("GameId")
    if game_id and len(game_id) == 8 and game_id.isalnum():
        return game_id
    for tag in ("Site", "LichessURL"):
        match = _LICHESS_ID.match(headers.get(tag, ""))
        if match:
            return match.group(1)
    return None


def rating(value: str | None) -> int | None:
    if value is None or not value.isdigit():
        return None
    number = int(value)
    return number if number < 32768 else None


def rated(event: str | None) -> bool | None:
    """Lichess Event names start with "Rated" or "Casual"; anything else is not known."""
    if not event:
        return None
    head = event[:6].lower()
    return True if head == "rated " else False if head == "casual" else None


@functools.lru_cache(maxsize=1 << 12)
def _day(date: str) -> int | None:
    try:
        return (dt.date(int(date[0:4]), int(date[5:7]), int(date[8:10])) - dt.date(1970, 1, 1)).days \
            if len(date) == 10 and date[4] == date[7] == "." else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=1 << 17)
def _second_of_day(time: str) -> int | None:
    if len(time) != 8 or time[2] != ":" or time[5] != ":" or not (time[:2] + time[3:5] + time[6:]).isdigit():
        return None
    hours, minutes, seconds = int(time[:2]), int(time[3:5]), int(time[6:])
    return hours * 3600 + minutes * 60 + seconds if hours < 24 and minutes < 60 and seconds < 61 else None


def utc_seconds(date: str | None, time: str | None) -> int | None:
    """Seconds since 1970 (UTC) of UTCDate + UTCTime; None unless both are well formed."""
    if date is None or time is None:
        return None
    day, second = _day(date), _second_of_day(time)
    return None if day is None or second is None else day * 86400 + second


def is_bot(headers: dict[str, str]) -> bool:
    return headers.get("WhiteTitle") == "BOT" or headers.get("BlackTitle") == "BOT"
