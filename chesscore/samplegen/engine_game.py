"""Playing one sample game: Stockfish at a strength set by rating, on the clock of clock.py,
and the way the game ends (mate, resignation, draw, flag, abandonment).

Determinism: Stockfish searches a fixed number of nodes (Threads=1, a small Hash, and a
`ucinewgame` before every game, which python-chess sends when the `game` key changes), so the
candidate moves and scores depend only on the moves so far; which candidate is played is
drawn from the game's own seeded `random.Random`. Stockfish's "Skill Level" is never used (it
seeds its own generator from the clock).

    Strength.of(rating), geometric from 800 to 2800: nodes 1 .. 20,000; softmax temperature
    1,000 cp .. 5 cp over the MultiPV candidates; a random legal move with probability 45% ..
    0.1%; and a pace on the clock, so the weak flag more (a side behind on the board thinks
    twice as long). Chosen so that rating gaps score close to the Elo formula (the table in
    docs/strength-experiment.md); the older, flatter curve (40 .. 1,280 nodes, 200 .. 10 cp,
    6% .. 0.2%, a coin for flags) gave a 400-point gap the score of about 90 Elo.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field

import chess
import chess.engine

from .clock import Clock, clk

MULTIPV = 4
MAX_PLIES = 300  # a normal game is adjudicated here, so it fits the 340-ply model context
ANALYSIS_NODES = 1500  # the after-game analysis of the few games that carry [%eval]
# Strength at ratings 800 and 2800, geometric in between (Strength.of).
NODES = (1, 20000)  # Stockfish's search per move
SOFTMAX_CP = (1000.0, 5.0)  # the temperature of the draw over the MultiPV candidates
RANDOM_MOVE = (0.45, 0.001)  # the probability of a random legal move instead


@dataclass
class GameRecord:
    """One game before it becomes PGN text: headers in Lichess order and the moves played."""

    index: int
    kind: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    sans: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)  # per ply, "" or "[%clk 0:03:00]" etc.
    glyphs: list[str] = field(default_factory=list)  # per ply, "" or "?!", "?", "??"
    first_ply: int = 0  # ply number of the first move (not 0 when the game starts from a FEN)
    result: str | None = "*"  # the result token that ends the movetext; None: no token
    ending: str = ""  # mate, resign, stalemate, threefold, fifty, insufficient, agreement,
    # time, abandoned, infraction, no_moves
    latin1_tag: str | None = None  # a tag written in Latin-1 (the stray non-UTF-8 byte)


@dataclass(frozen=True)
class Strength:
    nodes: int
    temperature: float  # centipawns
    blunder: float  # probability of a random legal move
    resign_below: int | None  # centipawns; None: plays on to the end
    pace: float  # moves the player budgets its base time for (clock.py): the weak flag more

    @staticmethod
    def of(rating: int, rng: random.Random, bot: bool = False) -> Strength:
        """The play of a `rating`: steep enough that rating gaps score close to what the Elo
        formula says (`python -m chesscore.eval.ratings` on the output: 0.01-0.10 below it,
        docs/strength-experiment.md)."""
        x = (min(max(rating, 800), 2800) - 800) / 2000
        stubborn = bot or rng.random() < 0.1
        return Strength(
            nodes=round(NODES[0] * (NODES[1] / NODES[0]) ** x),
            temperature=SOFTMAX_CP[0] * (SOFTMAX_CP[1] / SOFTMAX_CP[0]) ** x,
            blunder=RANDOM_MOVE[0] * (RANDOM_MOVE[1] / RANDOM_MOVE[0]) ** x,
            resign_below=None if stubborn else round(800 - 450 * x),
            pace=rng.uniform(30, 75) * (0.5 + x),
        )


def eval_text(cp: int, mate: int | None) -> str:
    """Lichess's %eval: pawns from White's side ("0.24", "-9.47", "0.0") or "#-3"."""
    return f"[%eval #{mate}]" if mate is not None else f"[%eval {round(cp / 100, 2)}]"


def glyph(before: float, after: float) -> str:
    """Lichess's mistake glyphs from the mover's winning-chance drop (cp from its side)."""

    def chances(cp: float) -> float:
        return 2 / (1 + math.exp(-0.00368208 * max(-1000.0, min(1000.0, cp)))) - 1

    drop = chances(before) - chances(after)
    return "??" if drop >= 0.3 else "?" if drop >= 0.2 else "?!" if drop >= 0.1 else ""


@dataclass
class Search:
    """Candidates of one position, best first, scores in centipawns from the mover's side."""

    moves: list[chess.Move]
    scores: list[float]


