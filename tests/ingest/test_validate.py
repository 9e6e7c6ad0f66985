"""Validation rules, filters and dedup: one small PGN file per case, run through run_validate,
reading back the accepted games and the rejects table it wrote."""

from __future__ import annotations

from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chesscore.data.shards import move_hashes
from chesscore.ingest.dedup import SeenKeys
from chesscore.ingest.validate import ValidateConfig, broken_rules, judge
from chesscore.ingest.validate_run import GAMES, REJECTS, run_validate
from chesscore.pgn import meta as pgn_meta
from chesscore.pgn.inputs import read_blocks
from chesscore.pgn.parse import parse_batch
from chesscore.pgn.split import split_games
from chesscore.pgn.tags import TagTable
from chesscore.tokens import decode_game
from tests.corpus import corpus_dir
from tests.sample import fixture, fixture_names, sample_pgn

FOOLS_MATE = "1. f3 e5 2. g4 Qh4#"
RUY = "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6"
OPENINGS = [
    "1. e4 e5 2. Nf3 Nc6",
    "1. d4 d5 2. c4 e6",
    "1. c4 e5 2. Nc3 Nf6",
    "1. Nf3 d5 2. g3 Nf6",
    "1. e4 c5 2. Nf3 d6",
    "1. e4 e6 2. d4 d5",
    "1. d4 Nf6 2. c4 g6",
    "1. e4 c6 2. d4 d5",
]


def game(moves: str, result: str = "1-0", token: str | None = None, **tags: str) -> str:
    tags = {
        "Event": "Rated Blitz game",
        "Site": "https://lichess.org/abcd0000",
        "Result": result,
        "WhiteElo": "1500",
        "BlackElo": "1600",
        "TimeControl": "180+2",
        "Termination": "Normal",
        **tags,
    }
    head = "".join(f'[{name} "{value}"]\n' for name, value in tags.items() if value is not None)
    return f"{head}\n{moves} {result if token is None else token}\n\n"


def run(
    tmp_path: Path, files: dict[str, str | bytes], config: ValidateConfig = ValidateConfig(), **kwargs
) -> tuple[dict, list[dict], list[dict]]:
    raw = tmp_path / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (raw / name).write_bytes(text.encode() if isinstance(text, str) else text)
    report = run_validate([raw], tmp_path / "out", config, **kwargs)
    accepted = pa.ipc.open_file(tmp_path / "out" / GAMES).read_all().to_pylist()
    rejects = pa.ipc.open_file(tmp_path / "out" / REJECTS).read_all().to_pylist()
    return report, accepted, rejects


def numbered(*games: str) -> str:
    """Games with distinct Lichess ids (so only the ones meant as duplicates are)."""
    return "".join(g.replace("abcd0000", f"abcd{n:04d}") for n, g in enumerate(games))


def test_every_rule_has_its_reason_in_order(tmp_path):
    text = numbered(
        game(RUY),  # 0 accepted
        game(RUY, Variant="Atomic"),  # 1
        game("1. Kb1", FEN="8/8/8/8/8/8/8/K6k w - - 0 1", SetUp="1"),  # 2
        game("1. e4 -- 2. Nf3"),  # 3
        game("1. e4 e5 2. Ke3"),  # 4
        game(""),  # 5
        game(RUY, result="*"),  # 6
        game(RUY, token=""),  # 7
        game(RUY, token="0-1"),  # 8
        game(FOOLS_MATE, result="1-0"),  # 9 Black mated White
        game("1. e4"),  # 10
        game("1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7"),  # 11 8 plies > max 6
        game(FOOLS_MATE, result="0-1"),  # 12 accepted
        "<html><body>oops</body></html>\n\n",  # 13
    )
    report, accepted, rejects = run(tmp_path, {"g.pgn": text}, ValidateConfig(context_tokens=20))
    reasons = {r["game_index"]: r["reason"] for r in rejects}
    assert reasons == {
        1: "variant",
        2: "setup_position",
        3: "null_move",
        4: "illegal_move",
        5: "no_moves",
        6: "no_result",
        7: "no_result",
        8: "result_mismatch",
        9: "result_mismatch",
        10: "too_short",
        11: "too_long",
        13: "unparsable",
    }
    assert [g["source_index"] for g in accepted] == [0, 12]
    assert decode_game(accepted[1]["tokens"])[-1].uci() == "d8h4" and accepted[1]["result"] == "0-1"
    assert "Ke3" in next(r["detail"] for r in rejects if r["reason"] == "illegal_move")
    assert report["by_file"][f"{tmp_path}/raw/g.pgn"] == {
        "games_seen": 14,
        "accepted": 2,
        "rejected": {
            "illegal_move": 1,
            "no_moves": 1,
            "no_result": 2,
            "null_move": 1,
            "result_mismatch": 2,
            "setup_position": 1,
            "too_long": 1,
            "too_short": 1,
            "unparsable": 1,
            "variant": 1,
        },
    }
    offsets = [r["byte_offset"] for r in rejects]
    assert text.encode()[offsets[0] :].startswith(b'[Event "Rated Blitz game"]\n[Site "https://lichess.org/abcd0001"]')


