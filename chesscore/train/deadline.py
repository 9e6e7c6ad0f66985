"""When training must stop: a time budget for this run, and a job deadline in absolute time.

A job deadline comes from a scheduler (a Slurm allocation, a Prefect run's time limit): an
absolute time, from params or the CHESS_JOB_DEADLINE environment variable, as an ISO-8601
time with a time zone (2026-11-30T18:00:00+00:00) or Unix seconds (1795968000). The soft
stop comes `margin` seconds earlier, leaving room to save a checkpoint.

    deadline = Deadline.parse(os.environ.get(DEADLINE_ENV) or params_deadline, margin=120)
    if deadline.soft_stop(): ...save and stop
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

DEADLINE_ENV = "CHESS_JOB_DEADLINE"


def parse_time(value: str | float | int) -> float:
    """Unix seconds of an ISO-8601 time with a zone, or of a number of Unix seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"deadline {value!r} is neither Unix seconds nor an ISO-8601 time") from None
    if moment.tzinfo is None:
        raise ValueError(f"deadline {value!r} has no time zone (add +00:00 or Z)")
    return moment.timestamp()


@dataclass
class Deadline:
    at: float | None  # Unix seconds; None: no deadline
    margin: float = 60.0  # seconds before `at` at which the soft stop begins
    clock: Callable[[], float] = field(default=time.time, repr=False)

    @classmethod
    def parse(cls, value: str | float | None, margin: float = 60.0) -> Deadline:
        return cls(None if value in (None, "") else parse_time(value), margin)

    def seconds_left(self) -> float:
        return float("inf") if self.at is None else self.at - self.margin - self.clock()

    def soft_stop(self) -> bool:
        return self.seconds_left() <= 0

    def validation_window_closed(self) -> bool:
        """After the soft stop, a validation of the weights it stops with may run until half
        the margin is left (the other half saves); SIGTERM (`at` = 0) leaves no window."""
        return self.at is not None and self.clock() >= self.at - self.margin / 2


@dataclass
class Budget:
    """A time budget for this run (not the whole job), counted from `start`."""

    max_seconds: float | None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    start: float = 0.0

    def __post_init__(self) -> None:
        self.start = self.clock()

    def spent(self) -> bool:
        return self.max_seconds is not None and self.clock() - self.start >= self.max_seconds
