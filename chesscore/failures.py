"""How a stage tells whoever runs it (DVC, the Prefect flow, a person) why it failed.

Every stage CLI ends with one line, so its errors map onto the exit codes below and its fault
hook (chesscore.faults) runs first:

    if __name__ == "__main__":
        failures.run("train", main)

The convention (exit codes from BSD sysexits.h, so they mean the same to other tools):

    exit  kind        retry?  raised as (or mapped from)
    0     -           -       main returned normally
    65    bad_input   no      BadInput; IntegrityError, InputError, ... (a retry reads the same input)
    78    refused     no      Refused; ResumeRefused, DatasetMismatch, ... (identity or set-up refused)
    75    temporary   yes     Temporary; MemoryError, torch.OutOfMemoryError (may pass next time)
    -N / 128+N  killed yes    the process died of signal N (SIGKILL from the OOM killer or a person)
    1     bug         no      any other exception: the traceback is printed; a retry hits it again
    2     usage       no      argparse rejected the command line

Before exiting with 65, 78 or 75 the stage prints one marker line on stderr, which the flow
quotes as the stage's message:

    chesscore-failure: bad_input: data/raw/x.pgn.zst: truncated zstd frame at byte 1048576

Stage code raises BadInput / Refused / Temporary (or subclasses them) for expected failures,
or an error listed in KNOWN_ERRORS below; there is no need to catch anything in a stage's main.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from chesscore import faults

BAD_INPUT = 65  # EX_DATAERR
TEMPORARY = 75  # EX_TEMPFAIL
REFUSED = 78  # EX_CONFIG
MARKER = "chesscore-failure:"


class StageFailure(Exception):
    """An expected failure with a message meant for the person running the stage."""

    kind = "error"
    exit_code = 1
    retryable = False


class BadInput(StageFailure):
    """The input is wrong (corrupt file, integrity error): retrying reads the same input."""

    kind, exit_code = "bad_input", BAD_INPUT


class Refused(StageFailure):
    """The stage refuses to run as asked (a checkpoint identity that differs, params that
    contradict each other): retrying is refused again."""

    kind, exit_code = "refused", REFUSED


class Temporary(StageFailure):
    """A failure that may pass on another attempt (out of memory, a busy resource)."""

    kind, exit_code, retryable = "temporary", TEMPORARY, True


# Errors of other chesscore modules, by (module, class name) -> the failure they mean. Looked up
# in sys.modules so this module imports neither torch nor pyarrow: an error can only be an
# instance of a class whose module is already imported.
KNOWN_ERRORS: tuple[tuple[str, str, type[StageFailure]], ...] = (
    ("chesscore.dataset", "IntegrityError", BadInput),  # a shard or manifest differs from its hash
    ("chesscore.pgn_input", "InputError", BadInput),  # an unreadable dump (names file and offset)
    ("chesscore.convert", "LeakageError", BadInput),  # one move sequence in two splits
    ("chesscore.checkpoint", "CheckpointError", Refused),  # missing or not our checkpoint format
    ("chesscore.train_state", "ResumeRefused", Refused),  # the checkpoint's identity differs
    ("chesscore.evaluate", "DatasetMismatch", Refused),  # checkpoint trained on another dataset
    ("chesscore.engine", "StockfishMissing", Refused),  # an install is needed, not a retry
    ("chesscore.selfplay_parallel", "WorkerDied", Temporary),  # most often the OOM killer
    ("torch", "OutOfMemoryError", Temporary),
)


def classify(error: BaseException) -> type[StageFailure] | None:
    """The failure kind an exception stands for, or None for an unexpected one (a bug)."""
    if isinstance(error, StageFailure):
        return type(error)
    if isinstance(error, MemoryError):
        return Temporary
    for module_name, class_name, failure in KNOWN_ERRORS:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type) and isinstance(error, cls):
            return failure
    return None


def is_retryable_exit(code: int) -> bool:
    """Whether a stage's exit status is worth another attempt (killed by a signal or temporary).

    Negative codes come from Python's subprocess (killed by signal -code); 129..159 is how a
    shell reports a command killed by signal code-128."""
    return code == TEMPORARY or code < 0 or 128 < code < 160


def run(stage: str, main: Callable[[], int | None]) -> NoReturn:
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
