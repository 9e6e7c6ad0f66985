"""Per-file validation and the merge: parts validated alone then merged are the same bytes as one
validate run over the same files in the same order, for any window; the key runs' merge finds
every repeated key and nothing else; bad parts are refused by name."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from chesscore import failures
from chesscore.ingest import duplicates
from chesscore.ingest.merge import MixedRules, NotAPart, merge_parts
from chesscore.ingest.runs import ROW_BITS, KeyLog, Run, shared_keys
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import run_validate
from tests.months import write_months

OUTPUTS = ("games.arrow", "rejects.arrow", "inputs.json", "report.json", "metrics.json")


def parts_of(paths: list[Path], folder: Path, config: ValidateConfig = ValidateConfig()) -> list[Path]:
    parts = []
    for path in paths:
        part = folder / path.name.split(".")[0]
        run_validate([path], part, config, keys=KeyLog())
        parts.append(part)
    return parts


@pytest.fixture(scope="module")
def months(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path, list[Path]]:
    """12 synthetic months, one validate run over them all, and each validated alone as a part."""
    root = tmp_path_factory.mktemp("months")
    paths = write_months(root / "raw", count=12, games=30)
    run_validate(paths, root / "single", ValidateConfig())
    return paths, root / "single", parts_of(paths, root / "parts")


@pytest.mark.parametrize(("window", "block"), [(1, 1 << 16), (7, 5), (1 << 16, 2)])
def test_the_merged_parts_are_one_runs_bytes(months, tmp_path: Path, monkeypatch, window: int, block: int) -> None:
    _, single, parts = months
    monkeypatch.setattr(duplicates, "_BLOCK", block)  # the replay's blocks: any size, the same games
    report = merge_parts(parts, tmp_path / "merged", window=window)
    for name in OUTPUTS:
        assert filecmp.cmp(single / name, tmp_path / "merged" / name, shallow=False), name
    # Every month after the first repeats 4 games of the month before (an exact copy, its moves
    # under a new id, an old id over other moves, an old id first): at least 44 duplicates.
    assert report["by_reason"]["duplicate"] >= 4 * 11
    assert report == json.loads((single / "report.json").read_text())


def test_a_game_dropped_for_its_id_does_not_drop_its_moves_later(months, tmp_path: Path) -> None:
    """Month 2 opens with month 1's id over moves it has again as its own 6th game: the first is a
    duplicate (the id), the 6th is kept; deduplicating month 2 alone would have dropped the 6th."""
    _, single, parts = months
    alone = json.loads((parts[1] / "report.json").read_text())
    assert "duplicate" not in alone["by_reason"]  # a part leaves every duplicate to the merge
    import pyarrow.ipc as ipc

    games = ipc.open_file(str(single / "games.arrow")).read_all()
    assert "m02g0005" in games["game_id"].to_pylist()
    rejects = ipc.open_file(str(single / "rejects.arrow")).read_all().to_pylist()
    first = next(r for r in rejects if r["source_path"].endswith("m02.pgn.zst") and r["game_index"] == 0)
    assert first["reason"] == "duplicate" and first["detail"] == f"same game id as game 6 of {parts_source(parts[0])}"


def parts_source(part: Path) -> str:
    return json.loads((part / "inputs.json").read_text())["inputs"][0]["path"]


def test_the_order_of_the_parts_decides_which_copy_wins(months, tmp_path: Path) -> None:
    paths, _, parts = months
    run_validate(paths[:2][::-1], tmp_path / "single", ValidateConfig())
    merge_parts(parts[:2][::-1], tmp_path / "merged")
    for name in OUTPUTS:
        assert filecmp.cmp(tmp_path / "single" / name, tmp_path / "merged" / name, shallow=False), name


def naive_shared(runs: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[int, int]]:
    pairs = [(int(k), (i << ROW_BITS) | int(r)) for i, (keys, rows) in enumerate(runs) for k, r in zip(keys, rows)]
    counts: dict[int, int] = {}
    for key, _ in pairs:
        counts[key] = counts.get(key, 0) + 1
    return sorted(pair for pair in pairs if counts[pair[0]] > 1)


@pytest.mark.parametrize("window", [4, 8, 20, 256])
def test_shared_keys_finds_every_repeated_key_whatever_the_window(tmp_path: Path, window: int) -> None:
    rng = np.random.default_rng(window)
    runs = []
    for i in range(4):  # small key range: many repeats, some across parts, long runs of one key
        keys = np.concatenate([rng.integers(1, 40, 30), np.full(10 * (i == 2), 7)]).astype(np.uint64)
        log = KeyLog()
        log.add(keys, keys, np.arange(len(keys)))
        log.write(tmp_path / f"p{i}")
        runs.append(Run(tmp_path / f"p{i}", "move"))
    expected = naive_shared([(r.keys(0, len(r)), r.rows(0, len(r))) for r in runs])
    chunks = list(shared_keys(runs, window))
    found = [(int(k), int(t)) for keys, tags in chunks for k, t in zip(keys, tags)]
    assert found == expected
    assert len({int(k) for keys, _ in chunks for k in np.unique(keys)}) == sum(len(np.unique(k)) for k, _ in chunks)


def test_a_part_without_ids_or_games_merges(tmp_path: Path) -> None:
    log = KeyLog()
    log.write(tmp_path / "empty")
    assert len(Run(tmp_path / "empty", "id")) == 0
    assert list(shared_keys([Run(tmp_path / "empty", "id")] * 2)) == []


def test_a_folder_validated_without_part_is_refused_by_name(months, tmp_path: Path) -> None:
    paths, single, parts = months
    with pytest.raises(NotAPart, match="single"):
        merge_parts([parts[0], single], tmp_path / "merged")
    with pytest.raises(NotAPart, match="nowhere"):
        merge_parts([tmp_path / "nowhere"], tmp_path / "merged")
    assert issubclass(NotAPart, failures.BadInput)


def test_parts_under_other_rules_are_refused(months, tmp_path: Path) -> None:
    paths, _, parts = months
    other = parts_of(paths[1:2], tmp_path / "other", ValidateConfig(min_plies=10))
    with pytest.raises(MixedRules, match="other rules"):
        merge_parts([parts[0], *other], tmp_path / "merged")
    assert issubclass(MixedRules, failures.Refused)
    assert not (tmp_path / "merged").exists()


def test_part_takes_one_file_and_merge_names_a_missing_part(months, tmp_path: Path) -> None:
    paths, _, _ = months
    command = [sys.executable, "-m", "stages.validate", "--raw", str(paths[0].parent), "--out", str(tmp_path / "p")]
    done = subprocess.run([*command, "--part", "--no-progress"], capture_output=True, text=True)
    assert done.returncode == failures.BAD_INPUT and "a part is one file" in done.stderr
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stages.merge",
            "--months",
            "m01",
            "--parts",
            str(tmp_path),
            "--into",
            str(tmp_path / "m"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == failures.BAD_INPUT and "m01" in done.stderr and "--part" in done.stderr
