"""The selfplay stage end to end: the CLI, byte-identical outputs for any worker count, exact
resume, refused identities, and outputs that account for every game (PGN <-> dataset rows)."""

import csv
import io
import json
import subprocess
from dataclasses import asdict, replace
from pathlib import Path

import chess.pgn
import pyarrow as pa
import pytest
import torch

from chesscore import checkpoint, failures
from chesscore.data import dataset
from chesscore.fileio import RUN_RECORD, sha256_file
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import run_validate
from chesscore.model import CONFIGS, GPT
from chesscore.resume import ResumeRefused
from chesscore.selfplay.run import RUN_KEYS, Execution, RunConfig, run_selfplay
from chesscore.tokens import decode_game
from tests.inprocess import run_module

REPO = Path(__file__).resolve().parents[2]
CFG = RunConfig(
    iterations=2, games=8, max_plies=150, shard_games=4, eval_games=2, batch_games=8, lr=1e-3, seed=3
)  # seed 3: iteration 0 has decisive games, so the update moves


@pytest.fixture(scope="module")
def start(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("start") / "best.pt"
    checkpoint.save(checkpoint.model_payload(GPT(CONFIGS["tiny"]), identity={"run": "supervised"}), path)
    return path


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != RUN_RECORD  # every output, stats.json too: the times are run.json's
    }


