"""Matches of a model against Stockfish levels, a random mover and other checkpoints.

    opponents = [Opponent.stockfish(StockfishLevel("sf1350", uci_elo=1350)), Opponent.random()]
    games = play_match(model, "best.pt", opponents[0], ArenaConfig(games=8), stockfish_path)
    summary = summarise(games_of_every_match, opponents)  # W/D/L, Elo +- 95%, anchored rating

Games come in pairs, as cutechess-cli's `-repeat`: the same opening, once with each colour.
The openings are a fixed list of named book lines, shuffled by the seed; every opponent gets
the same sequence, so their results compare on equal terms. All games of a match run at once
(`concurrency` per batch) through the game loop self-play uses too (chesscore.play.loop): the
model (and a checkpoint opponent) choose their moves for every game in one batched forward per
token, Stockfish and the random mover answer game by game (chesscore.play.engines). A game
ends by the rules, by a Stockfish judge's resign or draw rule, or at the ply cap (lowered to what
the models' context holds), where the judge's score of the final position decides
(chesscore.play.endings and chesscore.play.adjudication; `adjudication.enabled: false` makes the
cap a draw and ends nothing early). The raw model's illegal attempts are counted: moves where
its own unmasked choice (the sampler's, under the same noise) would have been illegal.

Every game repeats for a seed: the random mover and the sampler are seeded, the Stockfish levels
pick their handicapped moves with a seeded generator (chesscore.play.engine), and the judge
searches a fixed number of nodes from a fresh state.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import chess
import chess.pgn
import numpy as np
import torch

from chesscore import ranges
from chesscore.model import GPT
from chesscore.play.adjudication import Adjudication, GameAdjudicator, Judge, pgn_tags
from chesscore.play.elo import AnchoredResult, anchored_rating, elo_difference
from chesscore.play.endings import decided_by
from chesscore.play.engine import Stockfish, StockfishLevel
from chesscore.play.engines import ModelEngine, RandomEngine, StockfishEngine
from chesscore.play.loop import Game, Side, play_batch
from chesscore.play.moves import Sampler
from chesscore.runtime.seeds import derive_seed
from chesscore.tokens import RATING_UNKNOWN, TIME_CONTROL_UNKNOWN, State, rating_token

# Named book lines (UCI). Short, so the model still plays nearly the whole game.
OPENINGS: tuple[tuple[str, str], ...] = (
    ("Ruy Lopez", "e2e4 e7e5 g1f3 b8c6 f1b5"),
    ("Italian Game", "e2e4 e7e5 g1f3 b8c6 f1c4"),
    ("Scotch Game", "e2e4 e7e5 g1f3 b8c6 d2d4"),
    ("Petrov Defence", "e2e4 e7e5 g1f3 g8f6"),
    ("Vienna Game", "e2e4 e7e5 b1c3"),
    ("King's Gambit", "e2e4 e7e5 f2f4"),
    ("Sicilian Defence, Open", "e2e4 c7c5 g1f3 d7d6 d2d4"),
    ("Sicilian Defence, 2...Nc6", "e2e4 c7c5 g1f3 b8c6"),
    ("French Defence", "e2e4 e7e6 d2d4 d7d5"),
    ("Caro-Kann Defence", "e2e4 c7c6 d2d4 d7d5"),
    ("Scandinavian Defence", "e2e4 d7d5 e4d5 d8d5"),
    ("Pirc Defence", "e2e4 d7d6 d2d4 g8f6 b1c3"),
    ("Alekhine Defence", "e2e4 g8f6"),
    ("Queen's Gambit Declined", "d2d4 d7d5 c2c4 e7e6"),
    ("Queen's Gambit Accepted", "d2d4 d7d5 c2c4 d5c4"),
    ("Slav Defence", "d2d4 d7d5 c2c4 c7c6"),
    ("King's Indian Defence", "d2d4 g8f6 c2c4 g7g6 b1c3 f8g7"),
    ("Nimzo-Indian Defence", "d2d4 g8f6 c2c4 e7e6 b1c3 f8b4"),
    ("Queen's Indian Defence", "d2d4 g8f6 c2c4 e7e6 g1f3 b7b6"),
    ("Gruenfeld Defence", "d2d4 g8f6 c2c4 g7g6 b1c3 d7d5"),
    ("Dutch Defence", "d2d4 f7f5"),
    ("London System", "d2d4 d7d5 c1f4"),
    ("English Opening", "c2c4 e7e5"),
    ("Reti Opening", "g1f3 d7d5 c2c4"),
)
RANDOM, STOCKFISH, CHECKPOINT = "random", "stockfish", "checkpoint"


@dataclass(frozen=True)
class ArenaConfig:
    games: int = 8  # games per opponent; in pairs, one with each colour per opening
    temperature: float = 0.0  # the model's sampling temperature (0: its most likely move)
    max_plies: int = 300  # the ply cap: the judge's score of the final position decides (else a draw)
    concurrency: int = 32  # games of one match in one batch (memory: rows of the key/value cache)
    seed: int = 0  # the order of the openings, the random mover and the sampler derive from it
    adjudication: Adjudication = field(default_factory=Adjudication)  # the judge and its rules

    def __post_init__(self) -> None:
        ranges.check(self, counts=("games", "concurrency", "max_plies"), whole=("seed",), non_negative=("temperature",))


@dataclass(frozen=True)
class Opponent:
    name: str
    kind: str  # RANDOM, STOCKFISH or CHECKPOINT
    description: str
    level: StockfishLevel | None = None
    model: GPT | None = field(default=None, compare=False, repr=False)

    @classmethod
    def stockfish(cls, level: StockfishLevel) -> Opponent:
        return cls(level.name, STOCKFISH, level.describe(), level=level)

    @classmethod
    def random(cls, name: str = "random") -> Opponent:
        return cls(name, RANDOM, "uniformly random legal moves")

    @classmethod
    def checkpoint(cls, name: str, model: GPT, description: str) -> Opponent:
        return cls(name, CHECKPOINT, description, model=model)

    @property
    def anchor(self) -> float | None:
        """The opponent's Elo where it is known (Stockfish levels), else None."""
        return self.level.anchor if self.level is not None else None

    def open(self, stack: contextlib.ExitStack, stockfish_path: str | None, seed: int) -> Side:
        """The engine that plays this opponent's side for a match (the one place its kind
        matters): a Stockfish level's process stays open until `stack` closes."""
        if self.kind == CHECKPOINT:
            return ModelEngine(self.model)
        if self.kind == RANDOM:
            return RandomEngine(seed)
        if stockfish_path is None:
            raise ValueError(f"match vs {self.name!r} needs Stockfish: give the path (engine.find_stockfish)")
        return StockfishEngine(stack.enter_context(Stockfish(stockfish_path, self.level)))


