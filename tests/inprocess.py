"""Run a command's `python -m` entry point inside the test's own process.

    done = run_module("stages.evaluate", "--params", str(params), cwd=root)
    assert done.returncode == 65, done.stderr

It returns what subprocess.run(..., capture_output=True, text=True) would: the exit code (0, the
failure convention's 65/75/78, 1 with the traceback on stderr for a bug), stdout and stderr. For
tests about what a stage writes and how it fails; tests about the process itself (kills,
signals, memory limits, fault injection, DVC, torchrun) keep a real one. Each interpreter a test
starts imports torch again, about 4 CPU seconds on a CI core: over 100 launches, that was a
third of the suite's time.

What a stage changes in the process is put back afterwards: sys.argv, the working folder, the
environment, torch's thread count, signal handlers, the root logger's handlers and the output
locks it took (chesscore.cli.outlock holds them until the process ends).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from chesscore.cli import outlock

ROOT = Path(__file__).resolve().parents[1]
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def _process_state(module: str, args: list[str], cwd: Path, env: Mapping[str, str] | None) -> Iterator[None]:
    saved_argv, saved_env = sys.argv, dict(os.environ)
    saved_threads = torch.get_num_threads()
    saved_signals = {number: signal.getsignal(number) for number in _SIGNALS}
    saved_handlers = logging.getLogger().handlers[:]
    held = set(outlock._HELD)
    sys.argv = [module, *args]
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        with contextlib.chdir(cwd):
            yield
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        torch.set_num_threads(saved_threads)
        for number, handler in saved_signals.items():
            signal.signal(number, handler)
        logging.getLogger().handlers[:] = saved_handlers
        for out in set(outlock._HELD) - held:
            outlock.release_output(out)


def run_module(
    module: str, *args: object, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m module args...` run here; env, when given, replaces the whole environment."""
    argv = [str(arg) for arg in args]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with (
        _process_state(module, argv, cwd or ROOT, env),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            with warnings.catch_warnings():
                # a package that imports the module itself (flows.pipeline): runpy runs it again
                warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
                runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit_:
            if isinstance(exit_.code, str):  # sys.exit("message"): printed, exit 1, as Python does
                print(exit_.code, file=sys.stderr)
                code = 1
            else:
                code = exit_.code or 0
        except Exception:  # noqa: BLE001 - an uncaught error is the process's exit 1 and traceback
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess([sys.executable, "-m", module, *argv], code, out.getvalue(), err.getvalue())
