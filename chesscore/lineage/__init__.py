"""Lineage: audit any artifact back to the raw dump it came from, re-hashing every file.

    python -m chesscore.lineage audit data/evaluate/report.md     # a tree: OK / MISMATCH / MISSING
    python -m chesscore.lineage audit data/train/best.pt --json

Modules: `audit` (the tree from the artifacts' own records and dvc.lock), `dvc_lock` (dvc.lock
read as DVC writes it: outputs, deps, params, md5s).
"""

from chesscore.lineage.audit import Audit, Node, render

__all__ = ["Audit", "Node", "render"]
