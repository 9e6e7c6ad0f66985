"""Find the games of the plain layout in a buffer at once, with numpy: the fast path of pgn_split.

    starts, ends, movetext, ok, last = plain_games(buf, end)

The plain layout is how the Lichess dumps write every game: one tag paragraph (lines `[Name
"value"]`), one blank line, one movetext paragraph, one blank line, and the next game's `[`.
Candidate game starts are the `\\n\\n[` in the buffer; a candidate segment is accepted only when
everything the line walk of pgn_split would look at agrees with that layout (the same checks as
its paragraph fast path), so both find the same games. The first segment that does not pass
ends the fast path: `resume` is its start, and pgn_split walks on from there.

Work per byte is a few numpy comparisons and nonzeros (newlines, braces); everything else looks
only at those special bytes, and at the rare bytes never in a plain game (CR, ;, 0xEF).
"""

from __future__ import annotations

import numpy as np

# A movetext line may not start with these: blank, indented, a tag, a BOM (the line walk's checks).
_BAD_LINE_START = np.zeros(256, bool)
_BAD_LINE_START[[ord(c) for c in "\n \t\f\v\r["] + [0xEF]] = True


def _count(positions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """How many of the sorted positions lie in [low, high), for each pair."""
    return np.searchsorted(positions, high) - np.searchsorted(positions, low)


def _last_before(positions: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The last of the sorted positions below each high, or -1."""
    at = np.searchsorted(positions, high) - 1
    return np.where(at >= 0, positions[np.maximum(at, 0)] if len(positions) else -1, -1)


def plain_games(buf: bytes, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Candidate games of buf[:end], which must begin at a game start: (starts, ends, movetext
    starts, ok) of the complete candidate segments, and the start of the last (open) one."""
    empty = np.zeros(0, np.int64)
    if end < 4 or buf[:1] != b"[":
        return empty, empty, empty, np.zeros(0, bool), 0
    a = np.frombuffer(buf, np.uint8, count=end)
    # Comparisons and nonzero run at a fraction of a ns per byte; a 256-entry table lookup would
    # cost ten times more. Bytes never in a plain game (CR, a ; comment, 0xEF of a BOM) are rare:
    # looked for with memchr first.
    newlines, opens, closes = np.flatnonzero(a == 10), np.flatnonzero(a == 123), np.flatnonzero(a == 125)
    rare = any(buf.find(byte, 0, end) >= 0 for byte in (b"\r", b";", b"\xef"))
    odd = np.flatnonzero((a == 13) | (a == 59) | (a == 0xEF)) if rare else empty
    after = np.minimum(newlines + 1, end - 1)
    double = newlines[(a[after] == 10) & (newlines + 1 < end)]  # p: "\n\n" at p
    bound = double[(double + 2 < end) & (a[np.minimum(double + 2, end - 1)] == ord("["))]
    candidates = np.concatenate([[0], bound + 2]).astype(np.int64)
    if len(candidates) < 2:
        return empty, empty, empty, np.zeros(0, bool), 0
    s, e = candidates[:-1], candidates[1:]
    first_double = np.searchsorted(double, s)
    separators = _count(double, s, e - 2)
    mid = double[np.minimum(first_double, len(double) - 1)]  # the blank line between tags and moves
    ok = separators == 1
    # Tags: every newline between two tag lines ('"]\n['), and the paragraph ends with '"]'.
    p = newlines
    joins = p[(p >= 2) & (p + 1 < end) & (a[np.maximum(p - 2, 0)] == ord('"'))
              & (a[np.maximum(p - 1, 0)] == ord("]")) & (a[np.minimum(p + 1, end - 1)] == ord("["))]
    ok &= _count(newlines, s, mid) == _count(joins, s, mid)
    ok &= (mid >= 2) & (a[np.maximum(mid - 2, 0)] == ord('"')) & (a[np.maximum(mid - 1, 0)] == ord("]"))
    # Movetext: no line starting blank, indented, with a tag or a BOM; no comment open at its end.
    moves = mid + 2
    ok &= ~_BAD_LINE_START[a[np.minimum(moves, end - 1)]]
    bad_lines = newlines[_BAD_LINE_START[a[np.minimum(newlines + 1, end - 1)]]]
    ok &= _count(bad_lines, moves, e - 2) == 0
    ok &= _last_before(opens, e - 2) <= np.maximum(_last_before(closes, e - 2), moves - 1)
    ok &= _count(odd, s, e) == 0
    return s, e, moves, ok, int(candidates[-1])
