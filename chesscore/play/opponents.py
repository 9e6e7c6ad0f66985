"""The arena's opponents as params.yaml names them, checked, then built.

    arena:
      stockfish: {path: null, movetime_ms: 20, nodes: null, threads: 1, hash_mb: 16}
      opponents:
        - {name: random, kind: random}
        - {name: stockfish-skill0, kind: stockfish, skill: 0}
        - {name: selfplay-rl, kind: checkpoint, path: data/selfplay/rl.pt}

    opponents = build_opponents(specs, search, device="cpu")    # -> [Opponent, ...]

Every opponent is checked before the first game (unique names, a Stockfish level with exactly
one of uci_elo and skill, a checkpoint that loads), so a bad entry costs no games.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from chesscore.checkpoint import load_model
from chesscore.play.arena import Opponent
from chesscore.play.engine import StockfishLevel


@dataclass(frozen=True)
class StockfishSearch:
    """How every Stockfish opponent searches (an opponent may set its own movetime_ms or nodes)."""

    path: str | None = None  # the executable; null: stockfish on PATH, else Debian's /usr/games/stockfish
    movetime_ms: int | None = 20  # full strength (skill 20) only: time per move, or nodes: N (reproducible)
    nodes: int | None = None  # a node budget per move instead of time (weaker levels search to depth 1 + level)
    threads: int = 1  # as in Stockfish's UCI_Elo calibration; more makes the search irreproducible
    hash_mb: int = 16  # transposition table size


@dataclass(frozen=True)
class OpponentSpec:
    """One opponent of params.yaml's `arena.opponents` list."""

    name: str  # unique: it names the opponent's rows in every output
    kind: Literal["random", "stockfish", "checkpoint"]  # a uniform random mover, a Stockfish level, a model
    uci_elo: int | None = None  # stockfish: UCI_LimitStrength at this Elo (1350..2850)
    skill: int | None = None  # stockfish: or Skill Level 0..20 (0 is about 1347 CCRL Elo)
    movetime_ms: int | None = None  # stockfish: this opponent's own time per move (null: stockfish.movetime_ms)
    nodes: int | None = None  # stockfish: this opponent's own node budget (null: stockfish.nodes)
    path: Path | None = None  # checkpoint: the checkpoint file

    def __post_init__(self) -> None:
        if self.kind == "checkpoint" and self.path is None:
            raise ValueError(f"path: opponent {self.name!r} is a checkpoint and needs a path")
        if self.kind == "stockfish":
            self.level(StockfishSearch())  # raises if the level is not one Stockfish has

    def level(self, search: StockfishSearch) -> StockfishLevel:
        return StockfishLevel(
            self.name,
            uci_elo=self.uci_elo,
            skill=self.skill,
            movetime_ms=self.movetime_ms if self.movetime_ms is not None else search.movetime_ms,
            nodes=self.nodes if self.nodes is not None else search.nodes,
            threads=search.threads,
            hash_mb=search.hash_mb,
        )


def check_names(specs: Sequence[OpponentSpec]) -> None:
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"opponents: every opponent needs a unique name; repeated: {', '.join(repeated)}")


def build_opponents(specs: Sequence[OpponentSpec], search: StockfishSearch, device: str) -> list[Opponent]:
    """The opponents, in params order; checkpoints are loaded here (CheckpointError: exit 78)."""
    check_names(specs)
    opponents = []
    for spec in specs:
        if spec.kind == "random":
            opponents.append(Opponent.random(spec.name))
        elif spec.kind == "stockfish":
            opponents.append(Opponent.stockfish(spec.level(search)))
        else:
            model, _ = load_model(spec.path, device)
            opponents.append(Opponent.checkpoint(spec.name, model, f"chesscore {spec.path}"))
    return opponents
