"""python -m chesscore.samplegen --out data/raw/lichess_sample.pgn.zst [--games N --seed S]"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from . import report
from .generate import SampleConfig, generate


def main(argv: list[str] | None = None) -> int:
    defaults = SampleConfig(out=Path("data/raw/lichess_sample.pgn.zst"))
    parser = argparse.ArgumentParser(
        prog="python -m chesscore.samplegen",
        description="Generate the seeded Lichess-format sample (.pgn.zst) with Stockfish, "
        "a few percent of it deliberately broken for the validator.",
    )
    add = parser.add_argument
    add("--out", type=Path, default=defaults.out, help="output .pgn.zst (default: %(default)s)")
    add(
        "--games",
        type=int,
        default=defaults.games,
        help="games to generate; duplicate copies come on top (default: %(default)s)",
    )
    add("--seed", type=int, default=defaults.seed, help="seed (default: %(default)s)")
    add(
        "--workers",
        type=int,
        default=defaults.workers,
        help="processes; the output is the same for any count (default: %(default)s)",
    )
    add("--stockfish", default=defaults.stockfish, help="UCI engine path (default: %(default)s)")
    add("--zstd-level", type=int, default=defaults.zstd_level, help="(default: %(default)s)")
    add("--frame-games", type=int, default=defaults.frame_games, help="games per zstd frame (default: %(default)s)")
    add("--markdown", action="store_true", help="also print the README count tables and the list of rejects")
    add("--json", type=Path, help="also write per-game facts and the rejects as JSON here")
    args = parser.parse_args(argv)
    config = SampleConfig(
        out=args.out,
        games=args.games,
        seed=args.seed,
        workers=args.workers,
        stockfish=args.stockfish,
        zstd_level=args.zstd_level,
        frame_games=args.frame_games,
    )
    summary = generate(config)
    print(report.one_screen(summary))
    if args.markdown:
        print("\n" + report.markdown(summary) + "\n\n" + report.reject_list(summary))
    if args.json:
        data = {
            "config": {k: str(v) for k, v in asdict(config).items()},
            "sha256": summary.sha256,
            "pgn_sha256": summary.pgn_sha256,
            "games": summary.rows,
            "rejects": summary.injected,
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
