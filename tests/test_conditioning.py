"""triples-v2: the conditioning prefix's layout and round trip, the State over it, the prefix
made from dataset columns, the seeded "unknown" drop, and that no loss, accuracy or legality
metric counts the prefix (chesscore.tokens, chesscore.conditioning, chesscore.train.metrics)."""

from dataclasses import replace

import chess
import numpy as np
import pytest
import torch

from chesscore import tokens as T
from chesscore.conditioning import ConditionedSource, drop_fields, drop_prefixes, prefix_of, table_prefixes
from chesscore.features import CAPTURED, MOVE_FEATURES, NOTHING
from chesscore.model import CONFIGS, GPT
from chesscore.pgn.meta import ALL_CLASSES
from chesscore.train import metrics
from chesscore.train.batching import IGNORE, TokenList, collate
from chesscore.train.data import TrainData, conditioned
from tests.training_data import sample_tokens

ITALIAN = "e2e4 e7e5 g1f3 b8c6 f1c4 f8c5 e1g1 g8f6"


def test_rating_bins_are_100_points_with_open_ends_and_an_unknown_token():
    assert T.rating_token(None) == T.RATING_UNKNOWN == 72
    assert [T.rating_token(r) for r in (0, 599, 600, 699, 700, 1523, 3199, 3200, 4000)] == [
        73,
        73,
        74,
        74,
        75,
        83,
        99,
        100,
        100,
    ]
    labels = [T.rating_label(t) for t in range(T.RATING_UNKNOWN, T.RATING_LAST + 1)]
    assert labels[:3] == ["unknown", "<600", "600-699"] and labels[-2:] == ["3100-3199", "3200+"]
    for token in range(T.RATING_FIRST + 1, T.RATING_LAST):  # each bin holds exactly its own ratings
        low, high = T.rating_range(token)
        assert high - low == 99 and T.rating_token(low) == T.rating_token(high) == token
    with pytest.raises(ValueError, match="not a rating bin"):
        T.rating_range(T.TIME_CONTROL_FIRST)


def test_time_control_tokens_cover_every_class_the_dataset_stores():
    assert set(T.TIME_CONTROL_CLASSES) == set(ALL_CLASSES)
    tokens = {T.time_control_token(name) for name in ALL_CLASSES}
    assert tokens == set(range(T.TIME_CONTROL_FIRST, T.CONDITIONING_END))
    assert T.time_control_token(None) == T.TIME_CONTROL_UNKNOWN
    with pytest.raises(ValueError, match="'hyperbullet'"):
        T.time_control_token("hyperbullet")
    # Nothing of the prefix collides with a move, a special token or the rest of the reserved range.
    assert T.RESERVED_START == T.RATING_UNKNOWN and T.RATING_LAST + 1 == T.TIME_CONTROL_FIRST
    assert T.CONDITIONING_END < T.VOCAB_SIZE


def test_a_prefixed_game_round_trips_and_keeps_the_phase_of_every_target():
    prefix = T.conditioning_prefix(1834, None, "rapid")
    game = T.encode_game(ITALIAN.split(), prefix)
    plain = T.encode_game(ITALIAN.split())
    assert game[:4] == [T.BOS, 86, T.RATING_UNKNOWN, 104] and game[4:] == plain[1:]
    assert len(game) == 5 + 3 * 8 and T.prefix_length(game) == 3 and T.prefix_length(plain) == 0
    assert [m.uci() for m in T.decode_game(game)] == ITALIAN.split() == [m.uci() for m in T.decode_game(plain)]
    # Target i (over tokens[1:]) is a source, destination, promotion at i % 3 in both versions.
    for tokens in (game, plain):
        first = T.prefix_length(tokens)
        targets = tokens[1 + first :]
        assert all(0 <= t < 64 for i, t in enumerate(targets[:-1], first) if i % 3 in (0, 1))
        assert all(64 <= t <= 68 for i, t in enumerate(targets[:-1], first) if i % 3 == 2)


def test_the_state_reads_the_prefix_in_its_order_and_refuses_anything_else():
    state = T.State(conditioned=True)
    state.feed(T.BOS)
    assert state.mask().nonzero()[0].tolist() == list(range(72, 101))  # a rating (or unknown)
    with pytest.raises(ValueError, match="white rating"):
        state.feed(chess.E2)
    state.feed(80)
    state.feed(90)
    assert state.mask().nonzero()[0].tolist() == list(range(101, 108))
    with pytest.raises(ValueError, match="time control"):
        state.feed(90)
    state.copy().feed(101)  # a copy keeps the phase and leaves the original where it was
    state.feed(103)
    assert sorted(state.mask().nonzero()[0].tolist()) == sorted(
        {m.from_square for m in chess.Board().legal_moves} | {T.EOS}
    )
    assert T.State.from_moves(["e2e4"], T.UNKNOWN_PREFIX).board.fen() == T.State.from_moves(["e2e4"]).board.fen()
    v1 = T.State()
    v1.feed(T.BOS)
    with pytest.raises(ValueError, match="source or EOS"):
        v1.feed(80)  # a v1 game has no prefix
    with pytest.raises(ValueError, match="time control"):
        T.encode_game(["e2e4"], (80, 80, 80))
    with pytest.raises(ValueError, match="3 tokens"):
        T.encode_game(["e2e4"], (80, 80))
    with pytest.raises(ValueError, match=r"ply 2 \(token 7\)"):
        T.decode_game(T.encode_game(["e2e4", "e7e5"], T.UNKNOWN_PREFIX)[:7] + [chess.E2, chess.E4, 64, T.EOS])


