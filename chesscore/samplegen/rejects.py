"""The games in the sample that a validator must reject, and where they go.

Two sorts. Slot kinds are whole games made as they are (games.py): a FEN/SetUp start, a
Chess960 or crazyhouse game, an abandoned game with no moves, a legal game too long for the
model. Damage kinds take a finished normal game, chosen by a seeded draw among those that
qualify, and break it: an illegal or null move, a movetext cut off mid-game, a missing or
contradicting result, a Latin-1 byte, or a second copy (same Site id; or a new id and the same
moves) placed a little later in the file. The last game of the file is cut off in the middle
of a comment, with no newline after it, as a truncated download would be.

Counts scale with the sample size, at least one of each kind (`planned_counts`).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass

import chess

from . import people
from .engine_game import GameRecord

FULL_SAMPLE_GAMES = 3500

# kind: (count in a 3,500-game sample, what the game is)
REJECT_KINDS: dict[str, tuple[int, str]] = {
    "illegal_move": (16, "one move in the movetext is illegal in its position"),
    "null_move": (3, "one move is a null move (--)"),
    "truncated": (10, "the movetext stops mid-game (position not over), no result token"),
    "truncated_eof": (1, "the last game of the file stops inside a clock comment, no newline"),
    "setup": (6, "[FEN]/[SetUp] start position"),
    "from_position": (6, '[Variant "From Position"] with [FEN]/[SetUp], as Lichess writes it'),
    "chess960": (8, '[Variant "Chess960"] with a Chess960 [FEN]'),
    "crazyhouse": (8, '[Variant "Crazyhouse"], with at least one drop (N@f3)'),
    "no_moves": (14, "abandoned before the first move: the movetext is only the result token"),
    "no_result": (10, "a complete game with no result token"),
    "result_mismatch": (10, "the Result tag and the result token differ"),
    "result_vs_board": (5, "Result tag and token agree, but the checkmated side is given the win"),
    "duplicate_site": (10, "a byte-for-byte second copy of an earlier game (same Site id)"),
    "duplicate_moves": (5, "a new Site id and players, the same movetext as an earlier game"),
    "non_utf8": (8, "a player name written in Latin-1 (a byte that is not valid UTF-8)"),
    "too_long": (2, "a legal game of more than 340 plies (356..400)"),
}
SLOT_KINDS = ("setup", "from_position", "chess960", "crazyhouse", "no_moves", "too_long")
# Damage kinds in the order their targets are drawn: the scarce targets (mates) first.
DAMAGE_KINDS = (
    "result_vs_board",
    "duplicate_moves",
    "truncated",
    "illegal_move",
    "null_move",
    "no_result",
    "result_mismatch",
    "non_utf8",
    "duplicate_site",
)
MIN_PLIES = {
    "result_vs_board": 1,
    "duplicate_moves": 40,
    "truncated": 30,
    "illegal_move": 12,
    "null_move": 12,
    "no_result": 10,
    "result_mismatch": 10,
    "non_utf8": 1,
    "duplicate_site": 10,
}
LATIN1_NAMES = ("José", "Müller", "Sørensen", "Çelik", "Niño", "Ångström", "Pérez", "Zoë")


@dataclass
class Injected:
    """One reject: its kind, the slot it was made in or from, and what was done."""

    kind: str
    slot: int
    note: str
    record: GameRecord
    after_slot: int | None = None  # copies are placed right after this slot


def planned_counts(games: int) -> dict[str, int]:
    return {
        kind: 1 if kind == "truncated_eof" else max(1, round(n * games / FULL_SAMPLE_GAMES))
        for kind, (n, _) in REJECT_KINDS.items()
    }


def slot_kinds(seed: int, games: int) -> list[str]:
    """The kind of every generated slot; the last slot is a normal game (truncated later)."""
    counts = planned_counts(games)
    wanted = [kind for kind in SLOT_KINDS for _ in range(counts[kind])]
    if len(wanted) > games - 1:
        raise ValueError(f"{games} games is too few for {len(wanted)} special games")
    rng = random.Random(f"samplegen:{seed}:slots")
    kinds = ["normal"] * games
    for kind, slot in zip(wanted, rng.sample(range(games - 1), len(wanted))):
        kinds[slot] = kind
    return kinds


def damage(records: list[GameRecord], seed: int) -> list[Injected]:
    """Break a seeded choice of normal games in place, and make the duplicate copies."""
    rng = random.Random(f"samplegen:{seed}:damage")
    counts = planned_counts(len(records))
    used = {len(records) - 1}
    done: list[Injected] = []
    for kind in DAMAGE_KINDS:
        eligible = [
            r.index
            for r in records
            if r.index not in used
            and r.kind == "normal"
            and r.ending not in ("abandoned", "infraction")
            and len(r.sans) >= MIN_PLIES[kind]
            and (kind != "result_vs_board" or r.ending == "mate")
        ]
        for slot in sorted(rng.sample(eligible, min(counts[kind], len(eligible)))):
            used.add(slot)
            done.append(_DAMAGE[kind](records[slot], rng, seed, len(records)))
    return done


def _board_at(record: GameRecord, ply: int) -> chess.Board:
    board = chess.Board()
    for san in record.sans[:ply]:
        board.push_san(san)
    return board


def _illegal_move(record: GameRecord, rng: random.Random, *_: object) -> Injected:
    """Replace one move by a move of the other side, which is illegal for the mover."""
    while True:
        ply = rng.randint(6, len(record.sans) - 4)
        board = _board_at(record, ply)
        other = board.copy(stack=False)
        other.turn = not board.turn
        other.ep_square = None
        sans = sorted(other.san(m).rstrip("+#") for m in other.legal_moves)
        for san in rng.sample(sans, k=len(sans)):
            try:
                board.parse_san(san)
            except chess.IllegalMoveError:
                note = f"ply {ply + 1}: {record.sans[ply]} replaced by {san}"
                record.sans[ply] = san
                return Injected("illegal_move", record.index, note, record)
            except ValueError:
                continue


def _null_move(record: GameRecord, rng: random.Random, *_: object) -> Injected:
    ply = rng.randint(6, len(record.sans) - 4)
    note = f"ply {ply + 1}: {record.sans[ply]} replaced by --"
    record.sans[ply] = "--"
    return Injected("null_move", record.index, note, record)


def _truncated(record: GameRecord, rng: random.Random, *_: object) -> Injected:
    n = len(record.sans)
    cut = rng.randint(n // 3, 2 * n // 3)
    del record.sans[cut:], record.comments[cut:], record.glyphs[cut:]
    record.result = None
    return Injected("truncated", record.index, f"movetext stops after ply {cut} of {n}", record)


def _no_result(record: GameRecord, *_: object) -> Injected:
    note = f"result token {record.result} left out"
    record.result = None
    return Injected("no_result", record.index, note, record)


def _result_mismatch(record: GameRecord, rng: random.Random, *_: object) -> Injected:
    other = rng.choice([r for r in ("1-0", "0-1", "1/2-1/2") if r != record.result])
    if rng.random() < 0.5:
        record.headers = [(k, other if k == "Result" else v) for k, v in record.headers]
        note = f"Result tag {other}, token {record.result}"
    else:
        note = f"Result tag {record.result}, token {other}"
        record.result = other
    return Injected("result_mismatch", record.index, note, record)


def _result_vs_board(record: GameRecord, *_: object) -> Injected:
    wrong = "0-1" if record.result == "1-0" else "1-0"
    note = f"ends in mate ({record.sans[-1]}), Result tag and token {wrong}"
    record.result = wrong
    record.headers = [(k, wrong if k == "Result" else v) for k, v in record.headers]
    return Injected("result_vs_board", record.index, note, record)


def _non_utf8(record: GameRecord, rng: random.Random, *_: object) -> Injected:
    tag = rng.choice(("White", "Black"))
    name = rng.choice(LATIN1_NAMES) + str(rng.randint(1, 999))
    record.headers = [(k, name if k == tag else v) for k, v in record.headers]
    record.latin1_tag = tag
    return Injected("non_utf8", record.index, f"{tag} {name!r} written in Latin-1", record)


def _copy_after(record: GameRecord, rng: random.Random, games: int) -> int:
    return min(record.index + rng.randint(1, 300), games - 2)


def _duplicate_site(record: GameRecord, rng: random.Random, seed: int, games: int) -> Injected:
    after = _copy_after(record, rng, games)
    return Injected(
        "duplicate_site", record.index, f"copy of slot {record.index}", copy.deepcopy(record), after_slot=after
    )


def _duplicate_moves(record: GameRecord, rng: random.Random, seed: int, games: int) -> Injected:
    after = _copy_after(record, rng, games)
    white, black = people.pick_pair(rng, people.player_pool(seed))
    gid = people.site_id(rng)
    new = {"Site": f"https://lichess.org/{gid}", "White": white.name, "Black": black.name}
    twin = copy.deepcopy(record)
    twin.headers = [(k, new.get(k, v)) for k, v in record.headers]
    return Injected(
        "duplicate_moves", record.index, f"moves of slot {record.index}, new id {gid}", twin, after_slot=after
    )


_DAMAGE = {
    "illegal_move": _illegal_move,
    "null_move": _null_move,
    "truncated": _truncated,
    "no_result": _no_result,
    "result_mismatch": _result_mismatch,
    "result_vs_board": _result_vs_board,
    "non_utf8": _non_utf8,
    "duplicate_site": _duplicate_site,
    "duplicate_moves": _duplicate_moves,
}


def cut_mid_comment(game: bytes) -> bytes:
    """The game cut off inside a clock comment (or mid-movetext without clocks), no newline."""
    body = game.index(b"\n\n") + 2
    marks = [i for i in range(body, len(game)) if game.startswith(b"{ [%clk", i)]
    if marks:
        return game[: marks[len(marks) * 3 // 5] + len(b"{ [%clk 0:0")]
    return game[: body + (len(game) - body) * 3 // 5]
