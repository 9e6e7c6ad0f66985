"""The whole pipeline under DVC, on a snapshot of the project with the smallest params that run
every stage (tests/pipeline_fixtures.py runs it once per session): a second `dvc repro` does
nothing, a train param reruns train and what follows only (through `dvc exp run -S`), push and
pull round-trip every artifact, and two `dvc repro` at once cannot corrupt anything."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.pipeline_fixtures import BIN, PROJECT, STAGES, PipelineRun, copy_tree, dvc, output_files, run

pytestmark = pytest.mark.slow


def ran_and_skipped(output: str) -> tuple[set[str], set[str]]:
    ran = set(re.findall(r"Running stage '([^']+)'", output))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change, skipping", output))
    return ran, skipped


def test_every_stage_ran_and_the_summary_has_every_line(pipeline_run: PipelineRun) -> None:
    assert list(pipeline_run.seconds) == ["validate", "convert", "train", "evaluate", "selfplay", "arena"]
    done = run([str(BIN / "python"), "-m", "chesscore.pipeline.summary"], pipeline_run.repo)
    assert "not run yet" not in done.stdout
    for stage in STAGES:
        assert re.search(rf"^  {stage}\s+\S", done.stdout, re.M), f"no line for {stage}:\n{done.stdout}"
    assert "data/evaluate/report.md" in done.stdout  # where to look next
    # issue 16: the demo model is triples-v2; top-1 told true vs unknown, Elo at a low and a high told rating
    assert re.search(r"conditioning: top-1 told the true ratings \d+\.\d%, told unknown \d+\.\d%", done.stdout)
    # The three numbers on real games (chesscore.eval.human): the model, Stockfish depth 1, random.
    assert re.search(
        r"human moves \(real games, [\d,]+ positions\): top-1 model [\d.]+% \[.*\], Stockfish depth 1 [\d.]+% "
        r"\[.*\], random [\d.]+% \[.*\]",
        done.stdout,
    ), done.stdout
    told = re.search(r"told 1000 \S+ \[\S+, \S+\], told 2000 \S+ \[\S+, \S+\] \(Elo difference vs random", done.stdout)
    assert told, done.stdout


def fits(text: str, width: int = 120) -> bool:
    return max(map(len, text.splitlines()), default=0) <= width


def flat_keys(record: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in record.items():
        keys += flat_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [prefix + key]
    return keys


def test_metrics_are_the_few_numbers_people_compare(pipeline_run: PipelineRun) -> None:
    declared = {
        stage: [next(iter(m)) if isinstance(m, dict) else m for m in body.get("metrics", [])]
        for stage, body in yaml.safe_load((pipeline_run.repo / "dvc.yaml").read_text())["stages"].items()
    }
    lock = yaml.safe_load((pipeline_run.repo / "dvc.lock").read_text())["stages"]
    keys = {}
    for stage, files in declared.items():
        for path in files:
            resolved = next(out["path"] for out in lock[stage]["outs"] if out["path"].endswith(path.split("}")[-1]))
            keys[resolved] = flat_keys(json.loads((pipeline_run.repo / resolved).read_text()))
    assert 1 <= max(map(len, keys.values())) <= 12 and sum(map(len, keys.values())) <= 40, keys
    assert not any(key.split(".")[-1] == "error" for names in keys.values() for key in names)
    shown = dvc(pipeline_run.repo, "metrics", "show")
    assert "failed to load" not in shown.stdout + shown.stderr, shown.stdout + shown.stderr
    assert fits(shown.stdout), shown.stdout
    for names in keys.values():
        assert all(name in shown.stdout for name in names)


def test_the_readmes_sample_is_written_from_the_run_by_one_command(pipeline_run: PipelineRun, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    original = (PROJECT / "README.md").read_text()
    readme.write_text(original)
    command = [str(BIN / "python"), "-m", "chesscore.pipeline.summary", "--root", str(pipeline_run.repo)]
    printed = run(command, tmp_path).stdout
    run([*command, "--readme", str(readme)], tmp_path)
    text = readme.read_text()
    start = original.index("```text\n== chess pipeline summary\n") + len("```text\n")
    rest = original[start:].split("```", 1)[1]  # the README after the sample's closing fence
    # The sample replaced, nothing else; it shows what every run repeats, not this machine's times.
    times = re.findall(r"^  times .*\n", printed, re.M)
    assert len(times) == 1 and re.match(r"  times +train \d+ s \([\d,]+ useful tokens/s\), selfplay \d+ s", times[0])
    assert text == original[:start] + printed.replace(times[0], "") + "```" + rest
    before = readme.stat().st_mtime_ns
    run([*command, "--readme", str(readme)], tmp_path)
    assert readme.read_text() == text and readme.stat().st_mtime_ns == before  # nothing new: untouched


def test_second_repro_is_a_noop(pipeline_run: PipelineRun) -> None:
    done = dvc(pipeline_run.repo, "repro")
    ran, skipped = ran_and_skipped(done.stdout + done.stderr)
    assert ran == set() and skipped == set(STAGES)
    assert "Data and pipelines are up to date" in done.stdout + done.stderr
    assert output_files(pipeline_run.repo) == pipeline_run.outputs
    assert "up to date" in dvc(pipeline_run.repo, "status").stdout


def test_exp_run_with_a_train_param_reruns_train_and_what_follows_only(
    pipeline_run: PipelineRun, tmp_path: Path
) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    done = dvc(repo, "exp", "run", "-n", "lr-test", "-S", "train.lr=0.005")
    ran, skipped = ran_and_skipped(done.stdout + done.stderr)
    assert ran == {"train", "evaluate", "selfplay", "arena"}
    assert skipped == {"validate", "convert"}
    assert yaml.safe_load((repo / "params.yaml").read_text())["train"]["lr"] == 0.005
    shown = json.loads(dvc(repo, "exp", "show", "--json").stdout)
    names = [exp.get("name") for commit in shown for exp in (commit.get("experiments") or [])]
    assert "lr-test" in names, shown
    after = output_files(repo)
    for path, digest in pipeline_run.outputs.items():
        if path.startswith(("data/validated/", "data/dataset/")):
            assert after[path] == digest, path
    assert after["data/train/best.pt"] != pipeline_run.outputs["data/train/best.pt"]
    # Comparing the two: the metrics diff and the experiments table fit a 120-column terminal.
    diff = dvc(repo, "metrics", "diff")
    assert "best_nll" in diff.stdout and "failed to load" not in diff.stdout + diff.stderr
    assert fits(diff.stdout), diff.stdout
    # DVC adds a column per changed dependency, holding its full md5 (32 characters): the
    # checkpoints here; `--drop '.*\.pt$'` leaves the experiment's params and metrics.
    table = dvc(repo, "exp", "show", "--only-changed", "--no-pager", "--drop", r".*\.pt$", env={"COLUMNS": "120"})
    assert "lr-test" in table.stdout and "train.lr" in table.stdout and "best_nll" in table.stdout
    assert "…" not in table.stdout and fits(table.stdout), table.stdout  # nothing collapsed


def test_push_and_pull_round_trip_every_artifact(pipeline_run: PipelineRun, tmp_path: Path) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    dvc(repo, "remote", "add", "-d", "store", str(tmp_path / "remote"))
    run(["git", "commit", "-qam", "a local-folder DVC remote"], repo)
    pushed = dvc(repo, "push")
    assert re.search(r"\d+ files? pushed", pushed.stdout), pushed.stdout
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(repo), str(clone)], tmp_path)
    assert not (clone / "data/train/best.pt").exists()
    dvc(clone, "pull")
    assert output_files(clone) == pipeline_run.outputs  # every output, byte for byte
    status = dvc(clone, "status")
    assert "up to date" in status.stdout, status.stdout
    done = dvc(clone, "repro")
    assert ran_and_skipped(done.stdout + done.stderr) == (set(), set(STAGES)), done.stdout
    assert output_files(clone) == pipeline_run.outputs
    # DVC reruns a stage whose uncached metrics or plots are missing; each puts them back, the
    # same bytes (train as the no-op of a finished run, evaluate from its record or anew).
    gone = ["data/train/metrics.json", "data/train/plots/validation.csv", "data/evaluate/plots/accuracy_by_phase.csv"]
    for path in gone:
        (clone / path).unlink()
    done = dvc(clone, "repro")
    assert ran_and_skipped(done.stdout + done.stderr)[0] == {"train", "evaluate"}, done.stdout
    assert output_files(clone) == pipeline_run.outputs
    assert "up to date" in dvc(clone, "status").stdout


def test_two_repros_at_once_the_second_fails_clearly_and_nothing_is_corrupted(
    pipeline_run: PipelineRun, tmp_path: Path
) -> None:
    repo = copy_tree(pipeline_run.repo, tmp_path / "repo")
    first = subprocess.Popen(
        [str(BIN / "dvc"), "repro", "--force", "--single-item", "evaluate"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": f"{BIN}:/usr/games:/usr/bin:/bin"},
    )
    rwlock, deadline = repo / ".dvc/tmp/rwlock", time.monotonic() + 60
    while not (rwlock.exists() and '"pid"' in rwlock.read_text(errors="replace")):
        assert first.poll() is None and time.monotonic() < deadline, "the first repro never took its lock"
        time.sleep(0.05)
    second = dvc(repo, "repro", check=False)
    first_output, _ = first.communicate(timeout=600)
    assert second.returncode != 0
    assert re.search(r"is busy, it is being blocked by|Unable to acquire lock", second.stderr + second.stdout)
    assert first.returncode == 0, first_output
    assert output_files(repo) == pipeline_run.outputs
    assert "up to date" in dvc(repo, "status").stdout
