"""Who plays, at what time control, in which event: the header side of a sample game.

Everything here is drawn from a `random.Random` that the caller seeds per game, except the
player pool and the tournament list, which are drawn once from the sample seed (every worker
rebuilds the same pool). Lichess rules used:

- speed class from the estimated duration `base + 40 * increment` seconds:
  < 30 UltraBullet, < 180 Bullet, < 480 Blitz, < 1500 Rapid, else Classical; "-" is
  Correspondence;
- Event "Rated Blitz game", "Casual Rapid game", "Rated Bullet tournament https://lichess.org/
  tournament/<id>", "Rated Blitz swiss https://lichess.org/swiss/<id>"; casual games carry no
  RatingDiff headers.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from functools import lru_cache

ID_ALPHABET = string.ascii_letters + string.digits
RATING_MIN, RATING_MAX = 800, 2800
HUMAN_TITLES = ("GM", "IM", "FM", "CM", "NM", "WGM", "WIM", "WFM", "LM")

# (TimeControl, weight) per speed class; class weights below.
TIME_CONTROLS = {
    "UltraBullet": [("15+0", 1.0)],
    "Bullet": [("60+0", 6.0), ("120+1", 3.0), ("30+0", 0.5), ("60+1", 1.0), ("120+0", 0.5), ("45+0", 0.3)],
    "Blitz": [("180+0", 5.0), ("180+2", 4.0), ("300+0", 5.0), ("300+3", 2.0), ("240+0", 0.5), ("420+0", 0.3)],
    "Rapid": [("600+0", 5.0), ("600+5", 1.5), ("900+10", 2.0), ("600+10", 0.7), ("300+5", 0.4), ("420+3", 0.3)],
    "Classical": [("1800+0", 3.0), ("1800+20", 1.5), ("900+15", 1.0), ("1200+10", 0.5)],
    "Correspondence": [("-", 1.0)],
}
CLASS_WEIGHTS = {"UltraBullet": 2, "Bullet": 26, "Blitz": 41, "Rapid": 20, "Classical": 7, "Correspondence": 4}


def speed_class(time_control: str) -> str:
    """Lichess's speed class of a TimeControl header value."""
    if time_control == "-":
        return "Correspondence"
    base, inc = (int(x) for x in time_control.split("+"))
    estimate = base + 40 * inc
    for limit, name in ((30, "UltraBullet"), (180, "Bullet"), (480, "Blitz"), (1500, "Rapid")):
        if estimate < limit:
            return name
    return "Classical"


def site_id(rng: random.Random) -> str:
    return "".join(rng.choice(ID_ALPHABET) for _ in range(8))


@dataclass(frozen=True)
class Player:
    name: str
    rating: int
    title: str | None  # "GM", ..., "BOT" or None
    k_factor: int  # rating points at stake; high for new (provisional) players


_SYLLABLES = (
    "ka",
    "ro",
    "mi",
    "zen",
    "tal",
    "vor",
    "chess",
    "pawn",
    "li",
    "an",
    "dre",
    "max",
    "nik",
    "sa",
    "ta",
    "ox",
    "el",
    "gor",
    "kin",
    "bish",
    "op",
    "ru",
    "ya",
    "ve",
    "ko",
    "stor",
    "mat",
    "ito",
    "jo",
    "ne",
    "qu",
    "een",
    "rook",
    "fia",
    "sky",
    "dan",
    "bo",
)


def _username(rng: random.Random) -> str:
    name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
    style = rng.random()
    if style < 0.35:
        name = name.capitalize()
    elif style < 0.45:
        name = name.upper()
    if rng.random() < 0.25:
        name += rng.choice("_-")
    if rng.random() < 0.5:
        name += str(rng.randint(1, 2024))
    return name[:20]


@lru_cache(maxsize=4)
def player_pool(seed: int, size: int = 2500) -> tuple[Player, ...]:
    """The sample's players: ratings spread over 800-2800, a few titled players and BOTs."""
    rng = random.Random(f"samplegen:{seed}:players")
    players, names = [], set()
    while len(players) < size:
        name = _username(rng)
        if name.lower() in names:
            continue
        names.add(name.lower())
        rating = round(min(RATING_MAX, max(RATING_MIN, rng.gauss(1550, 400))))
        title = None
        if rng.random() < 0.01:
            title = "BOT"
        elif rating > 2200 and rng.random() < 0.3:
            title = rng.choice(HUMAN_TITLES)
        players.append(Player(name, rating, title, rng.choice((6, 8, 10, 12, 16, 20, 40))))
    # Pin the ends of the range so that every sample spans it.
    players[0] = Player(players[0].name, RATING_MIN, None, 40)
    players[1] = Player(players[1].name, RATING_MAX, "GM", 6)
    return tuple(players)


def pick_pair(rng: random.Random, pool: tuple[Player, ...]) -> tuple[Player, Player]:
    """Two players of similar rating, as a lobby pairing makes them (wider now and then)."""
    first = rng.choice(pool)
    window = 150 if rng.random() < 0.8 else 450
    while True:
        second = rng.choice(pool)
        if second is not first and abs(second.rating - first.rating) <= window:
            return (first, second) if rng.random() < 0.5 else (second, first)


@lru_cache(maxsize=4)
def tournaments(seed: int) -> tuple[tuple[str, str, str], ...]:
    """(kind, id, TimeControl) of the arenas and swisses games may belong to."""
    rng = random.Random(f"samplegen:{seed}:tournaments")
    found = []
    for _ in range(24):
        speed = rng.choices(["Bullet", "Blitz", "Rapid", "UltraBullet"], weights=[4, 8, 3, 1])[0]
        tc = rng.choices(*zip(*TIME_CONTROLS[speed]))[0]
        found.append(("swiss" if rng.random() < 0.2 else "tournament", site_id(rng), tc))
    return tuple(found)


def pick_event(rng: random.Random, seed: int) -> tuple[str, str, bool]:
    """(Event header, TimeControl, rated) for one game."""
    r = rng.random()
    if r < 0.15:
        kind, tid, tc = rng.choice(tournaments(seed))
        return f"Rated {speed_class(tc)} {kind} https://lichess.org/{kind}/{tid}", tc, True
    speed = rng.choices(list(CLASS_WEIGHTS), weights=list(CLASS_WEIGHTS.values()))[0]
    tc = rng.choices(*zip(*TIME_CONTROLS[speed]))[0]
    rated = r >= 0.18  # about 3% casual games
    return f"{'Rated' if rated else 'Casual'} {speed} game", tc, rated


def rating_diffs(white: Player, black: Player, result: str) -> tuple[str, str]:
    """Elo-style rating changes as Lichess writes them ("+6", "-6", "+0")."""
    score = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}[result]
    expected = 1 / (1 + 10 ** ((black.rating - white.rating) / 400))
    dw = round(white.k_factor * (score - expected))
    db = round(black.k_factor * ((1 - score) - (1 - expected)))
    return f"{dw:+d}", f"{db:+d}"
