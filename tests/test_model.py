"""The GPT over move tokens: parameter count of the baseline, and the key/value cache."""

from dataclasses import replace

import pytest
import torch

from chesscore import checkpoint
from chesscore.model import CONFIGS, GPT, GPTConfig
from chesscore.tokens import BOS, PREFIX_LENGTH, conditioning_prefix, encode_game
from chesscore.train.compiled import CompileCount
from chesscore.train.config import TrainConfig


def test_baseline_has_exactly_85_940_736_parameters():
    with torch.device("meta"):  # no memory for the weights
        model = GPT(CONFIGS["baseline"])
    assert model.num_parameters() == 85_940_736
    assert model.lm_head.weight is model.transformer.wte.weight


def test_baseline_board_is_the_baseline_with_the_demo_boards_two_embeddings():
    with torch.device("meta"):
        model = GPT(CONFIGS["baseline-board"])
    demo = CONFIGS["demo-board"]
    assert (model.config.move_features, model.config.board_readout) == (demo.move_features, demo.board_readout)
    # 26 move-feature ids and 64 squares x 13 codes, each a 768-wide row.
    assert model.num_parameters() == 85_940_736 + (26 + 64 * 13) * 768 == 86_599_680


def test_config_rejects_width_not_divisible_by_heads():
    with pytest.raises(ValueError, match="heads"):
        GPTConfig(n_head=5, n_embd=128)


def _model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(CONFIGS["tiny"]).eval()


