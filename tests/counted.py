"""Work counted instead of timed, so that a test can hold a bound linear in its input on any
machine: the bytes the game splitter's comment search looks at, and the text it walks.

    work = count_split_work(monkeypatch)
    list(split_games(blocks))
    assert work.searched <= 4 * len(data) and work.walked <= 4 * len(data)
"""

from __future__ import annotations

from dataclasses import dataclass

from chesscore.pgn import split


@dataclass
class Work:
    searched: int = 0  # bytes that bytes.find/rfind/`in` looked at in _comment_after
    walked: int = 0  # bytes of buffer _find_games walked (each look at the buffer counts)
    walks: int = 0  # how many looks


class Searched(bytes):
    """bytes that add up, in `work`, how many bytes each find, rfind and `in` looks at."""

    work: Work

    def find(self, sub, start=0, end=None):
        at = bytes.find(self, sub, start, end)
        stop = len(self) if end is None else end
        self.work.searched += (at + len(sub) if at >= 0 else stop) - start
        return at

    def rfind(self, sub, start=0, end=None):
        at = bytes.rfind(self, sub, start, end)
        stop = len(self) if end is None else end
        self.work.searched += stop - (at if at >= 0 else start)
        return at

    def __contains__(self, sub) -> bool:
        return self.find(sub) >= 0


def searched(line: bytes, work: Work) -> Searched:
    counted = Searched(line)
    counted.work = work
    return counted


def count_split_work(monkeypatch) -> Work:
    """Count, from now on, the splitter's comment searches and buffer walks (in this process)."""
    work = Work()
    comment_after, find_games = split._comment_after, split._find_games

    def counted_comment_after(line: bytes, in_comment: bool) -> bool:
        return comment_after(searched(line, work), in_comment)

    def counted_find_games(buf: bytes, end: int, fast: bool):
        work.walked += end
        work.walks += 1
        return find_games(buf, end, fast)

    monkeypatch.setattr(split, "_comment_after", counted_comment_after)
    monkeypatch.setattr(split, "_find_games", counted_find_games)
    return work
