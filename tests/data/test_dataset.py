"""The dataset reader: integrity checks before any game, the receipt, and the memory-mapped
TokenTable, over shards written by chesscore.data.shards from the embedded sample's games."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from chesscore.data import dataset, shards
from chesscore.fileio import atomic_write_json
from chesscore.tokens import BOS, EOS, PAD, decode_game, encode_game
from tests.sample import sample_games


def rows(games: list, first: int = 0) -> pa.Table:
    records = []
    for number, moves in enumerate(games, first):
        records.append(
            {
                "tokens": encode_game(moves),
                "game_id": f"g{number:05d}",
                "source_sha256": "ab" * 32,
                "source_index": number,
                "source_offset": 100 * number,
                "white_elo": 1500 + number,
                "result": "1-0",
                "time_control_class": "blitz",
                "plies": len(moves),
                "clocks": [60.0] * len(moves) if number % 2 else None,
            }
        )
    return pa.Table.from_pylist(records, schema=shards.SCHEMA)


def write_dataset(root: Path, parts: dict[str, list[pa.Table]]) -> dict:
    entries = [shards.write_shard(table, root, split) for split, tables in parts.items() for table in tables]
    manifest = shards.build_manifest({"demo": True}, [], entries)
    atomic_write_json(root / shards.MANIFEST, manifest)
    return manifest


@pytest.fixture
def built(tmp_path):
    games = list(sample_games()[:40])
    parts = {
        "train": [rows(games[:15]), rows(games[15:25], 15)],
        "validation": [rows(games[25:32], 25)],
        "test": [rows(games[32:40], 32)],
    }
    manifest = write_dataset(tmp_path / "ds", parts)
    return tmp_path / "ds", games, manifest


def test_round_trip_through_verify_load_and_games(built, tmp_path):
    root, games, manifest = built
    receipt = dataset.verify(root, tmp_path / "receipt.json")
    assert json.loads((tmp_path / "receipt.json").read_text()) == receipt
    assert receipt["fingerprint"] == manifest["fingerprint"] == dataset.manifest(root)["fingerprint"]
    tables = dataset.load(root, tmp_path / "receipt.json")
    assert sorted(tables) == ["train", "validation"]  # never the test split
    train = tables["train"]
    assert len(train) == 25 and train.fingerprint == manifest["fingerprint"] and len(train.shards) == 2
    expected = [encode_game(moves) for moves in games[:25]]
    assert train.lengths().tolist() == [len(t) for t in expected]
    assert train.lengths().dtype == np.int64 and train.num_tokens == sum(map(len, expected))
    for index in (0, 14, 15, 24, -1):  # both shards and a negative index
        assert train[index].tolist() == expected[index]
        assert train[index].dtype == np.uint8 and not train[index].flags.writeable
    picks = [24, 0, 15, 3, 3]
    batch = train.batch(picks)
    width = max(len(expected[i]) for i in picks)
    assert batch.shape == (5, width) and batch.dtype == np.uint8
    for row, pick in enumerate(picks):
        assert batch[row, : len(expected[pick])].tolist() == expected[pick]
        assert (batch[row, len(expected[pick]) :] == PAD).all()
    wide = len(expected[1]) + 7  # padded past the game's own length
    assert train.batch([1], width=wide).shape == (1, wide)
    with pytest.raises(ValueError, match="does not fit"):
        train.batch(picks, width=10)
    with pytest.raises(IndexError):
        train.batch([25])
    assert train.batch([]).shape == (0, 0)
    assert train.column("white_elo").to_pylist() == [1500 + i for i in range(25)]
    assert train.meta(16)["game_id"] == "g00016" and "tokens" not in train.meta(16)

    seen = list(dataset.games(root, "test"))
    assert [meta["game_id"] for _, meta in seen] == [f"g{i:05d}" for i in range(32, 40)]
    for (tokens, meta), moves in zip(seen, games[32:40]):
        assert tokens.tolist()[0] == BOS and tokens.tolist()[-1] == EOS
        assert decode_game(tokens) == moves
        assert meta["plies"] == len(moves) and meta["source_sha256"] == "ab" * 32
        assert meta["clocks"] == ([60.0] * len(moves) if meta["source_index"] % 2 else None)


def test_shards_are_content_addressed_and_deterministic(built, tmp_path):
    root, games, manifest = built
    again = write_dataset(
        tmp_path / "again",
        {
            "train": [rows(games[:15]), rows(games[15:25], 15)],
            "validation": [rows(games[25:32], 25)],
            "test": [rows(games[32:40], 32)],
        },
    )
    assert again["fingerprint"] == manifest["fingerprint"]
    for shard in manifest["shards"]:
        assert (root / shard["path"]).read_bytes() == (tmp_path / "again" / shard["path"]).read_bytes()
        assert shard["path"] == f"shards/{shard['split']}-{shard['sha256']}.arrow"
    assert manifest["splits"]["train"] == {
        "games": 25,
        "shards": 2,
        "tokens": sum(len(encode_game(g)) for g in games[:25]),
    }
    stored = pa.ipc.open_file(root / manifest["shards"][0]["path"]).read_all()
    assert pa.types.is_dictionary(stored.schema.field("source_sha256").type)


def first_game_or_error(root: Path, split: str = "train"):
    return next(iter(dataset.games(root, split)))


def test_a_changed_byte_in_any_shard_stops_every_split(built):
    root, _, manifest = built
    test_shard = root / next(s["path"] for s in manifest["shards"] if s["split"] == "test")
    data = bytearray(test_shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    test_shard.write_bytes(bytes(data))
    with pytest.raises(dataset.IntegrityError, match=test_shard.name):
        first_game_or_error(root, "train")  # the broken shard is in another split
    with pytest.raises(dataset.IntegrityError, match="sha256"):
        dataset.verify(root)


def test_missing_and_extra_shards_are_named(built):
    root, _, manifest = built
    victim = root / manifest["shards"][1]["path"]
    moved = root / "elsewhere.arrow"
    victim.rename(moved)
    with pytest.raises(dataset.IntegrityError, match=f"{victim.name}.*missing"):
        first_game_or_error(root)
    moved.rename(victim)
    extra = root / "shards" / "train-0000.arrow"
    shutil.copy(victim, extra)
    with pytest.raises(dataset.IntegrityError, match="train-0000.arrow: extra"):
        first_game_or_error(root)


@pytest.mark.parametrize("bad_path", ["../outside.arrow", "/etc/passwd", "shards/../../x.arrow", "manifest.json"])
def test_manifest_paths_that_leave_the_dataset_are_refused(built, bad_path):
    root, _, manifest = built
    manifest["shards"][0]["path"] = bad_path
    manifest["fingerprint"] = shards.fingerprint(manifest)  # a consistent manifest, only the path is bad
    atomic_write_json(root / shards.MANIFEST, manifest)
    with pytest.raises(dataset.IntegrityError, match="leaves the dataset"):
        first_game_or_error(root)


def test_a_link_out_of_the_dataset_is_refused(built, tmp_path):
    root, _, manifest = built
    shard = root / manifest["shards"][0]["path"]
    outside = tmp_path / "outside.arrow"
    shard.rename(outside)
    os.symlink(outside, shard)
    with pytest.raises(dataset.IntegrityError, match="outside the dataset"):
        dataset.verify(root)


def test_an_edited_manifest_breaks_its_fingerprint(built):
    root, _, manifest = built
    manifest["splits"]["train"]["games"] += 1
    atomic_write_json(root / shards.MANIFEST, manifest)
    with pytest.raises(dataset.IntegrityError, match="fingerprint"):
        first_game_or_error(root)


def test_load_refuses_a_receipt_of_another_dataset(built, tmp_path):
    root, games, _ = built
    receipt = dataset.verify(root)
    other = tmp_path / "other"
    write_dataset(
        other, {"train": [rows(games[:5])], "validation": [rows(games[5:7], 5)], "test": [rows(games[7:9], 7)]}
    )
    with pytest.raises(dataset.IntegrityError, match="another manifest"):
        dataset.load(other, receipt)
    forged = dict(receipt, shards={})
    with pytest.raises(dataset.IntegrityError, match="shards differ"):
        dataset.load(root, forged)
    with pytest.raises(dataset.IntegrityError, match="cannot read the receipt"):
        dataset.load(root, tmp_path / "no-receipt.json")
    # The receipt vouches for hashes; a shard whose size changed since is still caught.
    victim = root / dataset.manifest(root)["shards"][0]["path"]
    victim.write_bytes(victim.read_bytes() + b"\0")
    with pytest.raises(dataset.IntegrityError, match="bytes"):
        dataset.load(root, receipt)
    assert len(dataset.load(other, dataset.verify(other))["train"]) == 5
