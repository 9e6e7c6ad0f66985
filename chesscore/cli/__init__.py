"""The command-line plumbing every stage CLI shares, and the `chesscore` command.

    path, values = params_section(argv, "convert")      # params.yaml's convert: section
    hold_output(args.out, "convert")                     # one writer per output folder
    run_stage("convert", main)                           # faults first, then exit codes by kind

Modules: `params` (params.yaml sections -> config dataclasses), `runner` (a stage's last line:
failure kinds to exit codes), `outlock` (the lock on a stage's output folder, and the sweep of
what a killed run left there), `faults` (CHESSCORE_FAULT: failures on purpose, for tests and
rehearsals), `progress` (progress bars), `commands` (the `chesscore` command: lineage, uci,
samplegen).
"""

from chesscore.cli.params import config_from, params_section, worker_count
from chesscore.cli.runner import run_stage

__all__ = ["config_from", "params_section", "run_stage", "worker_count"]
