"""Does strength follow the rating (chesscore.eval.ratings): the higher-rated side's results by
rating gap, on game metadata built here and on a dataset folder whose test split must stay unread."""

from __future__ import annotations

import json

import pytest

from chesscore.eval.ratings import gap_table
from chesscore.play.elo import expected_score
from chesscore.tokens import encode_game
from tests.inprocess import run_module
from tests.training_data import write_dataset


def game(white: int | None, black: int | None, result: str) -> dict:
    return {"white_elo": white, "black_elo": black, "result": result}


def test_the_higher_rated_side_is_scored_whichever_colour_it_plays():
    metas = [
        game(1500, 1450, "1-0"),  # 0-99: white higher, wins
        game(1450, 1520, "1-0"),  # 0-99: black higher, loses
        game(1500, 1500, "1/2-1/2"),  # 0-99: equal ratings count as white's
        game(1200, 1350, "0-1"),  # 100-199: black higher, wins
        game(2400, 1200, "0-1"),  # 400+: white higher, loses
        game(2000, None, "1-0"),  # unrated
        game(1800, 1700, "*"),  # unfinished
    ]
    table = gap_table(metas, band=100, top=400)
    assert (table.seen, table.unrated, table.unfinished) == (7, 1, 1)
    rows = {row.gap: row for row in table.rows}
    assert list(rows) == ["0-99", "100-199", "400+"]  # bands without games are left out
    assert (rows["0-99"].wins, rows["0-99"].draws, rows["0-99"].losses) == (1, 1, 1)
    assert rows["0-99"].score == 0.5 and rows["0-99"].mean_gap == pytest.approx((50 + 70 + 0) / 3)
    assert (rows["100-199"].wins, rows["100-199"].score, rows["100-199"].elo) == (1, 1.0, None)  # +inf
    assert rows["400+"].losses == 1 and rows["400+"].elo is None and rows["400+"].low is None
    assert rows["400+"].expected == pytest.approx(expected_score(1200))


def test_ratings_that_decide_the_games_imply_their_gap():
    """Games scored as the Elo formula says: the implied difference lands near the rating gap."""
    metas = []
    for gap in (100, 300):
        wins = round(100 * expected_score(gap))
        metas += [game(1500 + gap, 1500, "1-0")] * wins + [game(1500 + gap, 1500, "0-1")] * (100 - wins)
    rows = gap_table(metas, band=200, top=400).rows
    assert [row.gap for row in rows] == ["0-199", "200-399"]
    for row, gap in zip(rows, (100, 300)):
        assert abs(row.elo - gap) < 15 and row.low < gap < row.high
        assert row.score == pytest.approx(row.expected, abs=0.01)


def test_bands_must_be_positive_and_fit_under_the_top():
    with pytest.raises(ValueError, match="band"):
        gap_table([], band=0)
    with pytest.raises(ValueError, match="top"):
        gap_table([], band=200, top=100)


def test_the_cli_reads_train_and_validation_only_and_writes_json(tmp_path):
    metas = {
        "train": [game(1600, 1500, "1-0"), game(1500, 1600, "1-0")],
        "validation": [game(1700, 1500, "1/2-1/2")],
        "test": [game(2500, 900, "1-0")] * 5,  # evaluate's: never read here
    }
    tokens = tuple(encode_game("e2e4 e7e5".split()))
    write_dataset(tmp_path, [tokens] * 2, [tokens], [tokens] * 5, metas=metas)
    done = run_module("chesscore.eval.ratings", tmp_path, "--json", tmp_path / "ratings.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("3 games: 3 rated with a result")
    written = json.loads((tmp_path / "ratings.json").read_text())
    assert [(row["gap"], row["wins"], row["draws"], row["losses"]) for row in written["rows"]] == [
        ("100-199", 1, 0, 1),
        ("200-299", 0, 1, 0),
    ]
    assert "--band" in run_module("chesscore.eval.ratings", "--help").stdout