def search(engine: chess.engine.SimpleEngine, board: chess.Board, nodes: int, key: object) -> Search:
    infos = engine.analyse(
        board,
        chess.engine.Limit(nodes=nodes),
        multipv=MULTIPV,
        game=key,
        info=chess.engine.INFO_SCORE | chess.engine.INFO_PV,
    )
    infos = [i for i in infos if i.get("pv") and "score" in i]
    if not infos:
        raise RuntimeError(f"Stockfish gave no move in {board.fen()}")
    scores = [float(i["score"].pov(board.turn).score(mate_score=20000)) for i in infos]
    return Search([i["pv"][0] for i in infos], scores)


def choose(rng: random.Random, board: chess.Board, found: Search, strength: Strength) -> chess.Move:
    """A softmax draw over the candidates, or now and then any legal move."""
    if rng.random() < strength.blunder:
        return rng.choice(sorted(board.legal_moves, key=chess.Move.uci))
    # Mate scores are capped; PV 1 is not always the highest score (bounds), so use the max.
    scores = [min(max(s, -3000.0), 3000.0) for s in found.scores]
    best = max(scores)
    weights = [math.exp((s - best) / strength.temperature) for s in scores]
    return rng.choices(found.moves, weights=weights)[0]


def automatic_draw(board: chess.Board) -> str | None:
    """The draws Lichess ends a game with by itself."""
    if board.is_stalemate():
        return "stalemate"
    if board.is_insufficient_material():
        return "insufficient"
    if board.is_repetition(3):
        return "threefold"
    if board.is_fifty_moves():
        return "fifty"
    return None


def annotate(
    engine: chess.engine.SimpleEngine, board: chess.Board, record: GameRecord, book_plies: int, key: object
) -> None:
    """Add [%eval] to every move and mistake glyphs after the book, as a Lichess analysis
    does: each position is searched once more, with ANALYSIS_NODES, after the game."""

    def white_eval(b: chess.Board) -> tuple[int, int | None]:
        if b.is_checkmate():
            return (-20000 if b.turn == chess.WHITE else 20000), None
        if automatic_draw(b):
            return 0, None
        score = engine.analyse(b, chess.engine.Limit(nodes=ANALYSIS_NODES), game=key, info=chess.engine.INFO_SCORE)[
            "score"
        ].white()
        return score.score(mate_score=20000), score.mate()

    before, _ = white_eval(board)
    for i, san in enumerate(record.sans):
        mover = 1 if board.turn == chess.WHITE else -1
        board.push_san(san)
        after, mate = white_eval(board)
        if i >= book_plies:
            record.glyphs[i] = glyph(mover * before, mover * after)
        if not board.is_checkmate():  # Lichess writes no eval after a mating move
            record.comments[i] = " ".join(filter(None, (eval_text(after, mate), record.comments[i])))
        before = after


@dataclass
class Plan:
    """What may happen in one game besides chess: set by the caller's seeded draws."""

    strengths: tuple[Strength, Strength]  # white, black
    book: tuple[str, ...] = ()  # SAN moves played first
    analysed: bool = False  # write [%eval] and mistake glyphs, as after a Lichess analysis
    agree_draws: bool = True
    abandon_at: int | None = None  # the side to move at this ply leaves the game
    infraction_at: int | None = None  # the side to move at this ply is caught cheating
    long_plies: int | None = None  # play on, avoiding every ending, until this many plies


TERMINATION = {"time": "Time forfeit", "abandoned": "Abandoned", "infraction": "Rules infraction"}


