"""Self-play RL learns from the judge's verdicts: a tiny model with move features, trained by
adjudicated self-play, beats the model it started from."""

import pytest
import torch

from chesscore import checkpoint
from chesscore.model import GPT, GPTConfig
from chesscore.play.adjudication import Adjudication
from chesscore.play.elo import elo_difference
from chesscore.selfplay.games import SelfPlayConfig, play_games
from chesscore.selfplay.run import Execution, RunConfig, run_selfplay

# Short games, judged every third ply: a side 300 cp down loses at once. Two near-random players
# fall behind in material within a few moves, so nearly every game has a verdict; what the
# policy can learn from them is to take material and to keep its own.
RULES = Adjudication(
    judge_nodes=200, every_plies=3, resign_moves=1, resign_score_cp=300, draw_moves=0, cap_score_cp=150
)


@pytest.mark.slow
def test_adjudicated_self_play_raises_the_score_against_the_start(stockfish, tmp_path):
    torch.manual_seed(0)
    start = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=256, move_features=True)).eval()
    checkpoint.save(checkpoint.model_payload(start, {"run": "start"}), tmp_path / "start.pt")
    cfg = RunConfig(
        # Seeds 1, 2, 3 scored 0.632, 0.665, 0.667 after 10 iterations (200 games against the
        # start); after 12, 0.31 (seed 1 had collapsed), 0.715, 0.72: 10 suffice, and are steadier.
        iterations=10,
        games=64,
        max_plies=40,
        shard_games=64,
        lr=1e-2,
        kl_coef=0.0,
        batch_games=32,
        eval_games=0,
        seed=2,  # RL from a random start is noisy (see iterations)
        adjudication=RULES,
    )
    stats = run_selfplay(tmp_path / "start.pt", tmp_path, cfg, Execution(workers=0), log=lambda line: None)
    played = cfg.iterations * cfg.games
    assert stats["nonzero_reward_share"] > 0.9 and stats["terminations"]["resign_rule"] > 0.9 * played
    trained, _ = checkpoint.load_model(tmp_path / "rl.pt")
    evaluation = SelfPlayConfig(games=200, max_plies=40, seed=99, adjudication=RULES, stockfish=stockfish)
    _, versus = play_games(trained, start, evaluation)
    result = versus["model"]
    estimate = elo_difference(result["wins"], result["draws"], result["losses"])
    assert estimate.score > 0.55 and estimate.low > 0, estimate  # measured: 0.665 (seed 2, 10 iterations)