@dataclass(frozen=True)
class ArenaGame:
    """One finished game, in plain values; `model_white` says which colour the model had."""

    opponent: str
    round: int  # 1-based within the match
    opening: str
    model_white: bool
    moves: tuple[str, ...]  # UCI, from the start position, the opening included
    result: str  # "1-0", "0-1", "1/2-1/2"
    termination: str  # one of chesscore.play.endings.TERMINATIONS
    model_moves: int
    illegal_attempts: int  # the model's moves whose unmasked choice was illegal
    opponent_illegal_attempts: int  # the same for a checkpoint opponent (else 0)
    stockfish_min_depth: int | None  # shallowest depth Stockfish reported in this game
    judge_score: int | None = None  # the judge's deciding score (centipawns, White's view); None: the rules
    judged: int = 0  # positions the judge scored in this game
    told: int | None = None  # the rating a triples-v2 model was told for its side; None: not told (unknown)

    @property
    def model_score(self) -> float:
        white = {"1-0": 1.0, "0-1": 0.0}.get(self.result, 0.5)
        return white if self.model_white else 1.0 - white


def openings_for(config: ArenaConfig) -> list[tuple[str, str]]:
    order = np.random.default_rng(derive_seed(config.seed, "openings")).permutation(len(OPENINGS))
    return [OPENINGS[i] for i in order]