def test_v1s_contract_hash_is_untouched_and_v2_has_its_own():
    v1, v2 = T.tokenizer_sha256(), T.tokenizer_sha256(T.CONDITIONED_VERSION)
    assert v1 == T.tokenizer_sha256(T.VERSION) == "d8d2a07a0ad3d439018443a9142a957d65b063e7838fe3e6b7bfe8f42c37d80e"
    # Pinned as v1 is: a change means the triples-v2 encoding changed, which needs a new version.
    assert v2 == "1c3bc12db5f96f3459c1743f8d897bf143da98a28de3650992dd8801765494e8"
    with pytest.raises(ValueError, match="triples-v3"):
        T.tokenizer_sha256("triples-v3")


def _games(n: int) -> list[tuple[int, ...]]:
    return list(sample_tokens()[:n])


def test_conditioned_rows_are_the_v1_games_with_their_prefix_after_bos():
    games = _games(5)
    prefixes = [
        prefix_of({"white_elo": 1000 + 300 * i, "black_elo": None, "time_control_class": "blitz"}) for i in range(5)
    ]
    source = ConditionedSource(TokenList(games), prefixes)
    assert source.lengths().tolist() == [len(g) + 3 for g in games]
    rows = source.batch([3, 0])
    for row, i in zip(rows, (3, 0)):
        moves = [m.uci() for m in T.decode_game(games[i])]
        expected = T.encode_game(moves, prefixes[i])
        assert row[: len(expected)].tolist() == expected and (row[len(expected) :] == T.PAD).all()
        assert source[i].tolist() == expected
    with pytest.raises(ValueError, match="4 prefixes for 5 games"):
        ConditionedSource(TokenList(games), prefixes[:4])


def test_the_unknown_drop_is_exact_seeded_and_deterministic():
    true = np.tile(np.array(T.conditioning_prefix(1500, 1600, "blitz"), np.uint8), (1000, 1))
    dropped = drop_prefixes(true, 0.1, seed=7)
    unknown = (dropped == T.UNKNOWN_PREFIX).all(1)
    assert unknown.sum() == 100 and ((dropped == true).all(1) | unknown).all()
    assert (drop_prefixes(true, 0.1, seed=7) == dropped).all()
    assert not (drop_prefixes(true, 0.1, seed=8) == dropped).all()
    assert (drop_prefixes(true, 0.0, seed=7) == true).all() and (drop_prefixes(true, 1.0, 7) == T.UNKNOWN_PREFIX).all()
    assert (true == T.conditioning_prefix(1500, 1600, "blitz")).all()  # the input is left alone
    with pytest.raises(ValueError, match="unknown_fraction"):
        drop_prefixes(true, 1.5, seed=7)


def test_each_field_is_dropped_on_its_own_exactly_and_seeded():
    true = np.tile(np.array(T.conditioning_prefix(1500, 1600, "blitz"), np.uint8), (1000, 1))
    dropped = drop_fields(true, 0.2, seed=7)
    unknown = dropped == np.array(T.UNKNOWN_PREFIX, np.uint8)
    assert unknown.sum(0).tolist() == [200, 200, 200]  # exactly round(0.2 x N) per field
    assert ((dropped == true) | unknown).all()  # a field is true or its own "unknown", nothing else
    # independent picks: some rows lose one field only (a bot told its own rating), some two, some all
    per_row = np.bincount(unknown.sum(1), minlength=4)
    assert per_row[1] > 300 and per_row[2] > 0 and per_row[0] > 400, per_row.tolist()
    assert (drop_fields(true, 0.2, seed=7) == dropped).all() and not (drop_fields(true, 0.2, 8) == dropped).all()
    assert (drop_fields(true, 0.0, seed=7) == true).all() and (drop_fields(true, 1.0, 7) == T.UNKNOWN_PREFIX).all()
    with pytest.raises(ValueError, match="field_unknown_fraction"):
        drop_fields(true, -0.1, seed=7)


