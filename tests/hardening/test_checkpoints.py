"""Checkpoints checked before any model is built, and the UCI engine's two deaths (issue 15).

The reproduction found 16 tracebacks across evaluate, arena, self-play and UCI for checkpoints
whose config does not match its weights, has an unknown key or lacks `model`, and an absurd
config that allocated 4.7 GB before failing. Each is now a CheckpointError (refused, exit 78),
and the absurd one is refused from the tensors' shapes alone."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import torch

from chesscore import checkpoint
from chesscore.failures import MARKER
from chesscore.model import CONFIGS, GPT
from chesscore.play.uci import UCIEngine
from tests.hardening.pgnfiles import SAMPLE, run_stage
from tests.imports import PROJECT
from tests.inprocess import run_module


def _payload() -> dict:
    torch.manual_seed(0)
    return checkpoint.model_payload(GPT(CONFIGS["tiny"]), identity={"seed": 0})


def _with(payload: dict, **config) -> dict:
    return {**payload, "config": {**payload["config"], **config}}


def _tensor(payload: dict, name: str, tensor: torch.Tensor) -> dict:
    return {**payload, "model": {**payload["model"], name: tensor}}


FC = "transformer.h.0.mlp.c_fc.weight"
BAD = {
    "config_does_not_match": (lambda p: _with(p, n_layer=3), "the config does not match the weights"),
    "unknown_config_key": (lambda p: _with(p, n_layers=2), "config has unknown key(s) n_layers"),
    "no_model": (lambda p: {k: v for k, v in p.items() if k != "model"}, "no `model` weights"),
    "no_config": (lambda p: {k: v for k, v in p.items() if k != "config"}, "no model `config`"),
    "absurd_config": (
        lambda p: _with(p, n_layer=4000, n_head=8, n_embd=8192, block_size=65536),
        "the config does not match the weights",
    ),
    "bad_value": (lambda p: _with(p, n_head=0), "config: n_head must be >= 1, got 0"),
    "float_layers": (lambda p: _with(p, n_layer=2.0), "n_layer must be an integer"),
    "wrong_shape": (lambda p: _tensor(p, FC, torch.zeros(3, 3)), f"{FC} has shape (3, 3)"),
    "extra_tensor": (lambda p: _tensor(p, "transformer.h.9.x", torch.zeros(1)), "the config does not match"),
    "not_finite": (
        lambda p: _tensor(p, FC, torch.full_like(p["model"][FC], float("nan"))),
        "is not a finite floating-point tensor",
    ),
    "integer_tensor": (
        lambda p: _tensor(p, FC, p["model"][FC].to(torch.int64)),
        "is not a finite floating-point tensor",
    ),
    "weights_not_tensors": (lambda p: {**p, "model": {"a": 1}}, "no `model` weights"),
}


@pytest.fixture(scope="module")
def bad_checkpoints(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("bad-checkpoints")
    good = _payload()
    paths = {"good": folder / "good.pt"}
    checkpoint.save(good, paths["good"])
    for name, (spoil, _) in BAD.items():
        paths[name] = folder / f"{name}.pt"
        checkpoint.save(spoil(good), paths[name])
    return paths


# Refused for one tensor, after the sizes matched: the model built to check them is the size of
# the checkpoint's own tensors. Every other kind is refused before any model is built.
AFTER_THE_SIZES = {"wrong_shape", "not_finite", "integer_tensor"}


@pytest.mark.parametrize("kind", BAD)
def test_a_bad_checkpoint_is_refused_by_name_before_a_model_of_its_config_is_built(bad_checkpoints, kind, monkeypatch):
    built = []
    real_init = GPT.__init__

    def counting_init(self, config):
        built.append(config)
        real_init(self, config)

    monkeypatch.setattr(GPT, "__init__", counting_init)
    with pytest.raises(checkpoint.CheckpointError, match=BAD[kind][1].replace("(", r"\(").replace(")", r"\)")):
        checkpoint.load_model(bad_checkpoints[kind])
    assert built == ([CONFIGS["tiny"]] if kind in AFTER_THE_SIZES else [])
    assert checkpoint.load_model(bad_checkpoints["good"])[0].config == CONFIGS["tiny"]


def test_an_absurd_config_is_refused_without_allocating(bad_checkpoints):
    """Through the UCI engine as a subprocess: exit 78, one line, and the peak RSS of a torch
    process that loaded a tiny model (the reproduction allocated 4.7 GB first)."""
    run = run_stage("chesscore.play.uci", "--checkpoint", bad_checkpoints["absurd_config"])
    assert run.code == 78 and "Traceback" not in run.stderr
    assert f"{MARKER} refused: {bad_checkpoints['absurd_config']}: the config does not match" in run.stderr
    assert run.peak_rss_mib < 1024, run.peak_rss_mib


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dataset")
    assert run_module("stages.validate", "--raw", SAMPLE, "--out", folder / "v", "--no-progress").returncode == 0
    done = run_module("stages.convert", "--validated", folder / "v", "--out", folder / "d", "--no-progress")
    assert done.returncode == 0, done.stderr
    return folder / "d"


# Each reader through its CLI's main (tests.inprocess), with a different kind of bad checkpoint each: every reader loads
# through checkpoint.load_model, which the test above holds to every kind, so what is left to show
# is that each CLI turns the refusal into exit 78 and one line (the UCI engine: the absurd one).
READERS = {
    "evaluate": "config_does_not_match",
    "arena": "unknown_config_key",
    "selfplay": "no_model",
}


@pytest.mark.slow
@pytest.mark.parametrize("tool", READERS)
def test_every_checkpoint_reader_exits_78_without_a_traceback(bad_checkpoints, dataset, tmp_path, tool):
    path = bad_checkpoints[READERS[tool]]
    params = tmp_path / "params.yaml"
    params.write_text("arena:\n  opponents:\n    - {name: random, kind: random}\n")
    command = {
        "evaluate": ("stages.evaluate", "--checkpoint", path, "--dataset", dataset, "--out", tmp_path / "e"),
        "arena": ("stages.arena", "--params", params, "--checkpoint", path, "--out", tmp_path / "a", "--games", 2),
        "selfplay": ("stages.selfplay", "--checkpoint", path, "--out", tmp_path / "s", "--workers", 0, "--games", 2),
    }[tool]
    run = run_module(*command, cwd=tmp_path)
    assert run.returncode == 78, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and f"{MARKER} refused: {path}:" in run.stderr, run.stderr


def _engine() -> tuple[UCIEngine, io.StringIO]:
    out = io.StringIO()
    return UCIEngine(GPT(CONFIGS["tiny"]).eval(), "test", out), out


def test_threads_outside_the_advertised_range_are_refused_and_the_engine_lives():
    engine, out = _engine()
    before = torch.get_num_threads()
    engine.handle("uci")
    assert "option name Threads type spin default" in out.getvalue() and "min 1 max 512" in out.getvalue()
    for value in ("100000", "513", "0", "-1", "many"):
        engine.handle(f"setoption name Threads value {value}")
        assert torch.get_num_threads() == before
    errors = [line for line in out.getvalue().splitlines() if line.startswith("info string error")]
    assert len(errors) == 5 and "outside 1..512" in errors[0]
    engine.handle("setoption name Threads value 1")
    engine.handle("position startpos")
    engine.handle("go")
    assert out.getvalue().splitlines()[-1].startswith("bestmove")
    torch.set_num_threads(before)


def test_invalid_utf8_on_stdin_does_not_end_the_engine(bad_checkpoints):
    """The reproduction: a byte that is not UTF-8 killed the engine under a UTF-8 locale."""
    done = subprocess.run(
        [sys.executable, "-m", "chesscore.play.uci", "--checkpoint", str(bad_checkpoints["good"])],
        input=b"uci\n\xff\xfe\xc3(\n"
        + b"setoption name Threads value 100000\n"
        + b"isready\nposition startpos\ngo\nquit\n",
        capture_output=True,
        timeout=120,
        cwd=PROJECT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
    )
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, done.stderr.decode()
    assert "uciok" in lines and "readyok" in lines and lines[-1].startswith("bestmove")
    assert any("unknown command" in line and "\ufffd" in line for line in lines)
    assert any("outside 1..512" in line for line in lines)
