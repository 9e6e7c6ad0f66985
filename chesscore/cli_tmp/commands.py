"""The project's command line, `chesscore` (installed by pyproject's [project.scripts]).

    chesscore lineage audit data/train/best.pt [--json]    # = python -m chesscore.lineage audit ...
    chesscore uci --checkpoint data/train/best.pt          # = python -m chesscore.uci ...
    chesscore samplegen --out data/raw/lichess_sample.pgn.zst

Each subcommand is a module's own `main(argv)`, so `chesscore X --help` and `python -m
chesscore.X --help` say the same. The pipeline itself runs with `dvc repro` (or the Prefect flow,
`python -m flows.pipeline`).
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module with main(argv), one line of help)
COMMANDS = {
    "lineage": ("chesscore.lineage", "audit an artifact back to its raw inputs (OK / MISMATCH / MISSING)"),
    "uci": ("chesscore.uci", "play a checkpoint as a UCI engine (for chess GUIs)"),
    "samplegen": ("chesscore.samplegen.__main__", "regenerate the embedded Lichess-format sample"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return (
        "usage: chesscore COMMAND [ARGS ...]\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\n`chesscore COMMAND --help` for a command's options.\n"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        sys.stderr.write(f"chesscore: unknown command {command!r}\n\n{usage()}")
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