def test_filters_are_off_by_default_and_each_has_its_reason(tmp_path):
    text = numbered(
        game(OPENINGS[0], Event="Casual Blitz game"),  # 0 unrated
        game(OPENINGS[1], WhiteElo="2400"),  # 1 rating (max 2000)
        game(OPENINGS[2], BlackElo="?"),  # 2 rating (missing)
        game(OPENINGS[3], TimeControl="60+0"),  # 3 time_control: bullet
        game(OPENINGS[4], Termination="Abandoned"),  # 4 termination
        game(OPENINGS[5], WhiteTitle="BOT"),  # 5 bot
        game(OPENINGS[6], TimeControl="600+5"),  # 6 accepted (rapid)
    )
    _, accepted, rejects = run(tmp_path / "defaults", {"f.pgn": text})
    assert [r["reason"] for r in rejects] == ["filtered:termination"] and len(accepted) == 6
    strict = ValidateConfig(
        rated_only=True, min_rating=1000, max_rating=2000, time_control_classes=("blitz", "rapid"), exclude_bots=True
    )
    _, accepted, rejects = run(tmp_path / "strict", {"f.pgn": text}, strict)
    assert [r["reason"] for r in rejects] == [
        "filtered:unrated",
        "filtered:rating",
        "filtered:rating",
        "filtered:time_control",
        "filtered:termination",
        "filtered:bot",
    ]
    assert [
        (g["source_index"], g["time_control_class"], g["base_seconds"], g["increment_seconds"]) for g in accepted
    ] == [(6, "rapid", 600, 5)]
    with pytest.raises(ValueError, match="time_control_classes: unknown"):
        ValidateConfig(time_control_classes=("hyperbullet",))


def test_duplicates_by_id_and_by_moves_within_and_across_files(tmp_path):
    first = numbered(game(RUY), game(FOOLS_MATE, result="0-1"), game(RUY))  # 2: same moves as 0
    again = game("1. d4 d5", Site="https://lichess.org/abcd0001")  # same id as first's 1
    report, accepted, rejects = run(tmp_path, {"a.pgn": first, "b.pgn": again})
    assert [(r["source_path"].rsplit("/", 1)[1], r["game_index"], r["reason"]) for r in rejects] == [
        ("a.pgn", 2, "duplicate"),
        ("b.pgn", 0, "duplicate"),
    ]
    assert rejects[0]["detail"].startswith("same moves as game 0 of") and rejects[0]["detail"].endswith("a.pgn")
    assert rejects[1]["detail"].startswith("same game id as game 1 of")
    assert [g["game_id"] for g in accepted] == ["abcd0000", "abcd0001"]
    assert report["by_reason"] == {"duplicate": 2}


def test_games_without_a_lichess_id_are_named_by_their_moves(tmp_path):
    text = (
        game(OPENINGS[0], Site=None)
        + game(OPENINGS[1], Site="Moscow")
        + game(OPENINGS[2], GameId="idCCCCCC", Site=None)
    )
    _, accepted, _ = run(tmp_path, {"a.pgn": text})
    hashes = move_hashes(pa.array([g["tokens"] for g in accepted], pa.list_(pa.uint8())))
    assert [g["game_id"] for g in accepted] == [f"moves:{hashes[0]:016x}", f"moves:{hashes[1]:016x}", "idCCCCCC"]


