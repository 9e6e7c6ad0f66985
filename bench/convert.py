"""The whole validate+convert path against (a) a plain python-chess loop and (b) pgn-extract, per core.

    python bench/convert.py                        # ~50k games at 1x, ~190k at 4x; minutes on 2 cores
    python bench/convert.py --copies 3 --baseline-games 500      # a quick look

Input: bench/_inputs.py's games: the shared corpus's real Lichess games (999, with clocks) where
it lies beside the checkout, and the embedded sample (3,515 Stockfish games in the dump format,
3.5% broken), copied `copies` times (1x) and 4 x `copies`
times (4x); copy k drops the last k plies of every game and gives it a new Lichess id, so games
do not repeat. Written once under bench/out/ as .pgn.zst (what we read) and .pgn (what
pgn-extract and python-chess read; their decompression is not counted, ours is).

Measured, each in its own process, CPU time = user + sys of the process and its children:
  ours         python -m stages.validate then stages.convert (--workers 1), on 1x and 4x the input
  python-chess chess.pgn.read_game + replaying every move on a Board (on --baseline-games games)
  pgn-extract  pgn-extract -r (parse and check every move, report errors, write nothing), on 4x
  zstd -dc     decompressing the 4x .pgn.zst (what pgn-extract, which reads plain text, would add)
games/s per core = games / CPU seconds, whole processes (interpreter start and imports included).
The headline ratio reads the same .pgn file on both sides; a second compares the compressed dump
as users have it (ours on the .pgn.zst against zstd -dc + pgn-extract). "Marginal" is
(games 4x - games 1x) / (CPU 4x - CPU 1x), the rate once started. Peak RSS of ours at 1x and 4x
shows memory flat in input size (convert buffers at most one shard per split: shard_games is set
to 10000 here). A last run with --workers 2 shows wall-clock scaling.
Targets: ours >= 20x python-chess, >= 1x pgn-extract.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._inputs import describe, game_texts  # noqa: E402

OUT = ROOT / "bench" / "out" / "convert"
PGN_EXTRACT = shutil.which("pgn-extract") or "/usr/games/pgn-extract"
_TOKEN = re.compile(r"\{[^}]*\}|\S+")
_MOVE_NUMBER = re.compile(r"^\d+\.+$")
_RESULTS = {"1-0", "0-1", "1/2-1/2", "*"}


def truncated(game: str, drop: int, copy: int, number: int) -> str | None:
    """The game without its last `drop` plies and with a new id, or None if too short."""
    head, _, movetext = game.partition("\n\n")
    tokens = _TOKEN.findall(movetext)
    plies = [
        i for i, t in enumerate(tokens) if not t.startswith("{") and not _MOVE_NUMBER.match(t) and t not in _RESULTS
    ]
    if len(plies) <= drop + 2 or tokens[-1] not in _RESULTS:
        return None
    end = plies[len(plies) - drop] if drop else len(tokens) - 1
    while end > 0 and _MOVE_NUMBER.match(tokens[end - 1]):
        end -= 1
    head = re.sub(r'\[Site "https://lichess.org/\w+"\]', f'[Site "https://lichess.org/{copy:03d}{number:05d}"]', head)
    return f"{head}\n\n{' '.join(tokens[:end] + [tokens[-1]])}\n\n"


def build_input(copies: int) -> tuple[Path, Path, int]:
    """Copies 0..copies-1 of every base game, copy k without its last k plies."""
    pgn, zst = OUT / f"games-x{copies}.pgn", OUT / f"games-x{copies}.pgn.zst"
    count = OUT / f"games-x{copies}.count"
    if zst.is_file() and pgn.is_file() and count.is_file():
        return pgn, zst, int(count.read_text())
    OUT.mkdir(parents=True, exist_ok=True)
    games = game_texts()
    written = 0
    with (
        open(pgn, "w", encoding="utf-8") as plain,
        open(zst, "wb") as raw,
        zstandard.ZstdCompressor(level=3).stream_writer(raw) as packed,
    ):
        for copy in range(copies):
            kept = [t for n, g in enumerate(games) if (t := truncated(g, copy, copy, n))]
            written += len(kept)
            text = "".join(kept)
            plain.write(text)
            packed.write(text.encode())
    count.write_text(str(written))
    return pgn, zst, written


def measure(command: list[str]) -> dict:
    """Wall and CPU seconds (user + sys of the process and the children it waited for) and peak
    RSS (of the largest of them) of one command, from wait4."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{stderr[-3000:]}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "stdout": stdout,
        "stderr": stderr,
    }