@torch.no_grad()
def play_match(
    model: GPT,
    opponent: Opponent,
    config: ArenaConfig,
    stockfish_path: str | None = None,
    on_game: Callable[[ArenaGame], None] | None = None,
    judge: Judge | None = None,
    rating: int | None = None,
) -> list[ArenaGame]:
    """config.games games of `model` against `opponent`, `concurrency` at a time. The judge
    (when config.adjudication is enabled) is `judge`, or one opened on stockfish_path. A
    triples-v2 model is told `rating` as its own side's (its opponent's and the time control
    unknown, as a UCI engine without UCI_Opponent), or "unknown" for both when None."""
    if rating is not None and not model.config.conditioning:
        raise ValueError(f"rating {rating}: the model reads no ratings (triples-v1)")
    if config.adjudication.enabled and judge is None and stockfish_path is None:
        raise ValueError(f"match vs {opponent.name!r} needs Stockfish: give the path (engine.find_stockfish)")
    with contextlib.ExitStack() as stack:
        engine = opponent.open(stack, stockfish_path, config.seed)
        if config.adjudication.enabled and judge is None:
            judge = stack.enter_context(Judge(stockfish_path, config.adjudication))
        games: list[ArenaGame] = []
        for first in range(0, config.games, config.concurrency):
            rounds = range(first, min(config.games, first + config.concurrency))
            games += _play_wave(model, opponent, engine, config, list(rounds), judge, on_game, rating)
        return games


def told_prefix(rating: int | None, white: bool) -> tuple[int, int, int]:
    """What the model reads after BOS: `rating` as its own side's, the rest unknown."""
    own = rating_token(rating)  # RATING_UNKNOWN for None
    if white:
        return own, RATING_UNKNOWN, TIME_CONTROL_UNKNOWN
    return RATING_UNKNOWN, own, TIME_CONTROL_UNKNOWN


