"""Self-play games out: a PGN file and a dataset (Arrow shards + manifest) that train reads.

    write_games(Path("data/selfplay"), games, run_id="3f2a...", params={...})
        data/selfplay/games.pgn
        data/selfplay/dataset/manifest.json, dataset/shards/<split>-<sha256>.arrow

The PGN is the dataset's raw input: each row's source_sha256 / source_index / source_offset
point at its game in games.pgn, and the manifest's `inputs` account for every game (seen =
accepted, nothing rejected), as for a converted Lichess dump. The PGN also goes back through
validate and convert unchanged. Rows follow chesscore.data.shards.SCHEMA; the split is convert's
keyed hash (chesscore.data.splits.assign_splits) of the game's move sequence, so identical games
(short self-play games do repeat) never straddle two splits. Nothing here reads a clock: equal
games give byte-identical files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import chess
import chess.pgn
import pyarrow as pa

from chesscore.data.shards import MANIFEST, SCHEMA, SPLITS, build_manifest, write_shard
from chesscore.data.splits import SplitRule, assign_splits
from chesscore.fileio import atomic_write_bytes, atomic_write_json, replace_dir, sha256_bytes, staging_dir
from chesscore.play.adjudication import pgn_tags
from chesscore.selfplay.games import MODEL, GameRecord
from chesscore.tokens import encode_game

PGN = "games.pgn"
DATASET = "dataset"
EVENT = "chesscore self-play"


@dataclass(frozen=True)
class PlayedGame:
    """A record with where it was played: the RL iteration and the players' names."""

    record: GameRecord
    iteration: int
    model_name: str  # e.g. "rl-iteration-2"
    opponent_name: str  # e.g. "self" or the opponent checkpoint's file name

    def name(self, side: str) -> str:
        return self.model_name if side == MODEL else self.opponent_name

    def game_id(self, run_id: str) -> str:
        r = self.record
        return f"selfplay:{run_id[:12]}:{self.iteration}:{r.seed}:{r.index}"


def pgn_game(game: PlayedGame, run_id: str, rating: int | None = None) -> str:
    """One game as PGN text. Termination is "normal" for a rule ending and "adjudication" for
    the judge's verdicts and the ply cap (PGN's words), with AdjudicationRule and JudgeScore;
    the precise ending is in the Ending tag. `rating`: the rating both sides were told (a
    conditioned run), as WhiteElo and BlackElo."""
    r = game.record
    board = chess.Board()
    for uci in r.moves:
        board.push_uci(uci)
    pgn = chess.pgn.Game.from_board(board)
    pgn.headers.update(
        {
            "Event": EVENT,
            "Site": "chesscore",
            "Date": "????.??.??",
            "Round": str(game.iteration),
            "White": game.name(r.white),
            "Black": game.name(r.black),
            "Result": r.result,
            **({} if rating is None else {"WhiteElo": str(rating), "BlackElo": str(rating)}),
            **pgn_tags(r.termination, r.judge_score),
            "Ending": r.termination,
            "PlyCount": str(r.plies),
            "GameId": game.game_id(run_id),
            "IllegalAttemptsWhite": str(r.illegal_white),
            "IllegalAttemptsBlack": str(r.illegal_black),
        }
    )
    return str(pgn) + "\n\n"


def _row(game: PlayedGame, run_id: str, pgn_sha: str, index: int, offset: int, rating: int | None) -> dict[str, Any]:
    r = game.record
    return {
        # a conditioned run's told ratings: a reader's prefix (chesscore.conditioning) is the one played with
        "white_elo": rating,
        "black_elo": rating,
        "tokens": encode_game(r.moves),
        "game_id": game.game_id(run_id),
        "source_sha256": pgn_sha,
        "source_index": index,
        "source_offset": offset,
        "event": f"{EVENT}, iteration {game.iteration}",
        "white": game.name(r.white),
        "black": game.name(r.black),
        "result": r.result,
        "termination": r.termination,
        "time_control": "-",
        "time_control_class": "unknown",
        "plies": r.plies,
    }


def write_games(
    out: Path,
    games: Sequence[PlayedGame],
    run_id: str,
    params: dict[str, Any],
    shard_rows: int = 100_000,
    splits: SplitRule | None = None,
    rating: int | None = None,
) -> dict[str, Any]:
    """Write out/games.pgn and out/dataset/ (swapped in whole); return the manifest. `rating`:
    what both sides were told in a conditioned run (the rows' white_elo and black_elo, and the
    PGN's WhiteElo and BlackElo), so the dataset's conditioning prefix is the one the games were
    played with; None (unknown) leaves them out."""
    splits = splits or SplitRule()
    out = Path(out)
    texts = [pgn_game(game, run_id, rating).encode("utf-8") for game in games]
    data = b"".join(texts)
    atomic_write_bytes(out / PGN, data)
    pgn_sha = sha256_bytes(data)
    offsets = list(accumulate((len(text) for text in texts[:-1]), initial=0))
    rows = [_row(game, run_id, pgn_sha, i, offset, rating) for i, (game, offset) in enumerate(zip(games, offsets))]
    move_ids = ["moves:" + hashlib.sha256(" ".join(g.record.moves).encode()).hexdigest()[:16] for g in games]
    split_of = assign_splits(move_ids, splits) if games else []
    inputs = [
        {
            "path": PGN,
            "sha256": pgn_sha,
            "bytes": len(data),
            "games_seen": len(games),
            "accepted": len(games),
            "rejected": {},
        }
    ]
    recorded = {
        "selfplay": params,
        "splits": {
            "train": splits.train,
            "validation": splits.validation,
            "test": splits.test,
            "split_key": splits.split_key,
            "split_by": "moves",
        },
    }
    with staging_dir(out / DATASET) as tmp:
        entries = []
        for number, split in enumerate(SPLITS):
            mine = [row for row, s in zip(rows, split_of) if s == number]
            for start in range(0, len(mine), shard_rows):
                table = pa.Table.from_pylist(mine[start : start + shard_rows], schema=SCHEMA)
                entries.append(write_shard(table, tmp, split))
        manifest = build_manifest(recorded, inputs, entries, leakage={"cross_split_identical_moves": 0})
        atomic_write_json(tmp / MANIFEST, manifest)
        replace_dir(tmp, out / DATASET)
    return manifest
