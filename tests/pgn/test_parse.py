"""The fast parser (Rust) against the reference (python-chess): on tests/fixtures (exporters'
quirks), the embedded sample and generated games (the shared corpus in the corpus tier), both must
accept the same games with the same tokens and clocks. Where the Rust parser gives up,
python-chess decides; each kind of such disagreement is listed."""

from __future__ import annotations

import random
from collections.abc import Iterable

import chess
import chess.pgn
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore.ingest.validate import ValidateConfig, broken_rules, judge, tags_verdict
from chesscore.pgn.inputs import read_blocks
from chesscore.pgn.parse import parse_batch, reference
from chesscore.pgn.split import split_games
from tests.corpus import corpus_dir
from tests.sample import SAMPLE, fixture, fixture_names

CONFIG = ValidateConfig(min_plies=1, exclude_terminations=())

# The fixtures' games where the parsers part ways, as in the corpus: fixture -> {game index: why}
# for those Rust gives up on and python-chess re-reads, game indexes for those the tags reject
# unread (a set-up position, a variant Rust cannot read), and for tags and moves on one line.
FIXTURE_RUST_GIVES_UP = {"null_moves.pgn": {0: "null move"}, "uci_movetext.pgn": {0: "UCI movetext"}}
FIXTURE_REJECTED_BY_TAGS = {"fen_setups.pgn": {0, 1, 2}, "variants.pgn": {1, 2}}
FIXTURE_SAME_LINE = {"tags_and_moves_on_one_line.pgn": {0}}
# The fixtures' games validation accepts (min_plies 1, every termination) and why each other is not.
FIXTURE_ACCEPTED = {
    "blank_line_in_tags.pgn": 1,
    "bom.pgn": 1,  # the other's movetext is ` *`
    "crlf.pgn": 2,
    "escaped_quotes.pgn": 1,
    "glued_comments.pgn": 1,  # the tag-less game has no result
    "no_space_after_move_number.pgn": 1,
    "null_moves.pgn": 1,  # the one whose null move is inside a variation
    "uci_movetext.pgn": 1,
}

# Games the Rust parser rejects and python-chess re-reads (file -> {game index: why}).
RUST_GIVES_UP = {
    "lichess-org__dartchess__data_wcc_2023.pgn": {0: "backslash", 1: "backslash"},
    "niklasf__python-chess__data_pgn_uci-moves.pgn": {0: "UCI movetext"},
}
# Games the Rust parser rejects that are not re-read: their tags alone reject them (a variant, a
# set-up position; Rust reads the movetext alone from the standard position once the tags are read).
REJECTED_BY_TAGS = {
    "niklasf__python-chess__data_pgn_cutechess-fischerrandom.pgn": {0, 1, 2, 3},
    "niklasf__python-chess__data_pgn_knightvuillaume-jannlee-zh-lichess.pgn": {0},
    "niklasf__python-chess__data_pgn_saturs-jannlee-zh-lichess.pgn": {0},
    "notnil__chess__fixtures_pgns_0003.pgn": {0},
    "notnil__chess__fixtures_pgns_0014.pgn": {1, 2, 3, 4},
}
# Games whose tags and moves share a line: the parsers read them differently (Rust keeps the tag
# and the moves, python-chess drops the whole line), so they go to python-chess directly.
SAME_LINE = {
    "lichess-org__dartchess__data_headers-and-moves-on-the-same-line.pgn": {0},
    "lichess-org__dartchess__data_leading-whitespace.pgn": {1},
}


def outcome(batch, i: int) -> tuple:
    """What validation makes of game i: the verdict, and the moves/clocks/headers if accepted."""
    verdict = judge(
        CONFIG,
        batch.headers[i],
        int(batch.plies()[i]),
        batch.result_token[i],
        bool(batch.checkmate[i]),
        bool(batch.stalemate[i]),
        batch.error[i],
    )
    if verdict is not None:
        return verdict[0], None, None, None
    clocks = batch.clocks[batch.offsets[i] : batch.offsets[i + 1]]
    return "accepted", batch.moves(i), np.nan_to_num(clocks, nan=-1).tolist(), batch.headers[i]


def compare(
    texts: list[str], odd: list[bool], movetext_at: list[int] | None = None
) -> tuple[dict[int, str], set[int], int]:
    """Assert the fast path (as validate calls it) and the reference agree on every game; return
    the games the Rust parser gave up on and python-chess re-read (index -> error), those not
    re-read because their tags reject them, and how many games were accepted."""
    fast = parse_batch(texts, odd, movetext_at, rejected_by_tags=lambda h: tags_verdict(h) is not None)
    broken = broken_rules(
        CONFIG, fast.tags, fast.plies(), fast.result_token, fast.checkmate, fast.stalemate, fast.error
    )
    assert broken.tolist() == [outcome(fast, i)[0] != "accepted" for i in range(len(texts))]  # both rule forms
    gave_up, by_tags, accepted = {}, set(), 0
    for i, text in enumerate(texts):
        expected = outcome(reference(text), 0)
        assert outcome(fast, i) == expected, f"game {i}: fast {outcome(fast, i)[:2]} != reference {expected[:2]}"
        accepted += expected[0] == "accepted"
        if fast.parser[i] == "python-chess" and not odd[i]:
            gave_up[i] = fast.error[i] or "read by python-chess"
        elif fast.error[i] and fast.error[i][1].startswith("not read"):
            by_tags.add(i)
    return gave_up, by_tags, accepted