def ours(raw: Path, name: str, workers: int) -> dict:
    """validate then convert as the stages run them; games from the validate report."""
    work = OUT / f"run-{name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "params.yaml").write_text("convert:\n  shard_games: 10000\n")
    common = ["--params", str(work / "params.yaml"), "--workers", str(workers), "--no-progress"]
    validate = measure(
        [sys.executable, "-m", "stages.validate", "--raw", str(raw), "--out", str(work / "validated"), *common]
    )
    convert = measure(
        [
            sys.executable,
            "-m",
            "stages.convert",
            "--validated",
            str(work / "validated"),
            "--out",
            str(work / "dataset"),
            *common,
        ]
    )
    report = json.loads((work / "validated" / "report.json").read_text())
    games = report["games_seen"]
    shutil.rmtree(work)
    return {
        "games": games,
        "accepted": report["accepted"],
        "cpu": validate["cpu"] + convert["cpu"],
        "wall": validate["wall"] + convert["wall"],
        "rss_validate": validate["rss_mb"],
        "rss_convert": convert["rss_mb"],
    }


PYTHON_CHESS_LOOP = """
import sys, chess.pgn
limit, n = int(sys.argv[2]), 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    while n < limit and (game := chess.pgn.read_game(f)) is not None:
        board = game.board()
        for move in game.mainline_moves():
            board.push(move)
        n += 1
print(n)
"""


def python_chess(pgn: Path, games: int) -> dict:
    run = measure([sys.executable, "-c", PYTHON_CHESS_LOOP, str(pgn), str(games)])
    return {"games": int(run["stdout"].split()[-1]), "cpu": run["cpu"], "wall": run["wall"], "rss": run["rss_mb"]}


