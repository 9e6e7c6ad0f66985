"""Splitting PGN byte streams into games: real exporters' layouts (tests/fixtures, the embedded
sample; the shared corpus in the corpus tier), and the fast paragraph path against the
line-by-line path on generated layouts, for any block boundaries."""

from __future__ import annotations

import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore.pgn import split
from chesscore.pgn.inputs import read_blocks
from chesscore.pgn.split import BOM, split_games
from tests.corpus import corpus_dir
from tests.counted import Work, count_split_work, searched
from tests.sample import FIXTURES, SAMPLE, fixture, fixture_names, sample_pgn

# Games per fixture as tests/fixtures/README.md counts them.
FIXTURE_GAMES = {
    name: int(count)
    for name, count in re.findall(r"^\| `([^`]+\.pgn)` \| (\d+) \|", (FIXTURES / "README.md").read_text(), re.M)
}
# Games per corpus file as its README counts them (the number in brackets where it gives one).
CORPUS_GAMES = {
    "kdave__pgn-toys__game4.pgn": 1,
    "kdave__pgn-toys__game5.pgn": 1,
    "kdave__pgn-toys__game6.pgn": 1,
    "kdave__pgn-toys__game7.pgn": 1,
    "kdave__pgn-toys__lichess.pgn": 999,
    "lichess-org__dartchess__data_headers-and-moves-on-the-same-line.pgn": 3,
    "lichess-org__dartchess__data_leading-whitespace.pgn": 4,
    "lichess-org__dartchess__data_lichess-bullet-game.pgn": 1,
    "lichess-org__dartchess__data_wcc_2023.pgn": 3,
    "lichess-org__scalachess__test-kit_resources_FWWRC.pgn": 605,
    "lichess-org__scalachess__test-kit_resources_uzchesscup.pgn": 45,
    "niklasf__python-chess__data_pgn_chessbase-empty-line.pgn": 1,
    "niklasf__python-chess__data_pgn_cutechess-fischerrandom.pgn": 4,
    "niklasf__python-chess__data_pgn_kasparov-deep-blue-1997.pgn": 6,
    "niklasf__python-chess__data_pgn_utf8-bom.pgn": 2,
    "niklasf__rust-pgn-reader__fuzz_corpus_pgn_bare.pgn": 1,
    "notnil__chess__fixtures_pgns_0006.pgn": 5,
    "notnil__chess__fixtures_pgns_0012.pgn": 1,
    "notnil__chess__fixtures_pgns_0013.pgn": 3,
    "notnil__chess__fixtures_pgns_0014.pgn": 5,
}


def games_of(data: bytes, block: int | None = None, fast: bool = True) -> list[tuple[int, int, bytes, bool]]:
    blocks = [data] if block is None else [data[i : i + block] for i in range(0, len(data), block)]
    return [(g.index, g.offset, g.data, g.odd) for g in split_games(blocks, fast=fast)]


def check_covers(data: bytes, games: list[tuple[int, int, bytes, bool]]) -> None:
    """Every byte is in exactly one game, except blank lines (and a BOM) before the first."""
    assert [g[0] for g in games] == list(range(len(games)))
    position = games[0][1] if games else len(data)
    assert not data[:position].replace(BOM, b"", 1).strip(), "text before the first game was dropped"
    for index, offset, text, _ in games:
        assert offset == position and data[offset : offset + len(text)] == text, f"game {index} misplaced"
        position += len(text)
    assert position == len(data)


def test_every_fixture_is_counted_in_the_readme():
    assert sorted(FIXTURE_GAMES) == fixture_names(".pgn") and len(FIXTURE_GAMES) >= 12


@pytest.mark.parametrize("name", sorted(FIXTURE_GAMES))
def test_fixtures_split_as_their_readme_counts(name, tmp_path):
    data = fixture(name)
    games = games_of(data)
    assert len(games) == FIXTURE_GAMES[name]
    check_covers(data, games)
    assert games == games_of(data, block=7) == games_of(data, fast=False)
    (tmp_path / name).write_bytes(data)
    assert games == [(g.index, g.offset, g.data, g.odd) for g in split_games(read_blocks(tmp_path / name, block=97))]


def test_embedded_sample_splits_into_its_games_across_frames_and_any_blocks():
    data = sample_pgn()
    games = games_of(data)
    assert len(games) == 3515  # data/raw/README.md
    check_covers(data, games)
    assert games == [(g.index, g.offset, g.data, g.odd) for g in split_games(read_blocks(SAMPLE, block=997))]


