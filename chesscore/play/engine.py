"""Stockfish from Debian's package, found and driven through python-chess's UCI client.

    path = find_stockfish()                       # PATH, then /usr/games; clear error if absent
    level = StockfishLevel("sf-1350", uci_elo=1350)  # or skill=0..19; skill=20 with movetime_ms/nodes
    with Stockfish(path, level) as engine:
        move, depth = engine.play(board, game="g1")

A level weakens Stockfish as UCI_Elo (1350..2850 in 15.1) or Skill Level (0..19) do, but
reproducibly: Stockfish's own handicap draws from a clock-seeded generator, so two runs of the
same games differ. Here Stockfish searches at full strength, one thread, fresh state for every
move, to depth 1 + level with MultiPV 4 (exactly the search its handicap picks from), and the
pick uses Stockfish 15.1's formula (Skill::pick_best) with a generator seeded by the level, the
game and the position. Same games in, same moves out; `anchor` is the Elo that level stands for (see
chesscore.play.elo). Skill Level 20 is full strength: movetime_ms (or a node budget, reproducible)
limits its search.
"""

from __future__ import annotations

import math
import os
import random
import shutil
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chess
import chess.engine

from chesscore.failures import Refused
from chesscore.play.elo import SF_MAX_UCI_ELO, SF_MIN_UCI_ELO, stockfish_skill_elo, stockfish_uci_elo_level

DEBIAN_PACKAGE = "stockfish"
INSTALL_COMMAND = "sudo apt-get install stockfish"
DEBIAN_GAMES_DIR = Path("/usr/games")
# Stockfish 15.1 (types.h, uci.h): a pawn in its internal units, and the internal units per
# 100 reported centipawns; the pick formula works in internal units.
PAWN_VALUE_MG, NORMALIZE_TO_PAWN_VALUE, VALUE_MATE = 126, 361, 32000
HANDICAP_MULTIPV = 4


class StockfishMissing(Refused, RuntimeError):
    """Stockfish is not installed where we look; the message says how to install it."""


def find_stockfish(path: str | os.PathLike | None = None) -> str:
    """The Stockfish executable: `path` if given, else `stockfish` on PATH, else Debian's
    /usr/games/stockfish (not on PATH for most users)."""
    if path is not None:
        if Path(path).is_file() and os.access(path, os.X_OK):
            return str(path)
        raise StockfishMissing(
            f"Stockfish: {path} is not an executable file. Install Debian's "
            f"'{DEBIAN_PACKAGE}' package with: {INSTALL_COMMAND}"
        )
    found = shutil.which("stockfish") or shutil.which("stockfish", path=str(DEBIAN_GAMES_DIR))
    if found is None:
        raise StockfishMissing(
            f"Stockfish was not found on PATH nor in {DEBIAN_GAMES_DIR}. It comes from the Debian "
            f"package '{DEBIAN_PACKAGE}': install it with `{INSTALL_COMMAND}` (it lands in "
            f"{DEBIAN_GAMES_DIR}/stockfish), or give its path in params.yaml (arena.stockfish.path)."
        )
    return found


@dataclass(frozen=True)
class StockfishLevel:
    """One strength of Stockfish: a handicap and a search limit per move."""

    name: str
    uci_elo: int | None = None  # UCI_LimitStrength with this UCI_Elo (Stockfish 15.1: 1350..2850)
    skill: int | None = None  # or Skill Level 0..20 (0 is the weakest, about 1347 CCRL Elo)
    movetime_ms: int | None = 20  # full strength only: search time per move; or a node budget
    nodes: int | None = None  # (handicapped levels search to depth 1 + level instead)
    threads: int = 1  # the calibration used 1 thread; more makes the search irreproducible
    hash_mb: int = 16

    def __post_init__(self) -> None:
        if (self.uci_elo is None) == (self.skill is None):
            raise ValueError(f"Stockfish level {self.name!r}: give exactly one of uci_elo and skill")
        if self.uci_elo is not None and not SF_MIN_UCI_ELO <= self.uci_elo <= SF_MAX_UCI_ELO:
            raise ValueError(
                f"Stockfish level {self.name!r}: UCI_Elo {self.uci_elo} is outside "
                f"{SF_MIN_UCI_ELO}..{SF_MAX_UCI_ELO} (use skill: 0 for the weakest play)"
            )
        if self.skill is not None and not 0 <= self.skill <= 20:
            raise ValueError(f"Stockfish level {self.name!r}: Skill Level {self.skill} is outside 0..20")
        if self.handicap is None and self.movetime_ms is None and self.nodes is None:
            raise ValueError(f"Stockfish level {self.name!r}: full strength needs movetime_ms or nodes")

    @property
    def anchor(self) -> float:
        """The Elo (CCRL 40/4 scale) this level stands for."""
        return float(self.uci_elo) if self.uci_elo is not None else stockfish_skill_elo(self.skill)

    @property
    def handicap(self) -> float | None:
        """The (fractional) Skill Level Stockfish would play at; None at full strength (20)."""
        level = stockfish_uci_elo_level(self.uci_elo) if self.uci_elo is not None else float(self.skill)
        return level if level < 20 else None

    def options(self) -> dict[str, Any]:
        # Full strength inside: the handicap is applied here, reproducibly (see the module doc).
        return {"Threads": self.threads, "Hash": self.hash_mb, "UCI_LimitStrength": False, "Skill Level": 20}

    def limit(self) -> chess.engine.Limit:
        if self.handicap is not None:
            return chess.engine.Limit(depth=1 + int(self.handicap))
        time = self.movetime_ms / 1000 if self.movetime_ms is not None else None
        return chess.engine.Limit(time=time, nodes=self.nodes)

    def describe(self) -> str:
        handicap = f"UCI_Elo={self.uci_elo}" if self.uci_elo is not None else f"Skill Level={self.skill}"
        if self.handicap is not None:
            return f"Stockfish {handicap} depth={1 + int(self.handicap)} multipv={HANDICAP_MULTIPV}"
        search = f"movetime={self.movetime_ms}ms" if self.movetime_ms is not None else ""
        if self.nodes is not None:
            search = f"{search} nodes={self.nodes}".strip()
        return f"Stockfish {handicap} {search}"


