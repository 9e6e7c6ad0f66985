"""triples-v1 tokens and the legal-move automaton, against python-chess's move generator."""

from __future__ import annotations

import chess
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore import tokens as T
from chesscore.tokens import BOS, EOS, PAD, RESERVED_START, State, decode_game, decode_move, encode_game, encode_move
from tests.corpus import standard_games
from tests.sample import sample_games


def test_constants_are_the_contract():
    assert (T.NO_PROMOTION, T.KNIGHT, T.BISHOP, T.ROOK, T.QUEEN) == (64, 65, 66, 67, 68)
    assert (BOS, EOS, PAD, RESERVED_START, T.VOCAB_SIZE, T.VERSION) == (69, 70, 71, 72, 128, "triples-v1")


@st.composite
def random_games(draw, max_plies: int = 160) -> list[chess.Move]:
    """A random legal game from the start position: each ply picks one legal move."""
    board, moves = chess.Board(), []
    for _ in range(draw(st.integers(0, max_plies))):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = legal[draw(st.integers(0, len(legal) - 1))]
        board.push(move)
        moves.append(move)
    return moves


def accepted_triples(state: State) -> set[tuple[int, int, int]]:
    """Every complete triple the automaton accepts at a source phase, by walking its masks.

    Past the sources, the walk feeds copies of a twin whose board has no move history: the legal moves
    do not depend on it (the position, side to move, castling rights and en passant square decide
    them), and copying the history for each of the ~45 branches of a position made the walk
    quadratic in the game's length."""
    twin = state.copy()
    twin.board = state.board.copy(stack=False)
    triples = set()
    for source in np.flatnonzero(state.mask()):
        if source == EOS:
            continue
        after_source = twin.copy()
        after_source.feed(source)
        for destination in np.flatnonzero(after_source.mask()):
            after_destination = after_source.copy()
            after_destination.feed(destination)
            for promotion in np.flatnonzero(after_destination.mask()):
                triples.add((int(source), int(destination), int(promotion)))
    return triples


def check_game(moves: list[chess.Move]) -> None:
    """Round trip, and at every position the automaton accepts exactly the legal moves."""
    tokens = encode_game(moves)
    assert len(tokens) == 2 + 3 * len(moves)
    assert decode_game(tokens) == moves
    state, board = State(), chess.Board()
    state.feed(BOS)
    for move in moves:
        assert accepted_triples(state) == {encode_move(m) for m in board.legal_moves}
        assert decode_move(encode_move(move)) == move
        for token in encode_move(move):
            state.feed(token)
        board.push(move)
        assert state.board == board
    assert accepted_triples(state) == {encode_move(m) for m in board.legal_moves}
    state.feed(EOS)
    assert state.done and not state.mask().any()


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(random_games(max_plies=120))
def test_random_legal_games(moves):
    check_game(moves)


SPECIAL_GAMES = {
    # both castlings, an en passant capture, checks
    "castling_en_passant": "e2e4 g8f6 e4e5 d7d5 e5d6 e7d6 g1f3 f8e7 f1c4 e8g8 b1c3 b8c6 d2d3 c8e6 c1e3 d8d7 "
    "d1d2 e6c4 e1c1",
    # all four promotions are offered, with and without capture
    "promotions": "e2e4 d7d5 e4d5 c7c6 d5c6 g8f6 c6b7 b8d7 b7a8n",
    "underpromotion_rook": "e2e4 d7d5 e4d5 c7c6 d5c6 g8f6 c6b7 b8d7 b7c8r",
    # a pinned knight and a king in check with few evasions
    "pin_and_check": "e2e4 e7e5 g1f3 b8c6 f1b5 d7d6 d2d4 c8d7 b1c3 g8f6 b5c6 d7c6 d4e5 f6e4 c3e4 c6e4 e5d6 f8d6 d1d6",
}


@pytest.mark.parametrize("name", sorted(SPECIAL_GAMES))
def test_special_positions(name):
    check_game([chess.Move.from_uci(u) for u in SPECIAL_GAMES[name].split()])


def test_promotion_phase_offers_exactly_the_four_pieces():
    state = State.from_moves("e2e4 d7d5 e4d5 c7c6 d5c6 g8f6 c6b7 b8d7".split())
    state.feed(chess.B7)
    state.feed(chess.A8)
    assert set(np.flatnonzero(state.mask())) == {T.KNIGHT, T.BISHOP, T.ROOK, T.QUEEN}


def _round_trip_and_replay(games, replay_every: int) -> None:
    for moves in games:
        assert [decode_move(encode_move(m)) for m in moves] == moves  # every move
    for moves in games[::replay_every]:  # a full replay costs a move generation per ply
        assert decode_game(encode_game(moves)) == moves


def test_sample_games_round_trip_and_replay():
    games = sample_games()
    assert len(games) > 3000
    _round_trip_and_replay(games, replay_every=15)


