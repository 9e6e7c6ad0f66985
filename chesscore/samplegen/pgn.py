"""A sample game as bytes, in the Lichess database dump format.

    [Event "Rated Blitz game"]      one tag per line, in the dump's order
    ...                             (blank line)
    1. e4 { [%clk 0:03:00] } 1... e5 { [%clk 0:03:00] } 2. Nf3 ... 1-0
                                    (blank line)

The whole movetext is one line; a black move carries its number ("1... e5") after a comment
or at the start; a game without clocks (correspondence) reads "1. e4 e5 2. Nf3". Written by
hand rather than with chess.pgn's exporter because the sample also needs movetext that no
exporter would write (illegal moves, a missing result token, a byte that is not UTF-8).
"""

from __future__ import annotations

from .engine_game import GameRecord


def movetext(record: GameRecord) -> str:
    parts = []
    for i, san in enumerate(record.sans):
        ply = record.first_ply + i
        number = ply // 2 + 1
        if ply % 2 == 0:
            parts.append(f"{number}. {san}{record.glyphs[i]}")
        elif i == 0 or record.comments[i - 1]:
            parts.append(f"{number}... {san}{record.glyphs[i]}")
        else:
            parts.append(f"{san}{record.glyphs[i]}")
        if record.comments[i]:
            parts.append("{ " + record.comments[i] + " }")
    if record.result is not None:
        parts.append(record.result)
    return " ".join(parts)


def _tag(name: str, value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'[{name} "{escaped}"]\n'


def game_bytes(record: GameRecord) -> bytes:
    """The game's text; a tag named by `record.latin1_tag` is written in Latin-1, not UTF-8."""
    out = bytearray()
    for name, value in record.headers:
        out += _tag(name, value).encode("latin-1" if name == record.latin1_tag else "utf-8")
    out += b"\n" + movetext(record).encode("utf-8") + b"\n\n"
    return bytes(out)
