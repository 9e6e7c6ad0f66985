"""Self-play: many games at once between a model and an opponent (another model, or itself).

The games are played by the arena's game loop (chesscore.play.loop): one batched forward per
token for all live games, with the key/value cache, finished games dropped from the batch. A
game ends by the rules of chess (checkmate, stalemate, threefold repetition, fifty-move rule,
insufficient material), by a Stockfish judge's resign or draw rule, or at the ply cap (lowered
to what the models' context holds), where the judge's score of the final position decides
(chesscore.play.adjudication; without adjudication the cap is a draw). Each process opens its
own judge, so the games of a shard are the same wherever it is played.

    model, _ = load_model("data/train/best.pt")
    records, stats = play_games(model, None, SelfPlayConfig(games=64, seed=1))  # None: itself
    play_games(model, None, SelfPlayConfig(adjudication=Adjudication(enabled=False)))  # no judge
    play_games(model, None, SelfPlayConfig(prefix=conditioning_prefix(1800, 1800, None)))  # a v2 model told 1800

A triples-v2 (conditioned) model reads `cfg.prefix` after BOS in every game (UNKNOWN_PREFIX by
default); a triples-v1 model reads no prefix, whatever cfg.prefix holds.

A GameRecord holds only plain Python values, so it pickles cheaply between processes.
For many processes or machines see chesscore.selfplay.parallel.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field

from chesscore import ranges
from chesscore.model import GPT
from chesscore.play.adjudication import Adjudication, GameAdjudicator, Judge
from chesscore.play.endings import TERMINATIONS, decided_by
from chesscore.play.engine import find_stockfish
from chesscore.play.engines import ModelEngine
from chesscore.play.loop import Game, play_batch
from chesscore.play.moves import Sampler
from chesscore.tokens import PREFIX_LENGTH, UNKNOWN_PREFIX, is_conditioning

MODEL, OPPONENT = "model", "opponent"
DECIDED = ("rules", "adjudication", "draw")  # chesscore.play.endings.decided_by


@dataclass(frozen=True)
class SelfPlayConfig:
    games: int = 64  # games played at once (one batch)
    temperature: float = 1.0  # sampling temperature under the legal mask; 0 is greedy
    max_plies: int = 200  # ply cap: a game still running after this many plies is a draw
    seed: int = 0  # seeds the sampler; the same seed gives the same games
    adjudication: Adjudication = field(default_factory=Adjudication)  # the judge and its rules
    stockfish: str | None = None  # the judge's executable (None: find_stockfish()); not in any output
    prefix: tuple[int, int, int] = UNKNOWN_PREFIX  # what a triples-v2 player reads after BOS (v1 models: nothing)

    def __post_init__(self) -> None:
        ranges.check(self, counts=("games", "max_plies"), whole=("seed",), non_negative=("temperature",))
        object.__setattr__(self, "prefix", tuple(int(token) for token in self.prefix))
        if len(self.prefix) != PREFIX_LENGTH or not all(map(is_conditioning, self.prefix)):
            raise ValueError(f"prefix must be {PREFIX_LENGTH} conditioning tokens, got {list(self.prefix)}")


@dataclass(frozen=True)
class GameRecord:
    """One finished game, in plain values. white/black say who played that colour."""

    moves: tuple[str, ...]  # UCI
    result: str  # "1-0", "0-1" or "1/2-1/2"
    termination: str  # one of TERMINATIONS
    plies: int
    white: str  # MODEL or OPPONENT
    black: str
    illegal_white: int  # moves where white's unmasked sample would have been illegal
    illegal_black: int
    seed: int  # the sampler seed of the batch it was played in
    index: int  # its place in that batch
    judge_score: int | None = None  # the judge's deciding score (centipawns, White's view); None: the rules ended it
    judged: int = 0  # positions the judge scored in this game

    @property
    def illegal_attempts(self) -> int:
        """Moves of the game where the mover's unmasked sample would have been illegal."""
        return self.illegal_white + self.illegal_black

    def score(self, side: str) -> float | None:
        """1, 0.5 or 0 for the player `side` (from white's view if it played both colours)."""
        if side not in (self.white, self.black):
            return None
        white_score = {"1-0": 1.0, "0-1": 0.0}.get(self.result, 0.5)
        return white_score if self.white == side else 1.0 - white_score


