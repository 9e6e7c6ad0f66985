"""A small table of named openings (ECO code, Lichess-style name, moves) for the sample.

A game starts by playing one line of the table, chosen by a seeded draw; its ECO and Opening
headers then name the deepest table line that the finished game's moves begin with, so the
name always matches the moves (a game that continues 1. e4 c5 with 2. Nf3 d6 is named
"Sicilian Defense: Modern Variations", as Lichess would).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Opening:
    eco: str
    name: str
    moves: tuple[str, ...]  # SAN from the standard start position
    offbeat: bool = False  # played far more often by low-rated players


def _o(eco: str, name: str, line: str, offbeat: bool = False) -> Opening:
    return Opening(eco, name, tuple(m for m in line.split() if not m[0].isdigit()), offbeat)


OPENINGS: tuple[Opening, ...] = (
    _o("A00", "Van't Kruijs Opening", "1. e3", True),
    _o("A00", "Polish Opening", "1. b4", True),
    _o("A00", "Hungarian Opening", "1. g3", True),
    _o("A00", "Grob Opening", "1. g4", True),
    _o("A00", "Saragossa Opening", "1. c3", True),
    _o("A00", "Mieses Opening", "1. d3", True),
    _o("A00", "Amar Opening", "1. Nh3", True),
    _o("A00", "Clemenz Opening", "1. h3", True),
    _o("A00", "Anderssen's Opening", "1. a3", True),
    _o("A00", "Ware Opening", "1. a4", True),
    _o("A01", "Nimzo-Larsen Attack", "1. b3"),
    _o("A02", "Bird Opening", "1. f4"),
    _o("A04", "Zukertort Opening", "1. Nf3"),
    _o("A10", "English Opening", "1. c4"),
    _o("A20", "English Opening: King's English Variation", "1. c4 e5"),
    _o("A40", "Queen's Pawn Game", "1. d4"),
    _o("A45", "Indian Defense", "1. d4 Nf6"),
    _o("A46", "Indian Defense: Knights Variation", "1. d4 Nf6 2. Nf3"),
    _o("A48", "East Indian Defense", "1. d4 Nf6 2. Nf3 g6"),
    _o("A56", "Benoni Defense", "1. d4 Nf6 2. c4 c5"),
    _o("A57", "Benko Gambit", "1. d4 Nf6 2. c4 c5 3. d5 b5"),
    _o("A80", "Dutch Defense", "1. d4 f5"),
    _o("B00", "King's Pawn", "1. e4", True),
    _o("B00", "Nimzowitsch Defense", "1. e4 Nc6", True),
    _o("B00", "Owen Defense", "1. e4 b6", True),
    _o("B00", "St. George Defense", "1. e4 a6", True),
    _o("B01", "Scandinavian Defense", "1. e4 d5"),
    _o("B01", "Scandinavian Defense: Mieses-Kotroc Variation", "1. e4 d5 2. exd5 Qxd5"),
    _o("B02", "Alekhine Defense", "1. e4 Nf6"),
    _o("B06", "Modern Defense", "1. e4 g6"),
    _o("B07", "Pirc Defense", "1. e4 d6 2. d4 Nf6"),
    _o("B10", "Caro-Kann Defense", "1. e4 c6"),
    _o("B12", "Caro-Kann Defense: Advance Variation", "1. e4 c6 2. d4 d5 3. e5"),
    _o("B13", "Caro-Kann Defense: Exchange Variation", "1. e4 c6 2. d4 d5 3. exd5 cxd5"),
    _o("B20", "Sicilian Defense", "1. e4 c5"),
    _o("B21", "Sicilian Defense: Smith-Morra Gambit", "1. e4 c5 2. d4 cxd4 3. c3"),
    _o("B22", "Sicilian Defense: Alapin Variation", "1. e4 c5 2. c3"),
    _o("B23", "Sicilian Defense: Closed", "1. e4 c5 2. Nc3"),
    _o("B27", "Sicilian Defense: Hyperaccelerated Dragon", "1. e4 c5 2. Nf3 g6"),
    _o("B30", "Sicilian Defense: Old Sicilian", "1. e4 c5 2. Nf3 Nc6"),
    _o("B40", "Sicilian Defense: French Variation", "1. e4 c5 2. Nf3 e6"),
    _o("B50", "Sicilian Defense: Modern Variations", "1. e4 c5 2. Nf3 d6"),
    _o("B70", "Sicilian Defense: Dragon Variation", "1. e4 c5 2. Nf3 d6 3. d4 cxd4 4. Nxd4 Nf6 5. Nc3 g6"),
    _o("B90", "Sicilian Defense: Najdorf Variation", "1. e4 c5 2. Nf3 d6 3. d4 cxd4 4. Nxd4 Nf6 5. Nc3 a6"),
    _o("C00", "French Defense", "1. e4 e6"),
    _o("C00", "French Defense: Knight Variation", "1. e4 e6 2. Nf3"),
    _o("C01", "French Defense: Exchange Variation", "1. e4 e6 2. d4 d5 3. exd5"),
    _o("C02", "French Defense: Advance Variation", "1. e4 e6 2. d4 d5 3. e5"),
    _o("C11", "French Defense: Classical Variation", "1. e4 e6 2. d4 d5 3. Nc3 Nf6"),
    _o("C15", "French Defense: Winawer Variation", "1. e4 e6 2. d4 d5 3. Nc3 Bb4"),
    _o("C20", "King's Pawn Game", "1. e4 e5"),
    _o("C20", "Bongcloud Attack", "1. e4 e5 2. Ke2", True),
    _o("C20", "Wayward Queen Attack", "1. e4 e5 2. Qh5", True),
    _o("C21", "Center Game", "1. e4 e5 2. d4"),
    _o("C21", "Danish Gambit", "1. e4 e5 2. d4 exd4 3. c3"),
    _o("C23", "Bishop's Opening", "1. e4 e5 2. Bc4"),
    _o("C25", "Vienna Game", "1. e4 e5 2. Nc3"),
    _o("C30", "King's Gambit", "1. e4 e5 2. f4"),
    _o("C33", "King's Gambit Accepted", "1. e4 e5 2. f4 exf4"),
    _o("C40", "King's Knight Opening", "1. e4 e5 2. Nf3"),
    _o("C41", "Philidor Defense", "1. e4 e5 2. Nf3 d6"),
    _o("C42", "Petrov's Defense", "1. e4 e5 2. Nf3 Nf6"),
    _o("C44", "King's Knight Opening: Normal Variation", "1. e4 e5 2. Nf3 Nc6"),
    _o("C44", "Scotch Game", "1. e4 e5 2. Nf3 Nc6 3. d4"),
    _o("C46", "Three Knights Opening", "1. e4 e5 2. Nf3 Nc6 3. Nc3"),
    _o("C47", "Four Knights Game", "1. e4 e5 2. Nf3 Nc6 3. Nc3 Nf6"),
    _o("C50", "Italian Game", "1. e4 e5 2. Nf3 Nc6 3. Bc4"),
    _o("C50", "Italian Game: Giuoco Piano", "1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5"),
    _o("C55", "Italian Game: Two Knights Defense", "1. e4 e5 2. Nf3 Nc6 3. Bc4 Nf6"),
    _o("C60", "Ruy Lopez", "1. e4 e5 2. Nf3 Nc6 3. Bb5"),
    _o("C65", "Ruy Lopez: Berlin Defense", "1. e4 e5 2. Nf3 Nc6 3. Bb5 Nf6"),
    _o("C68", "Ruy Lopez: Exchange Variation", "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Bxc6"),
    _o("C70", "Ruy Lopez: Morphy Defense", "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6"),
    _o("D00", "Queen's Pawn Game", "1. d4 d5"),
    _o("D00", "Queen's Pawn Game: Accelerated London System", "1. d4 d5 2. Bf4"),
    _o("D02", "Queen's Pawn Game: Zukertort Variation", "1. d4 d5 2. Nf3"),
    _o("D06", "Queen's Gambit", "1. d4 d5 2. c4"),
    _o("D10", "Slav Defense", "1. d4 d5 2. c4 c6"),
    _o("D20", "Queen's Gambit Accepted", "1. d4 d5 2. c4 dxc4"),
    _o("D30", "Queen's Gambit Declined", "1. d4 d5 2. c4 e6"),
    _o("D35", "Queen's Gambit Declined: Exchange Variation", "1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. cxd5"),
    _o("D80", "Grünfeld Defense", "1. d4 Nf6 2. c4 g6 3. Nc3 d5"),
    _o("E20", "Nimzo-Indian Defense", "1. d4 Nf6 2. c4 e6 3. Nc3 Bb4"),
    _o("E60", "King's Indian Defense", "1. d4 Nf6 2. c4 g6"),
)


def pick_opening(rng: random.Random, mean_rating: float) -> Opening:
    """A seeded choice of table line; offbeat lines are common below 1400 and rare above 2000."""
    offbeat_weight = 3.0 if mean_rating < 1400 else 1.0 if mean_rating < 2000 else 0.2
    weights = [offbeat_weight if o.offbeat else 1.0 for o in OPENINGS]
    return rng.choices(OPENINGS, weights=weights, k=1)[0]


def name_opening(sans: list[str]) -> Opening:
    """The deepest table line the game's moves begin with (every game starts with one)."""
    best = None
    for opening in OPENINGS:
        n = len(opening.moves)
        if tuple(sans[:n]) == opening.moves and (best is None or n > len(best.moves)):
            best = opening
    if best is None:
        raise ValueError(f"no opening in the table matches {' '.join(sans[:4])}")
    return best
