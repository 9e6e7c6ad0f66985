"""Worker processes that end with the process that started them.

    ProcessPoolExecutor(n, mp_context=get_context("spawn"), initializer=die_with_parent, initargs=(os.getpid(),))

A pool's worker holds both ends of its own call-queue pipe, so when the parent is killed
(SIGKILL, the OOM killer) the worker never reads end-of-file: it waits forever, a torch
process of hundreds of MB per worker. On Linux the kernel can signal a process when its parent
dies (prctl PR_SET_PDEATHSIG); elsewhere the worker is left to the pool as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, *then) -> None:
    """In a worker: be SIGKILLed when `parent` ends (and exit now if it already has). Extra
    arguments are an initializer to run next and its arguments."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)
    if then:
        then[0](*then[1:])
