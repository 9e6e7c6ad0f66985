"""Fault injection for stages: make a stage fail on purpose, to test retries and crash safety.

Every stage calls `inject(<stage>)` first (through chesscore.cli.runner.run_stage). It does nothing
unless the environment variable CHESSCORE_FAULT names the stage:

    CHESSCORE_FAULT=train:kill dvc repro                  # SIGKILL at start (a retry may pass)
    CHESSCORE_FAULT=train:kill-after=2.5 dvc repro        # SIGKILL 2.5 s into the stage (mid-way)
    CHESSCORE_FAULT=arena:kill-at-write=2 dvc repro       # SIGKILL as its 2nd file is renamed into place
    CHESSCORE_FAULT=convert:exit=75 dvc repro             # exit with a code (75: temporary)
    CHESSCORE_FAULT=validate:bad-input dvc repro          # raise BadInput (not retryable)
    CHESSCORE_FAULT=evaluate:oom,arena:kill dvc repro     # several rules; "*" matches every stage

With CHESSCORE_FAULT_ONCE=<folder>, each stage's fault fires only once: the first firing
creates <folder>/<stage> (O_EXCL, so two processes cannot both fire), later calls see it and
run normally. That is how a test makes a stage fail once and then pass on retry.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from chesscore import fileio
from chesscore.failures import BadInput

ENV = "CHESSCORE_FAULT"
ONCE_ENV = "CHESSCORE_FAULT_ONCE"
ACTIONS = ("kill", "kill-after", "kill-at-write", "exit", "oom", "bad-input")


@dataclass(frozen=True)
class Fault:
    """One rule of CHESSCORE_FAULT: `stage:action[=argument]`."""

    stage: str  # a stage name, or "*" for every stage
    action: str  # one of ACTIONS
    argument: float | None = None  # seconds for kill-after, the write's number for kill-at-write, the code for exit


def parse(spec: str) -> list[Fault]:
    """The rules of a CHESSCORE_FAULT value; a malformed rule is an error, never ignored."""
    rules = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        stage, sep, action = item.partition(":")
        action, has_arg, argument = action.partition("=")
        if not sep or not stage or action not in ACTIONS:
            raise ValueError(
                f"{ENV}: bad rule {item!r}; expected <stage>:<action>[=<value>] "
                f"with an action among {', '.join(ACTIONS)}"
            )
        needs_arg = action in ("kill-after", "kill-at-write", "exit")
        if needs_arg != bool(has_arg):
            raise ValueError(f"{ENV}: rule {item!r}: {action} {'needs' if needs_arg else 'takes no'} =<value>")
        try:
            value = float(argument) if has_arg else None
        except ValueError:
            raise ValueError(f"{ENV}: rule {item!r}: {argument!r} is not a number") from None
        if action == "kill-at-write" and (value is None or value < 1 or value != int(value)):
            raise ValueError(f"{ENV}: rule {item!r}: kill-at-write counts files from 1")
        rules.append(Fault(stage, action, value))
    return rules


def _claim_once(stage: str) -> bool:
    """True if this call may fire the fault (always, unless CHESSCORE_FAULT_ONCE is set)."""
    folder = os.environ.get(ONCE_ENV)
    if not folder:
        return True
    Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(Path(folder) / stage, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _kill_self() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_at_write(number: int) -> None:
    """SIGKILL as the process's `number`-th atomic write (chesscore.fileio.atomic_write) is about
    to rename its whole temporary file into place: the earlier files are done, this one is not."""
    written = 0

    def before_rename(path: Path) -> None:
        nonlocal written
        written += 1
        if written == number:
            print(f"killed before renaming {path} into place", file=sys.stderr)
            _kill_self()

    fileio.before_rename = before_rename


def inject(stage: str) -> None:
    """Fire the fault CHESSCORE_FAULT names for `stage`, if any (first matching rule)."""
    spec = os.environ.get(ENV, "")
    rule = next((r for r in parse(spec) if r.stage in (stage, "*")), None) if spec else None
    if rule is None or not _claim_once(stage):
        return
    print(
        f"{stage}: injected fault {rule.action}{'' if rule.argument is None else f'={rule.argument:g}'} ({ENV})",
        file=sys.stderr,
        flush=True,
    )
    if rule.action == "kill":
        _kill_self()
    elif rule.action == "kill-after":
        timer = threading.Timer(rule.argument, _kill_self)
        timer.daemon = True
        timer.start()
    elif rule.action == "kill-at-write":
        _kill_at_write(int(rule.argument))
    elif rule.action == "exit":
        sys.exit(int(rule.argument))
    elif rule.action == "oom":
        raise MemoryError(f"{stage}: out of memory (injected by {ENV})")
    elif rule.action == "bad-input":
        raise BadInput(f"{stage}: bad input (injected by {ENV})")
