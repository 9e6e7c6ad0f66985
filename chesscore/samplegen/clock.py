"""The Lichess clock of a sample game, in integer centiseconds.

The first move of each side is free (Lichess starts the clock after it); after that a move
costs the time spent and earns the increment. Each side has a pace (how many moves it
budgets its base time for; the weaker player's is lower, engine_game.Strength); below four
budgets it plays fast, and now and then thinks too long, and a side behind on the board
thinks twice as long: that is how flags (Time forfeit) come about, mostly to the weaker.
`%clk` shows whole seconds left.
"""

from __future__ import annotations

import random


class Clock:
    """Both sides' time; `can_flag=False` for a game that must not end on time."""

    def __init__(
        self, time_control: str, rng: random.Random, paces: tuple[float, float] = (35.0, 35.0), can_flag: bool = True
    ):
        self.rng, self.can_flag = rng, can_flag
        self.off = time_control == "-"
        base, inc = (0, 0) if self.off else (int(x) for x in time_control.split("+"))
        self.base, self.inc = base * 100, inc * 100
        self.left = [self.base, self.base]
        self.pace = list(paces)

    def spend(self, ply: int, side: int, behind: bool = False) -> int | None:
        """Time left after the move at `ply` by `side` (0 white), or None if the flag falls.
        A side `behind` on the board thinks twice as long, as players do: flags then go
        mostly to the weaker side, not to a coin."""
        if self.off:
            return 0
        if ply < 2:
            return self.left[side]
        budget = self.base / self.pace[side] + 0.9 * self.inc
        used = budget * self.rng.lognormvariate(-0.32, 0.8) * (0.35 if ply < 16 else 1.0)
        used = max(used, self.rng.uniform(10, 60))  # moving takes a moment even when premoved
        if self.left[side] < 4 * budget:  # time trouble: play fast, now and then think too long
            used = self.left[side] * self.rng.uniform(0.02, 0.25) + self.rng.uniform(10, 80)
            if self.rng.random() < 0.03:
                used = self.left[side] * self.rng.uniform(0.5, 1.5)
        used = round(used * (2 if behind else 1))
        if used >= self.left[side]:
            if self.can_flag:
                return None
            used = self.left[side] // 2
        self.left[side] += self.inc - used
        return self.left[side]


def clk(centiseconds: int) -> str:
    s = centiseconds // 100
    return f"[%clk {s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}]"