def test_dedup_remembers_only_accepted_games(tmp_path):
    a = game(OPENINGS[0], Site="https://lichess.org/idAAAAAA")
    b = game(OPENINGS[0], Site="https://lichess.org/idBBBBBB")  # moves of a: duplicate
    c = game(OPENINGS[1], Site="https://lichess.org/idBBBBBB")  # b's id, but b was rejected: kept
    d = game(OPENINGS[2], Site="https://lichess.org/idAAAAAA")  # a's id: duplicate
    for batch_games in (1, 2, 100):
        _, accepted, rejects = run(tmp_path / str(batch_games), {"d.pgn": a + b + c + d}, batch_games=batch_games)
        assert [g["source_index"] for g in accepted] == [0, 2]
        assert [(r["game_index"], r["detail"].split(" as ")[0]) for r in rejects] == [
            (1, "same moves"),
            (3, "same game id"),
        ]


def test_metadata_columns(tmp_path):
    text = game(
        "1. e4 { [%clk 0:03:00] } 1... e5 { [%clk 0:02:58.5] } 2. Nf3 c5",
        result="1/2-1/2",
        UTCDate="2024.01.31",
        UTCTime="23:59:58",
        ECO="C20",
        Opening="King's Pawn Game",
        WhiteTitle="GM",
        Site="https://lichess.org/QwErTy12",
    )
    text += game("1. e4 e5", Site="?", Event="?", TimeControl="-", WhiteElo="?")
    _, accepted, _ = run(tmp_path, {"m.pgn": text})
    first, second = accepted
    assert first["game_id"] == "QwErTy12" and first["white_title"] == "GM" and first["rated"] is True
    assert first["utc_datetime"].isoformat() == "2024-01-31T23:59:58+00:00"
    assert first["clocks"][:2] == [180.0, 178.5] and first["clocks"][2] != first["clocks"][2]  # NaN
    assert (first["eco"], first["opening"], first["plies"], first["result"]) == (
        "C20",
        "King's Pawn Game",
        4,
        "1/2-1/2",
    )
    assert second["game_id"].startswith("moves:") and second["event"] is None and second["rated"] is None
    assert (second["time_control_class"], second["white_elo"], second["clocks"]) == ("correspondence", None, None)


@pytest.mark.parametrize(
    "control, kind",
    [
        ("0+1", "bullet"),
        ("15+0", "ultrabullet"),
        ("29+0", "ultrabullet"),
        ("179+0", "bullet"),
        ("180+0", "blitz"),
        ("120+1", "bullet"),
        ("120+2", "blitz"),
        ("479+0", "blitz"),
        ("480+0", "rapid"),
        ("1499+0", "rapid"),
        ("900+15", "classical"),
        ("-", "correspondence"),
        ("1/259200", "unknown"),
        (None, "unknown"),
    ],
)
def test_time_control_classes_follow_lichess(control, kind):
    assert pgn_meta.time_control_class(control) == kind


def test_lichess_ids_and_dates():
    assert pgn_meta.lichess_id({"Site": "https://lichess.org/IW4ZfyAW"}) == "IW4ZfyAW"
    assert pgn_meta.lichess_id({"Site": "https://lichess.org/IW4ZfyAWxyz1"}) == "IW4ZfyAW"
    assert pgn_meta.lichess_id({"Site": "Moscow", "GameId": "abcdEFGH"}) == "abcdEFGH"
    assert pgn_meta.lichess_id({"Site": "https://example.org/IW4ZfyAW"}) is None
    assert pgn_meta.lichess_id({"Site": "https://lichess.org/IW4ZfyAé"}) is None  # ids are ASCII
    assert pgn_meta.lichess_id({"Site": "?", "GameId": "IW4ZfyAé"}) is None
    assert pgn_meta.utc_seconds("1970.01.02", "00:00:01") == 86401
    assert pgn_meta.utc_seconds("2021.02.30", "00:00:00") is None and pgn_meta.utc_seconds("????.??.??", "x") is None