def _ends_game(board: chess.Board, move: chess.Move) -> bool:
    board.push(move)
    try:
        return board.is_checkmate() or automatic_draw(board) is not None
    finally:
        board.pop()


def _long_game_move(rng: random.Random, board: chess.Board, found: Search, strength: Strength) -> chess.Move | None:
    """A move that keeps a deliberately long game going (None: every move would end it);
    near the fifty-move limit, a capture or pawn move."""
    move = choose(rng, board, found, strength)
    if not _ends_game(board, move) and board.halfmove_clock < 80:
        return move
    legal = [m for m in sorted(board.legal_moves, key=chess.Move.uci) if not _ends_game(board, m)]
    fresh = [m for m in legal if board.is_capture(m) or board.piece_type_at(m.from_square) == chess.PAWN]
    keep = fresh if fresh and board.halfmove_clock >= 80 else legal
    return rng.choice(keep) if keep else None


def play(
    engine: chess.engine.SimpleEngine,
    board: chess.Board,
    clock: Clock,
    plan: Plan,
    rng: random.Random,
    key: object,
    record: GameRecord,
) -> tuple[str, str]:
    """Play from `board` into `record` (sans, comments, glyphs, ending); returns (Result,
    Termination). The loop ends on mate, an automatic draw, a resignation, a draw agreement,
    a flag, an abandonment or a rules infraction."""
    start = board.copy()
    bad = [0, 0]
    recent: deque[float] = deque(maxlen=6)
    loser: int | None = None  # 0 white, 1 black; None with a draw
    while True:
        ply, side = len(record.sans), 0 if board.turn == chess.WHITE else 1
        found = search(engine, board, plan.strengths[side].nodes, key)
        if ply == plan.abandon_at or ply == plan.infraction_at:
            record.ending, loser = ("abandoned" if ply == plan.abandon_at else "infraction"), side
            break
        strength = plan.strengths[side]
        hopeless = strength.resign_below and found.scores[0] <= -strength.resign_below
        bad[side] = bad[side] + 1 if hopeless else 0
        recent.append(abs(found.scores[0]))
        if plan.long_plies is None:
            if bad[side] >= 3:
                record.ending, loser = "resign", side
                break
            if (
                plan.agree_draws
                and ply >= 30
                and len(recent) == recent.maxlen
                and max(recent) <= 60
                and rng.random() < 0.08
            ):
                record.ending = "agreement"
                break
            if ply >= MAX_PLIES:  # adjudicate: the worse side resigns, or both agree a draw
                if abs(found.scores[0]) >= 200:
                    record.ending, loser = "resign", side if found.scores[0] < 0 else 1 - side
                else:
                    record.ending = "agreement"
                break
        elif ply >= plan.long_plies:
            record.ending, loser = "time", side
            break
        if ply < len(plan.book):
            move = board.parse_san(plan.book[ply])
        elif plan.long_plies is None:
            move = choose(rng, board, found, strength)
        else:
            move = _long_game_move(rng, board, found, strength)
            if move is None:
                raise GameEndedEarly
        left = clock.spend(ply, side, behind=found.scores[0] <= -150)
        if left is None:
            record.ending, loser = "time", side
            break
        record.sans.append(board.san(move))
        record.comments.append("" if clock.off else clk(left))
        record.glyphs.append("")
        board.push(move)
        if board.is_checkmate():
            record.ending, loser = "mate", 1 - side  # the side that just moved wins
            break
        drawn = automatic_draw(board)
        if drawn:
            record.ending = drawn
            break
    if (
        record.ending == "time"
        and loser is not None
        and board.has_insufficient_material(chess.WHITE if loser == 1 else chess.BLACK)
    ):
        loser = None  # the flag fell, but the other side could never have mated
    if plan.analysed:
        annotate(engine, start, record, len(plan.book), key)
    result = "1/2-1/2" if loser is None else ("0-1" if loser == 0 else "1-0")
    return result, TERMINATION.get(record.ending, "Normal")


class GameEndedEarly(Exception):
    """A deliberately long game ran out of moves that keep it going; the caller retries."""