def split(blocks: Iterable[bytes]) -> tuple[list[str], list[bool], list[int], int]:
    """Texts, odd flags and movetext offsets of the games that are UTF-8, and how many are not."""
    texts, odd, movetext_at, undecodable = [], [], [], 0
    for game in split_games(blocks):
        try:
            texts.append(game.data.decode("utf-8"))
        except UnicodeDecodeError:
            undecodable += 1
            continue
        odd.append(game.odd)
        movetext_at.append(len(game.data[: game.movetext].decode("utf-8")))
    return texts, odd, movetext_at, undecodable


def test_fixtures_fast_and_reference_agree_and_disagreements_are_the_known_ones():
    for name in fixture_names(".pgn"):
        texts, odd, movetext_at, undecodable = split([fixture(name)])
        assert undecodable == 0
        gave_up, by_tags, accepted = compare(texts, odd, movetext_at)
        assert accepted == FIXTURE_ACCEPTED.get(name, 0), name
        assert set(gave_up) == set(FIXTURE_RUST_GIVES_UP.get(name, {})), name
        assert by_tags == FIXTURE_REJECTED_BY_TAGS.get(name, set()), name
        assert {i for i, flag in enumerate(odd) if flag} == FIXTURE_SAME_LINE.get(name, set()), name


def test_uci_movetext_is_kept_because_python_chess_reads_it():
    texts, odd, movetext_at, _ = split([fixture("uci_movetext.pgn")])
    batch = parse_batch(texts, odd, movetext_at)
    assert batch.parser == ["python-chess"] and batch.moves(0)[:3] == ["e2e4", "e7e5", "g1f3"]
    assert batch.moves(0)[6] == "e1g1" and batch.result_token[0] == "1/2-1/2"


def test_escaped_quotes_stay_inside_the_tag_value_in_both_parsers():
    texts, odd, movetext_at, _ = split([fixture("escaped_quotes.pgn")])
    fast, slow = parse_batch(texts, odd, movetext_at).headers[0], reference(texts[0]).headers[0]
    # python-chess keeps the escapes as written; the fast path must read the very same values.
    assert fast == slow and fast["Event"] == 'Study: \\"The Immortal\\" revisited'
    assert fast["Annotator"] == "C:\\\\Games\\\\annotated" and fast["Result"] == "1-0"


def test_null_moves_reject_the_main_line_only():
    texts, odd, movetext_at, _ = split([fixture("null_moves.pgn")])
    batch = parse_batch(texts, odd, movetext_at)
    assert batch.error[0] == ("null_move", "null move at ply 4") and batch.error[1] is None
    assert batch.moves(1) == ["d2d4", "d7d5", "c2c4", "e7e6", "b1c3", "g8f6"]


@pytest.mark.corpus
@pytest.mark.slow
def test_corpus_fast_and_reference_agree_and_disagreements_are_the_known_ones():
    accepted = 0
    for path in sorted(corpus_dir().glob("*.pgn")):
        texts, odd, movetext_at, undecodable = split(read_blocks(path))
        assert undecodable == 0
        gave_up, by_tags, count = compare(texts, odd, movetext_at)
        accepted += count
        assert set(gave_up) == set(RUST_GIVES_UP.get(path.name, {})), path.name
        assert by_tags == REJECTED_BY_TAGS.get(path.name, set()), path.name
        assert {i for i, flag in enumerate(odd) if flag} == SAME_LINE.get(path.name, set()), path.name
    assert accepted > 990  # nearly all of the Lichess head, plus the OTB and engine games


@pytest.mark.corpus
def test_corpus_uci_movetext_is_kept_because_python_chess_reads_it():
    texts, odd, movetext_at, _ = split(read_blocks(corpus_dir() / "niklasf__python-chess__data_pgn_uci-moves.pgn"))
    batch = parse_batch(texts, odd, movetext_at)
    assert batch.parser == ["python-chess"] and batch.moves(0)[:3] == ["g1f3", "c7c5", "e2e4"]


@pytest.mark.slow
def test_embedded_sample_fast_and_reference_agree():
    texts, odd, movetext_at, undecodable = split(read_blocks(SAMPLE))
    gave_up, by_tags, accepted = compare(texts, odd, movetext_at)
    assert undecodable == 8 and accepted > 3000 and not any(odd)
    # The games Rust gives up on are broken ones (illegal or null moves, a game cut inside a
    # comment); python-chess re-reads and rejects every one of them.
    reasons = {outcome(reference(texts[i]), 0)[0] for i in gave_up}
    assert "accepted" not in reasons and reasons <= {"illegal_move", "null_move", "no_result"}, reasons
    assert {outcome(reference(texts[i]), 0)[0] for i in by_tags} == {"variant", "setup_position"}


def exported_game(seed: int) -> str:
    """A random legal game as python-chess exports it, with clocks, NAGs and side lines."""
    rng = random.Random(seed)
    board, game = chess.Board(), chess.pgn.Game()
    game.headers["Site"] = f"https://lichess.org/{seed % 10**8:08d}"
    node = game
    for _ in range(rng.randint(1, 120)):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        if rng.random() < 0.1 and len(legal) > 1:
            node.add_variation(rng.choice([m for m in legal if m != move])).comment = "side line"
        node = node.add_main_variation(move)
        node.set_clock(rng.randint(0, 10_800) + rng.choice([0, 0.5]))
        if rng.random() < 0.3:
            node.nags.add(rng.randint(1, 6))
        board.push(move)
    end = board.outcome(claim_draw=False)
    game.headers["Result"] = end.result() if end else rng.choice(["1-0", "0-1", "1/2-1/2"])
    return str(game)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 2**32), min_size=1, max_size=8))
def test_generated_games_agree(seeds):
    gave_up, by_tags, _ = compare([exported_game(seed) for seed in seeds], [False] * len(seeds))
    assert gave_up == {} and by_tags == set()