def test_batch_columns_match_the_per_game_functions():
    headers = []
    for name in fixture_names(".pgn"):
        headers += parse_batch([g.data.decode() for g in split_games([fixture(name)])]).headers
    headers += parse_batch([g.data.decode("utf-8", "replace") for g in split_games([sample_pgn()])]).headers
    assert check_columns(headers) > 3500


@pytest.mark.corpus
def test_corpus_batch_columns_match_the_per_game_functions():
    headers = []
    for path in sorted(corpus_dir().glob("*.pgn")):
        headers += parse_batch([g.data.decode() for g in split_games(read_blocks(path))]).headers
    assert check_columns(headers) > 1700


def check_columns(headers: list[dict[str, str]]) -> int:
    """Each Arrow column of the tags equals the per-game function's value, on these headers and
    the edge cases below; returns how many headers were checked."""
    headers = headers + [
        {"Site": "https://lichess.org/IW4ZfyAé"},
        {"Site": "https://lichess.org/IW4ZfyéW"},
        {"Site": "Moscow", "GameId": "abcdéfgh"},
        {"Site": "https://lichess.org/IW4ZfyAW"},
    ]  # ids are ASCII
    headers += [
        {"WhiteElo": "12345678", "BlackElo": "-5"},
        {"WhiteElo": "40000", "BlackElo": "0"},
        {"UTCDate": "2021.02.30", "UTCTime": "10:00:00"},
        {"UTCDate": "2021.02.03", "UTCTime": "24:00:00"},
        {"UTCDate": "2021.2.3", "UTCTime": "10:00:00"},
        {"UTCDate": "2021.02.03", "UTCTime": "23:59:60"},
        {"UTCDate": "2021.02.03", "UTCTime": "??:??:??"},
        {"UTCDate": "2021.02.03", "UTCTime": "1:02:03"},
        {"UTCDate": "2021.02.03", "UTCTime": "01:02:03 "},
        {"UTCDate": "2021.02.03"},
        {"TimeControl": "abc", "Event": "?"},
        {"TimeControl": "0+0"},
        {"Event": "casual game"},
    ]
    tags = TagTable.build(headers)
    columns = {name: array.to_pylist() for name, array in pgn_meta.columns(tags).items()}
    ids = pgn_meta.lichess_ids(tags)
    assert ids.to_pylist() == [pgn_meta.lichess_id(h) for h in headers]
    keys = pgn_meta.id_keys(ids.slice(1))  # a slice too: the key of each id, 0 where none
    assert [bool(k) for k in keys] == [i is not None for i in ids.to_pylist()[1:]]
    assert len({int(k) for k in keys if k}) == len({i for i in ids.to_pylist()[1:] if i})
    for i, h in enumerate(headers):
        base, increment, kind = pgn_meta.parse_time_control(h.get("TimeControl"))
        expected = {
            "white_elo": pgn_meta.rating(h.get("WhiteElo")),
            "black_elo": pgn_meta.rating(h.get("BlackElo")),
            "base_seconds": base,
            "increment_seconds": increment,
            "time_control_class": kind,
            "rated": pgn_meta.rated(pgn_meta.known(h.get("Event"))),
            "time_control": h.get("TimeControl"),
            "result": h.get("Result"),
            **{column: pgn_meta.known(h.get(tag)) for column, tag in pgn_meta.TEXT_TAGS.items()},
        }
        got = {name: columns[name][i] for name in expected}
        assert got == expected, h
        seconds = pgn_meta.utc_seconds(h.get("UTCDate"), h.get("UTCTime"))
        stamp = columns["utc_datetime"][i]
        assert (None if stamp is None else int(stamp.timestamp())) == seconds, h
    return len(headers)


