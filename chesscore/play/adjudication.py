"""Adjudication: Stockfish as the judge of games the rules have not ended yet, as engine testers
adjudicate with cutechess-cli and fastchess (`-resign movecount=N score=S`, `-draw movenumber=M
movecount=N score=S`) and as the game reaches the ply cap.

    rules = Adjudication(resign_score_cp=500, resign_moves=3, every_plies=5)
    with Judge(find_stockfish(), rules) as judge:
        adjudicator = GameAdjudicator(rules, judge)      # one per game
        ending = termination(board, legal, max_plies, adjudicator)   # chesscore.play.endings

The judge is full-strength Stockfish through chesscore.play.engine: one thread, a fresh state
(`ucinewgame`, the hash cleared) before every position, a fixed `judge_nodes` budget. So a
score depends on the position alone and every verdict repeats, on any machine with the same
Stockfish. Scores are centipawns from White's view; a mate in n is +-(MATE_CP - n).

A position is judged after every `every_plies` plies (plies k, 2k, ...; 0: only at the cap); k
is odd, so consecutive judgements alternate the side to move: in the wild positions weak players
reach, the side to move is a tempo up (it takes first), and a judge that always saw the same side
to move would favour it (measured: judged every 4 plies, always White to move, White won 112 of
the demo's 128 self-play games). The rules, with cutechess-cli's meaning of a "move" (a full
move, two plies):

- resign: a side whose score has stayed at or below -resign_score_cp at every judgement over
  the last `resign_moves` moves loses (cutechess-cli counts each engine's own moves; the one
  judge plays both engines, so its verdict is two-sided);
- draw: from move `draw_from_move` on, a score within +-draw_score_cp at every judgement over
  the last `draw_moves` moves, with no capture or pawn move among them, is a draw
  (cutechess-cli restarts its count at every irreversible move);
- cap: a game still running at the ply cap is won by the side the judge sees at least
  cap_score_cp ahead in the final position, else drawn.

"Over the last N moves" means ceil(2N / every_plies) consecutive judgements: with every_plies 1
exactly cutechess-cli's count, with more a sparser sample of the same span (cheaper).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import chess
import chess.engine

from chesscore.play.endings import Ending
from chesscore.play.engine import Stockfish, StockfishLevel

MATE_CP = 100_000  # a mate in n scores +-(MATE_CP - n) centipawns
RESIGN, DRAW, CAP = "resign_rule", "draw_rule", "ply_cap"  # termination kinds (endings.TERMINATIONS)
PGN_RULE = {RESIGN: "resign", DRAW: "draw", CAP: "ply_cap"}  # the AdjudicationRule tag


@dataclass(frozen=True)
class Adjudication:
    """The judge and its rules (params.yaml `arena.adjudication`, `selfplay.adjudication`)."""

    enabled: bool = True  # false: no judge; the ply cap is a draw, as without adjudication
    judge_nodes: int = 1000  # Stockfish's node budget per judged position (reproducible, unlike time)
    judge_hash_mb: int = 1  # its hash, cleared before every position (1 MB clears fastest)
    every_plies: int = 5  # judge after every k plies, k odd (both sides to move in turn); 0: only at the ply cap
    resign_moves: int = 3  # resign rule: moves the score must stay beyond the threshold; 0: off
    resign_score_cp: int = 500  # ... at least this many centipawns against the losing side (Stockfish
    # 15.1's scale, 100 = a 50% win chance: a minor piece up scores about 550-700, a pawn about 200)
    draw_moves: int = 8  # draw rule: moves the score must stay inside the band; 0: off
    draw_score_cp: int = 20  # ... within +- this many centipawns
    draw_from_move: int = 40  # ... and not before this full move number
    cap_score_cp: int = 300  # at the ply cap: at least this far ahead wins, else a draw

    def __post_init__(self) -> None:
        positive = ("judge_nodes", "judge_hash_mb", "resign_score_cp", "cap_score_cp")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"adjudication.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("every_plies", "resign_moves", "draw_moves", "draw_score_cp", "draw_from_move"):
            if getattr(self, name) < 0:
                raise ValueError(f"adjudication.{name} must be >= 0, got {getattr(self, name)}")
        if self.draw_score_cp >= self.resign_score_cp:
            raise ValueError(
                f"adjudication.draw_score_cp ({self.draw_score_cp}) must be below resign_score_cp "
                f"({self.resign_score_cp})"
            )
        if self.every_plies % 2 == 0 and self.every_plies:
            raise ValueError(
                f"adjudication.every_plies must be odd (or 0), got {self.every_plies}: an even count always "
                "judges with the same side to move"
            )
        if self.every_plies == 0 and (self.resign_moves or self.draw_moves):
            raise ValueError(
                "adjudication.every_plies is 0 (judge only at the cap): set resign_moves and draw_moves to 0"
            )

    def judgements(self, moves: int) -> int:
        """Consecutive judgements that span `moves` full moves."""
        return math.ceil(2 * moves / self.every_plies) if moves and self.every_plies else 0

    def describe(self) -> str:
        if not self.enabled:
            return "no adjudication (the ply cap is a draw)"
        parts = [f"Stockfish judge at {self.judge_nodes} nodes"]
        parts.append(f"every {self.every_plies} plies" if self.every_plies else "at the cap only")
        if self.resign_moves:
            parts.append(f"resign movecount={self.resign_moves} score={self.resign_score_cp}")
        if self.draw_moves:
            parts.append(
                f"draw movenumber={self.draw_from_move} movecount={self.draw_moves} score={self.draw_score_cp}"
            )
        parts.append(f"cap score={self.cap_score_cp}")
        return ", ".join(parts)


def white_cp(score: chess.engine.PovScore) -> int:
    """A UCI score as centipawns from White's view, a mate in n as +-(MATE_CP - n)."""
    return int(score.white().score(mate_score=MATE_CP))


