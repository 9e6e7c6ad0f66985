"""One sample game from its spec (seed, index, kind): players, event, clock, moves, headers.

Each game draws everything from `random.Random(f"samplegen:{seed}:game:{index}")`, so a game
is the same whichever worker makes it and whatever was made before it.

Kinds: "normal"; and the ones a validator must reject because of what they are, not because
their text was damaged afterwards (see rejects.py for those): "setup" (FEN/SetUp start),
"from_position" (the same with Lichess's [Variant "From Position"]), "chess960",
"crazyhouse" (with at least one drop), "no_moves" (abandoned before the first move; the
movetext is only the result token) and "too_long" (a legal game of more than 340 plies).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import chess
import chess.engine
import chess.variant

from . import people
from .clock import Clock, clk
from .engine_game import GameEndedEarly, GameRecord, Plan, Strength, choose, play, search
from .openings import name_opening, pick_opening

START = datetime(2024, 3, 1, tzinfo=timezone.utc)  # games start 1.5 s apart from here


@dataclass(frozen=True)
class GameSpec:
    seed: int
    index: int
    kind: str = "normal"


def make_game(spec: GameSpec, engine: chess.engine.SimpleEngine) -> GameRecord:
    rng = random.Random(f"samplegen:{spec.seed}:game:{spec.index}")
    white, black = people.pick_pair(rng, people.player_pool(spec.seed))
    event, tc, rated = people.pick_event(rng, spec.seed)
    gid = people.site_id(rng)
    when = START + timedelta(seconds=int(spec.index * 1.5 + rng.random() * 1.49))
    strengths = (
        Strength.of(white.rating, rng, white.title == "BOT"),
        Strength.of(black.rating, rng, black.title == "BOT"),
    )
    clock = Clock(tc, rng, (strengths[0].pace, strengths[1].pace))  # the weaker budgets worse
    record = GameRecord(spec.index, spec.kind)
    extra: list[tuple[str, str]] = []  # Variant, FEN, SetUp
    opening = ("?", "?")
    speed = people.speed_class(tc)

    if spec.kind == "normal":
        book = pick_opening(rng, (white.rating + black.rating) / 2).moves
        plan = Plan(
            strengths,
            book=book,
            analysed=rng.random() < 0.06,
            agree_draws=min(white.rating, black.rating) >= 1100,
            abandon_at=rng.randint(1, 6) if rng.random() < 0.004 else None,
            infraction_at=rng.randint(10, 80) if rng.random() < 0.002 else None,
        )
        result, termination = play(engine, chess.Board(), clock, plan, rng, (spec.seed, spec.index), record)
        named = name_opening(record.sans)
        opening = (named.eco, named.name)
    elif spec.kind in ("setup", "from_position"):
        event, rated = f"Casual {speed} game", False  # Lichess never rates from-position games
        board = _engine_prefix(engine, rng, rng.randint(8, 40), (spec.seed, spec.index, "prefix"))
        record.first_ply = board.ply()
        extra = [("FEN", board.fen()), ("SetUp", "1")]
        if spec.kind == "from_position":
            extra.insert(0, ("Variant", "From Position"))
        result, termination = play(engine, board, clock, Plan(strengths), rng, (spec.seed, spec.index), record)
    elif spec.kind == "chess960":
        event = "Rated Chess960 game"
        board = chess.Board.from_chess960_pos(rng.choice([n for n in range(960) if n != 518]))
        board.chess960 = True
        extra = [("Variant", "Chess960"), ("FEN", board.fen()), ("SetUp", "1")]
        result, termination = play(engine, board, clock, Plan(strengths), rng, (spec.seed, spec.index), record)
    elif spec.kind == "crazyhouse":
        event = "Rated Crazyhouse game"
        extra = [("Variant", "Crazyhouse")]
        for _ in range(50):  # seeded retries until the game has a drop
            record.sans, record.comments, record.glyphs = [], [], []
            result, termination = _crazyhouse(rng, Clock(tc, rng), record)
            if any("@" in san for san in record.sans):
                break
    elif spec.kind == "no_moves":
        result, termination = rng.choice(("1-0", "0-1")), "Abandoned"
        record.ending = "no_moves"
    elif spec.kind == "too_long":
        event, tc, rated = "Rated Classical game", "1800+20", True
        result, termination = _too_long(engine, rng, spec, strengths, record)
        named = name_opening(record.sans)
        opening = (named.eco, named.name)
    else:
        raise ValueError(f"unknown game kind {spec.kind!r}")

    record.result = result
    record.headers = _headers(event, gid, when, white, black, result, rated, tc, opening, termination, extra)
    return record


def _headers(
    event: str,
    gid: str,
    when: datetime,
    white: people.Player,
    black: people.Player,
    result: str,
    rated: bool,
    tc: str,
    opening: tuple[str, str],
    termination: str,
    extra: list[tuple[str, str]],
) -> list[tuple[str, str]]:
    """The tags in the order the Lichess database dumps write them."""
    date = when.strftime("%Y.%m.%d")
    tags = [
        ("Event", event),
        ("Site", f"https://lichess.org/{gid}"),
        ("Date", date),
        ("Round", "-"),
        ("White", white.name),
        ("Black", black.name),
        ("Result", result),
        ("UTCDate", date),
        ("UTCTime", when.strftime("%H:%M:%S")),
        ("WhiteElo", str(white.rating)),
        ("BlackElo", str(black.rating)),
    ]
    if rated:
        dw, db = people.rating_diffs(white, black, result)
        tags += [("WhiteRatingDiff", dw), ("BlackRatingDiff", db)]
    tags += [(f"{side}Title", p.title) for side, p in (("White", white), ("Black", black)) if p.title]
    tags += [t for t in extra if t[0] == "Variant"]
    tags += [("ECO", opening[0]), ("Opening", opening[1]), ("TimeControl", tc), ("Termination", termination)]
    return tags + [t for t in extra if t[0] != "Variant"]


def _engine_prefix(engine: chess.engine.SimpleEngine, rng: random.Random, plies: int, key: object) -> chess.Board:
    """A position reached by a 2000-strength opening: the start of a from-position game."""
    board = chess.Board()
    for move in pick_opening(rng, 2000).moves:
        board.push_san(move)
    strength = Strength.of(2000, rng)
    while board.ply() < plies and not board.is_game_over():
        board.push(choose(rng, board, search(engine, board, strength.nodes, key), strength))
    if board.is_game_over():
        board.pop()
    return chess.Board(board.fen())


def _too_long(
    engine: chess.engine.SimpleEngine,
    rng: random.Random,
    spec: GameSpec,
    strengths: tuple[Strength, Strength],
    record: GameRecord,
) -> tuple[str, str]:
    """A legal game of 356..400 plies that ends on time; retried (seeded) until it gets there."""
    target = rng.randint(356, 400)
    for attempt in range(50):
        record.sans, record.comments, record.glyphs = [], [], []
        plan = Plan(strengths, book=pick_opening(rng, 1800).moves, long_plies=target)
        try:
            clock = Clock("1800+20", rng, can_flag=False)
            result, termination = play(
                engine, chess.Board(), clock, plan, rng, (spec.seed, spec.index, attempt), record
            )
        except GameEndedEarly:
            continue
        if len(record.sans) >= target:
            return result, termination
    raise RuntimeError(f"game {spec.index}: no long game in 50 attempts")


def _crazyhouse(rng: random.Random, clock: Clock, record: GameRecord) -> tuple[str, str]:
    """A crazyhouse game played by a seeded policy (Stockfish has no crazyhouse): captures,
    checks and drops preferred; it ends in mate or a resignation after 30..70 plies."""
    board = chess.variant.CrazyhouseBoard()
    limit = rng.randint(30, 70)
    while True:
        ply, side = len(record.sans), 0 if board.turn == chess.WHITE else 1
        if ply >= limit and any("@" in s for s in record.sans):
            record.ending = "resign"
            return ("0-1" if side == 0 else "1-0"), "Normal"
        moves = sorted(board.legal_moves, key=chess.Move.uci)
        weights = [1 + 3 * board.is_capture(m) + 2 * board.gives_check(m) + 2 * (m.drop is not None) for m in moves]
        move = rng.choices(moves, weights=weights)[0]
        left = clock.spend(ply, side)
        if left is None:
            record.ending = "time"
            return ("0-1" if side == 0 else "1-0"), "Time forfeit"
        san = board.san(move)
        record.sans.append("P" + san if san.startswith("@") else san)  # Lichess writes P@e6
        record.comments.append("" if clock.off else clk(left))
        record.glyphs.append("")
        board.push(move)
        if board.is_checkmate():
            record.ending = "mate"
            return ("1-0" if side == 0 else "0-1"), "Normal"
        if board.is_game_over():
            record.ending = "draw"
            return "1/2-1/2", "Normal"