def test_fixture_tag_only_sections_split_on_a_repeated_tag_and_join_on_new_ones():
    tags_only = games_of(fixture("tags_only.pgn"))
    assert all(text.startswith(b'[Event "World Rapid') for _, _, text, _ in tags_only)
    without_event = games_of(fixture("tags_without_event.pgn"))
    assert [text.split(b"\n", 1)[0] for _, _, text, _ in without_event] == [
        b'[Event "Round 1: Gamma, G. - Delta, D."]',
        b'[Round "1.2"]',
        b'[Round "1.3"]',
    ]
    chessbase = games_of(fixture("blank_line_in_tags.pgn"))
    assert len(chessbase) == 1 and b'[Date "2019.03.07"]' in chessbase[0][2] and b"Nb3" in chessbase[0][2]


def test_fixture_tags_and_moves_on_one_line_are_flagged_for_the_reference():
    games = games_of(fixture("tags_and_moves_on_one_line.pgn"))
    assert [odd for *_, odd in games] == [True, False, False]


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(CORPUS_GAMES))
def test_corpus_files_split_as_their_readme_counts(name):
    path = corpus_dir() / name
    games = games_of(path.read_bytes())
    assert len(games) == CORPUS_GAMES[name]
    check_covers(path.read_bytes(), games)
    assert games == [(g.index, g.offset, g.data, g.odd) for g in split_games(read_blocks(path, block=97))]


@pytest.mark.corpus
def test_tag_only_sections_split_on_a_repeated_tag_and_join_on_new_ones():
    fwwrc = games_of((corpus_dir() / "lichess-org__scalachess__test-kit_resources_FWWRC.pgn").read_bytes())
    assert all(text.startswith(b'[Event "FIDE Women') for _, _, text, _ in fwwrc)
    uzchess = games_of((corpus_dir() / "lichess-org__scalachess__test-kit_resources_uzchesscup.pgn").read_bytes())
    assert [text.split(b"\n", 1)[0] for _, _, text, _ in uzchess[:3]] == [
        b'[Event "Round 1: Aravindh, Chithambaram VR. - Praggnanandhaa R"]',
        b'[Round "1.2"]',
        b'[Round "1.3"]',
    ]
    chessbase = games_of((corpus_dir() / "niklasf__python-chess__data_pgn_chessbase-empty-line.pgn").read_bytes())
    assert len(chessbase) == 1 and b'[Date "2017.12.04"]' in chessbase[0][2] and b"Kf3" in chessbase[0][2]


@pytest.mark.corpus
def test_tags_and_moves_on_one_line_are_flagged_for_the_reference():
    games = games_of(
        (corpus_dir() / "lichess-org__dartchess__data_headers-and-moves-on-the-same-line.pgn").read_bytes()
    )
    assert [odd for *_, odd in games] == [True, False, False]


def test_bom_crlf_and_comments_spanning_blank_lines():
    data = (
        BOM + b'[Event "a"]\r\n[Result "1-0"]\r\n\r\n1. e4 { a comment\r\n\r\n[not a tag] still comment }'
        b' e5 1-0\r\n\r\n[Event "b"]\r\n\r\n1. d4 *\r\n'
    )
    games = games_of(data)
    assert len(games) == 2 and games[0][1] == len(BOM) and games[1][2].startswith(b'[Event "b"]')
    assert games == games_of(data, block=5) == games_of(data, fast=False)
    check_covers(data, games)


def test_movetext_after_a_blank_line_is_a_new_game_without_tags():
    data = b'[Event "a"]\n\n1. e4 e5 *\n\n1. d4 d5 *\n\n\n\n   \n2. c4\n'
    assert [text for _, _, text, _ in games_of(data)] == [
        b'[Event "a"]\n\n1. e4 e5 *\n\n',
        b"1. d4 d5 *\n\n\n\n   \n",
        b"2. c4\n",
    ]


def test_empty_and_blank_streams_have_no_games():
    assert games_of(b"") == [] and games_of(b"\n\n  \n\r\n") == [] and games_of(BOM + b"\n") == []


def test_an_oversized_game_is_one_problem_record_and_reading_resumes():
    big = b'[Event "big"]\n\n1. e4 ' + b"{" + b"x" * 5000 + b"} e5 *\n\n"
    data = big + b'[Event "next"]\n\n1. d4 *\n'
    blocks = [data[i : i + 256] for i in range(0, len(data), 256)]
    games = list(split_games(blocks, max_game_bytes=1000))
    assert [(g.index, g.problem is not None) for g in games] == [(0, True), (1, False)]
    assert games[0].offset == 0 and games[0].data == b"" and games[1].data.startswith(b'[Event "next"]')


