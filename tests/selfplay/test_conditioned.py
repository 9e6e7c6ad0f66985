"""Self-play with a triples-v2 (conditioned) model: the games are played with the prefix the run
names, the RL update reads that same prefix and computes nothing on it, the outputs say what
the games were conditioned on, and a v1 model is refused a rating."""

import copy
from dataclasses import replace

import chess.pgn
import pytest
import torch

from chesscore import checkpoint, failures
from chesscore.conditioning import ConditionedSource, table_prefixes, with_prefix
from chesscore.data import dataset
from chesscore.model import CONFIGS, GPT
from chesscore.play.adjudication import Adjudication
from chesscore.play.moves import play_mask
from chesscore.selfplay.games import SelfPlayConfig, play_games
from chesscore.selfplay.rl import PGConfig, game_batch, policy_gradient_step, token_log_probs
from chesscore.selfplay.run import Execution, RunConfig, run_selfplay
from chesscore.tokens import BOS, PREFIX_LENGTH, UNKNOWN_PREFIX, State, conditioning_prefix, encode_game
from chesscore.train.data import TrainData
from chesscore.train.distributed import setup
from chesscore.train.trainer import train
from tests.train.test_conditioning import CONFIG, HIGH, LOW, synthetic

OFF = Adjudication(enabled=False)
TOLD = conditioning_prefix(1800, 1800, None)  # (85, 85, 107)