def test_training_data_takes_prefixes_from_the_dataset_columns(tmp_path):
    import pyarrow as pa

    from chesscore.data import dataset, shards

    games = _games(12)
    rows = [
        {
            "tokens": list(g),
            "game_id": f"g{i}",
            "source_sha256": "ab" * 32,
            "source_index": i,
            "source_offset": 0,
            "result": "1-0",
            "white_elo": None if i == 0 else 900 + 100 * i,
            "black_elo": 2500,
            "time_control_class": ("bullet", "classical")[i % 2],
            "plies": (len(g) - 2) // 3,
        }
        for i, g in enumerate(games)
    ]
    entries = [shards.write_shard(pa.Table.from_pylist(rows, schema=shards.SCHEMA), tmp_path, "train")]
    entries.append(shards.write_shard(pa.Table.from_pylist(rows[:2], schema=shards.SCHEMA), tmp_path, "validation"))
    from chesscore.fileio import atomic_write_json

    atomic_write_json(tmp_path / shards.MANIFEST, shards.build_manifest({}, [], entries))
    tables = dataset.load(tmp_path, dataset.verify(tmp_path))
    prefixes = table_prefixes(tables["train"])
    assert prefixes[0].tolist() == [T.RATING_UNKNOWN, T.rating_token(2500), T.time_control_token("bullet")]
    assert prefixes[5].tolist() == [T.rating_token(1400), T.rating_token(2500), T.time_control_token("classical")]
    assert [tuple(p) for p in prefixes] == [prefix_of(tables["train"].meta(i)) for i in range(12)]
    data = conditioned(TrainData(tables["train"], tables["validation"], "fp"), unknown_fraction=0.25, seed=3)
    assert (data.validation.prefixes == prefixes[:2]).all()  # validation keeps the true prefixes
    assert (data.train.prefixes == T.UNKNOWN_PREFIX).all(1).sum() == 3
    fields = conditioned(TrainData(tables["train"], tables["validation"], "fp"), 0.25, 3, field_unknown_fraction=0.5)
    assert (fields.train.prefixes[:, 2] == T.TIME_CONTROL_UNKNOWN).sum() >= 6  # half the games, at least
    assert (fields.validation.prefixes == prefixes[:2]).all()
    with pytest.raises(ValueError, match="needs games with ratings"):
        conditioned(TrainData(TokenList(games), TokenList(games), "fp"), 0.1, 0)


def test_no_loss_accuracy_or_legality_is_counted_on_the_prefix():
    games = _games(6)
    plain = TokenList(games)
    prefixed = ConditionedSource(plain, [T.conditioning_prefix(1200 + 200 * i, 1500, "blitz") for i in range(6)])
    inputs, targets = collate(prefixed.batch(range(6)))
    assert (targets[:, :3] == IGNORE).all() and not (targets[:, 3:] >= T.RESERVED_START).any()
    assert (collate(plain.batch(range(6)))[1] != IGNORE).sum() == (targets != IGNORE).sum()
    torch.manual_seed(0)
    model = GPT(replace(CONFIGS["tiny"], conditioning=True)).eval()
    with torch.no_grad():
        v2 = metrics.evaluate(model, prefixed, micro=3)
        v1 = metrics.evaluate(model, plain, micro=3)
    for key in ("targets", "legality_targets", "phase_counts"):
        assert v2[key] == v1[key], key
    assert v2["teacher_forced_triple_legality"] is not None and v2["illegal_probability"] is not None
    masks = metrics.legal_masks(prefixed[0])
    assert masks[0].nonzero()[0].tolist() == list(range(72, 101)) and masks[2].nonzero()[0].tolist() == [
        *range(101, 108)
    ]
    assert (masks[3:] == metrics.legal_masks(plain[0])).all()  # the moves see the same legal masks


def test_a_conditioned_move_feature_model_sees_the_same_boards_cached_and_whole():
    torch.manual_seed(0)
    model = GPT(replace(CONFIGS["tiny"], move_features=True, conditioning=True)).eval()
    game = T.encode_game(ITALIAN.split() + ["c5f2", "f1f2", "f6e4"], T.conditioning_prefix(1500, 1800, "blitz"))
    x = torch.tensor([game[:-1]])
    with torch.no_grad():
        whole = model(x)
        cache = model.new_cache(1)
        parts = [model(x[:, :5], cache=cache)] + [model(x[:, i : i + 1], cache=cache) for i in range(5, x.shape[1])]
    assert torch.allclose(whole, torch.cat(parts, 1), atol=1e-5)
    # The prefix shifts the moves by 3 and the replay reads it as a move of no squares: every move
    # keeps the feature it has in v1 (a capture names the piece taken), the prefix names nothing.
    plain = torch.tensor([T.encode_game(ITALIAN.split() + ["c5f2", "f1f2", "f6e4"])[:-1]])
    one_hot = torch.eye(MOVE_FEATURES, CONFIGS["tiny"].n_embd)
    model.features.moves.weight.data.copy_(one_hot)
    with torch.no_grad():
        ids_v2, ids_v1 = model.features(x).argmax(-1)[0], model.features(plain).argmax(-1)[0]
    assert ids_v2[4:].tolist() == ids_v1[1:].tolist() and ids_v2[:4].tolist() == [NOTHING] * 4
    assert (ids_v1 > CAPTURED).sum() >= 2  # the game's captures are among them
