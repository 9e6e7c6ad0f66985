"""Evaluation of a checkpoint on the dataset's test split (the only reader of that split).

    games = sample_test_games(Path("data/dataset"), EvalConfig(games=100))
    result = evaluate.evaluate(model, games, EvalConfig())      # NLL, top-k move matching, legality, by bucket
    write_outputs(result, Path("data/evaluate"))       # metrics.json, report.md, CSVs, plots

Modules: `evaluate` (sampling, the metrics by rating, time control and phase), `moves` (the
model's own move at each position: matching and legality), `report` (the files it writes),
`conditioning` (top-1 told each rating), and `ratings`, which reads no checkpoint and no test game:
does strength follow the rating in the train and validation games a conditioned model learns from
(`python -m chesscore.eval.ratings data/dataset`).
"""

from chesscore.eval.evaluate import DatasetMismatch, EvalConfig, check_dataset, sample_test_games
from chesscore.eval.report import write_outputs

__all__ = ["DatasetMismatch", "EvalConfig", "check_dataset", "sample_test_games", "write_outputs"]
