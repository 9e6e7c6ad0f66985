"""The dataset contract: Arrow shards, their manifest, the split rule, and the verified reader.

    receipt = verify("data/dataset", "receipt.json")            # every shard re-hashed first
    tables = load("data/dataset", receipt)                      # {"train", "validation"}: TokenTables
    for tokens, meta in games("data/dataset", "test"): ...       # verified, then game by game

Modules: `shards` (the shard schema, content-addressed shard files, the manifest and its
fingerprint, move-sequence keys), `splits` (a game's split from a keyed hash of its id),
`structure` (every manifest field the readers use, type and range checked), `dataset` (the
reader: nothing is yielded before every shard matches the manifest). Writers of
datasets (chesscore.ingest, chesscore.selfplay.export) and readers (train, eval) meet here, and
nothing here reads PGN, so a change in the PGN code never reruns training.
"""

from chesscore.data.dataset import IntegrityError, TokenTable, games, load, manifest, verify
from chesscore.data.splits import SplitRule, assign_splits

__all__ = ["IntegrityError", "SplitRule", "TokenTable", "assign_splits", "games", "load", "manifest", "verify"]