@pytest.fixture(scope="module")
def over_workers(start, tmp_path_factory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """CFG's run through the stage's entry point (in this process: tests/inprocess.py; under DVC
    the pipeline tests start it as a process), its games over two worker processes. The other
    tests read this run; the resume test plays it again without workers, to the same bytes."""
    tmp = tmp_path_factory.mktemp("over-workers")
    params = tmp / "params.yaml"
    values = {k: v for k, v in asdict(CFG).items() if k not in ("games", "iterations")}
    params.write_text("selfplay:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in values.items()))
    out = tmp / "out"
    flags = ["--checkpoint", start, "--out", out, "--games", CFG.games, "--iterations", CFG.iterations]
    done = run_module("stages.selfplay", "--params", params, *flags, "--workers", 2, "--no-progress", cwd=REPO)
    assert done.returncode == 0, done.stderr
    # What run_selfplay returns: stats.json and run.json (the times and workers) together.
    return out, {**json.loads((out / "stats.json").read_text()), **json.loads((out / RUN_RECORD).read_text())}, done


@pytest.mark.slow
def test_the_stage_cli_plays_over_two_workers_and_says_how_it_went(over_workers):
    _, stats, done = over_workers
    assert "selfplay:" in done.stdout and "vs supervised" in done.stdout and "moves/s" in done.stdout
    assert stats["execution"]["workers"] == 2 and stats["moves_per_second"] > 0


@pytest.mark.slow
def test_outputs_account_for_every_game_and_the_model_moved(start, over_workers, tmp_path):
    out, stats, _ = over_workers
    history = stats["per_iteration"]
    assert history[0]["play"]["white_wins"] + history[0]["play"]["black_wins"] > 0  # something to learn
    for entry in history:
        versus = entry["vs_reference"]
        assert versus["wins"] + versus["draws"] + versus["losses"] == CFG.eval_games
        assert versus["win_rate"] == versus["wins"] / CFG.eval_games
    assert stats["games"] == stats["white_wins"] + stats["draws"] + stats["black_wins"] == 16
    assert 0 < stats["illegal_attempt_rate"] <= 1 and stats["plies"]["total"] > 0
    # The judge's verdicts: every game has an ending, a share of the sides earned a reward.
    assert sum(stats["terminations"].values()) == sum(stats["decided_by"].values()) == 16
    assert stats["decided_by"]["draw"] == stats["draws"]
    decisive_sides = 2 * (stats["white_wins"] + stats["black_wins"])  # self-play: both sides are the model's
    assert stats["nonzero_reward_share"] == decisive_sides / 32 and stats["reward"] == "outcome"
    assert stats["judge"]["positions"] == stats["judged_positions"] > 0 and 0 < stats["judge_share_of_play"] < 1
    assert stats["vs_supervised"] == history[-1]["vs_reference"]
    assert sum(stats["vs_supervised"]["decided_by"].values()) == CFG.eval_games
    on_disk = json.loads((out / "stats.json").read_text())
    assert on_disk["games"] == 16 and on_disk["dataset_fingerprint"] == stats["dataset_fingerprint"]
    assert set(json.loads((out / RUN_RECORD).read_text())) == set(RUN_KEYS) and not set(on_disk) & set(RUN_KEYS)
    plot = list(csv.DictReader(io.StringIO((out / "plots" / "iterations.csv").read_text())))
    assert [int(row["iteration"]) for row in plot] == [entry["iteration"] for entry in history]
    assert [float(row["score_vs_supervised"]) for row in plot] == pytest.approx(
        [entry["vs_reference"]["score"] for entry in history]
    )

    pgn = (out / "games.pgn").read_bytes()
    manifest = dataset.manifest(out / "dataset")
    assert manifest["inputs"][0]["sha256"] == sha256_file(out / "games.pgn")
    assert manifest["inputs"][0]["games_seen"] == manifest["inputs"][0]["accepted"] == 16
    rows = [row for split in ("train", "validation", "test") for row in dataset.games(out / "dataset", split)]
    assert sorted(meta["source_index"] for _, meta in rows) == list(range(16))
    for tokens, meta in rows:  # each row is the game its offset points at in games.pgn
        game = chess.pgn.read_game(io.StringIO(pgn[meta["source_offset"] :].decode()))
        assert [m.uci() for m in decode_game(tokens)] == [m.uci() for m in game.mainline_moves()]
        assert (game.headers["Result"], game.headers["GameId"]) == (meta["result"], meta["game_id"])
        assert len(game.errors) == 0 and meta["plies"] == len(list(game.mainline_moves()))
        adjudicated = meta["termination"] in ("resign_rule", "draw_rule", "ply_cap")
        assert game.headers["Termination"] == ("adjudication" if adjudicated else "normal")
        assert ("JudgeScore" in game.headers) == adjudicated

    tables = dataset.load(out / "dataset", dataset.verify(out / "dataset"))  # as training opens it
    assert len(tables["train"]) + len(tables["validation"]) == 16 - manifest["splits"]["test"]["games"]
    assert len(tables["train"]) > 0
    # games.pgn is also a raw input: validate accepts every game, with the same tokens.
    report = run_validate([out / "games.pgn"], tmp_path / "validated", ValidateConfig())
    assert (report["games_seen"], report["accepted"], report["rejected"]) == (16, 16, 0)
    validated = pa.ipc.open_file(str(tmp_path / "validated" / "games.arrow")).read_all()
    assert sorted(validated["tokens"].to_pylist()) == sorted(list(tokens) for tokens, _ in rows)

    trained, payload = checkpoint.load_model(out / "rl.pt")
    first, _ = checkpoint.load_model(start)
    assert payload["identity"]["reference"]["sha256"] == sha256_file(start)
    assert any(not torch.equal(a, b) for a, b in zip(trained.state_dict().values(), first.state_dict().values()))


@pytest.mark.slow
def test_a_run_resumed_in_process_ends_with_the_bytes_of_the_run_over_workers(start, over_workers, tmp_path):
    logged = []
    run_selfplay(start, tmp_path, replace(CFG, iterations=1), Execution(workers=0), log=logged.append)
    stats = run_selfplay(start, tmp_path, CFG, Execution(workers=0), log=logged.append)
    assert "resuming after iteration 1 of 2" in logged
    assert _files(tmp_path) == _files(over_workers[0])
    assert list(stats["timings"]) == [1]  # only the second iteration was played by the resume
    run_selfplay(start, tmp_path, CFG, Execution(workers=0), log=logged.append)  # finished: plays nothing
    assert logged[-1] == "resuming after iteration 2 of 2" and _files(tmp_path) == _files(over_workers[0])


@pytest.mark.slow
def test_a_checkpoint_of_another_run_is_refused_or_replaced(start, over_workers, tmp_path):
    saved = over_workers[0] / "rl.pt"
    with pytest.raises(ResumeRefused, match=r"config\.lr"):
        run_selfplay(start, tmp_path, replace(CFG, lr=2e-3), Execution(workers=0), resume=str(saved))
    with pytest.raises(ResumeRefused, match="2 iterations done, only 1 asked for"):
        run_selfplay(start, tmp_path, replace(CFG, iterations=1), Execution(workers=0), resume=str(saved))
    logged = []
    (tmp_path / "rl.pt").write_bytes(saved.read_bytes())
    run_selfplay(start, tmp_path, replace(CFG, iterations=1, kl_coef=0.5), Execution(workers=0), log=logged.append)
    assert logged[0].startswith("fresh start, not resuming") and "config.kl_coef" in logged[0]
    assert checkpoint.load(tmp_path / "rl.pt")["identity"]["config"]["kl_coef"] == 0.5


def test_a_missing_checkpoint_is_bad_input(tmp_path):
    from stages.selfplay import main

    with pytest.raises(failures.BadInput, match="no checkpoint"):
        main(
            [
                "--params",
                str(tmp_path / "none.yaml"),
                "--checkpoint",
                str(tmp_path / "absent.pt"),
                "--out",
                str(tmp_path / "out"),
            ]
        )


def test_a_judge_without_stockfish_is_refused_with_the_install_command(start, tmp_path):
    done = run_module(
        "stages.selfplay",
        "--params",
        tmp_path / "none.yaml",
        "--checkpoint",
        start,
        "--out",
        tmp_path / "out",
        "--stockfish",
        tmp_path / "no-stockfish",
        "--no-progress",
        cwd=REPO,
    )
    assert done.returncode == 78 and "sudo apt-get install stockfish" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
