"""The GPT over move tokens: parameter count of the baseline, and the key/value cache."""

import pytest
import torch

from chesscore import checkpoint
from chesscore.model import CONFIGS, GPT, GPTConfig


def test_baseline_has_exactly_85_940_736_parameters():
    with torch.device("meta"):  # no memory for the weights
        model = GPT(CONFIGS["baseline"])
    assert model.num_parameters() == 85_940_736
    assert model.lm_head.weight is model.transformer.wte.weight


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


def test_damaged_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="bad.pt"):
        checkpoint.load(path)
