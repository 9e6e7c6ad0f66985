"""Make the whole sample: plan the slots, play the games (in worker processes), break the
chosen ones, and write the .pgn.zst atomically. The output depends only on the seed, the
game count, Stockfish's version and the zstd level, never on the worker count."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.util import Finalize
from pathlib import Path

import chess.engine
import zstandard

from chesscore.fileio import atomic_write_bytes
from chesscore.runtime.children import die_with_parent
from chesscore.runtime.progress import progress_bar

from . import rejects
from .engine_game import GameRecord
from .games import GameSpec, make_game
from .people import speed_class
from .pgn import game_bytes

STOCKFISH_VERSION = "Stockfish 15.1"  # the version the committed sample was made with


@dataclass(frozen=True)
class SampleConfig:
    out: Path  # the .pgn.zst to write
    games: int = 3500  # generated games; duplicate copies come on top
    seed: int = 20240301
    workers: int = 2  # processes, each with its own Stockfish; does not change the output
    stockfish: str = shutil.which("stockfish") or "/usr/games/stockfish"  # Debian's games dir
    zstd_level: int = 19
    frame_games: int = 1000  # games per zstd frame (the file is several concatenated frames)
    hash_mb: int = 16


@dataclass
class Summary:
    """What was written: per-game facts in file order, for the one-screen summary and README."""

    path: Path
    sha256: str = ""
    pgn_sha256: str = ""
    bytes: int = 0
    seconds: float = 0.0
    engine: str = ""
    rows: list[dict] = field(default_factory=list)  # one per game in file order
    injected: list[dict] = field(default_factory=list)  # kind, index, site, note


_ENGINE: chess.engine.SimpleEngine | None = None


def _open_engine(path: str, hash_mb: int) -> chess.engine.SimpleEngine:
    engine = chess.engine.SimpleEngine.popen_uci(path)
    engine.configure({"Threads": 1, "Hash": hash_mb})
    return engine


def _worker_init(path: str, hash_mb: int) -> None:
    global _ENGINE
    _ENGINE = _open_engine(path, hash_mb)
    # Quit Stockfish when the worker exits; python-chess's engine thread would keep it alive.
    Finalize(_ENGINE, _ENGINE.quit, exitpriority=10)


def _worker_game(spec: GameSpec) -> GameRecord:
    assert _ENGINE is not None
    return make_game(spec, _ENGINE)


def _play_all(config: SampleConfig, specs: list[GameSpec]) -> list[GameRecord]:
    bar = progress_bar(total=len(specs), desc="games", unit="game", smoothing=0.05)
    out: list[GameRecord] = []
    if config.workers <= 1:
        engine = _open_engine(config.stockfish, config.hash_mb)
        try:
            for spec in specs:
                out.append(make_game(spec, engine))
                bar.update()
        finally:
            engine.quit()
    else:
        with ProcessPoolExecutor(
            config.workers,
            mp_context=get_context("spawn"),
            initializer=die_with_parent,
            initargs=(os.getpid(), _worker_init, config.stockfish, config.hash_mb),
        ) as pool:
            for record in pool.map(_worker_game, specs, chunksize=4):
                out.append(record)
                bar.update()
    bar.close()
    return out


def engine_version(path: str) -> str:
    engine = chess.engine.SimpleEngine.popen_uci(path)
    try:
        return engine.id.get("name", "?")
    finally:
        engine.quit()


def generate(config: SampleConfig) -> Summary:
    start = time.perf_counter()
    summary = Summary(config.out, engine=engine_version(config.stockfish))
    if summary.engine != STOCKFISH_VERSION:
        print(
            f"samplegen: warning: {config.stockfish} is {summary.engine!r}, the committed "
            f"sample was made with {STOCKFISH_VERSION!r}; the output will differ from it",
            file=sys.stderr,
        )
    kinds = rejects.slot_kinds(config.seed, config.games)
    records = _play_all(config, [GameSpec(config.seed, i, k) for i, k in enumerate(kinds)])
    injected = rejects.damage(records, config.seed)

    # File order: slot order, each copy right after the slot it was placed behind.
    order = [(r.index, 0, r) for r in records]
    order += [(inj.after_slot, 1 + n, inj.record) for n, inj in enumerate(injected) if inj.after_slot is not None]
    order.sort(key=lambda item: (item[0], item[1]))
    reject_of = {id(inj.record): inj for inj in injected}
    reject_of.update(
        {id(r): rejects.Injected(r.kind, r.index, _slot_note(r), r) for r in records if r.kind != "normal"}
    )

    index_of_slot = {slot: position for position, (slot, sub, _) in enumerate(order) if sub == 0}
    chunks: list[bytes] = []
    for position, (slot, _, record) in enumerate(order):
        data = game_bytes(record)
        inj = reject_of.get(id(record))
        kind, note = (inj.kind, inj.note) if inj else (None, "")
        if inj and inj.after_slot is not None:
            source = records[inj.slot]
            note = (
                f"{'copy' if kind == 'duplicate_site' else 'moves'} of the game at index "
                f"{index_of_slot[inj.slot]} ({dict(source.headers)['Site'][-8:]})"
            )
        if position == len(order) - 1:
            data = rejects.cut_mid_comment(data)
            kind, note = "truncated_eof", f"the file ends {len(data)} bytes into this game"
        chunks.append(data)
        tags = dict(record.headers)
        summary.rows.append(
            {
                "index": position,
                "slot": slot,
                "site": tags["Site"][-8:],
                "event": tags["Event"],
                "time_control": tags["TimeControl"],
                "result": tags["Result"],
                "termination": tags["Termination"],
                "ending": record.ending,
                "plies": len(record.sans),
                "white_elo": int(tags["WhiteElo"]),
                "black_elo": int(tags["BlackElo"]),
                "titles": [tags[t] for t in ("WhiteTitle", "BlackTitle") if t in tags],
                "analysed": any("%eval" in c for c in record.comments),
                "reject": kind,
            }
        )
        if kind:
            summary.injected.append({"kind": kind, "index": position, "site": tags["Site"][-8:], "note": note})
    sites = Counter(row["site"] for row in summary.rows if row["reject"] != "duplicate_site")
    if max(sites.values()) > 1:
        raise RuntimeError(f"Site id collision: {sites.most_common(1)}")

    _write_zst(config, chunks, summary)
    summary.seconds = time.perf_counter() - start
    return summary


def _slot_note(record: GameRecord) -> str:
    tags = dict(record.headers)
    if record.kind in ("setup", "from_position", "chess960"):
        return f"FEN {tags['FEN']}"
    if record.kind == "crazyhouse":
        return "first drop " + next(s for s in record.sans if "@" in s)
    if record.kind == "too_long":
        return f"{len(record.sans)} plies"
    return f"Result {tags['Result']}, Termination {tags['Termination']}"


def _write_zst(config: SampleConfig, chunks: list[bytes], summary: Summary) -> None:
    """Concatenated zstd frames of `frame_games` games each, single-threaded (reproducible)."""
    compressor = zstandard.ZstdCompressor(level=config.zstd_level, threads=0)
    frames = [
        compressor.compress(b"".join(chunks[i : i + config.frame_games]))
        for i in range(0, len(chunks), config.frame_games)
    ]
    data = b"".join(frames)
    atomic_write_bytes(config.out, data)
    summary.sha256 = hashlib.sha256(data).hexdigest()
    summary.pgn_sha256 = hashlib.sha256(b"".join(chunks)).hexdigest()
    summary.bytes = len(data)


def class_of(row: dict) -> str:
    return speed_class(row["time_control"])
