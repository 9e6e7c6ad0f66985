"""Evaluate and triples-v2: on a real dataset folder of two synthetic "ratings" that play
different openings, a conditioned checkpoint's conditioning matrix has its best cell on the
diagonal and the stage writes the table, the DVC plot and the heat map PNG; a v1 checkpoint of
the same (v1) dataset still evaluates as before, without them."""

from __future__ import annotations

import json
import struct
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from chesscore import checkpoint
from chesscore.data import shards
from chesscore.eval.conditioning import NO_MATRIX, band_of, conditioning_matrix, write_png
from chesscore.eval.evaluate import sample_test_games
from chesscore.fileio import atomic_write_json
from chesscore.tokens import VERSION, encode_game
from chesscore.train.data import open_dataset
from chesscore.train.distributed import setup
from chesscore.train.trainer import train
from tests.inprocess import run_module
from tests.train.test_conditioning import CONFIG, HIGH, LOW, OPENINGS


def _table(first: int, games_each: int) -> pa.Table:
    rows = []
    for rating, line in OPENINGS.items():
        for n in range(games_each):
            tokens = encode_game(line.split())
            index = first + len(rows)
            rows.append(
                {
                    "tokens": tokens,
                    "game_id": f"{rating}-{index:04d}",
                    "source_sha256": "cd" * 32,
                    "source_index": index,
                    "source_offset": 0,
                    "white_elo": rating + 10 * (n % 5),
                    "black_elo": rating - 10 * (n % 5),
                    "result": "1/2-1/2",
                    "time_control_class": "blitz",
                    "plies": (len(tokens) - 2) // 3,
                }
            )
    return pa.Table.from_pylist(rows, schema=shards.SCHEMA)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A dataset folder as convert writes it, a v2 checkpoint trained on it, and a v1 checkpoint of
    four updates on it (the tests read only its token format, not its skill)."""
    root = tmp_path_factory.mktemp("conditioned-eval")
    data = root / "dataset"
    entries = [
        shards.write_shard(_table(0, 32), data, "train"),
        shards.write_shard(_table(100, 4), data, "validation"),
        shards.write_shard(_table(200, 6), data, "test"),
    ]
    atomic_write_json(data / shards.MANIFEST, shards.build_manifest({"source": "synthetic"}, [], entries))
    out = {"dataset": data}
    for version, config in (("v2", CONFIG), ("v1", replace(CONFIG, tokens=VERSION, max_updates=4))):
        train(config, open_dataset(data), root / version, setup("cpu"))
        out[version] = root / version / "best.pt"
    return out


def test_bands_are_the_nearest_told_rating():
    assert [band_of(r, (1000, 1400)) for r in (None, 700, 1199, 1200, 1201, 3000)] == [
        None,
        "1000",
        "1000",
        "1000",
        "1400",
        "1400",
    ]


@pytest.mark.slow
def test_the_diagonal_is_the_best_cell_when_the_ratings_decide_the_opening(trained):
    model, _ = checkpoint.load_model(trained["v2"])
    games, _ = sample_test_games(trained["dataset"], None, seed=0)
    matrix = conditioning_matrix(model, games, (LOW, HIGH), batch_size=8)
    assert matrix["positions"] == {"1000": 36, "2000": 36}  # 6 games x 6 plies per rating
    top1 = matrix["top1"]
    for band, wrong in (("1000", "told 2000"), ("2000", "told 1000")):
        assert top1["told true"][band] == top1[f"told {band}"][band] == 1.0
        assert top1[wrong][band] <= 5 / 6  # told the other rating, it opens with the other first move
    assert matrix["best_told"] == {"1000": "told 1000", "2000": "told 2000"} and matrix["diagonal_not_best"] == []
    for condition, by_band in top1.items():  # overall: every rated move once, whatever its band
        assert matrix["overall"][condition] == pytest.approx(sum(by_band[b] * 36 for b in by_band) / 72)
    assert matrix["overall"]["told true"] == 1.0 > matrix["overall"]["told 1000"]
    with pytest.raises(ValueError, match="triples-v2"):
        conditioning_matrix(checkpoint.load_model(trained["v1"])[0], games, (LOW, HIGH), 8)


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    (length,) = struct.unpack(">I", data[idat - 4 : idat])
    return width, height, zlib.decompress(data[idat + 4 : idat + 4 + length])


def test_the_heat_map_png_has_a_cell_per_condition_and_band(tmp_path):
    matrix = {
        "bands": ["1000", "2000"],
        "conditions": ["told true", "told unknown", "told 1000", "told 2000"],
        "top1": {
            "told true": {"1000": 0.9, "2000": 0.8},
            "told unknown": {"1000": 0.5, "2000": None},
            "told 1000": {"1000": 0.9, "2000": 0.1},
            "told 2000": {"1000": 0.2, "2000": 0.8},
        },
    }
    write_png(tmp_path / "h.png", matrix, cell=4)
    width, height, raw = _png_pixels(tmp_path / "h.png")
    assert (width, height) == (8, 16) and len(raw) == height * (1 + 3 * width)

    def pixel(row: int, column: int) -> tuple[int, ...]:
        start = (4 * row) * (1 + 3 * width) + 1 + 3 * (4 * column)
        return tuple(raw[start : start + 3])

    assert pixel(0, 0) == pixel(2, 0) and pixel(0, 0)[1] > 200  # the highest top-1: yellow-green
    assert pixel(2, 1)[1] < 10  # the lowest: dark
    assert pixel(1, 1) == (128, 128, 128)  # no positions


def _stage(*args: str) -> subprocess.CompletedProcess:
    return run_module("stages.evaluate", *args)


@pytest.mark.slow
def test_the_stage_writes_the_conditioning_outputs_and_v1_still_evaluates(trained, tmp_path):
    write_png(tmp_path / "none.png", NO_MATRIX)
    no_matrix = (tmp_path / "none.png").read_bytes()
    for version in ("v2", "v1"):
        out = tmp_path / version
        done = _stage(
            "--checkpoint",
            str(trained[version]),
            "--dataset",
            str(trained["dataset"]),
            "--out",
            str(out),
            "--games",
            "none",
            "--conditioning-ratings",
            "1000,2000",
        )
        assert done.returncode == 0, done.stderr[-2000:]
        record = json.loads((out / "evaluation.json").read_text())
        assert record["free_running"]["positions"] == 72 and record["teacher_forced"]["targets"] == 12 * 19
        plot = (out / "plots" / "conditioning.csv").read_text().splitlines()
        if version == "v1":
            assert "conditioning" not in record and plot == ["actual"]
            assert (out / "conditioning.png").read_bytes() == no_matrix  # the output DVC expects, one grey cell
            continue
        assert record["conditioning"]["diagonal_not_best"] == []
        assert plot[0] == "actual,told_true,told_unknown,told_1000,told_2000" and len(plot) == 3
        assert (out / "conditioning.png").read_bytes()[:4] == b"\x89PNG"
        assert "Does the conditioning matter?" in (out / "report.md").read_text()
        assert "diagonal is the best cell of every band" in (out / "report.md").read_text()
