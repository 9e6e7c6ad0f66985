"""The command-line plumbing every stage CLI shares, and the `chesscore` command.

    settings, args = stage_settings(argv, "convert", Settings, __doc__)   # params.yaml + flags, checked
    hold_output(settings.out, "convert")                 # one writer per output folder
    run_stage("convert", main)                           # faults first, then exit codes by kind

Modules: `params` (params.yaml sections and the flags generated from a settings dataclass),
`runner` (a stage's last line: failure kinds to exit codes), `outlock` (the lock on a stage's
output folder, and the sweep of what a killed run left there), `faults` (CHESSCORE_FAULT: failures
on purpose, for tests and rehearsals), `commands` (the `chesscore` command: lineage, uci,
samplegen).
"""

from chesscore.cli.params import stage_settings, worker_count
from chesscore.cli.runner import run_stage

__all__ = ["run_stage", "stage_settings", "worker_count"]
