"""Sign and range checks of every numeric knob, in the config dataclasses' __post_init__
(chesscore.ranges): the message starts with the field name, the error is a ValueError that the
stages turn into exit 78. The reproductions: train.grad_clip: -1 and train.lr: -0.001 trained
backwards (validation NLL 4.88 -> 5.70); arena.games: 0 and selfplay.lr: x were tracebacks."""

from __future__ import annotations

import pytest

from chesscore import failures, ranges
from chesscore.data.splits import SplitRule
from chesscore.eval.evaluate import EvalConfig
from chesscore.ingest.convert import ConvertConfig
from chesscore.ingest.validate import ValidateConfig
from chesscore.model import GPTConfig
from chesscore.play.arena import ArenaConfig
from chesscore.selfplay.games import SelfPlayConfig
from chesscore.selfplay.run import RunConfig
from chesscore.train.config import TrainConfig
from chesscore.train.optim import OptimConfig
from tests.inprocess import run_module

BAD = [
    (OptimConfig, "grad_clip", -1, "grad_clip must be > 0, got -1"),
    (OptimConfig, "grad_clip", 0, "grad_clip must be > 0"),
    (OptimConfig, "lr", -0.001, "lr must be > 0, got -0.001"),
    (OptimConfig, "lr", float("nan"), "lr must be a finite number"),
    (OptimConfig, "lr", "x", "lr must be a number, got 'x'"),
    (OptimConfig, "weight_decay", -0.1, "weight_decay must be >= 0"),
    (OptimConfig, "min_lr_ratio", 1.5, "min_lr_ratio must be <= 1"),
    (OptimConfig, "beta2", 1.0, "beta2 must be < 1"),
    (TrainConfig, "micro", 0, "micro must be >= 1, got 0"),
    (TrainConfig, "epochs", True, "epochs must be an integer, got True"),
    (TrainConfig, "warmup_steps", -1, "warmup_steps must be >= 0"),
    (TrainConfig, "max_seconds", 0, "max_seconds must be > 0"),
    (TrainConfig, "seed", -3, "seed must be >= 0"),
    (TrainConfig, "device", "tpu", "device must be one of auto, cpu, cuda; got 'tpu'"),
    (ValidateConfig, "min_plies", "two", "min_plies must be an integer, got 'two'"),
    (ValidateConfig, "min_plies", 0, "min_plies must be >= 1"),
    (ValidateConfig, "context_tokens", 4, "context_tokens must be >= 8"),
    (ValidateConfig, "context_tokens", 10**6, "context_tokens must be <= 98303"),
    (ValidateConfig, "max_rating", 40000, "max_rating must be <= 32767"),
    (ConvertConfig, "shard_games", 0, "shard_games must be >= 1"),
    (ConvertConfig, "train", -0.1, "train must be >= 0"),
    (ConvertConfig, "split_key", "k" * 65, "split_key must be a text of 1 to 64 bytes"),
    (EvalConfig, "games", 0, "games must be >= 1"),
    (EvalConfig, "top_k", 500, "top_k must be <= 128"),
    (EvalConfig, "middlegame_until_ply", 20, "middlegame_until_ply must be >= 21"),
    (ArenaConfig, "games", 0, "games must be >= 1, got 0"),
    (ArenaConfig, "temperature", -1.0, "temperature must be >= 0"),
    (RunConfig, "lr", "x", "lr must be a number, got 'x'"),
    (RunConfig, "lr", -1e-5, "lr must be > 0"),
    (RunConfig, "grad_clip", -1, "grad_clip must be > 0"),
    (RunConfig, "kl_coef", -0.1, "kl_coef must be >= 0"),
    (RunConfig, "games", 0, "games must be >= 1"),
    (RunConfig, "temperature", 0, "temperature must be > 0"),
    (RunConfig, "eval_temperature", 0, "eval_temperature must be > 0"),
    (SelfPlayConfig, "games", 0, "games must be >= 1"),
    (SelfPlayConfig, "max_plies", 0, "max_plies must be >= 1"),
    (GPTConfig, "n_layer", 0, "n_layer must be >= 1"),
    (GPTConfig, "dropout", 1.5, "dropout must be <= 1"),
]


@pytest.mark.parametrize("cls, field, value, message", BAD, ids=[f"{c.__name__}.{f}={v!r}" for c, f, v, _ in BAD])
def test_a_knob_out_of_range_is_refused_with_its_name_first(cls, field, value, message):
    with pytest.raises(ValueError) as caught:
        cls(**{field: value})
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, ranges.InvalidSetting) and failures.classify(caught.value) is failures.Refused


@pytest.mark.parametrize(
    "cls",
    [
        OptimConfig,
        TrainConfig,
        ValidateConfig,
        ConvertConfig,
        SplitRule,
        EvalConfig,
        ArenaConfig,
        RunConfig,
        SelfPlayConfig,
        GPTConfig,
    ],
)
def test_the_defaults_pass(cls):
    cls()


@pytest.mark.parametrize(
    "stage, section, expected",
    [
        ("train", "train:\n  grad_clip: -1\n", "train.grad_clip: must be > 0, got -1.0"),
        ("train", "train:\n  lr: -0.001\n", "train.lr: must be > 0, got -0.001"),
        ("train", "train:\n  device: tpu\n", "train.device: expected one of auto, cpu, cuda"),
        ("validate", "validate:\n  min_plies: two\n", "validate.min_plies: expected an integer, got 'two'"),
        ("arena", "arena:\n  games: 0\n", "arena.games: must be >= 1, got 0"),
        ("selfplay", "selfplay:\n  lr: x\n", "selfplay.lr: expected a number, got 'x'"),
    ],
)
def test_the_stages_exit_78_on_the_reproductions(tmp_path, stage, section, expected):
    (tmp_path / "params.yaml").write_text(section)
    run = run_module(f"stages.{stage}", "--params", "params.yaml", cwd=tmp_path)
    assert run.returncode == 78, run.stderr[-1500:]
    assert "Traceback" not in run.stderr and expected in run.stderr, run.stderr