@torch.no_grad()
def test_cached_decoding_matches_full_forward_token_by_token():
    model = _model()
    tokens = torch.randint(0, 72, (4, 40))
    full = model(tokens)
    cache = model.new_cache(batch_size=4)
    steps = [model(tokens[:, :7], cache=cache)]  # prefill, then one token per game per step
    steps += [model(tokens[:, t : t + 1], cache=cache) for t in range(7, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.lengths.tolist() == [40] * 4


@torch.no_grad()
def test_rows_at_different_lengths_each_see_their_own_prefix():
    model = _model(1)
    tokens = torch.randint(0, 72, (3, 30))
    cache = model.new_cache(batch_size=3)
    model(tokens, cache=cache)
    cache.lengths = torch.tensor([5, 17, 30])  # rewind rows 0 and 1
    branch = torch.tensor([[11], [12], [13]])
    logits = model(branch, cache=cache)
    for row, length in enumerate([5, 17, 30]):
        expected = model(torch.cat([tokens[row : row + 1, :length], branch[row : row + 1]], dim=1))[0, -1]
        torch.testing.assert_close(logits[row, 0], expected, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_cache_select_keeps_rows():
    model = _model(2)
    tokens = torch.randint(0, 72, (4, 12))
    cache = model.new_cache(batch_size=4)
    model(tokens[:, :11], cache=cache)
    kept = cache.select(torch.tensor([1, 3]))
    torch.testing.assert_close(
        model(tokens[[1, 3], 11:], cache=kept)[:, 0], model(tokens[[1, 3]])[:, -1], atol=1e-5, rtol=1e-5
    )


def test_context_overflow_is_refused():
    model = _model()
    with pytest.raises(ValueError, match="context"):
        model(torch.zeros(1, model.config.block_size + 1, dtype=torch.long))
    cache = model.new_cache(batch_size=1, max_len=4)
    model(torch.zeros(1, 4, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="full"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


def test_checkpoint_round_trip_loads_with_weights_only(tmp_path):
    model = _model(3)
    checkpoint.save(checkpoint.model_payload(model, {"seed": 3}), tmp_path / "m.pt")
    loaded, payload = checkpoint.load_model(tmp_path / "m.pt")
    assert payload["identity"] == {"seed": 3}
    tokens = torch.randint(0, 72, (2, 9))
    torch.testing.assert_close(loaded(tokens), model(tokens))


class Smuggled:
    """A class torch's weights_only unpickler does not allow: unpickling it could run code."""


def test_a_checkpoint_holding_any_other_object_is_refused(tmp_path):
    torch.save({"format": checkpoint.FORMAT, "payload": Smuggled()}, tmp_path / "evil.pt")
    with pytest.raises(checkpoint.CheckpointError, match="evil.pt: not a loadable checkpoint"):
        checkpoint.load(tmp_path / "evil.pt")


def test_damaged_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="bad.pt"):
        checkpoint.load(path)


def _skill_model(seed: int = 3) -> GPT:
    torch.manual_seed(seed)
    return GPT(replace(CONFIGS["tiny"], conditioning=True, skill_inputs=True)).eval()


def _v2_rows(ratings: list[tuple[int, int]]) -> torch.Tensor:
    """Rows of the same game under different (white, black) rating prefixes."""
    moves = "e2e4 e7e5 g1f3 b8c6 f1c4 f8c5 c2c3 g8f6".split()
    return torch.tensor([encode_game(moves, conditioning_prefix(w, b, "blitz")) for w, b in ratings])


@torch.no_grad()
def test_skill_inputs_decode_the_same_with_a_cache_fed_in_pieces_and_selected_rows():
    model = _skill_model()
    tokens = _v2_rows([(900, 2400), (2400, 900), (1500, 1500)])
    full = model(tokens)
    cache = model.new_cache(batch_size=3)
    steps = [model(tokens[:, :2], cache=cache)]  # white's rating in the prefill, black's in the next step
    steps += [model(tokens[:, t : t + 1], cache=cache) for t in range(2, 10)]
    kept = cache.select(torch.tensor([0, 2]))  # the recorded ratings travel with their rows
    torch.testing.assert_close(torch.cat(steps, dim=1), full[:, :10], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(tokens[[0, 2], 10:11], cache=kept)[:, 0], full[[0, 2], 10], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_skill_inputs_follow_the_side_to_move_from_the_prefixs_last_token_on():
    skills = _skill_model().skills
    ab, ba = _v2_rows([(900, 2400), (2400, 900)])[:, :16]
    one, other = skills(ab[None], None, None)[0], skills(ba[None], None, None)[0]
    assert one[:PREFIX_LENGTH].abs().sum() == 0  # BOS and the first two prefix tokens: nothing added
    # Output p predicts a token of ply (p - 3) // 3: white's plies under (900, 2400) read as black's under (2400, 900).
    white_to_move = [p for p in range(PREFIX_LENGTH, 16) if (p - PREFIX_LENGTH) // 3 % 2 == 0]
    black_to_move = [p for p in range(PREFIX_LENGTH, 16) if (p - PREFIX_LENGTH) // 3 % 2 == 1]
    torch.testing.assert_close(one[white_to_move[:3]], other[black_to_move[:3]])
    assert not torch.allclose(one[white_to_move[0]], one[black_to_move[0]])  # the two sides differ


def test_skill_inputs_need_the_prefix():
    with pytest.raises(ValueError, match="needs conditioning"):
        replace(CONFIGS["tiny"], skill_inputs=True)
    with pytest.raises(ValueError, match="skill_inputs needs tokens triples-v2"):
        TrainConfig(model="tiny", tokens="triples-v1", skill_inputs=True)  # refused, not silently off
    with pytest.raises(ValueError, match="rating token"):
        _skill_model()(torch.tensor([[BOS, 12, 28, 64]]))  # a triples-v1 row


@torch.no_grad()
def test_skill_inputs_compile_without_a_graph_break_and_still_check_the_prefix():
    """The prefix check runs on the device when compiled (or on a GPU): no host read, no break."""
    torch._dynamo.reset()
    model = _skill_model()
    rows = _v2_rows([(900, 2400), (1500, 1500)])
    count = CompileCount()
    compiled = torch.compile(model, dynamic=False)
    torch.testing.assert_close(compiled(rows), model(rows), atol=1e-5, rtol=1e-5)
    report = count.report()
    assert report["graphs"] == 1 and report["graph_breaks"] == 0
    with pytest.raises(RuntimeError, match="rating token"):
        compiled(torch.tensor([[BOS, 12, 28, 64] + [12] * (rows.shape[1] - 4)] * 2))  # v1 rows, the same shape
