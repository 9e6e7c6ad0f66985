"""A seeded mutation fuzzer for the validate and convert stages.

    python -m tests.hardening.fuzz --inputs 300 --seed 0 --save /tmp/findings   # a report on stdout

Inputs are windows of the embedded sample (data/raw/lichess_sample.pgn.zst), generated games
and small hand-made fixtures, mutated 1-4 times (byte flips, truncations, inserted braces,
parentheses, NULs, invalid UTF-8 and huge numbers, header edits, lost or doubled blank lines,
CRLF, BOMs, repeated games, games of megabytes of comments under and over the 8 MiB cap) and
written plain, .zst, .gz or .bz2 (some with the compressed bytes cut or flipped). Each goes
through the stages' own main() in this process, mapped to exit codes as their CLIs map them
(chesscore.failures.classify), and is checked: exit 0 or 65, no
traceback, games seen = accepted + rejected for the file, no `internal_error` reject, convert
exit 0 on what validate wrote (or 65 for a split left without a game), and CPU time within a
factor of what unmutated inputs cost per byte and per game (calibrated on unmutated inputs
first). The report gives the process's peak RSS (VmHWM) over all inputs. Same seed, same inputs.
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import gzip
import io
import json
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import zstandard

from chesscore import failures
from chesscore.cli import outlock
from chesscore.pgn.split import MAX_GAME_BYTES
from tests.hardening.pgnfiles import SAMPLE, random_games

FACTOR = 10  # a mutated input may cost this many times an unmutated one per byte
OVERHEAD_FACTOR = 3  # and this many times the fixed cost of a tiny one

FIXTURES = [
    b"",
    b"\n\n\n",
    b'[Event "only tags"]\n[Result "1-0"]\n',
    b"1. e4 e5 2. Nf3 Nc6 1-0\n",
    b'[Event "a"]\r\n[Result "*"]\r\n\r\n1. e4 (1. d4 d5) e5 $1 {comment} 2. Nf3?! *\r\n\r\n',
    b'\xef\xbb\xbf[Event "bom"]\n[Result "1/2-1/2"]\n\n1. e4 e5 1/2-1/2\n\n',
    b'[Event "x"]\n[FEN "8/8/8/8/8/8/8/K6k w - - 0 1"]\n[SetUp "1"]\n\n1. Ka2 *\n\n',
    b'[Event "x"]\n[Variant "Crazyhouse"]\n[Result "1-0"]\n\n1. e4 e5 2. P@f3 1-0\n\n',
    b'[Event "x"] [Result "0-1"] 1. f3 e5 2. g4 Qh4# 0-1\n',
    b'[Event "x"]\n[Result "1-0"]\n\n1. e4 e5 ; rest of line { not a comment\n2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n',
]


def sample_games() -> list[bytes]:
    text = zstandard.ZstdDecompressor().decompressobj().decompress(SAMPLE.read_bytes())
    starts = [0] + [i + 2 for i in range(len(text)) if text.startswith(b'\n\n[Event "', i)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


# -- mutations: (rng, data) -> data ---------------------------------------------------------


def _at(rng: random.Random, data: bytes) -> int:
    return rng.randrange(len(data) + 1)


def _insert(rng: random.Random, data: bytes, piece: bytes) -> bytes:
    at = _at(rng, data)
    return data[:at] + piece + data[at:]


def flip_bytes(rng, data):
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.randint(1, 40)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def truncate(rng, data):
    return data[: _at(rng, data)]


def braces(rng, data):
    return _insert(
        rng, data, rng.choice([b"{", b"}", b"{ x }", b'{\n\n[Event "in comment"]\n\n']) * rng.randint(1, 3000)
    )


def parentheses(rng, data):
    return _insert(rng, data, rng.choice([b"(", b")", b"( 1. e4 )", b"(e4 "]) * rng.randint(1, 5000))


def nuls(rng, data):
    return _insert(rng, data, b"\0" * rng.randint(1, 50))


def invalid_utf8(rng, data):
    return _insert(rng, data, rng.choice([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))


def huge_numbers(rng, data):
    number = str(rng.choice([2**31, 2**63, 10**30, 99999999999])).encode()
    return _insert(
        rng, data, rng.choice([number + b". e4 ", b"$" + number + b" ", b"{ [%clk " + number + b":00:00] } "])
    )


def header_edit(rng, data):
    value = rng.choice(
        [b"3000000000+0", b"\xc2\xb2+0", b"\xd9\xa1\xd9\xa8\xd9\xa0+2", b"-", b"", b"x" * 200_000, b"99999999999"]
    )
    name = rng.choice([b"TimeControl", b"WhiteElo", b"BlackElo", b"Result", b"UTCDate", b"UTCTime", b"Site", b"FEN"])
    line = b"[" + name + b' "' + value + b'"]\n'
    at = data.find(b"\n", rng.randrange(max(1, len(data)))) + 1 if data else 0
    return data[:at] + line + data[at:]


def drop_tag_lines(rng, data):
    lines = data.split(b"\n")
    keep = [line for line in lines if not (line.startswith(b"[") and rng.random() < 0.3)]
    return b"\n".join(keep)


def no_blank_lines(rng, data):
    return data.replace(b"\n\n", b"\n")


def more_blank_lines(rng, data):
    return data.replace(b"\n", b"\n\n\n", rng.randint(1, 50))


def crlf(rng, data):
    return data.replace(b"\n", b"\r\n")


def join_lines(rng, data):
    return data.replace(b"\n", b" ")


def boms(rng, data):
    return _insert(rng, data, b"\xef\xbb\xbf")


def repeat(rng, data):
    cut = _at(rng, data)
    return data + data[cut:] * rng.randint(1, 20)


def many_tags(rng, data):
    tags = b"".join(b'[Tag%d "%d"]\n' % (i, i) for i in range(rng.randint(100, 20_000)))
    return tags + data if rng.random() < 0.5 else _insert(rng, data, b"\n" + tags)


def escape_lines(rng, data):
    return _insert(rng, data, b"\n%" + b"x" * rng.randint(0, 100) + b" { ; ( \n")


def nested(rng, data):
    depth = rng.randint(10, 3000)
    return _insert(rng, data, b"( e4 { c } " * depth + b") " * depth)


def tiny_games(rng, data):
    return data + rng.choice([b"*\n\n", b"1. e4 *\n\n", b'[Result "*"]\n\n*\n\n']) * rng.randint(100, 30_000)


# Issue 43: a game of megabytes of {comments} and no result cost minutes (every comment searched
# the rest of its line again, and the game was only found over the cap after all of it was read).
COMMENT_UNITS = [
    b"{ comment } ",  # on one line
    b"1. e4 { c } 1... e5 { c } ",  # between moves
    b"{ c } " * 12 + b"\n",  # on many lines
    b"{ c\n\nc } ",  # with blank lines inside
    b"{ ; } ",  # holding what starts a ; comment outside one
    b"{ a\n\n[b] } ",  # holding what starts a game outside one
]


def comment_flood(rng, data):
    """A game of comments, 10 KB to the 8 MiB cap (log-uniform) or just past it (a third of the
    time), in one of the shapes above or one giant comment, with or without a result, last in
    the file (half the time: the reproduction's place) or anywhere."""
    if rng.random() < 1 / 3:
        size = rng.randint(MAX_GAME_BYTES + 1, MAX_GAME_BYTES + (2 << 20))
    else:
        size = int(10_000 * (MAX_GAME_BYTES / 10_000) ** rng.random())
    if rng.random() < 0.15:
        body = b"{ " + b"comment " * (size // 8) + b"}"
    else:
        unit = rng.choice(COMMENT_UNITS)
        body = unit * (size // len(unit))
    game = b'[Event "comments"]\n[Result "*"]\n\n' + body + rng.choice([b"", b" *", b" 1-0"]) + b"\n"
    return data + b"\n" + game if rng.random() < 0.5 else _insert(rng, data, game)


def splice(rng, data):
    a, b = sorted((_at(rng, data), _at(rng, data)))
    return data[:a] + data[b:] + data[a:b]


MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [
    flip_bytes,
    truncate,
    braces,
    parentheses,
    nuls,
    invalid_utf8,
    huge_numbers,
    header_edit,
    drop_tag_lines,
    no_blank_lines,
    more_blank_lines,
    crlf,
    join_lines,
    boms,
    repeat,
    splice,
    many_tags,
    escape_lines,
    nested,
    tiny_games,
    comment_flood,
]
MAX_INPUT_BYTES = 3 * MAX_GAME_BYTES  # a mutation that would make more is left out (a repeat of a flood)


def container(rng: random.Random, data: bytes) -> tuple[str, bytes, str]:
    """(file suffix, bytes on disk, what was done)."""
    kind = rng.choices(["pgn", "zst", "gz", "bz2"], weights=[70, 20, 5, 5])[0]
    if kind == "pgn":
        return ".pgn", data, "plain"
    packed = {
        "zst": lambda: zstandard.ZstdCompressor(level=3).compress(data),
        "gz": lambda: gzip.compress(data, mtime=0),
        "bz2": lambda: bz2.compress(data),
    }[kind]()
    damage = rng.choice(["none", "none", "cut", "flip"])
    if damage == "cut" and packed:
        packed = packed[: rng.randrange(len(packed))]
    elif damage == "flip" and len(packed) > 8:
        spoiled = bytearray(packed)
        spoiled[rng.randrange(4, len(spoiled))] ^= 1 << rng.randrange(8)
        packed = bytes(spoiled)
    return f".pgn.{kind}", packed, f"{kind}:{damage}"


def make_input(rng: random.Random, games: list[bytes], mutate: bool = True) -> tuple[bytes, list[str]]:
    source = rng.choices(["sample", "generated", "fixture"], weights=[60, 25, 15])[0]
    if source == "sample":
        start = rng.randrange(len(games))
        data = b"".join(games[start : start + rng.randint(1, 60)])
    elif source == "generated":
        data = random_games(rng.randint(1, 20), seed=rng.randrange(10**6)).encode()
    else:
        data = rng.choice(FIXTURES)
    steps = [source]
    for _ in range(rng.randint(1, 4) if mutate else 0):
        mutation = rng.choice(MUTATIONS)
        mutated = mutation(rng, data)
        if len(mutated) <= MAX_INPUT_BYTES:  # 200 MB of repeated comments would only cost time
            data = mutated
            steps.append(mutation.__name__)
    return data, steps


def generate(seed: int, number: int, games: list[bytes]) -> tuple[bytes, str, bytes, list[str]]:
    """Input `number` of `seed`: (its text, file suffix, bytes on disk, the steps that made it)."""
    rng = random.Random(f"{seed}:{number}")
    data, steps = make_input(rng, games)
    suffix, packed, how = container(rng, data)
    return data, suffix, packed, [*steps, how]


# -- running the stages --------------------------------------------------------------------


def run_main(module: str, argv: list[str]) -> tuple[int | str, str]:
    """The stage's main as its CLI runs it: (exit code or "traceback", the traceback or the
    failure's message)."""
    main = __import__(module, fromlist=["main"]).main
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return main(argv) or 0, ""
    except SystemExit as exit_:
        return int(exit_.code or 0), ""
    except Exception as error:  # noqa: BLE001 - that is what is looked for
        kind = failures.classify(error)
        return (kind.exit_code, str(error)) if kind is not None else ("traceback", traceback.format_exc())


EMPTY_SPLIT = "would hold no game"  # convert's message for a split too few games reach


def check_one(folder: Path, name: str, data: bytes) -> tuple[list[str], float, int]:
    """(problems found, CPU seconds, games seen) of validate then convert on one input file."""
    raw, validated, dataset = folder / "raw", folder / "validated", folder / "dataset"
    raw.mkdir()
    (raw / name).write_bytes(data)
    none = str(folder / "no-params.yaml")
    started = time.process_time()
    problems, seen = [], 0
    code, trace = run_main(
        "stages.validate", ["--raw", str(raw), "--out", str(validated), "--no-progress", "--params", none]
    )
    outlock.release_output(validated)
    if code not in (0, 65):
        problems.append(f"validate exit {code}\n{trace}")
    if code == 0 or (validated / "report.json").is_file():  # 65 after writing: no game accepted
        report = json.loads((validated / "report.json").read_text())
        for path, entry in report["by_file"].items():
            seen += entry["games_seen"]
            if entry["games_seen"] != entry["accepted"] + sum(entry["rejected"].values()):
                problems.append(f"accounting: {path}: {entry}")
        if report["by_reason"].get("internal_error"):
            problems.append(f"internal_error rejects: {report['by_reason']['internal_error']}")
    if code == 0:
        code, trace = run_main(
            "stages.convert", ["--validated", str(validated), "--out", str(dataset), "--no-progress", "--params", none]
        )
        outlock.release_output(dataset)
        if code != 0 and not (code == 65 and EMPTY_SPLIT in trace):  # too few games for every split
            problems.append(f"convert exit {code}\n{trace}")
    return problems, time.process_time() - started, seen


def high_water_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fuzz(inputs: int, seed: int, save: Path | None = None, baseline_inputs: int = 30) -> dict:
    games = sample_games()
    with tempfile.TemporaryDirectory(prefix="chesscore-fuzz-") as scratch:
        root = Path(scratch)
        count = iter(range(10**9))

        def run(data: bytes, suffix: str = ".pgn", packed: bytes | None = None) -> tuple[list[str], float, int]:
            folder = root / str(next(count))
            folder.mkdir()
            return check_one(folder, f"input{suffix}", data if packed is None else packed)

        def one(number: int) -> dict:
            data, suffix, packed, steps = generate(seed, number, games)
            problems, seconds, seen = run(data, suffix, packed)
            if problems and save is not None:
                save.mkdir(parents=True, exist_ok=True)
                (save / f"seed{seed}-{number}{suffix}").write_bytes(packed)
            return {
                "number": number,
                "steps": steps,
                "bytes": len(data),
                "seconds": seconds,
                "seen": seen,
                "problems": problems,
            }

        cost = calibrate(run, games, seed, baseline_inputs)
        results = [one(n) for n in range(inputs)]
    for result in results:
        expected = cost["per_byte"] * result["bytes"] + cost["per_game"] * result["seen"]
        allowed = OVERHEAD_FACTOR * cost["tiny"] + FACTOR * expected
        result["ratio"] = (result["seconds"] - cost["tiny"]) / expected if result["bytes"] > 10_000 else 0.0
        if result["seconds"] > allowed:
            result["problems"].append(
                f"slow: {result['seconds']:.2f} s for {result['bytes']:,} bytes, {result['seen']:,} games "
                f"(allowed {allowed:.2f})"
            )
    findings = [r for r in results if r["problems"]]
    worst = max(results, key=lambda r: r["ratio"])
    return {
        "inputs": len(results),
        "seed": seed,
        "bytes": sum(r["bytes"] for r in results),
        "games_seen": sum(r["seen"] for r in results),
        "mutations": dict(Counter(step for r in results for step in r["steps"][1:-1])),
        "containers": dict(Counter(r["steps"][-1] for r in results)),
        "tiny_seconds": cost["tiny"],
        "baseline_us_per_byte": cost["per_byte"] * 1e6,
        "baseline_us_per_game": cost["per_game"] * 1e6,
        "worst_ratio": max(r["ratio"] for r in results),
        "worst": {k: worst[k] for k in ("number", "steps", "bytes", "seen", "seconds")},
        "peak_rss_mib": high_water_mib(),
        "findings": [{k: r[k] for k in ("number", "steps", "bytes", "problems")} for r in findings],
    }


def calibrate(run, games: list[bytes], seed: int, baseline_inputs: int) -> dict[str, float]:
    """What unmutated input costs on this machine now: the fixed cost of a one-game file, the
    CPU per byte of windows of the sample (the most of them), and per game of a file of the
    smallest games (3 bytes each: per-game work that a Lichess game's 700 bytes hide)."""
    # Warm-up: first imports, compiled patterns and caches of every path (rejects, python-chess,
    # the decompressors) are not an input's cost.
    run(games[0])
    run(b"".join(FIXTURES) + b"\n\n".join(g.replace(b"[Result", b"[Rsult") for g in games[:20]))
    for number in range(-8, 0):
        run(*generate(seed, number, games)[:3])
    tiny = min(run(games[0])[1] for _ in range(3))
    rng = random.Random(f"{seed}:baseline")
    per_byte = 0.0
    for _ in range(baseline_inputs):
        start = rng.randrange(len(games))
        data = b"".join(games[start : start + rng.randint(20, 60)])
        per_byte = max(per_byte, (run(data)[1] - tiny) / len(data))
    per_game = max((run(b"*\n\n" * 20_000)[1] - tiny) / 20_000 for _ in range(2))
    return {"tiny": tiny, "per_byte": per_byte, "per_game": per_game}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hardening.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=300, help="mutated inputs to try")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, help="write the inputs that found something here")
    args = parser.parse_args(argv)
    report = fuzz(args.inputs, args.seed, args.save)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 1 if report["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