@pytest.mark.parametrize("block", [7, 100, 999, 1 << 20])
def test_an_oversized_game_with_many_tag_lines_is_one_problem_record_for_any_blocks(block):
    """Skipping used to resume at the oversized game's own second tag line when the stream came in
    blocks smaller than the game: one game became two records, depending on the reads."""
    big = b'[Event "big"]\n[Site "x"]\n[Result "*"]\n\n1. e4 {' + b"x" * 5000 + b"} e5 *\n\n"
    data = b'[Event "a"]\n\n1. d4 *\n\n' + big + b'[Event "next"]\n[Result "*"]\n\n1. d4 *\n'
    games = list(split_games([data[i : i + block] for i in range(0, len(data), block)], max_game_bytes=1000))
    assert [(g.index, g.problem is not None) for g in games] == [(0, False), (1, True), (2, False)]
    assert games[1].offset == data.index(b'[Event "big"]') and games[2].data.startswith(b'[Event "next"]')


LINES = [
    b'[Event "Rated Blitz game"]',
    b'[Site "https://lichess.org/abcdefgh"]',
    b'[Result "1-0"]',
    b'[Round "1"]',
    b'  [Variant "Standard"]',
    b'[White "a"] 1. e4 e5 *',
    b"1. e4 e5 2. Nf3 Nc6 1-0",
    b"1. d4 { open comment",
    b"closing } d5 *",
    b"{ [%clk 0:01:00] } 2... Nf6",
    b"; rest { of line",
    b"%escape line",
    b"",
    b"",
    b"   ",
    b"[not a tag",
    b"} stray",
    BOM + b'[Event "x"]',
    b"1. e4 { a comment left open, with more than thirty-two bytes after its brace 1-0",
]


PLAIN = [
    b'[Event "Rated Blitz game"]\n[Site "https://lichess.org/abcdefgh"]\n[Result "1-0"]\n\n'
    b"1. e4 { [%clk 0:03:00] } 1... e5 { [%clk 0:02:59] } 1-0\n\n",
    b'[Event "x"]\n[Result "*"]\n\n1. d4 d5 *\n\n',
    b'[Round "2"]\n\n0-1\n\n',
    b'[Event "y"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 6. Re1 b5 1-0\n\n',
]


@pytest.mark.parametrize("count", [3, 200])
def test_many_rare_bytes_in_a_buffer_split_as_the_line_walk_does(count):
    # Past a few dozen CRs or ; comments in a buffer the fast path finds them with a numpy scan
    # instead of one by one: both ways must give the line walk's games and movetext offsets.
    semicolon = b'[Event "semicolon"]\n\n1. e4 ; a comment\ne5 1-0\n\n'
    crlf = b'[Event "crlf"]\r\n\r\n1. e4 e5 1-0\r\n\r\n'
    data = PLAIN[0] + (semicolon + crlf) * count + PLAIN[0] * 3
    fast, walked = list(split_games([data])), list(split_games([data], fast=False))
    assert fast == walked and len(fast) == 2 * count + 4
    assert [g.movetext > 0 for g in fast[1:3]] == [False, False] and fast[-1].movetext > 0


def test_a_comment_left_open_far_from_the_end_joins_the_next_paragraphs():
    data = (
        b'[Event "a"]\n\n1. e4 { a comment left open with more than thirty-two bytes after it\n\n'
        b'[Event "b"]\n\n1. d4 } d5 1-0\n\n' + PLAIN[0]
    )
    fast = list(split_games([data]))
    assert fast == list(split_games([data], fast=False)) and len(fast) == 2


def chunks(parts: list[bytes], newline: bytes) -> bytes:
    return b"".join(p if p in PLAIN else p + newline for p in parts)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(LINES + PLAIN * 4), max_size=30),
    st.sampled_from([b"\n", b"\r\n"]),
    st.integers(1, 64),
    st.booleans(),
)
def test_fast_paths_agree_with_the_line_walk_for_any_blocks(parts, newline, block, final_newline):
    data = chunks(parts, newline)
    data = data if final_newline else data.rstrip(b"\n")
    reference = games_of(data, fast=False)
    assert games_of(data) == reference
    assert games_of(data, block=block) == reference
    check_covers(data, reference)
    whole = list(split_games([data]))
    assert [g.movetext for g in whole] == [
        g.movetext for g in split_games([data[i : i + block] for i in range(0, len(data), block)])
    ]
    for game in whole:
        if game.movetext:  # the plain layout: tag lines, one blank line, movetext with no tag line
            head, moves = game.data[: game.movetext], game.data[game.movetext :]
            assert head.endswith(b'"]\n\n') and all(line.startswith(b"[") for line in head[:-2].split(b"\n"))
            assert moves[:1] not in (b"[", b"\n", b" ") and b"\n[" not in moves.rstrip(b"\n")