@pytest.mark.parametrize("flush", [7, 100, 1 << 16])
def test_seen_keys_keep_the_first_occurrence_across_spills_and_merges(flush):
    rng = np.random.default_rng(flush)
    seen, first = SeenKeys(flush=flush), {}
    keys = rng.integers(0, 3000, 12_000).astype(np.uint64)
    for number, start in enumerate(range(0, len(keys), 37)):
        chunk = keys[start : start + 37]
        assert seen.lookup(chunk).tolist() == [first.get(int(k), -1) for k in chunk]
        fresh = [(offset, key) for offset, key in enumerate(chunk.tolist()) if key not in first]
        if number % 2 and len({key for _, key in fresh}) == len(fresh):  # as the callers batch them
            seen.add_new(np.array([key for _, key in fresh], np.uint64), np.array([start + o for o, _ in fresh]))
            first.update((key, start + offset) for offset, key in fresh)
            continue
        for offset, key in fresh:
            if key not in first:  # the callers add only keys they found unseen
                first[key] = start + offset
                seen.add(key, start + offset)
    assert len(seen) == len(first)
    assert any(len(keys) > 37 for keys, _ in seen._runs)  # runs were merged


TAG_VALUES = {
    "Variant": [None, "", "Standard", "chess", "Atomic", "From Position"],
    "FEN": [None, "", chess.STARTING_FEN, " " + chess.STARTING_FEN, "8/8/8/8/8/8/8/K6k w - - 0 1"],
    "SetUp": [None, "0", "1"],
    "Result": [None, "1-0", "0-1", "1/2-1/2", "*", "?"],
    "Event": [None, "", "Rated Blitz game", "Casual Rapid game", "rated bullet", "?"],
    "WhiteElo": [None, "1500", "?", "999", "2001", "00001500", "1²"],
    "BlackElo": [None, "1200", "3000"],
    "TimeControl": [None, "180+2", "60+0", "-", "900+15", "x"],
    "Termination": [None, "Normal", "Abandoned", "Rules infraction"],
    "WhiteTitle": [None, "BOT", "GM"],
    "BlackTitle": [None, "BOT"],
}
CONFIGS = [
    ValidateConfig(),
    ValidateConfig(min_plies=10, context_tokens=92, exclude_terminations=()),
    ValidateConfig(
        rated_only=True, min_rating=1000, max_rating=2000, time_control_classes=("blitz", "rapid"), exclude_bots=True
    ),
]


@st.composite
def judged_games(draw):
    headers = {
        name: value for name, values in TAG_VALUES.items() if (value := draw(st.sampled_from(values))) is not None
    }
    plies = draw(st.integers(0, 40))
    token = draw(st.sampled_from([None, "1-0", "0-1", "1/2-1/2", "*"]))
    error = draw(st.sampled_from([None, None, ("illegal_move", "x"), ("null_move", "y")]))
    return headers, plies, token, draw(st.booleans()), draw(st.booleans()), error


@settings(max_examples=150, deadline=None)
@given(st.lists(judged_games(), min_size=1, max_size=12))
def test_column_wise_rules_reject_exactly_what_judge_rejects(games):
    headers, plies, tokens, mates, stalemates, errors = zip(*games)
    tags = TagTable.build(list(headers))
    for config in CONFIGS:
        broken = broken_rules(
            config, tags, np.array(plies), list(tokens), np.array(mates), np.array(stalemates), list(errors)
        )
        expected = [judge(config, *game) is not None for game in games]
        assert broken.tolist() == expected, config


def test_the_output_folder_keeps_the_gitignore_dvc_wrote_there(tmp_path):
    # The folder is rebuilt aside and swapped in whole; DVC's .gitignore in it (a tracked file
    # naming the cached outputs) must survive, or `git status` shows it deleted after every run.
    out = tmp_path / "validated"
    out.mkdir()
    (out / ".gitignore").write_text("/games.arrow\n/rejects.arrow\n/inputs.json\n")
    (out / "stale.txt").write_text("another run's file\n")
    (tmp_path / "crlf.pgn").write_bytes(fixture("crlf.pgn"))
    run_validate([tmp_path / "crlf.pgn"], out, ValidateConfig())
    assert (out / ".gitignore").read_text() == "/games.arrow\n/rejects.arrow\n/inputs.json\n"
    assert not (out / "stale.txt").exists() and (out / GAMES).is_file()
