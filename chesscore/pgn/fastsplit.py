"""The plain layout of PGN games, and finding such games a buffer at a time with numpy.

    starts, ends, movetext, ok, last = plain_games(buf, end)
    plain_movetext(game_text)       # where a game's movetext starts if its text is plain, else 0

The plain layout is how the Lichess dumps write every game: one tag paragraph (lines `[Name
"value"]`), one blank line, one movetext paragraph, one blank line, and the next game's `[`.
Candidate game starts are the `\\n\\n[` in the buffer; a candidate segment is `ok` only when
everything the line walk of pgn_split would look at agrees with that layout (the same checks as
its paragraph fast path, below), so both find the same games. pgn_split walks the segments that
are not ok line by line (and on to the end of the buffer, should one end inside a game).

Work per byte is one numpy comparison and nonzero (newlines) and a memchr for each of the rare
bytes never in a plain game (CR, ;, 0xEF); everything else looks only at the newlines, those
rare bytes and the last few bytes of each movetext (for an open comment).
"""

from __future__ import annotations

import re

import numpy as np

_SUSPECT_LINE = re.compile(rb"\n[ \t\f\v]*(?:\n|\[|$|\xef\xbb\xbf)")  # a blank, tag or BOM line in movetext

# A movetext line may not start with these: blank, indented, a tag, a BOM (the line walk's checks).
_BAD_LINE_START = np.zeros(256, bool)
_BAD_LINE_START[[ord(c) for c in "\n \t\f\v\r["] + [0xEF]] = True
_TAIL = 32  # bytes at the end of a movetext where its last brace usually is
_RARE_BY_FIND = 64  # rare bytes in a buffer found one by one before a numpy scan pays
_SEGMENTS_AT_ONCE = 1 << 14  # segments whose tails are looked at together (4 MB of temporaries)


def _count(positions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """How many of the sorted positions lie in [low, high), for each pair."""
    return np.searchsorted(positions, high) - np.searchsorted(positions, low)


def _comments_closed(a: np.ndarray, buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether no {comment} is open at the end of each buf[start:end] (comments do not nest, so
    the last brace tells). Most movetext ends in or just after a comment (`{ [%clk 0:00:11] }
    1-0`), so the last brace is looked for in the last _TAIL bytes of every segment at once;
    only segments with none there are searched with memrchr."""
    closed = np.ones(len(starts), bool)
    # _TAIL x 8 bytes a segment in each temporary: a piece at a time, or a buffer of tiny segments
    # (a comment game of `{ a\n\n[b] }`s, 12 bytes each) would take 56 bytes of memory a byte.
    for first in range(0, len(starts), _SEGMENTS_AT_ONCE):
        piece = slice(first, first + _SEGMENTS_AT_ONCE)
        closed[piece] = _tails_closed(a, buf, starts[piece], ends[piece])
    return closed


def _tails_closed(a: np.ndarray, buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    closed = np.ones(len(starts), bool)
    at = ends[:, None] - np.arange(1, _TAIL + 1)  # each segment's tail, last byte first
    window = np.where(at >= starts[:, None], a[np.maximum(at, 0)], 0)
    brace = (window == ord("{")) | (window == ord("}"))
    found = brace.any(axis=1)
    closed[found] = window[found, brace[found].argmax(axis=1)] == ord("}")
    for i in np.flatnonzero(~found & (ends - starts > _TAIL)).tolist():  # shorter ones have no brace
        start, end = int(starts[i]), int(ends[i])
        last_open = buf.rfind(b"{", start, end)
        closed[i] = last_open < 0 or buf.rfind(b"}", last_open, end) > last_open
    return closed


def _rare_positions(a: np.ndarray, buf: bytes, end: int) -> np.ndarray:
    """Sorted positions of the bytes never in a plain game (CR, a ; comment, 0xEF of a BOM) in
    buf[:end]: found with memchr while they are few (a non-ASCII name has an 0xEF now and then),
    with a numpy scan once they are not."""
    found: list[int] = []
    for byte in (b"\r", b";", b"\xef"):
        at = buf.find(byte, 0, end)
        while at >= 0:
            found.append(at)
            if len(found) > _RARE_BY_FIND:
                return np.flatnonzero((a == 13) | (a == 59) | (a == 0xEF))
            at = buf.find(byte, at + 1, end)
    return np.array(sorted(found), np.int64)


def plain_games(buf: bytes, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Candidate games of buf[:end], which must begin at a game start: (starts, ends, movetext
    starts, ok) of the complete candidate segments, and the start of the last (open) one."""
    empty = np.zeros(0, np.int64)
    if end < 4 or buf[:1] != b"[":
        return empty, empty, empty, np.zeros(0, bool), 0
    a = np.frombuffer(buf, np.uint8, count=end)
    # Comparisons and nonzero run at a fraction of a ns per byte; a 256-entry table lookup would
    # cost ten times more.
    newlines = np.flatnonzero(a == 10)
    odd = _rare_positions(a, buf, end)
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
    joins = p[
        (p >= 2)
        & (p + 1 < end)
        & (a[np.maximum(p - 2, 0)] == ord('"'))
        & (a[np.maximum(p - 1, 0)] == ord("]"))
        & (a[np.minimum(p + 1, end - 1)] == ord("["))
    ]
    ok &= _count(newlines, s, mid) == _count(joins, s, mid)
    ok &= (mid >= 2) & (a[np.maximum(mid - 2, 0)] == ord('"')) & (a[np.maximum(mid - 1, 0)] == ord("]"))
    # Movetext: no line starting blank, indented, with a tag or a BOM; no comment open at its end.
    moves = mid + 2
    ok &= ~_BAD_LINE_START[a[np.minimum(moves, end - 1)]]
    bad_lines = newlines[_BAD_LINE_START[a[np.minimum(newlines + 1, end - 1)]]]
    ok &= _count(bad_lines, moves, e - 2) == 0
    ok &= _comments_closed(a, buf, moves, e - 2)
    ok &= _count(odd, s, e) == 0
    return s, e, moves, ok, int(candidates[-1])


def tag_paragraph(para: bytes) -> bool:
    """Only tag lines, each `[...]` ending in '"]' (what the line walk reads as tags alone)."""
    return para[:1] == b"[" and para.endswith(b'"]') and para.count(b"\n") == para.count(b'"]\n[')


def text_paragraph(para: bytes) -> bool:
    """Movetext with nothing the line walk would treat differently: no line that is blank, a
    tag or a BOM, and no {comment} open at its end (comments do not nest: the last brace tells).
    The caller rules out CR, ; comments and BOMs."""
    if para[:1] in b" \t\f\v\r\n\xef[" or para.rfind(b"{") > para.rfind(b"}"):
        return False
    return b"\n" not in para or not _SUSPECT_LINE.search(para)


def plain_movetext(data: bytes) -> int:
    """Where the movetext starts if a game's text is of the plain layout (a tag paragraph, one
    blank line, one movetext paragraph), else 0. A property of the text alone."""
    blank = data.find(b"\n\n")
    if blank <= 0 or b"\r" in data or b";" in data or b"\xef" in data:
        return 0
    moves = data[blank + 2 :].rstrip(b"\n")
    ok = moves and b"\n\n" not in moves and tag_paragraph(data[:blank]) and text_paragraph(moves)
    return blank + 2 if ok else 0