def open_at_end(line: bytes, in_comment: bool) -> bool:
    """The rule, byte by byte: whether a {comment} is open at the end of the line (outside a
    comment, `;` starts one that ends the line; comments do not nest)."""
    for byte in line:
        if in_comment:
            in_comment = byte != ord("}")
        elif byte == ord("{"):
            in_comment = True
        elif byte == ord(";"):
            return False
    return in_comment


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"{", b"}", b";", b"a", b" "]), max_size=16).map(b"".join), st.booleans())
def test_the_comment_open_at_a_line_end_is_found_as_the_rule_says(line, in_comment):
    assert split._comment_after(line, in_comment) == open_at_end(line, in_comment)


@pytest.mark.parametrize(
    "line",
    [
        b"{ c } " * 20_000,  # issue 43: 10 MB of these took 139 s (every comment searched the rest for a ;)
        b"1. e4 { c } 1... e5 { c } " * 5_000,
        b"{ c } " * 20_000 + b"{ left open",
        b"{ ; } " * 20_000,  # ; inside comments: each is skipped once
        b"{ c } " * 20_000 + b"; the rest { of the line",
        b"} c { " * 20_000,
    ],
    ids=["comments", "moves", "open", "semicolons", "line-comment", "closing-first"],
)
@pytest.mark.parametrize("in_comment", [False, True])
def test_a_line_of_many_comments_is_searched_in_linear_time(line, in_comment):
    work = Work()
    assert split._comment_after(searched(line, work), in_comment) == open_at_end(line, in_comment)
    assert work.searched <= 4 * len(line), work.searched / len(line)


LONG_GAME_HEAD = b'[Event "long"]\n[Site "y"]\n[Result "*"]\n\n'
LONG_BODIES = {
    "comment paragraphs": (b"{ c\n\nc } " * 8 + b"\n") * 2_000,  # a blank line in every comment
    "cut-like comments": (b"1. e4 { a\n\n[b] } 1... e5 { c } " * 4 + b"\n") * 1_000,  # \n\n[ too
}


@pytest.mark.parametrize("body", LONG_BODIES.values(), ids=LONG_BODIES)
@pytest.mark.parametrize("block", [1_000, 7_919])
def test_a_long_game_in_small_blocks_is_walked_a_bounded_number_of_times(body, block, monkeypatch):
    """Each block used to walk the open game's text again from its start: a 150 KB game in 1 KB
    blocks was walked 150 times (a 4 MB one in a .zst's 100 KB chunks, 41 times)."""
    data = PLAIN[1] + LONG_GAME_HEAD + body + b"\n" + PLAIN[0] + PLAIN[1]
    whole = games_of(data)
    assert len(whole) == 4 and whole[1][2].startswith(LONG_GAME_HEAD)
    work = count_split_work(monkeypatch)
    assert games_of(data, block) == whole
    assert work.walked <= 3 * len(data) and work.searched <= 6 * len(data), (work.walked, work.searched, len(data))


def test_games_before_a_break_come_out_while_a_long_game_waits_for_more():
    """Past a long open game the splitter waits for more blocks before it looks again; a stream
    that breaks (a damaged file) must still give every game whose end was read."""
    data = PLAIN[1] + LONG_GAME_HEAD + LONG_BODIES["comment paragraphs"] + b"\n" + PLAIN[0] * 3 + PLAIN[1]

    def broken():
        yield from (data[i : i + 1_000] for i in range(0, len(data), 1_000))
        raise OSError("the rest is unreadable")

    got = []
    with pytest.raises(OSError):
        for game in split_games(broken()):
            got.append((game.index, game.offset, game.data, game.odd))
    assert got == games_of(data)[:-1]  # the last one is open where the stream broke


def test_a_buffer_of_tiny_segments_is_looked_at_in_bounded_memory():
    """Every `\\n\\n[` is a candidate game start for the numpy pass, which looked at the last 32
    bytes of all of them at once (int64 offsets): a comment game of `{ a\\n\\n[b] }`s, 12 bytes
    each, took 63 bytes of memory a byte (778 MiB RSS for a 10 MB fuzz input, over the 512 MiB
    bound of docs/limits.md). The tails are looked at a piece at a time (numpy's allocations are
    traced, so this counts bytes, not time)."""
    unit = b"{ a\n\n[b] } "
    data = LONG_GAME_HEAD + unit * 200_000 + b"\n"
    tracemalloc.start()
    try:
        games = games_of(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(games) == 1 and games[0][2] == data
    assert peak < 25 * len(data), peak / len(data)
