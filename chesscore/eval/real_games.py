"""The real Lichess games (data/real: 999 games of the 2021-10 dump, CC0), read and split in two
halves, and a half written out as PGN for training on human games.

    python -m chesscore.eval.real_games                     # how many games each half holds
    python -m chesscore.eval.real_games --half validation --out runs/human/raw/real-validation.pgn

Each game is put in one half by a keyed hash of its Lichess id, so a game's half never depends
on which other games a file holds: `validation`, for choosing settings and checkpoints (and
the only half a model may train on), and `evaluation`, which nothing is trained or tuned on; the
evaluate stage measures the evaluation half (chesscore.eval.human). Games that are not standard
chess from the start position, have no moves, or have a BOT player are skipped and counted by
reason, the same in both uses. A written half holds each of its games' text as the source file
holds it (tags, comments, clocks), in file order, for the validate stage to read with the rest
of a raw folder (docs/evaluation.md: "Human games in training").
"""

from __future__ import annotations

import argparse
import io
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chess
import chess.pgn
import numpy as np

from chesscore import failures
from chesscore.fileio import atomic_write, sha256_bytes, sha256_file
from chesscore.pgn import inputs as pgn_input
from chesscore.pgn import meta as pgn_meta
from chesscore.pgn.split import split_games
from chesscore.tokens import encode_game

HALVES = ("validation", "evaluation")


@dataclass(frozen=True)
class RealGame:
    game_id: str
    tokens: np.ndarray  # triples-v1: BOS, a triple per move, EOS
    moves: tuple[chess.Move, ...]  # the same moves, for the engine and the legal-move counts
    meta: dict[str, Any]  # white_elo, black_elo, time_control_class, plies (as a dataset's rows)


def half_of(game_id: str) -> str:
    """The half a real game belongs to, fixed by its id alone."""
    return HALVES[int(sha256_bytes(f"real-games-half:{game_id}".encode())[:8], 16) % 2]


def real_game_files(path: str | os.PathLike) -> list[dict[str, str]]:
    """Path and sha256 of every PGN file at `path` (a file or a folder), in read order."""
    files = pgn_input.find_inputs([path])
    if not files:
        raise failures.BadInput(f"{path}: no PGN file (.pgn, .pgn.zst, .pgn.gz, .pgn.bz2) there")
    return [{"path": str(f), "sha256": sha256_file(f)} for f in files]


def read_real_games(path: str | os.PathLike) -> tuple[list[RealGame], dict[str, Any]]:
    """Every usable game of the PGN files at `path` (a file or a folder, any compression the
    validate stage reads), in file order, and what was read and skipped (by reason)."""
    files = real_game_files(path)
    games, skipped, read = [], Counter(), 0
    for _, reason, real in _each_game(files):
        read += 1
        if reason:
            skipped[reason] += 1
        else:
            games.append(real)
    source = {
        "files": files,
        "games_read": read,
        "games_kept": len(games),
        "skipped": dict(sorted(skipped.items())),
    }
    return games, source


def _each_game(files: Sequence[dict[str, str]]) -> Iterator[tuple[bytes, str | None, RealGame | None]]:
    """Each game's text as its file holds it, with why it is skipped or what it is."""
    for file in files:
        for raw in split_games(pgn_input.read_blocks(Path(file["path"]))):
            if raw.problem:
                yield raw.data, raw.problem, None
                continue
            game = chess.pgn.read_game(io.StringIO(raw.data.decode("utf-8", errors="replace")))
            if game is None:
                yield raw.data, "unparsable", None
                continue
            reason, real = _real_game(game)
            yield raw.data, reason, real


def _real_game(game: chess.pgn.Game) -> tuple[str | None, RealGame | None]:
    headers = dict(game.headers)
    if game.errors:
        return "unparsable", None
    if "FEN" in headers or headers.get("Variant", "Standard") not in ("Standard", "standard"):
        return "not_standard", None
    if pgn_meta.is_bot(headers):
        return "bot", None
    game_id = pgn_meta.lichess_id(headers)
    if game_id is None:
        return "no_id", None
    moves = list(game.mainline_moves())
    if not moves:
        return "no_moves", None
    meta = {
        "game_id": game_id,
        "white_elo": pgn_meta.rating(headers.get("WhiteElo")),
        "black_elo": pgn_meta.rating(headers.get("BlackElo")),
        "time_control_class": pgn_meta.time_control_class(headers.get("TimeControl")),
        "plies": len(moves),
    }
    return None, RealGame(game_id, np.array(encode_game(moves), dtype=np.uint8), tuple(moves), meta)


def choose(games: Sequence[RealGame], half: str, n: int | None, seed: int = 0) -> list[RealGame]:
    """The half's n games of smallest sha256(seed:id) (all when n is None), in that order."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    mine = [g for g in games if half_of(g.game_id) == half]
    mine.sort(key=lambda g: sha256_bytes(f"{seed}:{g.game_id}".encode()))
    return mine if n is None else mine[:n]


def write_half(path: str | os.PathLike, half: str, out: str | os.PathLike) -> dict[str, Any]:
    """Write the usable games of `half` (those `choose` picks from) to the PGN file `out`, each
    game's text as its source holds it, in file order; return what was written and left out."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    out = Path(out)
    if out.suffix != ".pgn":
        raise failures.BadInput(f"{out}: a written half is plain PGN; name it *.pgn")
    files = real_game_files(path)
    if any(Path(f["path"]).resolve() == out.resolve() for f in files):
        raise failures.BadInput(f"{out}: is one of the files it would be written from")
    counts: Counter[str] = Counter()

    def write(f: Any) -> None:
        for text, reason, real in _each_game(files):
            if real is None:  # skipped, for `reason`
                counts[f"skipped:{reason}"] += 1
            elif half_of(real.game_id) != half:
                counts["other_half"] += 1
            else:
                # A file's last game may end without a blank line; the next one needs it.
                f.write(text if text.endswith(b"\n\n") else text.rstrip(b"\r\n") + b"\n\n")
                counts["written"] += 1

    atomic_write(out, write)
    return {"half": half, "out": str(out), "sources": files, **dict(sorted(counts.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real-games", type=Path, default=Path("data/real"), help="a PGN file or folder of real games")
    parser.add_argument("--half", choices=HALVES, help="the half to write (with --out)")
    parser.add_argument("--out", type=Path, help="write the half's games to this .pgn file")
    args = parser.parse_args(argv)
    if (args.half is None) != (args.out is None):
        parser.error("--half and --out go together: --half validation --out FILE.pgn")
    try:
        if args.out is None:
            games, source = read_real_games(args.real_games)
            halves = Counter(half_of(g.game_id) for g in games)
            skipped = ", ".join(f"{k} {v}" for k, v in source["skipped"].items()) or "none"
            print(f"{args.real_games}: {source['games_read']} games read, {len(games)} usable (skipped: {skipped})")
            print("  " + ", ".join(f"{h} half {halves[h]}" for h in HALVES))
            return 0
        written = write_half(args.real_games, args.half, args.out)
    except (failures.BadInput, OSError) as error:  # a file's problem, named: no traceback
        raise SystemExit(f"error: {error}") from None
    left = ", ".join(f"{k} {v}" for k, v in written.items() if k.startswith(("skipped:", "other_half")))
    print(f"wrote {written.get('written', 0)} games of the {args.half} half to {args.out} (left out: {left})")
    if args.half == "evaluation":
        print("note: the evaluate stage measures the evaluation half; a model trained on it has no honest human figure")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