def _play_wave(
    model: GPT,
    opponent: Opponent,
    engine: Side,
    config: ArenaConfig,
    rounds: list[int],
    judge: Judge | None,
    on_game: Callable[[ArenaGame], None] | None,
    rating: int | None = None,
) -> list[ArenaGame]:
    book = openings_for(config)
    openings = [book[(r // 2) % len(book)] for r in rounds]
    me = ModelEngine(model, prefixes=[told_prefix(rating, r % 2 == 0) for r in rounds])
    games = [
        Game(
            index=i,
            sides=(me, engine) if r % 2 == 0 else (engine, me),
            state=State.from_moves(line.split()),
            key=(opponent.name, r),
            adjudicator=GameAdjudicator(config.adjudication, judge),
        )
        for i, (r, (_, line)) in enumerate(zip(rounds, openings))
    ]
    finished: dict[int, ArenaGame] = {}

    def ended(game: Game) -> None:
        finished[game.index] = _arena_game(game, opponent.name, rounds[game.index], openings[game.index][0], rating)
        if on_game is not None:
            on_game(finished[game.index])

    sampler = Sampler(config.temperature, derive_seed(config.seed, opponent.name, rounds[0]))
    play_batch(games, config.max_plies, sampler, ended)
    return [finished[i] for i in range(len(games))]


def _arena_game(game: Game, opponent: str, round_: int, opening: str, rating: int | None) -> ArenaGame:
    """A finished Game from the model's view (it is White in even rounds)."""
    mine, end = round_ % 2, game.end  # the model's colour: 0 White, 1 Black
    return ArenaGame(
        opponent=opponent,
        round=round_ + 1,
        opening=opening,
        model_white=mine == 0,
        moves=tuple(m.uci() for m in game.state.board.move_stack),
        result=end.result,
        termination=end.termination,
        model_moves=game.played[mine],
        illegal_attempts=game.illegal[mine],
        opponent_illegal_attempts=game.illegal[1 - mine],
        stockfish_min_depth=min(game.depths) if game.depths else None,
        judge_score=end.judge_score,
        judged=game.adjudicator.judged if game.adjudicator is not None else 0,
        told=rating,
    )


def match_summary(opponent: Opponent, games: Sequence[ArenaGame]) -> dict:
    """W/D/L from the model's view, Elo difference +- 95%, and what else a reader checks."""
    scores = [g.model_score for g in games]
    wins, draws, losses = scores.count(1.0), scores.count(0.5), scores.count(0.0)
    estimate = elo_difference(wins, draws, losses)
    by_colour = {}
    for colour, white in (("as_white", True), ("as_black", False)):
        mine = [g.model_score for g in games if g.model_white == white]
        by_colour[colour] = {"wins": mine.count(1.0), "draws": mine.count(0.5), "losses": mine.count(0.0)}
    model_moves = sum(g.model_moves for g in games)
    illegal = sum(g.illegal_attempts for g in games)
    depths = [g.stockfish_min_depth for g in games if g.stockfish_min_depth is not None]
    return {
        "name": opponent.name,
        "kind": opponent.kind,
        "description": opponent.description,
        "anchor_elo": opponent.anchor,
        **estimate.to_dict(),
        **by_colour,
        "terminations": dict(sorted(Counter(g.termination for g in games).items())),
        "decided_by": decided_counts(games),
        "mean_plies": sum(len(g.moves) for g in games) / len(games),
        "model_moves": model_moves,
        "illegal_attempts": illegal,
        "illegal_attempt_rate": illegal / model_moves if model_moves else None,
        "opponent_illegal_attempts": sum(g.opponent_illegal_attempts for g in games),
        "stockfish_min_depth": min(depths) if depths else None,
    }


def decided_counts(games: Sequence[ArenaGame]) -> dict[str, int]:
    """How many games were decided by the rules (checkmate), by adjudication (a win the judge
    gave), and drawn (by either)."""
    counts = Counter(decided_by(g.result, g.termination) for g in games)
    return {how: counts[how] for how in ("rules", "adjudication", "draw")}


def summarise(matches: Sequence[tuple[Opponent, Sequence[ArenaGame]]]) -> dict:
    """Per-opponent summaries, and the rating anchored on the Stockfish levels."""
    per_opponent = [match_summary(opponent, games) for opponent, games in matches]
    anchored = [
        AnchoredResult(s["anchor_elo"], s["wins"], s["draws"], s["losses"])
        for s in per_opponent
        if s["anchor_elo"] is not None
    ]
    overall = None
    if anchored:
        overall = anchored_rating(anchored).to_dict()
        overall["anchors"] = {s["name"]: s["anchor_elo"] for s in per_opponent if s["anchor_elo"] is not None}
        overall["scale"] = (
            "CCRL 40/4 Elo, as Stockfish 15.1 calibrates UCI_Elo and Skill Level (see chesscore.play.elo)"
        )
    games = [g for _, gs in matches for g in gs]
    model_moves = sum(g.model_moves for g in games)
    illegal = sum(g.illegal_attempts for g in games)
    return {
        "opponents": per_opponent,
        "rating": overall,
        "games": len(games),
        "judged_positions": sum(g.judged for g in games),
        "model_moves": model_moves,
        "illegal_attempts": illegal,
        "illegal_attempt_rate": illegal / model_moves if model_moves else None,
    }


def to_pgn(game: ArenaGame, model_name: str, opponent: Opponent, event: str) -> chess.pgn.Game:
    pgn = chess.pgn.Game()
    white, black = (model_name, opponent.description) if game.model_white else (opponent.description, model_name)
    pgn.headers.update(
        {
            "Event": event,
            "Site": "chesscore arena",
            "Date": "????.??.??",
            "Round": str(game.round),
            "White": white,
            "Black": black,
            "Result": game.result,
        }
    )
    if opponent.anchor is not None:
        pgn.headers["BlackElo" if game.model_white else "WhiteElo"] = str(round(opponent.anchor))
    pgn.headers["Opening"] = game.opening
    pgn.headers["PlyCount"] = str(len(game.moves))
    pgn.headers.update(pgn_tags(game.termination, game.judge_score))
    model_side = "White" if game.model_white else "Black"
    pgn.headers[f"{model_side}IllegalAttempts"] = str(game.illegal_attempts)
    if opponent.kind == CHECKPOINT:
        pgn.headers[f"{'Black' if game.model_white else 'White'}IllegalAttempts"] = str(game.opponent_illegal_attempts)
    if game.told is not None:  # not an Elo tag: the rating the model was told to play at, not one measured
        pgn.headers[f"{model_side}Conditioning"] = str(game.told)
    node = pgn.add_line([chess.Move.from_uci(m) for m in game.moves])
    node.comment = game.termination.replace("_", " ")
    return pgn


def pgn_text(matches: Sequence[tuple[Opponent, Sequence[ArenaGame]]], model_name: str) -> str:
    def event(game: ArenaGame, opponent: Opponent) -> str:
        told = f" told {game.told}" if game.told is not None else ""
        return f"chesscore arena: {model_name}{told} vs {opponent.name}"

    texts = [str(to_pgn(game, model_name, o, event(game, o))) for o, games in matches for game in games]
    return "\n\n".join(texts) + "\n"


def game_rows(matches: Sequence[tuple[Opponent, Sequence[ArenaGame]]]) -> list[dict]:
    """One flat row per game (for games.csv)."""
    rows = []
    for _, games in matches:
        for game in games:
            row = asdict(game)
            row["moves"] = " ".join(game.moves)
            row["plies"] = len(game.moves)
            row["model_score"] = game.model_score
            rows.append(row)
    return rows
