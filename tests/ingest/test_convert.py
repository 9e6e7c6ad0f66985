"""The convert stage: stable keyed-hash splits, byte-identical shards, the leakage check, the
manifest and the CLI. (Under DVC: tests/pipeline, where `dvc repro` runs it in a snapshot of the
project, a second repro skips it, and a forced rerun after a kill gives the same bytes.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore.data import dataset
from chesscore.data.shards import SCHEMA, filter_rows
from chesscore.data.splits import assign_splits
from chesscore.ingest.convert import ConvertConfig, LeakageError, run_convert
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import GAMES, INPUTS, run_validate
from tests.inprocess import run_module
from tests.sample import sample_pgn


@pytest.fixture(scope="module")
def halves(tmp_path_factory) -> tuple[Path, Path]:
    """The embedded sample as two files, validated alone (first) and together (both)."""
    root = tmp_path_factory.mktemp("halves")
    lichess = sample_pgn()
    middle = lichess.index(b'\n\n[Event "', len(lichess) // 2) + 2
    (root / "raw").mkdir()
    (root / "raw" / "a.pgn").write_bytes(lichess[:middle])
    (root / "raw" / "b.pgn").write_bytes(lichess[middle:])
    run_validate([root / "raw" / "a.pgn"], root / "first", ValidateConfig())
    run_validate([root / "raw"], root / "both", ValidateConfig())
    return root / "first", root / "both"


def splits_by_id(dataset_dir: Path) -> dict[str, str]:
    table = {}
    for split in ("train", "validation", "test"):
        for _, meta in dataset.games(dataset_dir, split):
            table[meta["game_id"]] = split
    return table


def test_splits_are_stable_when_input_grows_and_follow_the_fractions(halves, tmp_path):
    first, both = halves
    config = ConvertConfig(shard_games=150)
    small = run_convert(first, tmp_path / "small", config)
    large = run_convert(both, tmp_path / "large", config)
    before, after = splits_by_id(tmp_path / "small"), splits_by_id(tmp_path / "large")
    assert before and all(after[game_id] == split for game_id, split in before.items())
    games = (
        large["splits"]["train"]["games"] + large["splits"]["validation"]["games"] + large["splits"]["test"]["games"]
    )
    assert games == len(after) == sum(entry["accepted"] for entry in large["inputs"])
    assert abs(large["splits"]["train"]["games"] - 0.9 * games) < 5 * (games * 0.09) ** 0.5
    assert small["leakage"] == {"cross_split_identical_moves": 0}
    assert all(shard["rows"] <= 150 for shard in large["shards"])
    other = assign_splits(list(after), ConvertConfig(split_key="another key").split_rule)
    assert (other != assign_splits(list(after), config.split_rule)).any(), "the key decides the split"


def test_two_runs_and_any_worker_count_give_identical_bytes(halves, tmp_path):
    _, both = halves
    config = ConvertConfig(shard_games=100)
    one = run_convert(both, tmp_path / "one", config, workers=1)
    two = run_convert(both, tmp_path / "two", config, workers=2)
    assert one == two and len(one["shards"]) > 5
    for shard in one["shards"]:
        assert (tmp_path / "one" / shard["path"]).read_bytes() == (tmp_path / "two" / shard["path"]).read_bytes()
    assert (tmp_path / "one" / "manifest.json").read_bytes() == (tmp_path / "two" / "manifest.json").read_bytes()
    params = one["params"]
    assert params["convert"]["shard_games"] == 100 and params["validate"]["min_plies"] == 2
    assert [Path(entry["path"]).name for entry in one["inputs"]] == ["a.pgn", "b.pgn"]


def test_the_same_moves_in_two_splits_is_refused(halves, tmp_path):
    _, both = halves
    rows = pa.ipc.open_file(both / GAMES).read_all().slice(0, 1).to_pylist()[0]
    ids = [f"twin{n}" for n in range(50)]
    splits = assign_splits(ids, ConvertConfig().split_rule)
    twins = [ids[0], next(i for i, s in zip(ids, splits) if s != splits[0])]
    table = pa.Table.from_pylist([dict(rows, game_id=twin) for twin in twins], schema=SCHEMA)
    fake = tmp_path / "validated"
    fake.mkdir()
    with pa.ipc.new_file(str(fake / GAMES), SCHEMA) as writer:
        writer.write_table(table)
    shutil.copy(both / INPUTS, fake / INPUTS)
    with pytest.raises(LeakageError, match="1 games have the same moves"):
        run_convert(fake, tmp_path / "leaky", ConvertConfig())
    assert not (tmp_path / "leaky").exists()


def test_cli_writes_a_dataset_and_its_summary(halves, tmp_path):
    _, both = halves
    (tmp_path / "params.yaml").write_text(
        "convert:\n  shard_games: 300\n  train: 0.8\n  validation: 0.1\n  test: 0.1\n"
    )
    env = {"PATH": "/usr/bin:/bin"}
    done = run_module("stages.convert", "--validated", both, "--out", "ds", "--no-progress", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "leakage (same moves in two splits): 0" in done.stdout and "fingerprint" in done.stdout
    manifest = dataset.manifest(tmp_path / "ds")
    assert manifest["params"]["convert"]["train"] == 0.8 and dataset.verify(tmp_path / "ds")["shards"]
    missing = run_module("stages.convert", "--validated", "nowhere", "--no-progress", cwd=tmp_path, env=env)
    assert missing.returncode == 65 and "run the validate stage first" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 255), max_size=5),
            st.none() | st.lists(st.floats(0, 60, width=32) | st.just(float("nan")), max_size=3),
            st.booleans(),
        ),
        max_size=12,
    ),
    st.integers(0, 3),
)
def test_filter_rows_keeps_what_arrow_filter_keeps(rows, skip):
    # Run-wise copies of the list columns (tokens, clocks with null rows) on a sliced batch.
    tokens, clocks, keep = zip(*rows) if rows else ((), (), ())
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(list(tokens), pa.list_(pa.uint8())),
            pa.array(list(clocks), pa.list_(pa.float32())),
            pa.array(range(len(rows)), pa.int64()),
        ],
        names=["tokens", "clocks", "n"],
    )
    batch, keep = batch.slice(min(skip, len(rows))), np.array(keep, bool)[min(skip, len(rows)) :]
    got, expected = filter_rows(batch, keep), batch.filter(pa.array(keep, pa.bool_()))
    assert got.schema == expected.schema and repr(got.to_pylist()) == repr(expected.to_pylist())  # NaN as text
    assert got["clocks"].null_count == expected["clocks"].null_count
