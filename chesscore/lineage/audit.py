"""Lineage audit: walk back from any artifact to the raw inputs it came from, re-hashing every file.

    python -m chesscore.lineage audit data/evaluate/metrics.json      # a tree, OK / MISMATCH / MISSING
    python -m chesscore.lineage audit data/train/best.pt --json       # the same tree as JSON
    chesscore lineage audit data/selfplay                             # the project CLI, same command

Two records lead back, and both are checked. The artifacts' own records: an evaluation or arena
report names its checkpoint's sha256, a checkpoint's identity names its dataset's fingerprint (a
self-play checkpoint names the checkpoint it started from), a dataset's manifest names each shard's
and each raw input's sha256. And DVC's: dvc.lock names the stage that made each output, the md5
of the output, of every input and code file it read, and the params values it ran with. Every
claim is re-checked against the files as they are now; the exit status is 1 if any fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chesscore.lineage.dvc_lock import Lock, current_params, dvc_md5, file_digest

OK, MISMATCH, MISSING = "OK", "MISMATCH", "MISSING"
REPORT_FILES = ("evaluation.json", "arena.json", "stats.json")  # records that name their checkpoint
CODE_SUFFIXES = (".py",)


@dataclass
class Node:
    """One step of the audit: what was checked, its own status, and what it came from."""

    label: str
    status: str = OK
    detail: str = ""
    children: list[Node] = field(default_factory=list)

    def problems(self) -> int:
        return (self.status != OK) + sum(child.problems() for child in self.children)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "status": self.status,
            "detail": self.detail,
            "children": [child.to_dict() for child in self.children],
        }


def claim_node(label: str, path: Path, claims: list[tuple[str, str, str]]) -> Node:
    """Check (kind, expected value, who claims it) for `path`: sha256, md5 (DVC) or fingerprint."""
    if not path.exists():
        named = sorted({source for _, _, source in claims})
        return Node(label, MISSING, "does not exist" + (f" (named by {', '.join(named)})" if named else ""))
    failed, sources = [], []
    for kind, expected, source in claims:
        actual = (
            file_digest(path, "sha256")
            if kind == "sha256"
            else dvc_md5(path)
            if kind == "md5"
            else str((_json(path / "manifest.json" if path.is_dir() else path) or {}).get("fingerprint"))
        )
        sources.append(f"{kind} as in {source}")
        if actual != expected:
            failed.append(f"{kind} {actual[:16]} but {source} says {expected[:16]}")
    return Node(label, MISMATCH if failed else OK, "; ".join(failed or sources))


class Audit:
    """Builds the tree; each artifact is expanded once (later mentions say "expanded above")."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.lock = Lock.read(root)
        self.seen: set[str] = set()

    def rel(self, path: str | Path) -> str:
        path = Path(path)
        absolute = path if path.is_absolute() else self.root / path
        try:
            return absolute.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(absolute.resolve())

    def artifact(self, path: str, claims: list[tuple[str, str, str]]) -> Node:
        """The node of one artifact: its claims checked, then DVC's record of it, then its own
        records, each leading further back. An artifact is expanded once; a file inside a folder
        artifact (a shard in a dataset) is audited as that folder."""
        path = self.rel(path)
        kind, key, records = self.kind(path)
        node = claim_node(f"{path}  [{kind}]", self.root / path, claims)
        if node.status == MISSING:
            return node
        if key in self.seen:
            node.detail += "; expanded above"
            return node
        self.seen.add(key)
        node.children += self.dvc_record(key)
        node.children += records()
        return node

    def kind(self, path: str) -> tuple[str, str, Any]:
        """What `path` is, the artifact it belongs to, and the reader of that artifact's own
        records: walk up from it to the first folder that holds a known record."""
        p = self.root / path
        if p.suffix == ".pt":
            return "checkpoint", path, lambda: self.checkpoint(path)
        folder, top = (p if p.is_dir() else p.parent).resolve(), self.root
        while folder == top or top in folder.parents:
            key = self.rel(folder)
            if (folder / "stats.json").is_file() and (folder / "rl.pt").is_file():
                return "self-play output", key, lambda f=folder: self.selfplay(f)
            if (folder / "manifest.json").is_file():
                return "dataset", key, lambda f=folder: self.dataset(f)
            if (folder / "inputs.json").is_file():
                return "validated games", key, lambda f=folder: self.validated(f)
            for name in REPORT_FILES:
                record = _json(folder / name)
                if isinstance(record, dict) and isinstance(record.get("checkpoint"), dict):
                    return "report", key, lambda f=folder / name, r=record: self.report(f, r)
            folder = folder.parent
        made = self.lock.outputs(path) if self.lock else []
        return ("file" if made else "input"), path, lambda: []

    # -- DVC's record ---------------------------------------------------------------------------
    def dvc_record(self, path: str) -> list[Node]:
        """One node per stage that made (part of) `path`: its outputs' md5 as dvc.lock records
        them, its params and code as they were, and the inputs it read (audited in turn)."""
        made = self.lock.outputs(path) if self.lock else []
        nodes = []
        for stage in dict.fromkeys(name for name, _ in made):
            outs = [
                claim_node(out["path"], self.root / out["path"], [("md5", out["md5"], "dvc.lock")])
                for name, out in made
                if name == stage and "md5" in out
            ]
            bad = [n for n in outs if n.status != OK]
            node = Node(
                f"stage {stage} (dvc.lock): {len(outs)} output(s) as recorded"
                if not bad
                else f"stage {stage} (dvc.lock): {len(bad)} of {len(outs)} output(s) differ from the record",
                MISMATCH if bad else OK,
                children=bad,
            )
            node.children.append(self.params_node(stage))
            deps = self.lock.stages[stage].get("deps", [])
            code = [d for d in deps if d["path"].endswith(CODE_SUFFIXES)]
            changed = [claim_node(d["path"], self.root / d["path"], [("md5", d["md5"], "dvc.lock")]) for d in code]
            changed = [n for n in changed if n.status != OK]
            node.children.append(
                Node(
                    f"code: {len(code)} file(s) as recorded"
                    if not changed
                    else f"code: {len(changed)} of {len(code)} file(s) changed since the run",
                    MISMATCH if changed else OK,
                    children=changed,
                )
            )
            node.children += [
                self.artifact(d["path"], [("md5", d["md5"], f"dvc.lock ({stage} deps)")]) for d in deps if d not in code
            ]
            nodes.append(node)
        return nodes

    def params_node(self, stage: str) -> Node:
        recorded = self.lock.params(stage)
        now: dict[str, Any] = {}
        for params_file in self.lock.params_files(stage):
            now.update(current_params(self.root, params_file, list(recorded)))
        changed = [
            Node(key, MISMATCH, f"{now[key]!r} in params now, {value!r} when the stage ran")
            for key, value in recorded.items()
            if now.get(key) != value
        ]
        return Node(
            f"params: {len(recorded)} value(s) as recorded"
            if not changed
            else f"params: {len(changed)} of {len(recorded)} value(s) changed since the run",
            MISMATCH if changed else OK,
            children=changed,
        )

    # -- the artifacts' own records ---------------------------------------------------------------
    def report(self, record_path: Path, record: dict[str, Any]) -> list[Node]:
        source = self.rel(record_path)
        nodes = []
        ckpt = record.get("checkpoint")
        ckpt = {"path": ckpt} if isinstance(ckpt, str) else ckpt
        if isinstance(ckpt, dict) and ckpt.get("path"):
            claims = [("sha256", ckpt["sha256"], source)] if ckpt.get("sha256") else []
            nodes.append(self.artifact(ckpt["path"], claims))
        dataset = record.get("dataset")
        if isinstance(dataset, dict) and dataset.get("path"):
            nodes.append(self.artifact(dataset["path"], [("fingerprint", dataset["fingerprint"], source)]))
        return nodes

    def checkpoint(self, path: str) -> list[Node]:
        from chesscore.checkpoint import CheckpointError, load

        try:
            identity = load(self.root / path).get("identity") or {}
        except CheckpointError as error:
            return [Node("checkpoint payload", MISMATCH, str(error))]
        nodes = []
        reference = identity.get("reference")  # a self-play checkpoint names the one it started from
        if isinstance(reference, dict) and reference.get("sha256"):
            deps = self.lock_deps_of(path, suffix=".pt")
            nodes += [self.artifact(dep, [("sha256", reference["sha256"], f"{path} identity")]) for dep in deps]
        fingerprint = identity.get("dataset_fingerprint")
        if fingerprint:
            for dep in self.lock_deps_of(path, manifest=True):
                nodes.append(self.artifact(dep, [("fingerprint", fingerprint, f"{path} identity")]))
        return nodes

    def lock_deps_of(self, path: str, suffix: str = "", manifest: bool = False) -> list[str]:
        made = self.lock.outputs(path) if self.lock else []
        deps = [d["path"] for stage, _ in made[:1] for d in self.lock.stages[stage].get("deps", [])]
        return [
            d
            for d in deps
            if (suffix and d.endswith(suffix)) or (manifest and (self.root / d / "manifest.json").is_file())
        ]

    def selfplay(self, folder: Path) -> list[Node]:
        """The RL checkpoint (whose identity names the checkpoint it started from) and the games."""
        nodes = self.report(folder / "stats.json", _json(folder / "stats.json") or {})
        nodes.append(self.artifact(self.rel(folder / "rl.pt"), []))
        if (folder / "dataset" / "manifest.json").is_file():
            nodes.append(self.artifact(self.rel(folder / "dataset"), []))
        return nodes

    def dataset(self, folder: Path) -> list[Node]:
        from chesscore.data.shards import fingerprint

        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        actual = fingerprint(manifest)
        nodes = [
            Node(
                "manifest fingerprint",
                OK if actual == manifest.get("fingerprint") else MISMATCH,
                ""
                if actual == manifest.get("fingerprint")
                else f"recomputed {actual[:16]}, manifest says {str(manifest.get('fingerprint'))[:16]}",
            )
        ]
        shards = [
            claim_node(f"shard {s['path']}", folder / s["path"], [("sha256", s["sha256"], "manifest.json")])
            for s in manifest.get("shards", [])
        ]
        bad = [n for n in shards if n.status != OK]
        nodes.append(
            Node(
                f"shards: {len(shards)} re-hashed, as in the manifest"
                if not bad
                else f"shards: {len(bad)} of {len(shards)} differ from the manifest",
                MISMATCH if bad else OK,
                children=bad,
            )
        )
        nodes += self.raw_inputs(manifest.get("inputs", []), folder, self.rel(folder / "manifest.json"))
        return nodes

    def validated(self, folder: Path) -> list[Node]:
        inputs = _json(folder / "inputs.json") or {}
        return self.raw_inputs(inputs.get("inputs", []), folder, self.rel(folder / "inputs.json"))

    def raw_inputs(self, inputs: list[dict[str, Any]], folder: Path, source: str) -> list[Node]:
        nodes = []
        for entry in inputs:
            path = Path(entry["path"])
            if not path.is_absolute() and not (self.root / path).exists():
                # written relative to the writer's output folder (self-play: games.pgn beside dataset/)
                near = [f / path for f in (folder, *folder.parents) if self.root in f.parents and (f / path).exists()]
                path = near[0] if near else path
            nodes.append(self.artifact(str(path), [("sha256", entry["sha256"], source)]))
        return nodes


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def render(node: Node, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    branch = "" if top else ("└── " if last else "├── ")
    lines = [f"{prefix}{branch}{node.status:<8} {node.label}" + (f"  ({node.detail})" if node.detail else "")]
    inner = prefix + ("" if top else ("    " if last else "│   "))
    for i, child in enumerate(node.children):
        lines += render(child, inner, i == len(node.children) - 1, top=False)
    return lines


def audit(path: str | os.PathLike, root: str | os.PathLike = ".") -> Node:
    return Audit(Path(root)).artifact(str(path), [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chesscore.lineage", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("audit", help="audit one artifact back to its raw inputs")
    run.add_argument("path", help="a checkpoint, report, dataset, self-play output or any DVC output")
    run.add_argument("--root", default=".", help="the project checkout (holds dvc.lock and params.yaml)")
    run.add_argument("--json", action="store_true", help="print the tree as JSON")
    args = parser.parse_args(argv)
    tree = audit(args.path, args.root)
    problems = tree.problems()
    if args.json:
        print(json.dumps({"ok": problems == 0, "problems": problems, "tree": tree.to_dict()}, indent=2))
    else:
        print("\n".join(render(tree)))
        print(f"\n{'OK: every record matches the files' if not problems else f'{problems} problem(s) found'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
