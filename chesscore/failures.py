"""How a stage tells whoever runs it (DVC, the Prefect flow, a person) why it failed.

Library code raises one of three kinds (or a subclass of one: `IntegrityError(BadInput)`,
`ResumeRefused(Refused)`, ...); every stage CLI ends with one line that maps them onto exit
codes (chesscore.cli.runner):

    if __name__ == "__main__":
        run_stage("train", main)

The convention (exit codes from BSD sysexits.h, so they mean the same to other tools):

    exit  kind        retry?  raised as
    0     -           -       main returned normally
    65    bad_input   no      BadInput and its subclasses (a retry reads the same input)
    78    refused     no      Refused and its subclasses (identity, set-up or params refused)
    75    temporary   yes     Temporary; MemoryError, torch.OutOfMemoryError, a full disk or quota
                              (OSError ENOSPC, EDQUOT, EFBIG, ENOMEM): may pass next time
    -N / 128+N  killed yes    the process died of signal N (SIGKILL from the OOM killer or a person)
    1     bug         no      any other exception: the traceback is printed; a retry hits it again
    2     usage       no      argparse rejected the command line

Before exiting with 65, 78 or 75 the stage prints one marker line on stderr, which the flow
quotes as the stage's message:

    chesscore-failure: bad_input: data/raw/x.pgn.zst: truncated zstd frame at byte 1048576
"""

from __future__ import annotations

import errno
import sys

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


KINDS: tuple[type[StageFailure], ...] = (BadInput, Refused, Temporary)


def classify(error: BaseException) -> type[StageFailure] | None:
    """The failure kind an exception stands for, or None for an unexpected one (a bug).

    Out-of-memory is temporary, whether Python's MemoryError or torch's (looked up in
    sys.modules, so this module never imports torch: an error can only be an instance of a
    class whose module is already imported)."""
    kind = next((kind for kind in KINDS if isinstance(error, kind)), None)
    if kind is not None:
        return kind
    if isinstance(error, StageFailure):
        return StageFailure
    if isinstance(error, MemoryError) or exhausted(error):
        return Temporary
    torch_oom = getattr(sys.modules.get("torch"), "OutOfMemoryError", None)
    if isinstance(torch_oom, type) and isinstance(error, torch_oom):
        return Temporary
    return None


# The disk (or a quota, or a file size limit) is full, or the kernel is out of memory: the
# same run may pass once space is freed, so these are temporary, not bugs.
EXHAUSTED = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENOMEM}


def exhausted(error: BaseException) -> bool:
    """Whether an error is the system running out of a resource (disk, quota, memory)."""
    return isinstance(error, OSError) and error.errno in EXHAUSTED


def is_retryable_exit(code: int) -> bool:
    """Whether a stage's exit status is worth another attempt (killed by a signal or temporary).

    Negative codes come from Python's subprocess (killed by signal -code); 129..159 is how a
    shell reports a command killed by signal code-128."""
    return code == TEMPORARY or code < 0 or 128 < code < 160
