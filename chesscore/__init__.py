"""chesscore: the library behind the pipeline. It imports neither DVC nor Prefect.

At the top, what every part shares:

    tokens      the move-token contract (triples-v1) and the legal-move automaton `State`
    model       the GPT (one file, a config dataclass) and its named configs
    checkpoint  saving and loading checkpoints (tensors + JSON-able metadata, weights_only=True)
    failures    the three kinds of expected failure (bad input, refused, temporary) and exit codes
    fileio      atomic writes (fsynced), staged folders, content hashes, YAML read as DVC reads it
    config      settings dataclasses: checked mappings, fields documented by their comments
    ranges      the sign and range checks of every config dataclass's knobs
    resume      resuming a run: which checkpoint, identity checks, stable checkpoint bytes

Then one sub-package per concern, in the order the pipeline runs:

    pgn/        reading raw PGN: inputs (compression), splitting into games, parsing, tags
    ingest/     validate (rules, dedup) and convert: raw games -> the dataset
    data/       the dataset contract: shards, manifest, splits, and the verified reader
    train/      the training loop and what it needs: batching, optimizer, metrics, identity, resume
    eval/       the evaluation of a checkpoint on the test split, and its report
    play/       playing games: move choice, game endings, Stockfish, the arena, Elo, the UCI engine
    selfplay/   self-play games in many processes (or on Ray) and the RL update
    lineage/    the audit of an artifact back to the raw dump (artifacts' records and dvc.lock)
    cli/        what every stage CLI shares: params and flags, exit codes (runner), faults
    pipeline/   the pipeline as a whole: params profiles, the one-screen summary of a run
    samplegen/  the generator of the embedded sample
    runtime/    what long-running processes share: progress bars, seeds, file locks, child processes
"""
