"""Stockfish from Debian's package, found and driven through python-chess's UCI client.

    path = find_stockfish()                       # PATH, then /usr/games; clear error if absent
    level = StockfishLevel("sf-1350", uci_elo=1350, movetime_ms=20)
    with Stockfish(path, level) as engine:
        move, depth = engine.play(board, game="g1")

A level weakens Stockfish either with UCI_LimitStrength + UCI_Elo (1350..2850 in 15.1) or
with Skill Level (0..20); `anchor` is the Elo that level stands for (see chesscore.elo).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable

import chess
import chess.engine

from chesscore.elo import SF_MAX_UCI_ELO, SF_MIN_UCI_ELO, stockfish_skill_elo

DEBIAN_PACKAGE = "stockfish"
INSTALL_COMMAND = "sudo apt-get install stockfish"
DEBIAN_GAMES_DIR = Path("/usr/games")


class StockfishMissing(RuntimeError):
    """Stockfish is not installed where we look; the message says how to install it."""


def find_stockfish(path: str | os.PathLike | None = None) -> str:
    """The Stockfish executable: `path` if given, else `stockfish` on PATH, else Debian's
    /usr/games/stockfish (not on PATH for most users)."""
    if path is not None:
        if Path(path).is_file() and os.access(path, os.X_OK):
            return str(path)
        raise StockfishMissing(f"Stockfish: {path} is not an executable file. Install Debian's "
                               f"'{DEBIAN_PACKAGE}' package with: {INSTALL_COMMAND}")
    found = shutil.which("stockfish") or shutil.which("stockfish", path=str(DEBIAN_GAMES_DIR))
    if found is None:
        raise StockfishMissing(
            f"Stockfish was not found on PATH nor in {DEBIAN_GAMES_DIR}. It comes from the Debian "
            f"package '{DEBIAN_PACKAGE}': install it with `{INSTALL_COMMAND}` (it lands in "
            f"{DEBIAN_GAMES_DIR}/stockfish), or give its path in params.yaml (arena.stockfish.path).")
    return found


@dataclass(frozen=True)
class StockfishLevel:
    """One strength of Stockfish: a handicap and a search limit per move."""

    name: str
    uci_elo: int | None = None  # UCI_LimitStrength with this UCI_Elo (Stockfish 15.1: 1350..2850)
    skill: int | None = None  # or Skill Level 0..20 (0 is the weakest, about 1347 CCRL Elo)
    movetime_ms: int | None = 20  # search time per move; or a node budget:
    nodes: int | None = None
    threads: int = 1  # the calibration used 1 thread
    hash_mb: int = 16

    def __post_init__(self) -> None:
        if (self.uci_elo is None) == (self.skill is None):
            raise ValueError(f"Stockfish level {self.name!r}: give exactly one of uci_elo and skill")
        if self.uci_elo is not None and not SF_MIN_UCI_ELO <= self.uci_elo <= SF_MAX_UCI_ELO:
            raise ValueError(f"Stockfish level {self.name!r}: UCI_Elo {self.uci_elo} is outside "
                             f"{SF_MIN_UCI_ELO}..{SF_MAX_UCI_ELO} (use skill: 0 for the weakest play)")
        if self.skill is not None and not 0 <= self.skill <= 20:
            raise ValueError(f"Stockfish level {self.name!r}: Skill Level {self.skill} is outside 0..20")
        if self.movetime_ms is None and self.nodes is None:
            raise ValueError(f"Stockfish level {self.name!r}: give movetime_ms or nodes")

    @property
    def anchor(self) -> float:
        """The Elo (CCRL 40/4 scale) this level stands for."""
        return float(self.uci_elo) if self.uci_elo is not None else stockfish_skill_elo(self.skill)

    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"Threads": self.threads, "Hash": self.hash_mb}
        if self.uci_elo is not None:
            options.update({"UCI_LimitStrength": True, "UCI_Elo": self.uci_elo})
        else:
            options.update({"UCI_LimitStrength": False, "Skill Level": self.skill})
        return options

    def limit(self) -> chess.engine.Limit:
        time = self.movetime_ms / 1000 if self.movetime_ms is not None else None
        return chess.engine.Limit(time=time, nodes=self.nodes)

    def describe(self) -> str:
        handicap = f"UCI_Elo={self.uci_elo}" if self.uci_elo is not None else f"Skill Level={self.skill}"
        search = f"movetime={self.movetime_ms}ms" if self.movetime_ms is not None else ""
        if self.nodes is not None:
            search = f"{search} nodes={self.nodes}".strip()
        return f"Stockfish {handicap} {search}"


class Stockfish:
    """A Stockfish process set to one level. Use as a context manager (the process is closed)."""

    def __init__(self, path: str, level: StockfishLevel) -> None:
        self.level = level
        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.version = self.engine.id.get("name", "Stockfish")
        self.engine.configure(level.options())

    def play(self, board: chess.Board, game: Hashable | None = None) -> tuple[chess.Move, int | None]:
        """Stockfish's move and the depth it reported. `game` keys the game so Stockfish gets
        `ucinewgame` whenever the game changes (games may be interleaved)."""
        result = self.engine.play(board, self.level.limit(), game=game, info=chess.engine.INFO_BASIC)
        if result.move is None or result.move not in board.legal_moves:
            raise RuntimeError(f"{self.version} returned no legal move in {board.fen()}")
        return result.move, result.info.get("depth")

    def close(self) -> None:
        self.engine.quit()

    def __enter__(self) -> "Stockfish":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
