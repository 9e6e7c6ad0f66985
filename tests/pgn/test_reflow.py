"""The re-flow of a game's text for python-chess (chesscore.pgn.reflow): the same reading, in
linear time. Equality is checked event by event on generated token soup, the kind of text where
the line rules (tags, `%` and `;` lines, blank lines, comments over lines) meet."""

from __future__ import annotations

import io
import time

import chess.pgn
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore.pgn.inputs import read_blocks
from chesscore.pgn.parse import reference
from chesscore.pgn.reflow import reflow
from chesscore.pgn.split import split_games
from tests.imports import PROJECT

SAMPLE = PROJECT / "data" / "raw" / "lichess_sample.pgn.zst"


class Recorder(chess.pgn.BaseVisitor):
    """Every event of python-chess's reader, errors included (reading goes on past them)."""

    def begin_game(self):
        self.events = []

    def visit_header(self, name, value):
        self.events.append(("header", name, value))

    def visit_move(self, board, move):
        self.events.append(("move", move.uci()))

    def visit_comment(self, comment):
        self.events.append(("comment", comment))

    def visit_nag(self, nag):
        self.events.append(("nag", nag))

    def begin_variation(self):
        self.events.append(("(",))

    def end_variation(self):
        self.events.append((")",))

    def visit_result(self, result):
        self.events.append(("result", result))

    def handle_error(self, error):
        self.events.append(("error", str(error)))

    def result(self):
        return self.events


class Tokens(Recorder):
    """The reader's events with each SAN token as written, not played: python-chess's reading is
    a function of these events (the tags, moves, comments, NAGs, variations and results in
    order), so equal tokens read equally. A null move stands in for each move, so nothing is
    replayed, and nothing after an illegal move is skipped: stricter than the reading, and 8
    CPU s on the sample against the reading's 20."""

    def parse_san(self, board, san):
        self.events.append(("san", san))
        return chess.Move.null()

    def visit_move(self, board, move):
        pass


def events(text: str, visitor: type[Recorder] = Recorder):
    handle = io.StringIO(text)
    games = []
    while (game := chess.pgn.read_game(handle, Visitor=visitor)) is not None:
        games.append(game)
    return games


FRAGMENTS = [
    '[Event "x"]',
    '[Result "1-0"]',
    '[Annotator "a}b{"]',
    "[",
    "]",
    "\n",
    "\n\n",
    " ",
    "\t",
    "\r",
    "\u00a0",
    "\x1c",
    "\ufeff",
    "{",
    "}",
    "{ [%clk 0:01:00] }",
    ";",
    "%",
    "(",
    ")",
    "1.",
    "1...",
    "e4",
    "e5",
    "Nf3",
    "Nc6",
    "d4",
    "Qh5",
    "1-0",
    "*",
    "$1",
    "!?",
    "x",
]


@settings(max_examples=600, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join))
def test_python_chess_reads_the_reflowed_text_exactly_as_the_original(text):
    assert events(reflow(text)) == events(text)


def test_a_lichess_line_of_clock_comments_is_cut_after_each_comment():
    line = "1. e4 { [%clk 0:03:00] } 1... e5 { [%clk 0:02:59] } 1-0"
    assert reflow(f'[Event "x"]\n\n{line}\n') == (
        '[Event "x"]\n\n1. e4 { [%clk 0:03:00] }\n  1... e5 { [%clk 0:02:59] }\n  1-0\n'
    )
    assert reflow('[Annotator "}"]\n\n1. e4 *\n') == '[Annotator "}"]\n\n1. e4 *\n'  # tags untouched


def test_a_game_of_many_comments_on_one_line_reads_in_linear_time():
    """The reproduction: python-chess took 16 s for 5 MB, 68 s for 10 MB (quadratic). Here the
    time per byte of a 4x longer game stays within 2x of the shorter one's (CPU seconds)."""

    def seconds(comments: int) -> float:
        text = '[Event "x"]\n[Result "1-0"]\n\n1. e4 ' + "{ abcd } " * comments + "e5 1-0\n"
        start = time.process_time()
        parsed = reference(text)
        assert parsed.moves(0) == ["e2e4", "e7e5"] and parsed.result_token == ["1-0"]
        return time.process_time() - start

    small, large = seconds(25_000), seconds(100_000)
    assert large / 4 < 2 * small + 0.05, (small, large)


@pytest.mark.slow
def test_every_game_of_the_embedded_sample_reads_the_same():
    texts = [game.data.decode("utf-8", "replace") for game in split_games(read_blocks(SAMPLE))]
    changed = [(text, flowed) for text in texts if (flowed := reflow(text)) != text]
    assert len(changed) > len(texts) // 2  # most Lichess games have clock comments
    for text, flowed in changed:  # about 200,000 moves: their tokens, not a replay of each twice
        assert events(flowed, Tokens) == events(text, Tokens)
