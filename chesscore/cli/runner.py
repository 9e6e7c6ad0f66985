"""The last line of every stage CLI: run its main under the failure convention.

    if __name__ == "__main__":
        run_stage("train", main)

First the fault hook (chesscore.cli.faults) fires if CHESSCORE_FAULT names the stage; then
main runs, and an expected failure (chesscore.failures) becomes its exit code and one marker
line on stderr; anything else keeps its traceback (exit 1: a bug).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from chesscore.cli import faults
from chesscore.failures import MARKER, classify


def run_stage(stage: str, main: Callable[[], int | None]) -> NoReturn:
    """Run a stage's main under the convention: inject faults, map errors to exit codes."""
    try:
        faults.inject(stage)
        code = main()
    except KeyboardInterrupt:
        raise
    except Exception as error:  # noqa: BLE001 - classified, otherwise re-raised with its traceback
        failure = classify(error)
        if failure is None:
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"{stage}: error: {message}", file=sys.stderr)
        print(f"{MARKER} {failure.kind}: {message}", file=sys.stderr, flush=True)
        sys.exit(failure.exit_code)
    sys.exit(code or 0)