def test_sample_games_automaton_equals_move_generator():
    # The full walk costs ~30 feeds per position: a spread of games, the three shortest with a
    # promotion, and the shortest with an underpromotion.
    games = sample_games()
    promoting = sorted((g for g in games if any(m.promotion for m in g)), key=len)
    under = [g for g in promoting if any(m.promotion not in (None, chess.QUEEN) for m in g)]
    chosen = games[::340] + tuple(promoting[:3]) + tuple(under[:1])
    assert len(chosen) == 15 and under
    for moves in chosen:
        check_game(moves)


@pytest.mark.corpus
def test_corpus_games_round_trip_and_replay():
    games = standard_games()
    assert len(games) > 1000
    _round_trip_and_replay(games, replay_every=5)


@pytest.mark.corpus
def test_corpus_games_automaton_equals_move_generator():
    # The full walk costs ~30 feeds per position: a spread of games, promotions included.
    games = standard_games()
    chosen = games[::100] + [g for g in games if any(m.promotion for m in g)][:4]
    for moves in chosen:
        check_game(moves)


@settings(max_examples=25, deadline=None)
@given(random_games(max_plies=60), st.data())
def test_illegal_token_raises_and_leaves_state_unchanged(moves, data):
    state = State.from_moves(moves)
    # stop somewhere inside the next move, if there is one
    legal = list(state.board.legal_moves)
    if legal:
        move = legal[data.draw(st.integers(0, len(legal) - 1))]
        for token in encode_move(move)[: data.draw(st.integers(0, 2))]:
            state.feed(token)
    before = (state.phase, state.board.fen(), list(state.board.move_stack), state.mask().copy())
    allowed = state.mask()
    for token in list(range(T.VOCAB_SIZE)) + [-1, 128, 1000]:
        if 0 <= token < T.VOCAB_SIZE and allowed[token]:
            continue
        with pytest.raises(ValueError):
            state.feed(token)
        assert (state.phase, state.board.fen(), list(state.board.move_stack)) == before[:3]
        assert np.array_equal(state.mask(), before[3])


@settings(max_examples=25, deadline=None)
@given(random_games(max_plies=60))
def test_eos_only_at_source_phase_and_reserved_never(moves):
    state = State()
    for token in encode_game(moves)[:-1]:
        for legal in (True, False):
            mask = state.mask(legal=legal)
            assert mask.dtype == bool and mask.shape == (128,)
            assert not mask[RESERVED_START:].any() and not mask[PAD]
            assert mask[EOS] == (state.phase == T.PHASE_SOURCE)
            assert mask[BOS] == (state.phase == T.PHASE_BOS)
        assert not (state.mask(legal=True) & ~state.mask(legal=False)).any()  # legal within grammar
        state.feed(token)


def test_nothing_follows_eos():
    state = State.from_moves(["e2e4"])
    state.feed(EOS)
    with pytest.raises(ValueError, match="after EOS"):
        state.feed(12)
    with pytest.raises(ValueError, match="after EOS"):
        decode_game([BOS, EOS, BOS])


@pytest.mark.parametrize(
    "tokens, message",
    [
        ([12, 28], "3 tokens"),
        ([12, 28, 64, 64], "3 tokens"),
        ([12, 28, 72], "not 64..68"),
        ([12, 28, PAD], "not 64..68"),
        ([64, 28, 64], "not a square"),
        ([12, 12, 64], "both"),
        ([12, 28, T.QUEEN], "not a promotion"),  # e2e4 cannot promote
    ],
)
def test_decode_move_rejects_malformed_triples(tokens, message):
    with pytest.raises(ValueError, match=message):
        decode_move(tokens)


def test_encode_move_rejects_non_standard_moves():
    for move in (
        chess.Move.null(),
        chess.Move(chess.E2, chess.E4, drop=chess.KNIGHT),
        chess.Move(chess.E7, chess.E8, promotion=chess.KING),
    ):
        with pytest.raises(ValueError):
            encode_move(move)


def test_decode_game_names_the_ply_of_the_first_illegal_move():
    tokens = encode_game([chess.Move.from_uci(u) for u in ("e2e4", "e7e5", "e1e3")])
    with pytest.raises(ValueError, match=r"ply 3 .*token 8"):
        decode_game(tokens)
    with pytest.raises(ValueError, match="ply 0"):
        decode_game([12, 28, 64, EOS])
    with pytest.raises(ValueError, match="does not end with EOS"):
        decode_game(encode_game([chess.Move.from_uci("e2e4")])[:-1])


def test_legal_moves_are_generated_once_per_position():
    state = State.from_moves(["e2e4"])
    first = state.legal_moves()
    state.mask()
    state.feed(chess.E7)
    assert state.legal_moves() is first  # the destination mask reads the same list
    for token in (chess.E5, T.NO_PROMOTION):
        state.feed(token)
    assert state.legal_moves() is not first


def test_the_contract_hash_is_of_the_encoding_not_of_the_file():
    # Pinned: a change here means the triples-v1 encoding changed; that needs a new VERSION.
    assert T.tokenizer_sha256() == "d8d2a07a0ad3d439018443a9142a957d65b063e7838fe3e6b7bfe8f42c37d80e"
    assert len(T.CONTRACT_GAMES) == 5 and all(T.decode_game(T.encode_game(g.split())) for g in T.CONTRACT_GAMES)
