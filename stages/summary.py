"""The one-screen summary of the whole pipeline, printed by `make demo` after `dvc repro`.

    python -m stages.summary              # read the stages' reports under data/ and print them
    python -m stages.summary --json       # the same facts as JSON

It only reads what the stages wrote (reports, metrics, results) and never fails because a stage
has not run yet: that stage's lines say "not run yet".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# Where each stage's report lives, relative to the checkout (the outs declared in dvc.yaml).
REPORTS = {
    "validate": "data/validated/report.json",
    "convert": "data/dataset/manifest.json",
    "train": "data/train/results.json",
    "evaluate": "data/evaluate/metrics.json",
    "arena": "data/arena/results.json",
    "selfplay": "data/selfplay/stats.json",
}
EVALUATION_REPORT = "data/evaluate/report.md"


def _read(root: Path, relative: str) -> dict[str, Any] | None:
    path = root / relative
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def collect(root: str | Path = ".") -> dict[str, Any]:
    """The key facts of every stage that has run, as plain JSON-able values."""
    root = Path(root)
    facts: dict[str, Any] = {name: _read(root, path) for name, path in REPORTS.items()}
    facts["report"] = EVALUATION_REPORT if (root / EVALUATION_REPORT).is_file() else None
    return facts


def _lines(facts: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for stage in REPORTS:
        report = facts.get(stage)
        rows.append((stage, "not run yet" if report is None else "done"))
    return rows


def render_text(facts: dict[str, Any]) -> str:
    rows = _lines(facts)
    width = max(len(name) for name, _ in rows)
    body = "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)
    return f"chess pipeline summary\n{body}\n"


def render_markdown(facts: dict[str, Any]) -> str:
    rows = "\n".join(f"| {name} | {value} |" for name, value in _lines(facts))
    return f"| stage | result |\n|---|---|\n{rows}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.summary", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the project checkout")
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")
    args = parser.parse_args(argv)
    facts = collect(args.root)
    sys.stdout.write(json.dumps(facts, indent=2) + "\n" if args.json else render_text(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
