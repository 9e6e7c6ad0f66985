"""The UCI engine's options: what `uci` declares and what `setoption` may change.

    options = Options(temperature=0.0, seed=0)
    options.declarations()                       # the `option name ...` lines of the `uci` answer
    options.set("MultiPV", "3")                  # False: the game goes on; True: its sampler restarts

Temperature (0 = the model's most likely move, 1 = sample its distribution), Seed (the sampler
restarts from it at every `ucinewgame`), Threads (torch CPU threads, 1..512), MultiPV (`go`
reports the N most likely moves), Debug (an `info string` whenever the model's unmasked choice
was illegal). UCI_LimitStrength with UCI_Elo, and UCI_Opponent (`<title> <rating|none>
<computer|human> <name>`, as a GUI or lichess-bot sends it), set the ratings a triples-v2 model is
told (its own side's and its opponent's; chesscore.play.uci); without them it is told "unknown".
Hash, Move Overhead and Ponder are accepted, as GUIs and lichess-bot set them, with
no effect: there is no search, no table and no clock. A value out of range or of the wrong kind
raises ValueError (the engine answers it with an `info string`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MAX_THREADS = 512  # advertised in `uci` and enforced by setoption (100000 threads segfaulted)
MAX_MULTIPV = 256
MIN_ELO, MAX_ELO = 500, 3200  # UCI_Elo: the rating bins' range (chesscore.tokens), ends included
# Accepted because GUIs and bots set them, with no effect here: name -> its declaration.
NO_EFFECT = {
    "hash": "option name Hash type spin default 16 min 1 max 1048576",
    "move overhead": "option name Move Overhead type spin default 10 min 0 max 60000",
    "ponder": "option name Ponder type check default false",
}


def check_value(value: str, name: str) -> bool:
    """A UCI check option's value: true or false."""
    if value.lower() not in ("true", "false"):
        raise ValueError(f"{name} is a check option: true or false, got {value!r}")
    return value.lower() == "true"


def spin_value(value: str, name: str, low: int, high: int) -> int:
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"{name} {value} is outside {low}..{high}")
    return number


@dataclass
class Options:
    temperature: float = 0.0
    seed: int = 0
    multipv: int = 1
    debug: bool = False
    limit_strength: bool = False  # UCI_LimitStrength: tell the model UCI_Elo as its own rating
    elo: int = 1500  # UCI_Elo
    opponent_elo: int | None = None  # from UCI_Opponent; None: unknown

    def declarations(self) -> list[str]:
        return [
            f"option name Temperature type string default {self.temperature:g}",
            f"option name Seed type spin default {self.seed} min 0 max 2147483647",
            f"option name Threads type spin default {torch.get_num_threads()} min 1 max {MAX_THREADS}",
            f"option name MultiPV type spin default 1 min 1 max {MAX_MULTIPV}",
            "option name Debug type check default false",
            "option name UCI_LimitStrength type check default false",
            f"option name UCI_Elo type spin default {self.elo} min {MIN_ELO} max {MAX_ELO}",
            "option name UCI_Opponent type string default none none computer unknown",
            *NO_EFFECT.values(),
        ]

    def set(self, name: str, value: str) -> bool:
        """Apply `setoption name NAME value VALUE`; True when the game's sampler must restart."""
        name, value = name.strip().lower(), value.strip()
        if name == "temperature":
            temperature = float(value)
            if not temperature >= 0:
                raise ValueError(f"Temperature {value} must be a number >= 0")
            self.temperature = temperature
        elif name == "seed":
            self.seed = int(value)
        elif name == "threads":  # past the advertised range OpenMP can crash the process
            torch.set_num_threads(spin_value(value, "Threads", 1, MAX_THREADS))
        elif name == "multipv":
            self.multipv = spin_value(value, "MultiPV", 1, MAX_MULTIPV)
            return False  # reporting only: the game's sampler goes on
        elif name == "debug":
            self.debug = check_value(value, "Debug")
            return False
        elif name == "uci_limitstrength":
            self.limit_strength = check_value(value, "UCI_LimitStrength")
            return False
        elif name == "uci_elo":
            self.elo = spin_value(value, "UCI_Elo", MIN_ELO, MAX_ELO)
            return False
        elif name == "uci_opponent":
            self.opponent_elo = opponent_rating(value)
            return False
        elif name in NO_EFFECT:  # a malformed value is still refused
            if name == "ponder":
                check_value(value, "Ponder")
            else:
                int(value)
            return False
        else:
            raise ValueError(f"no option named {name!r}")
        return True


def opponent_rating(value: str) -> int | None:
    """The rating in a UCI_Opponent value `<title> <rating> <computer|human> <name>` (the UCI
    protocol's form; title and rating may be `none`): None when it is `none`."""
    words = value.split()
    if len(words) < 3 or words[2].lower() not in ("computer", "human"):
        raise ValueError(f"UCI_Opponent: expected '<title> <rating|none> <computer|human> <name>', got {value!r}")
    if words[1].lower() == "none":
        return None
    return int(words[1])