def pick_handicapped(lines: list[tuple[chess.Move, int]], level: float, rng: random.Random) -> chess.Move:
    """Stockfish 15.1's Skill::pick_best over its MultiPV lines (move, score in internal units,
    best first): each score gets a push toward the best one, part fixed and part random, both
    larger the weaker the level; the highest pushed score wins (the last of equals)."""
    top, weakness = lines[0][1], 120 - 2 * level
    delta = min(top - lines[-1][1], PAWN_VALUE_MG)
    best, best_score = lines[0][0], -math.inf
    for move, score in lines:
        push = int((weakness * (top - score) + delta * (rng.getrandbits(32) % int(weakness))) / 128)
        if score + push >= best_score:
            best, best_score = move, score + push
    return best


def _internal(score: chess.engine.PovScore, turn: chess.Color) -> int:
    """A reported score back in Stockfish's internal units, for the side to move."""
    pov = score.pov(turn)
    mate = pov.mate()
    if mate is not None:  # mate in n moves: VALUE_MATE - plies (negative: being mated)
        return VALUE_MATE - (2 * mate - 1) if mate > 0 else -VALUE_MATE + (-2 * mate)
    return round(pov.score() * NORMALIZE_TO_PAWN_VALUE / 100)


class Stockfish:
    """A Stockfish process set to one level. Use as a context manager (the process is closed)."""

    def __init__(self, path: str, level: StockfishLevel) -> None:
        self.level = level
        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.version = self.engine.id.get("name", "Stockfish")
        self.engine.configure(level.options())

    def play(self, board: chess.Board, game: Hashable | None = None) -> tuple[chess.Move, int | None]:
        """Stockfish's move and the depth it reported. `game` names the game for the handicap's
        generator; every search starts from a fresh state (`ucinewgame`), so a move depends on
        the position and the game alone, not on what else this process searched before."""
        fresh = object()  # python-chess sends ucinewgame whenever the game object changes
        level = self.level.handicap
        if level is None:
            result = self.engine.play(board, self.level.limit(), game=fresh, info=chess.engine.INFO_BASIC)
            move, depth = result.move, result.info.get("depth")
        else:
            infos = self.engine.analyse(board, self.level.limit(), game=fresh, multipv=HANDICAP_MULTIPV)
            lines = [(info["pv"][0], _internal(info["score"], board.turn)) for info in infos if info.get("pv")]
            rng = random.Random(f"{self.level.name}/{game}/{board.ply()}/{board.fen()}")
            move = pick_handicapped(lines, level, rng) if lines else None
            depth = min((info.get("depth", 0) for info in infos), default=None)
        if move is None or move not in board.legal_moves:
            raise RuntimeError(f"{self.version} returned no legal move in {board.fen()}")
        return move, depth

    def score(self, board: chess.Board) -> chess.engine.PovScore:
        """Stockfish's score of the position at this level's search limit, from a fresh state
        (`ucinewgame`): with one thread and a node budget, the same position gives the same score."""
        # INFO_SCORE: python-chess parses only the score, not every PV (half its CPU per call)
        info = self.engine.analyse(board, self.level.limit(), game=object(), info=chess.engine.INFO_SCORE)
        if "score" not in info:
            raise RuntimeError(f"{self.version} reported no score for {board.fen()}")
        return info["score"]

    def close(self) -> None:
        self.engine.quit()

    def __enter__(self) -> Stockfish:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