def _conditioned(seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(replace(CONFIGS["tiny"], conditioning=True)).eval()


@torch.no_grad()
def _log_prob_by_hand(model: GPT, moves: tuple[str, ...], white: bool, prefix: tuple[int, ...]) -> float:
    """Sum over the side's move tokens of log softmax(logits) under play_mask, from one full
    forward (no cache) over BOS, the prefix and the moves: what the sampler drew from."""
    total, state = 0.0, State.from_moves([])
    tokens = with_prefix(encode_game(moves), prefix).tolist()[:-1]
    every = model(torch.tensor([tokens]))[0]  # every[i - 1]: the logits that predict tokens[i]
    for i in range(1 + len(prefix), len(tokens)):
        ply = (i - 1 - len(prefix)) // 3
        if (ply % 2 == 0) == white:
            masked = every[i - 1].masked_fill(~torch.tensor(play_mask(state)), float("-inf"))
            total += float(torch.log_softmax(masked, -1)[tokens[i]])
        state.feed(tokens[i])
    return total


@pytest.fixture(scope="module")
def played():
    model = _conditioned(0)
    with torch.no_grad():  # an untrained model barely reads any token: make the told rating matter
        model.transformer.wte.weight[TOLD[0]] *= 50
    records, _ = play_games(model, None, SelfPlayConfig(games=3, max_plies=10, seed=2, adjudication=OFF, prefix=TOLD))
    return model, records


def test_the_update_reads_the_prefix_played_with_and_computes_nothing_on_it(played):
    model, records = played
    batch = game_batch(records, model.config.vocab_size, TOLD)
    assert batch.inputs[:, : 1 + PREFIX_LENGTH].tolist() == [[BOS, *TOLD]] * len(records)
    assert not batch.own[:, :PREFIX_LENGTH].any()  # the prefix is nobody's move: no loss, no KL
    assert int(batch.own.sum()) == 3 * sum(r.plies for r in records)  # every move token, nothing more
    taken = token_log_probs(model, batch, temperature=1.0)[0].detach()
    # A self-play row holds both colours: a prefix target counted as own would land in black's sum.
    measured = [float(taken[row][batch.white[row] == white].sum()) for row in range(len(records)) for white in (1, 0)]
    expected = [_log_prob_by_hand(model, r.moves, white, TOLD) for r in records for white in (True, False)]
    torch.testing.assert_close(torch.tensor(measured), torch.tensor(expected), atol=1e-4, rtol=1e-4)
    # The model's policy depends on what it is told: rows read as "unknown" are another policy.
    unknown = [_log_prob_by_hand(model, r.moves, True, UNKNOWN_PREFIX) for r in records]
    assert max(abs(a - b) for a, b in zip(unknown, expected[::2])) > 1e-2


def _by_colour(record, white: bool) -> float:  # the capped games are draws: give the sides different rewards
    return 1.0 if white else -0.5


def test_policy_gradient_step_weighs_the_log_probs_under_the_given_prefix(played):
    model, records = played
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the loss is what is checked, not the step
    metrics = policy_gradient_step(model, reference, optimizer, records, PGConfig(kl_coef=0.0), _by_colour, TOLD)
    baseline = (1.0 - 0.5) / 2
    expected = -sum(
        (_by_colour(r, white) - baseline) * _log_prob_by_hand(reference, r.moves, white, TOLD)
        for r in records
        for white in (True, False)
    ) / sum(r.plies for r in records)
    assert metrics["pg_loss"] == pytest.approx(expected, abs=1e-5)
    assert metrics["kl_per_move"] == pytest.approx(0.0, abs=1e-6)  # the reference read the same prefix


def test_the_prefix_reaches_the_games(tmp_path):
    # The trainer's two synthetic "ratings" (tests/train/test_conditioning.py): 1000 opens e2e4, 2000 d2d4.
    train(CONFIG, TrainData(synthetic(32), synthetic(4), fingerprint="synthetic"), tmp_path, setup("cpu"))
    model = checkpoint.load_model(tmp_path / "best.pt")[0]
    first = {}
    for rating in (LOW, HIGH, None):
        cfg = SelfPlayConfig(games=2, max_plies=4, temperature=0.0, adjudication=OFF, prefix=_told(rating))
        first[rating] = [r.moves[0] for r in play_games(model, None, cfg)[0]]
    assert first[LOW] == ["e2e4"] * 2 and first[HIGH] == ["d2d4"] * 2, first


def _told(rating: int | None) -> tuple[int, int, int]:
    return conditioning_prefix(rating, rating, None)


@pytest.fixture(scope="module")
def conditioned_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("start") / "v2.pt"
    checkpoint.save(checkpoint.model_payload(_conditioned(1), identity={"run": "supervised"}), path)
    cfg = RunConfig(
        iterations=1, games=4, max_plies=12, shard_games=2, eval_games=2, batch_games=4, adjudication=OFF, seed=3
    )
    out = tmp_path_factory.mktemp("out")
    stats = run_selfplay(path, out, replace(cfg, conditioning_rating=1800), Execution(workers=0), log=lambda line: None)
    return path, cfg, out, stats


def test_a_conditioned_run_records_its_conditioning_and_its_dataset_reads_it_back(conditioned_run):
    _, _, out, stats = conditioned_run
    assert stats["conditioning"]["prefix"] == list(TOLD)
    assert stats["conditioning"]["labels"] == ["1800-1899", "1800-1899", "unknown"]
    saved = torch.load(out / "rl.pt", weights_only=True)
    assert saved["identity"]["conditioning"] == stats["conditioning"]
    assert saved["identity"]["tokenizer"]["version"] == "triples-v2"
    tables = dataset.load(out / "dataset", dataset.verify(out / "dataset"))  # as training opens it
    rows = [ConditionedSource(t, table_prefixes(t)) for t in tables.values()]
    heads = [source[i][: 1 + PREFIX_LENGTH].tolist() for source in rows for i in range(len(source))]
    assert heads == [[BOS, *TOLD]] * stats["games"]  # a conditioned reader gets the prefix played with
    with open(out / "games.pgn", encoding="utf-8") as handle:
        game = chess.pgn.read_game(handle)
    assert (game.headers["WhiteElo"], game.headers["BlackElo"]) == ("1800", "1800")


def test_another_rating_is_another_run(conditioned_run, tmp_path):
    path, cfg, out, stats = conditioned_run
    other = run_selfplay(path, tmp_path, replace(cfg, conditioning_rating=1000), Execution(workers=0), log=print)
    assert other["conditioning"]["prefix"] == list(conditioning_prefix(1000, 1000, None))
    assert other["run_id"] != stats["run_id"]  # the identity holds the rating: no resume across ratings
    unknown = run_selfplay(path, tmp_path / "unknown", cfg, Execution(workers=0), log=print)
    assert unknown["conditioning"]["prefix"] == list(UNKNOWN_PREFIX)
    assert "WhiteElo" not in (tmp_path / "unknown" / "games.pgn").read_text(encoding="utf-8")


def test_a_v1_model_is_refused_a_conditioning_rating(tmp_path):
    path = tmp_path / "v1.pt"
    checkpoint.save(checkpoint.model_payload(GPT(CONFIGS["tiny"]), identity={}), path)
    cfg = RunConfig(iterations=1, games=2, max_plies=8, shard_games=2, eval_games=0, adjudication=OFF)
    with pytest.raises(failures.Refused, match="triples-v1"):
        run_selfplay(path, tmp_path / "out", replace(cfg, conditioning_rating=1500), Execution(workers=0))
    assert not (tmp_path / "out" / "rl.pt").exists()
    stats = run_selfplay(path, tmp_path / "out", cfg, Execution(workers=0), log=lambda line: None)
    assert stats["conditioning"] is None
    assert torch.load(tmp_path / "out" / "rl.pt", weights_only=True)["identity"]["tokenizer"]["version"] == "triples-v1"