def play_games(model: GPT, opponent: GPT | None, cfg: SelfPlayConfig) -> tuple[list[GameRecord], dict]:
    """Play cfg.games games; against a separate opponent the model is white in even-numbered
    games and black in odd ones. Returns the records (in game order) and their stats. The ply
    cap is lowered to what the models' context holds (chesscore.play.moves.fit_plies)."""
    started = time.perf_counter()
    separate = opponent is not None and opponent is not model
    with contextlib.ExitStack() as stack:
        judge = None
        if cfg.adjudication.enabled:
            judge = stack.enter_context(Judge(cfg.stockfish or find_stockfish(), cfg.adjudication))
        records = _play(model, opponent if separate else None, cfg, judge)
    stats = summarise(records, time.perf_counter() - started)
    stats["judge_seconds"] = judge.seconds if judge is not None else 0.0
    return records, stats


def _play(model: GPT, opponent: GPT | None, cfg: SelfPlayConfig, judge: Judge | None) -> list[GameRecord]:
    # Every player is told the same prefix (who plays, how fast): self-play's conditioning.
    told = [cfg.prefix] * cfg.games
    me = ModelEngine(model, told)
    them = ModelEngine(opponent, told) if opponent is not None else me
    games = [
        Game(g, sides=(me, them) if g % 2 == 0 else (them, me), adjudicator=GameAdjudicator(cfg.adjudication, judge))
        for g in range(cfg.games)
    ]
    play_batch(games, cfg.max_plies, Sampler(cfg.temperature, cfg.seed))
    return [_record(game, me, cfg.seed) for game in games]


def _record(game: Game, me: ModelEngine, seed: int) -> GameRecord:
    """A finished Game as plain values: who played each colour (the model, or its opponent)."""
    white, black = (MODEL if side is me else OPPONENT for side in game.sides)
    moves = tuple(move.uci() for move in game.state.board.move_stack)
    return GameRecord(
        moves=moves,
        result=game.end.result,
        termination=game.end.termination,
        plies=len(moves),
        white=white,
        black=black,
        illegal_white=game.illegal[0],
        illegal_black=game.illegal[1],
        seed=seed,
        index=game.index,
        judge_score=game.end.judge_score,
        judged=game.adjudicator.judged,
    )


def summarise(records: list[GameRecord], seconds: float) -> dict:
    """W/D/L (by colour, and for the model where it met an opponent), terminations, plies,
    the model's illegal-attempt rate, and throughput. Only `seconds` and `moves_per_second`
    depend on the machine."""
    results = Counter(r.result for r in records)
    plies = [r.plies for r in records]
    model_moves = sum(_moves_of(r, MODEL) for r in records)
    model_illegal = sum(r.illegal_white * (r.white == MODEL) + r.illegal_black * (r.black == MODEL) for r in records)
    stats = {
        "games": len(records),
        "white_wins": results["1-0"],
        "draws": results["1/2-1/2"],
        "black_wins": results["0-1"],
        "terminations": {name: sum(r.termination == name for r in records) for name in TERMINATIONS},
        "decided_by": {how: sum(decided_by(r.result, r.termination) == how for r in records) for how in DECIDED},
        "judged_positions": sum(r.judged for r in records),
        "plies": {
            "total": sum(plies),
            "mean": sum(plies) / max(1, len(plies)),
            "min": min(plies, default=0),
            "max": max(plies, default=0),
        },
        "model_moves": model_moves,
        "illegal_attempts": model_illegal,
        "illegal_attempt_rate": model_illegal / max(1, model_moves),
        "seconds": seconds,
        "moves_per_second": sum(plies) / seconds if seconds > 0 else 0.0,
    }
    versus = [r for r in records if OPPONENT in (r.white, r.black)]
    if versus:
        scores = [r.score(MODEL) for r in versus]
        stats["model"] = {
            "wins": scores.count(1.0),
            "draws": scores.count(0.5),
            "losses": scores.count(0.0),
            "score": sum(scores) / len(scores),
        }
    return stats


def _moves_of(record: GameRecord, side: str) -> int:
    """How many of the game's plies `side` played (white plays the odd-numbered ones)."""
    white_plies = (record.plies + 1) // 2
    return white_plies * (record.white == side) + (record.plies - white_plies) * (record.black == side)
