"""The evaluate stage's files: evaluation.json (the whole record: provenance, config, every
metric and breakdown), metrics.json (the DVC metric: the two numbers people compare across
experiments), a CSV table per breakdown, CSVs for DVC plots (accuracy by rating, by phase), and
a one-page Markdown report. The metric and the plots derive from the record alone, so
evaluation.json gives them back, the same bytes, when DVC has removed them.

    write_outputs(Path("data/evaluate"), record)   # record: chesscore.eval.evaluate.evaluate(...) + provenance
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chesscore.eval import conditioning
from chesscore.eval.evaluate import DIMENSIONS, UNKNOWN
from chesscore.eval.human import MEASURERS
from chesscore.fileio import atomic_write_text, csv_text, json_text, metrics_text, update_text

TABLE_FILES = {"rating": "by_rating.csv", "time_control": "by_time_control.csv", "phase": "by_phase.csv"}
PLOT_RATING = "plots/accuracy_by_rating.csv"
PLOT_PHASE = "plots/accuracy_by_phase.csv"
PLOT_CONDITIONING = "plots/conditioning.csv"  # triples-v2 models; header only for v1
HEATMAP = "conditioning.png"


def _csv(rows: list[dict[str, Any]]) -> str:
    """Every key of any row is a column, in order of first appearance."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    return csv_text([{key: _cell(row.get(key)) for key in columns} for row in rows], columns)


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def plot_rows(record: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """(accuracy by rating: one row per known rating bucket; by phase: one row per phase and
    measure, for a horizontal bar chart)."""
    k = record["config"]["top_k"]
    rating = [
        {
            "rating": int(row["bucket"].split("-")[0]),
            "top1": row["top1"],
            f"top{k}": row[f"top{k}"],
            "positions": row["positions"],
        }
        for row in record["breakdowns"]["rating"]
        if row["bucket"] != UNKNOWN and row["positions"]
    ]
    phase = [
        {"phase": f"{row['bucket']} {label}", "accuracy": row[key]}
        for row in record["breakdowns"]["phase"]
        if row["positions"]
        for label, key in (("top-1", "top1"), (f"top-{k}", f"top{k}"))
    ]
    return rating, phase


def report_markdown(record: dict[str, Any]) -> str:
    k = record["config"]["top_k"]
    free, tf = record["free_running"], record["teacher_forced"]
    split = record["test_split"]
    lines = [
        f"# Evaluation: {record['checkpoint']['path']}",
        "",
        f"Model {record['checkpoint']['config_name']} ({record['checkpoint']['parameters']:,} parameters), "
        f"checkpoint sha256 `{record['checkpoint']['sha256'][:16]}`; dataset {record['dataset']['path']} "
        f"(fingerprint `{record['dataset']['fingerprint'][:16]}`, checkpoint check: {record['dataset']['check']}). "
        f"Test split: {split['games_evaluated']} of {split['games_in_split']} games ({split['sample']}), "
        f"{free['positions']:,} positions.",
        "",
        "## Headline",
        "",
        "| measure | value |",
        "|---|---|",
        f"| move matching top-1 (legal-masked, Maia measure) | {_pct(free['top1'])} |",
        f"| move matching top-{k} | {_pct(free[f'top{k}'])} |",
        f"| own greedy move legal (whole move, unmasked) | {_pct(free['move_legal'])} |",
        f"| ... source legal / destination legal (given own source) / promotion legal (given both) | "
        f"{_pct(free['source_legal'])} / {_pct(free['destination_legal'])} / {_pct(free['promotion_legal'])} |",
        f"| teacher-forced NLL per token (nats) | {_num(tf['nll'])} |",
        "| teacher-forced accuracy: source / destination / promotion / EOS | "
        + " / ".join(_pct(tf["phase_accuracy"][p]) for p in ("source", "destination", "promotion", "eos"))
        + " |",
        f"| teacher-forced triple legality (gold prefix) | {_pct(tf['teacher_forced_triple_legality'])} |",
        f"| probability on illegal tokens / on reserved tokens | {_num(tf['illegal_probability'], 4)} / "
        f"{_num(tf['reserved_probability'], 6)} |",
        "",
    ]
    titles = {
        "phase": "By game phase (ply)",
        "time_control": "By time-control class",
        "rating": "By the mover's rating",
    }
    for dim in ("phase", "time_control", "rating"):
        lines += [
            f"## {titles[dim]}",
            "",
            f"| {dim.replace('_', ' ')} | games | positions | top-1 | top-{k} | move legal | source legal | NLL |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in record["breakdowns"][dim]:
            lines.append(
                f"| {row['bucket']} | {row['games']} | {row['positions']} | {_pct(row['top1'])} | "
                f"{_pct(row[f'top{k}'])} | {_pct(row['move_legal'])} | {_pct(row['source_legal'])} | "
                f"{_num(row['nll'])} |"
            )
        lines.append("")
    lines += conditioning_markdown(record.get("conditioning"))
    lines += human_markdown(record.get("human"))
    phases = record["config"]
    lines += [
        "## How these are measured",
        "",
        f"Top-1/top-{k}: the human's move is the model's most likely / among its {k} most likely legal "
        "moves, a move's probability being p(source) p(destination | source) p(promotion | both), each "
        "renormalised over the legal tokens (exact top-k, best-first). Own greedy move: the unmasked "
        "argmax source, then destination after it, then promotion; a sub-token's rate counts positions "
        "where the earlier ones were legal. Teacher-forced metrics are training's (chesscore.train.metrics), "
        "over the raw 128 logits with the gold prefix. Phases by ply: opening 1-"
        f"{phases['opening_until_ply']}, middlegame {phases['opening_until_ply'] + 1}-"
        f"{phases['middlegame_until_ply']}, endgame later. Rating: the mover's, in "
        f"{phases['rating_bin']}-point bins. Tables: by_rating.csv, by_time_control.csv, by_phase.csv.",
        "",
    ]
    return "\n".join(lines)


def human_markdown(human: dict[str, Any] | None) -> list[str]:
    """Human-move prediction on real games: the model beside Stockfish and the random mover."""
    if not human:
        return []
    k, source = human["top_k"], human["source"]
    names = {"model": "model", "stockfish": f"Stockfish depth {human['stockfish']['depth']}", "random": "random"}

    def cell(row: dict[str, Any], who: str, name: str) -> str:
        m = row.get(who)
        return "-" if not m else f"{_pct(m[name])} [{_pct(m[name + '_ci95'][0])}, {_pct(m[name + '_ci95'][1])}]"

    lines = [
        "## Human moves on real Lichess games",
        "",
        f"{source['games_measured']} games of the {source['half']} half of "
        f"{', '.join(f['path'] for f in source['files'])} "
        f"({source['games_kept']} of {source['games_read']} games usable; {source['sample']}), "
        f"{human['overall']['positions']:,} positions; the same positions for all three. "
        f"{human['stockfish']['version']}, depth {human['stockfish']['depth']}, one thread, MultiPV {k}. "
        "95% intervals: bootstrap over games.",
        "",
        "| | positions | "
        + " | ".join(f"{names[w]} top-1" for w in MEASURERS)
        + f" | model top-{k} | Stockfish top-{k} |",
        "|---|---|" + "---|" * (len(MEASURERS) + 2),
    ]
    for label, row in [("all", human["overall"]), *((r["bucket"], r) for r in human["by_rating"] + human["by_phase"])]:
        if row["positions"]:
            lines.append(
                f"| {label} | {row['positions']} | "
                + " | ".join(cell(row, w, "top1") for w in MEASURERS)
                + f" | {cell(row, 'model', f'top{k}')} | {cell(row, 'stockfish', f'top{k}')} |"
            )
    d = human["overall"]["model_minus_stockfish_top1"]
    lines += [
        "",
        f"Model minus Stockfish, top-1 on the same positions: {100 * d['value']:+.1f} points "
        f"[{100 * d['ci95'][0]:+.1f}, {100 * d['ci95'][1]:+.1f}]. Rows after `all`: the mover's rating band, "
        "then the phase.",
        "",
    ]
    return lines


def conditioning_markdown(matrix: dict[str, Any] | None) -> list[str]:
    """The heat map as a table: told rating (rows) x the mover's band (columns) -> top-1."""
    if not matrix:
        return []
    bands = matrix["bands"]
    lines = [
        "## Does the conditioning matter? (top-1 by what the model is told x the mover's rating band)",
        "",
        "| told \\ actual | " + " | ".join(bands) + " |",
        "|---|" + "---|" * len(bands),
        "| positions | " + " | ".join(str(matrix["positions"][b]) for b in bands) + " |",
    ]
    for condition in matrix["conditions"]:
        cells = []
        for band in bands:
            value = _pct(matrix["top1"][condition][band])
            cells.append(f"**{value}**" if matrix["best_told"][band] == condition else value)
        lines.append(f"| {condition} | " + " | ".join(cells) + " |")
    off = matrix["diagonal_not_best"]
    lines += [
        "",
        "Bold: the best told rating of each band. "
        + (
            f"The diagonal is not the best cell in band(s) {', '.join(off)}."
            if off
            else "The diagonal is the best cell of every band."
        )
        + f" Heat map: {HEATMAP}.",
        "",
    ]
    return lines


RECORD = "evaluation.json"


def headline(record: dict[str, Any]) -> dict[str, Any]:
    """metrics.json: move matching (top-1, legal-masked) and the raw legality of the model's own move."""
    free = record["free_running"]
    numbers = {"top1": free["top1"], "legal": free["move_legal"]}
    if "human" in record:  # on real games: the model, Stockfish depth 1 and the random mover
        overall = record["human"]["overall"]
        numbers.update({f"human_top1_{who}": overall[who]["top1"] for who in MEASURERS})
    return numbers


def write_outputs(out: Path, record: dict[str, Any]) -> list[Path]:
    """Every output file, atomically; evaluation.json last (its presence marks a finished run)."""
    written = []
    for dim in DIMENSIONS:
        path = out / TABLE_FILES[dim]
        atomic_write_text(path, _csv(record["breakdowns"][dim]))
        written.append(path)
    atomic_write_text(out / "report.md", report_markdown(record))
    # A DVC output whatever the model: a v1 model's (it reads no ratings) is one grey cell.
    conditioning.write_png(out / HEATMAP, record.get("conditioning") or conditioning.NO_MATRIX)
    written.append(out / HEATMAP)
    written += [out / "report.md", *write_dvc_files(out, record)]
    atomic_write_text(out / RECORD, json_text(record))
    return written + [out / RECORD]


def write_dvc_files(out: Path, record: dict[str, Any]) -> list[Path]:
    """The DVC metric and plots, from the record alone (also as evaluation.json gives it back):
    what DVC removes before it reruns a stage whose uncached outputs it found missing. A file
    already holding its bytes is left alone."""
    rating, phase = plot_rows(record)
    written = []
    for path, rows, columns in (
        (out / PLOT_RATING, rating, ["rating", "top1", f"top{record['config']['top_k']}", "positions"]),
        (out / PLOT_PHASE, phase, ["phase", "accuracy"]),
        (
            out / PLOT_CONDITIONING,
            conditioning.plot_rows(record["conditioning"]) if "conditioning" in record else [],
            ["actual"],
        ),
    ):
        update_text(path, _csv(rows) if rows else ",".join(columns) + "\n")
        written.append(path)
    update_text(out / "metrics.json", metrics_text(headline(record)))
    return written + [out / "metrics.json"]
