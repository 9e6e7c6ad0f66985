"""Real games for the tests, all inside the checkout: the embedded sample (data/raw: 3,515 games in
the Lichess dump format, its broken games listed in data/raw/README.md) and tests/fixtures/, small
hand-written reproductions of what real exporters write (tests/fixtures/README.md lists them).

    sample_pgn()                  # the sample's decompressed bytes
    sample_games()                # mainline moves of its standard games with legal moves
    fixture("bom.pgn")            # a fixture's bytes, after its first line (the % comment)

The shared corpus of real files beside the checkout belongs to the optional corpus tier
(tests/corpus.py); nothing here reads outside the checkout.
"""

from __future__ import annotations

import functools
from pathlib import Path

import chess

from chesscore.ingest.validate import tags_verdict
from chesscore.pgn.inputs import read_blocks
from chesscore.pgn.parse import parse_batch
from chesscore.pgn.split import split_games

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "raw" / "lichess_sample.pgn.zst"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@functools.cache
def sample_pgn() -> bytes:
    """The embedded sample, decompressed (about 5 MB)."""
    return b"".join(read_blocks(SAMPLE))


@functools.cache
def sample_games() -> tuple[list[chess.Move], ...]:
    """Mainline moves of every sample game that is standard chess from the start position, with
    legal moves and at least one (3,446 of 3,515: duplicates and games without a result among
    them), in file order. The fast parser reads them; tests/pgn/test_parse.py checks it against
    python-chess on this very file."""
    texts, odd, movetext_at = [], [], []
    for game in split_games([sample_pgn()]):
        try:
            text = game.data.decode("utf-8")
        except UnicodeDecodeError:  # the sample's Latin-1 games
            continue
        texts.append(text)
        odd.append(game.odd)
        movetext_at.append(len(game.data[: game.movetext].decode("utf-8")))
    batch = parse_batch(texts, odd, movetext_at, rejected_by_tags=lambda h: tags_verdict(h) is not None)
    return tuple(
        list(map(chess.Move.from_uci, batch.moves(i)))
        for i in range(len(batch))
        if batch.error[i] is None and batch.plies()[i] > 0
    )


def fixture_names(suffix: str = "") -> list[str]:
    """The fixtures' file names (those ending in `suffix`), sorted."""
    return sorted(p.name for p in FIXTURES.iterdir() if p.name.endswith(suffix) and p.name != "README.md")


def fixture(name: str) -> bytes:
    """A fixture's bytes as the exporter wrote them: a .pgn file without its first line, the `%`
    comment that names the case (a .zst carries its note in a skippable frame, and is whole)."""
    data = (FIXTURES / name).read_bytes()
    return data if name.endswith(".zst") else data.split(b"\n", 1)[1]


def fixture_note(name: str) -> str:
    """What real-world case a .pgn fixture reproduces: its first line, without the `% `."""
    return (FIXTURES / name).read_bytes().split(b"\n", 1)[0].decode("utf-8").removeprefix("% ").strip()


def write_fixtures(folder: Path, names: list[str] | None = None) -> Path:
    """The fixtures (all, or those named) written to `folder` as the exporter's bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names or fixture_names():
        (folder / name).write_bytes(fixture(name))
    return folder
