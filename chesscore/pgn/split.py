"""Split a stream of PGN bytes into games, with each game's index and byte offset.

    for game in split_games(read_blocks(path)):
        game.index, game.offset, game.data      # 0, 0, b'[Event "Rated Blitz game"]\\n...'

Where one game ends and the next begins (the rules real files need):
  1. a tag line after movetext starts a new game (blank line or not);
  2. after a blank line, a tag line whose name the open game already has starts a new game
     (tag-only exports separate games by one blank line), while a new name continues it
     (ChessBase writes a blank line inside a tag section);
  3. after a blank line, movetext that follows movetext starts a new game without tags;
  4. nothing inside a {comment} counts: not blank lines, not tag-like lines.
Lines may be indented, end in CRLF, carry a BOM, or hold tags and moves together. Tags need
not include [Event]. Bytes outside games are blank lines only, so every byte of the input is
in some game: nothing is dropped unseen.

Typical Lichess games (a tag paragraph, a blank line, a movetext paragraph) are found a buffer
at a time with numpy (chesscore.pgn.fastsplit); from the first game that is not of that plain
layout on, paragraphs are classified by C-speed scans and anything unusual is walked line by
line. All paths apply the same rules (a test checks that they agree on every split).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np

from chesscore.pgn.fastsplit import plain_games, plain_movetext, tag_paragraph, text_paragraph

MAX_GAME_BYTES = 8 << 20  # no real game comes near; past this the text is skipped and rejected
BOM = b"\xef\xbb\xbf"
_TAG_NAMES = re.compile(rb"\[\s*([A-Za-z0-9][A-Za-z0-9_+#=:-]*)")
# Where reading resumes after an oversized game: the next line that starts like a tag.
_RESYNC = re.compile(rb'\n\[[A-Za-z0-9][A-Za-z0-9_+#=:-]{0,200}\s*"')
_RESYNC_TAIL = 256  # bytes kept between blocks while skipping, so a match may span two blocks
# Reading resumes only after a line that is not a tag (rule 1: a tag line after movetext): the
# oversized game's own tag lines start no game, however the stream was cut into blocks.
_TEXT_LINE = re.compile(rb"\n[ \t\r]*[^\[\s]")
_TAG_PAIRS = re.compile(rb'(?:\[[^\[\]"\n]*"(?:[^"\\\n]|\\.)*"\s*\]\s*)+')  # tags before moves on a line


class RawGame(NamedTuple):
    index: int  # 0-based game number within the file
    offset: int  # byte offset of the game's first line (in the decompressed file)
    data: bytes  # the game's text up to the next game (b"" when `problem` is set)
    problem: str | None = None  # why the text could not be kept as a game
    odd: bool = False  # tags and moves share a line: parsers disagree there, the reference decides
    movetext: int = 0  # where the movetext starts in `data` for the plain layout (one tag paragraph,
    #                    a blank line, one movetext paragraph); 0 when the layout is anything else


def _comment_after(line: bytes, in_comment: bool) -> bool:
    """Whether a {comment} is still open at the end of `line` (a ; comment ends the line).
    Linear in the line's length, however many comments it holds: each byte is searched once for
    `{`, once for `}` and once for `;` (a line of 10 MB of comments once took minutes here, each
    comment searching the rest of the line for a `;` again)."""
    semicolon = line.find(b";")
    if semicolon < 0:  # comments do not nest: the last brace tells (no brace: nothing changes)
        last_open, last_close = line.rfind(b"{"), line.rfind(b"}")
        return in_comment if last_open == last_close else last_open > last_close
    at = 0
    while True:
        if in_comment:
            close = line.find(b"}", at)
            if close < 0:
                return True
            in_comment, at = False, close + 1
        else:
            if 0 <= semicolon < at:  # that ; was inside a comment: the next one
                semicolon = line.find(b";", at)
            brace = line.find(b"{", at)
            if brace < 0 or 0 <= semicolon < brace:
                return False
            in_comment, at = True, brace + 1


class _Scanner:
    """Walks paragraphs and lines of a buffer that begins at a game (or file) start and records
    where games start."""

    def __init__(self, buf: bytes, fast: bool = True) -> None:
        self.buf, self.fast = buf, fast
        self.starts: list[int] = []
        self.odd: set[int] = set()  # starts of games with tags and moves on one line
        # Buffer-wide, so most paragraphs need not be searched for these one by one.
        self.no_oddities = b"\r" not in buf and b";" not in buf and BOM not in buf
        self.has_text = False  # the open game has movetext
        self.tag_spans: list[tuple[int, int]] = []  # where the open game's tags are
        self.names: set[bytes] | None = None  # their names, computed only when needed
        self.in_comment = False
        self.after_blank = True

    def _start(self, pos: int) -> None:
        self.starts.append(pos)
        self.has_text, self.tag_spans, self.names = False, [], None

    def _tags(self, start: int, end: int) -> None:
        if not self.starts or self.has_text:
            self._start(start)
        elif self.after_blank and self.tag_spans:
            if self.names is None:
                self.names = {n for s, e in self.tag_spans for n in _TAG_NAMES.findall(self.buf, s, e)}
            first = _TAG_NAMES.match(self.buf, start, end)
            if first and first.group(1) in self.names:
                self._start(start)
        self.tag_spans.append((start, end))
        if self.names is not None:
            self.names.update(_TAG_NAMES.findall(self.buf, start, end))
        self.after_blank = False

    def _text(self, start: int) -> None:
        if not self.starts or (self.has_text and self.after_blank):
            self._start(start)
        self.has_text, self.after_blank = True, False

    def scan(self, end: int) -> list[int]:
        pos, fast = 0, self.fast
        for para in self.buf[:end].split(b"\n\n"):
            start, pos = pos, pos + len(para) + 2
            if para[:1] == b"\n":
                body = para.lstrip(b"\n")
                start, para = start + len(para) - len(body), body
            if not para:
                continue
            self.after_blank = True
            if fast and not self.in_comment:
                if para[:1] == b"[":
                    if tag_paragraph(para):
                        self._tags(start, start + len(para))
                        continue
                elif self._plain_text(para):
                    self._text(start)
                    continue
            self._lines(start, para)
        return self.starts

    def _plain_text(self, para: bytes) -> bool:
        return (self.no_oddities or not (b"\r" in para or b";" in para or BOM in para)) and text_paragraph(para)

    def _lines(self, start: int, para: bytes) -> None:
        for line in para.split(b"\n"):
            begin, start = start, start + len(line) + 1
            if self.in_comment:
                self.in_comment = _comment_after(line, True)
                self.has_text, self.after_blank = True, False
                continue
            body = line.lstrip(b" \t\f\v\r")
            if body.startswith(BOM):
                body = body[len(BOM) :].lstrip(b" \t\f\v\r")
            if not body.rstrip():
                self.after_blank = True
                continue
            at = begin + len(line) - len(body)
            if body[:1] == b"[":
                body = body.rstrip()
                if body.endswith(b'"]'):  # tags only
                    self._tags(at, at + len(body))
                    continue
                pairs = _TAG_PAIRS.match(body)
                close = pairs.end() if pairs else body.find(b"]") + 1 or len(body)
                self._tags(at, at + close)
                rest = body[close:]
                if rest.strip():  # moves on the same line as the tags
                    self.odd.add(self.starts[-1])
                    self.has_text = True
                    self.in_comment = _comment_after(rest, False)
            else:
                self._text(at)
                self.in_comment = _comment_after(body, False)


def split_games(
    blocks: Iterable[bytes], max_game_bytes: int = MAX_GAME_BYTES, fast: bool = True, offset: int = 0, index: int = 0
) -> Iterator[RawGame]:
    """Games of a byte stream, any block boundaries. Memory holds one block plus the open game.
    A stream that resumes a file at a game start gives that start's byte `offset` and game `index`
    (a byte order mark is looked for only at the file's start)."""
    buf, base, first, skipping, tags_only = b"", offset, offset == 0, None, False
    unread: list[bytes] = []  # blocks come since buf was last looked at
    unread_bytes = 0
    for data, last, flush in _with_last(blocks):
        if first and data:
            first = False
            if data.startswith(BOM):
                data, base = data[len(BOM) :], len(BOM)
        unread.append(data)
        unread_bytes += len(data)
        # Looking at buf reads again the open game's text held there. While that is more than what
        # came since, wait for more (up to the cap, where the oversized game is skipped as before):
        # a long game is then read a bounded number of times however small the blocks (a 4 MB game
        # of comments in 100 KB blocks was walked 41 times). The games are the same for any blocks.
        if skipping is None and not (last or flush) and unread_bytes < len(buf) <= max_game_bytes - unread_bytes:
            continue
        buf = b"".join([buf, *unread]) if buf else b"".join(unread)
        unread, unread_bytes = [], 0
        if skipping is not None and tags_only:  # inside an oversized game's tags: look for its movetext
            text = _TEXT_LINE.search(buf)
            if text is None and not last:
                keep = min(len(buf), _RESYNC_TAIL)
                base, buf = base + len(buf) - keep, buf[len(buf) - keep :]
                continue
            tags_only = False
            if text is not None:
                base, buf = base + text.start() + 1, buf[text.start() + 1 :]
        if skipping is not None:  # inside an oversized game: look for the next tag line
            found = _RESYNC.search(buf)
            if found is None and not last:
                keep = min(len(buf), _RESYNC_TAIL)
                base, buf = base + len(buf) - keep, buf[len(buf) - keep :]
                continue
            yield RawGame(index, skipping, b"", f"game text over {max_game_bytes} bytes")
            index, skipping = index + 1, None
            cut_at = len(buf) if found is None else found.start() + 1
            base, buf = base + cut_at, buf[cut_at:]
        if last:
            end = len(buf)
        else:  # the last blank line; a CRLF one only matters after the last LF one
            blank = buf.rfind(b"\n\n")
            end = max(blank, buf.rfind(b"\n\r\n", max(blank, 0)))
            if len(buf) - max(end, 0) > max_game_bytes:
                # No blank line for longer than a game may be (a file that never leaves one, or
                # one huge game): cut at the last line end instead, so that the games found so
                # far leave memory and an oversized open game is skipped below.
                end = buf.rfind(b"\n")
                if end <= 0:  # not even a line end: the open game (after any blank lines) is over the cap
                    lead = len(buf) - len(buf.lstrip())
                    if lead < len(buf):
                        skipping, tags_only = base + lead, True
                    base, buf = base + len(buf), b""
                    continue
        if end <= 0:
            continue
        starts, movetext, odd = _find_games(buf, end, fast)
        if not starts:  # only blank lines so far
            base, buf = base + end, buf[end:]
            continue
        ends = starts[1:] + ([len(buf)] if last else [])
        for begin, finish in zip(starts, ends):
            if finish - begin > max_game_bytes:  # the last block's final game may pass the cap
                yield RawGame(index, base + begin, b"", f"game text over {max_game_bytes} bytes")
            else:
                data = buf[begin:finish]
                at = movetext.get(begin)
                yield RawGame(index, base + begin, data, None, begin in odd, plain_movetext(data) if at is None else at)
            index += 1
        if not last:
            base, buf = base + starts[-1], buf[starts[-1] :]
            if len(buf) > max_game_bytes:
                skipping, tags_only, buf, base = base, True, buf[1:], base + 1


def _find_games(buf: bytes, end: int, fast: bool) -> tuple[list[int], dict[int, int], set[int]]:
    """Game starts in buf[:end] (buf begins at a game start), the movetext offsets of the plain
    ones found at once, and the starts of odd games. Segments the numpy pass does not vouch for
    are walked line by line; if one ends inside a game, the walk goes on to the end."""
    starts: list[int] = []
    movetext: dict[int, int] = {}
    odd: set[int] = set()
    position = 0
    if fast:
        first, after, moves, ok, position = plain_games(buf, end)
        done = 0
        for bad in [*np.flatnonzero(~ok).tolist(), len(ok)]:
            starts += first[done:bad].tolist()
            movetext.update(zip(first[done:bad].tolist(), (moves[done:bad] - first[done:bad]).tolist()))
            if bad == len(ok):
                break
            begin, finish = int(first[bad]), int(after[bad])
            walk = _Scanner(buf[begin:finish])
            starts += [begin + start for start in walk.scan(finish - begin)]
            odd.update(begin + start for start in walk.odd)
            if walk.in_comment or not walk.has_text:  # the next tag line may not start a game
                del starts[len(starts) - len(walk.starts) :]
                position = begin
                break
            done = bad + 1
    walk = _Scanner(buf[position:] if position else buf, fast)
    starts += [position + start for start in walk.scan(end - position)]
    odd.update(position + start for start in walk.odd)
    return starts, movetext, odd


def _with_last(blocks: Iterable[bytes]) -> Iterator[tuple[bytes, bool, bool]]:
    """Each block with a flag for the last one (an empty last block if the stream is empty) and
    one for the last before the stream breaks (nothing may wait for more then)."""
    previous = None
    try:
        for block in blocks:
            if previous is not None:
                yield previous, False, False
            previous = block
    except Exception:  # the stream broke (InputError): what was read before the damage still counts
        if previous is not None:
            yield previous, False, True
        raise
    yield (previous if previous is not None else b""), True, False