def score_text(cp: int) -> str:
    """The judge's score as a PGN tag writes it: "+612" centipawns, or "#+3" / "#-2" for mates."""
    if abs(cp) > MATE_CP - 1000:
        return f"#{'+' if cp > 0 else '-'}{MATE_CP - abs(cp)}"
    return f"{cp:+d}"


def pgn_tags(termination: str, judge_score: int | None) -> dict[str, str]:
    """PGN tags of an ending: Termination "normal" (the rules) or "adjudication" (the judge, or
    the ply cap), then AdjudicationRule (resign, draw, ply_cap) and JudgeScore (its deciding
    score, centipawns from White's view) for an adjudicated game."""
    if termination not in PGN_RULE:
        return {"Termination": "normal"}
    tags = {"Termination": "adjudication", "AdjudicationRule": PGN_RULE[termination]}
    if judge_score is not None:
        tags["JudgeScore"] = score_text(judge_score)
    return tags


class Judge:
    """Stockfish at full strength scoring positions; counts what it judged and how long it took."""

    def __init__(self, path: str, rules: Adjudication) -> None:
        level = StockfishLevel(
            "judge", skill=20, movetime_ms=None, nodes=rules.judge_nodes, hash_mb=rules.judge_hash_mb
        )
        self.engine = Stockfish(path, level)
        self.positions = 0
        self.seconds = 0.0

    @property
    def version(self) -> str:
        return self.engine.version

    def score(self, board: chess.Board) -> int:
        """The position's score, centipawns from White's view (a fresh search every time)."""
        started = time.perf_counter()
        cp = white_cp(self.engine.score(board))
        self.seconds += time.perf_counter() - started
        self.positions += 1
        return cp

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GameAdjudicator:
    """One game's adjudication: the runs of judgements each rule counts, and the verdicts."""

    def __init__(self, rules: Adjudication, judge: Judge | None) -> None:
        if rules.enabled and judge is None:
            raise ValueError("adjudication is enabled: give a Judge")
        self.rules = rules
        self.judge = judge if rules.enabled else None
        self.resign_run = 0  # consecutive judgements beyond the resign threshold, same side
        self.resign_side = 0  # +1: White ahead, -1: Black ahead
        self.draw_run = 0  # consecutive judgements inside the draw band, no irreversible move
        self.judged = 0  # positions this game's judge scored
        self.last: tuple[int, int] | None = None  # (ply, score) of the latest judgement

    def after_ply(self, board: chess.Board) -> Ending | None:
        """A verdict by the resign or draw rule after the last move, if one fires (a game the
        rules of chess have not ended)."""
        rules, ply = self.rules, board.ply()
        if self.judge is None or not rules.every_plies or ply % rules.every_plies:
            return None
        cp = self._judge(board)
        return self.rule_verdict(cp, ply, board.halfmove_clock)

    def rule_verdict(self, cp: int, ply: int, halfmove_clock: int) -> Ending | None:
        """Count one judgement (score `cp` after ply `ply`) into the runs; the verdict, if any."""
        rules = self.rules
        side = 1 if cp >= rules.resign_score_cp else -1 if cp <= -rules.resign_score_cp else 0
        self.resign_run = self.resign_run + 1 if side and side == self.resign_side else int(side != 0)
        self.resign_side = side
        if rules.resign_moves and self.resign_run >= rules.judgements(rules.resign_moves):
            return Ending("1-0" if side > 0 else "0-1", RESIGN, cp)
        if halfmove_clock < rules.every_plies:  # a capture or pawn move since the last judgement
            self.draw_run = 0
        self.draw_run = self.draw_run + 1 if abs(cp) <= rules.draw_score_cp else 0
        if (
            rules.draw_moves
            and ply // 2 >= rules.draw_from_move  # as cutechess-cli: plies played / 2
            and self.draw_run >= rules.judgements(rules.draw_moves)
        ):
            return Ending("1/2-1/2", DRAW, cp)
        return None

    def at_cap(self, board: chess.Board) -> Ending:
        """The verdict on a game still running at the ply cap."""
        if self.judge is None:
            return Ending("1/2-1/2", CAP, None)
        cp = self.last[1] if self.last is not None and self.last[0] == board.ply() else self._judge(board)
        return self.cap_verdict(cp)

    def cap_verdict(self, cp: int) -> Ending:
        if abs(cp) >= self.rules.cap_score_cp:
            return Ending("1-0" if cp > 0 else "0-1", CAP, cp)
        return Ending("1/2-1/2", CAP, cp)

    def _judge(self, board: chess.Board) -> int:
        cp = self.judge.score(board)
        self.last = (board.ply(), cp)
        self.judged += 1
        return cp