def pgn_extract(pgn: Path, games: int) -> dict:
    """-r -s reports errors only; its progress lines ("Games: N" per thousand) confirm it read them
    all (it splits a few broken games differently, so its count may differ a little from ours)."""
    run = measure([PGN_EXTRACT, "-r", "-s", str(pgn)])
    counted = [int(n) for n in re.findall(r"Games: (\d+)", run["stderr"])]
    if games >= 1000 and not (counted and abs(counted[-1] - games) <= max(1000, games // 50)):
        raise SystemExit(f"pgn-extract read about {counted[-1:] or 0} of {games} games:\n{run['stderr'][-2000:]}")
    return {"games": games, "cpu": run["cpu"], "wall": run["wall"], "rss": run["rss_mb"]}


def zstd_decompress(zst: Path) -> dict:
    run = measure(["zstd", "-dc", str(zst), "-o", os.devnull, "-f", "-q"])
    return {"cpu": run["cpu"], "wall": run["wall"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=12, help="copies of the ~4,500 base games in 1x")
    parser.add_argument("--baseline-games", type=int, default=2000, help="games for the python-chess loop")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of ours and pgn-extract at 4x")
    args = parser.parse_args(argv)
    if not Path(PGN_EXTRACT).exists():
        print(f"bench/convert: pgn-extract not found ({PGN_EXTRACT}); install it (apt-get install pgn-extract)")
        return 1
    pgn1, zst1, n1 = build_input(args.copies)
    pgn4, zst4, n4 = build_input(4 * args.copies)
    print(
        f"input: {describe()}\n"
        f"1x {n1:,} games ({zst1.stat().st_size / 1e6:.1f} MB .zst, {pgn1.stat().st_size / 1e6:.1f} MB .pgn), "
        f"4x {n4:,} games; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    # The machine's speed drifts (shared cores): alternate the two main contenders and keep each
    # one's best round.
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for name, measure_once in (
            ("extract", lambda: pgn_extract(pgn4, n4)),
            ("four", lambda: ours(pgn4, "4x", workers=1)),
            ("four_zst", lambda: ours(zst4, "4x-zst", workers=1)),
            ("unzstd", lambda: zstd_decompress(zst4)),
        ):
            run = measure_once()
            best[name] = min(filter(None, [best.get(name), run]), key=lambda r: r["cpu"])
    extract, four, four_zst, unzstd = best["extract"], best["four"], best["four_zst"], best["unzstd"]
    chess_loop = python_chess(pgn4, args.baseline_games)
    one = ours(pgn1, "1x", workers=1)
    two_workers = ours(pgn4, "4x-w2", workers=2)
    rate = {
        "ours": four["games"] / four["cpu"],
        "python-chess loop": chess_loop["games"] / chess_loop["cpu"],
        "pgn-extract -r": extract["games"] / extract["cpu"],
    }
    extract_zst = {**extract, "cpu": extract["cpu"] + unzstd["cpu"], "wall": extract["wall"] + unzstd["wall"]}
    print(f"{'':<30}{'games':>10}{'CPU s':>9}{'wall s':>9}{'games/s/core':>14}{'peak RSS MB':>13}")
    rows = [
        ("ours 1x .pgn", one, max(one["rss_validate"], one["rss_convert"])),
        ("ours 4x .pgn", four, max(four["rss_validate"], four["rss_convert"])),
        ("ours 4x .pgn, 2 workers", two_workers, max(two_workers["rss_validate"], two_workers["rss_convert"])),
        ("ours 4x .pgn.zst", four_zst, max(four_zst["rss_validate"], four_zst["rss_convert"])),
        ("python-chess loop .pgn", chess_loop, chess_loop["rss"]),
        ("pgn-extract -r 4x .pgn", extract, extract["rss"]),
        ("zstd -dc + pgn-extract -r", extract_zst, extract["rss"]),
    ]
    for name, run, rss in rows:
        print(
            f"{name:<30}{run['games']:>10,}{run['cpu']:>9.2f}{run['wall']:>9.2f}"
            f"{run['games'] / run['cpu']:>14,.0f}{rss:>13.0f}"
        )
    vs_chess, vs_extract = rate["ours"] / rate["python-chess loop"], rate["ours"] / rate["pgn-extract -r"]
    vs_extract_zst = extract_zst["cpu"] / four_zst["cpu"]
    marginal = (four["games"] - one["games"]) / (four["cpu"] - one["cpu"])
    print(
        f"ours, marginal 1x -> 4x: {marginal:,.0f} games/s per core "
        f"({marginal / rate['pgn-extract -r']:.2f}x pgn-extract)"
    )
    print(f"ours / python-chess loop = {vs_chess:.1f}x per core (target >= 20x)")
    print(f"ours / pgn-extract -r    = {vs_extract:.2f}x per core, same .pgn file (target >= 1x)")
    print(f"ours / zstd -dc + pgn-extract -r = {vs_extract_zst:.2f}x per core, from the .pgn.zst")
    print(
        f"peak RSS 4x / 1x: validate {four['rss_validate'] / one['rss_validate']:.2f}, "
        f"convert {four['rss_convert'] / one['rss_convert']:.2f} (flat: about 1)"
    )
    print(
        f"2 workers: {two_workers['games'] / two_workers['wall']:,.0f} games/s wall vs "
        f"{four['games'] / four['wall']:,.0f} with 1"
    )
    return 0 if vs_chess >= 20 and vs_extract >= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
