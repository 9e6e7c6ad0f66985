"""Evaluation of a checkpoint on the dataset's test split (the only reader of that split).

    from chesscore.eval.evaluate import EvalConfig, evaluate, sample_test_games
    from chesscore.eval.report import write_outputs
    games, _ = sample_test_games(Path("data/dataset"), n=100, seed=0)
    result = evaluate(model, games, EvalConfig())      # NLL, top-k move matching, legality, by bucket
    write_outputs(Path("data/evaluate"), result)       # metrics.json, report.md, CSVs, plots

Modules: `evaluate` (sampling, the metrics by rating, time control and phase), `moves` (the
model's own move at each position: matching and legality), `report` (the files it writes),
`conditioning` (top-1 told each rating), `human` (human-move prediction on real Lichess games,
beside Stockfish and the random mover), `real_games` (those games, their two halves, and the
validation half written out for training), and `ratings`, which reads no checkpoint and no test
game: does strength follow the rating in the train and validation games a conditioned model
learns from (`python -m chesscore.eval.ratings data/dataset`).

The package imports none of them, so that `python -m chesscore.eval.<module>` runs its module once.
"""
