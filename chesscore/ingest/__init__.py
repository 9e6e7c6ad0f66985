"""Raw PGN in, the dataset out: the validate and convert stages' engines.

    run_validate([Path("data/raw")], Path("data/validated"), ValidateConfig())  # games + rejects
    run_convert(Path("data/validated"), Path("data/dataset"), ConvertConfig())  # shards + manifest

Modules: `validate` (the rules a game must pass, column-wise and game by game), `rows`
(accepted games as Arrow rows), `validate_run` (files -> games.arrow, rejects.arrow, inputs.json,
report.json, with exact accounting), `validate_feed` (its inner parallel path: each file's byte
ranges through the workers, in order), `chunks` (cutting a stream into ranges at game starts,
and the worker that splits and validates one), `spool` (the reader process that inflates a
compressed input), `dedup` (Lichess ids and move sequences already seen), `runs` (a part's dedup
keys as sorted runs on disk, merged in bounded memory), `merge` (parts validated one file each ->
the bytes of one validate run over them), `convert` (splits, shards and manifest, with the
leakage check).
"""

from chesscore.ingest.convert import ConvertConfig, LeakageError, run_convert
from chesscore.ingest.validate import ValidateConfig
from chesscore.ingest.validate_run import run_validate

__all__ = ["ConvertConfig", "LeakageError", "ValidateConfig", "run_convert", "run_validate"]
