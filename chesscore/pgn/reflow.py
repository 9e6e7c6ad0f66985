"""A game's text re-flowed so that python-chess reads it in linear time, with the same result.

    chess.pgn.read_game(io.StringIO(reflow(text)))      # what read_game(io.StringIO(text)) reads

python-chess's reader slices the rest of the line off after every {comment}, so a line holding
n comments costs O(n x line length): a 5 MB game of comments on one line took 16 s, 20 MB 423 s.
Here a line break is put after every comment that has more on its line, followed by a space:

    1. e4 { [%clk 0:03:00] } 1... e5 { [%clk 0:02:59] } 2. Nf3      (one line)
    1. e4 { [%clk 0:03:00] }\\n 1... e5 { [%clk 0:02:59] }\\n 2. Nf3  (three)

which python-chess reads the same way: after a comment it goes on with the rest of the line as a
fresh string (its tokens do not depend on what came before), and a continuation that starts with
a space is neither a blank line (the rest holds more than whitespace) nor a `%` or `;` line. The
tags are left alone, and so are `;` comments, `%` lines and the inside of comments, found the way
python-chess finds them (a test compares the two readers on generated token soup).
"""

from __future__ import annotations

import re

_AFTER = re.compile(r"\S")  # str.isspace()'s notion of whitespace, as python-chess uses it
_OPEN = re.compile(r"[{;]")  # outside a comment, a `{` or `;` always starts one (no move holds either)


def reflow(text: str) -> str:
    """text with a line break (and a space) after every comment that has more on its line."""
    if "}" not in text:
        return text
    lines = text.split("\n")  # StringIO.readline() splits at "\n" only
    at = _movetext_start(lines)
    in_comment = False
    for i in range(at, len(lines)):
        line = lines[i]
        if not in_comment:
            if line.startswith(("%", ";")):
                continue  # a whole-line comment or escape, skipped unread
            if not line or line.isspace():
                break  # the end of the game: python-chess reads no further
        cuts, in_comment = _comment_ends(line, in_comment)
        if cuts:
            parts, start = [], 0
            for cut in cuts:
                parts.append(line[start:cut])
                start = cut
            parts.append(line[start:])
            lines[i] = "\n ".join(parts)
    return "\n".join(lines)


def _movetext_start(lines: list[str]) -> int:
    """The index of the line where python-chess's header loop stops (chess.pgn.read_game)."""
    i = 0

    def line(k: int) -> str:  # what readline() returns ("" at the end)
        if k >= len(lines) or (k == len(lines) - 1 and not lines[k]):
            return ""
        text = lines[k] + ("\n" if k < len(lines) - 1 else "")
        return text.lstrip("\ufeff") if k == 0 else text

    while line(i).isspace() or line(i).startswith(("%", ";")):
        i += 1
    empty = 0
    while line(i):
        text = line(i)
        if text.startswith(("%", ";")):
            i += 1
            continue
        if empty < 1 and text.isspace():
            empty += 1
            i += 1
            continue
        if not text.startswith("["):
            break
        empty = 0
        i += 1
    return i


def _comment_ends(line: str, in_comment: bool) -> tuple[list[int], bool]:
    """Positions just after each `}` of `line` that closes a comment and has more than whitespace
    after it, and whether a comment is still open at the end of the line."""
    cuts, pos = [], 0
    while True:
        if in_comment:
            close = line.find("}", pos)
            if close < 0:
                return cuts, True
            pos, in_comment = close + 1, False
            if _AFTER.search(line, pos):
                cuts.append(pos)
            else:
                return cuts, False
        opening = _OPEN.search(line, pos)
        if opening is None or opening.group() == ";":
            return cuts, False
        pos, in_comment = opening.end(), True
