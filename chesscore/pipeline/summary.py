"""The one-screen summary of the whole pipeline, printed by `make demo` after `dvc repro`.

    python -m chesscore.pipeline.summary              # read what the stages wrote under data/ and print it
    python -m chesscore.pipeline.summary --json       # the same facts as JSON
    python -m chesscore.pipeline.summary --readme README.md   # put it in the README's sample (`make lock`),
                                                              # without the times line (this machine's)

It only reads the stages' reports (their paths come from params.yaml) and never fails because
a stage has not run yet: that stage's line says so. The Prefect flow publishes the same facts
as its final Markdown artifact (render_markdown).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from chesscore.cli.params import load as load_params
from chesscore.fileio import RUN_RECORD, update_text

# stage -> (params key of its output folder, report file in it)
REPORTS = {
    "validate": ("out", "report.json"),
    "convert": ("out", "manifest.json"),
    "train": ("output", "results.json"),
    "evaluate": ("out", "evaluation.json"),
    "arena": ("out", "arena.json"),
    "selfplay": ("out", "stats.json"),
}


TIMED = ("train", "selfplay", "arena")  # the stages that write a run.json


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def folders(root: Path) -> dict[str, str]:
    """Each stage's output folder, as params.yaml names it (relative to the checkout), else the
    stage's default."""
    from chesscore.pipeline.settings import default_of

    params = load_params(root / "params.yaml")
    return {
        stage: str(((params or {}).get(stage) or {}).get(key) or default_of(f"{stage}.{key}"))
        for stage, (key, _) in REPORTS.items()
    }


def collect(root: str | Path = ".") -> dict[str, Any]:
    """The stages' reports as they are on disk (None where a stage has not run), and the paths
    of the reports a person reads next."""
    root = Path(root)
    where = folders(root)
    facts: dict[str, Any] = {stage: _read(root / where[stage] / REPORTS[stage][1]) for stage in REPORTS}
    report = Path(where["evaluate"]) / "report.md"
    # What this machine took (run.json beside the outputs; not DVC outputs, so a clone has none).
    facts["runs"] = {stage: _read(root / where[stage] / RUN_RECORD) for stage in TIMED}
    facts["report"] = report.as_posix() if (root / report).is_file() else None
    facts["arena_report"] = (Path(where["arena"]) / "report.md").as_posix()
    return facts


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _elo(v: dict[str, Any]) -> str:
    """Elo difference and its 95% interval; +-inf where every game had one result."""

    def bound(x: Any, inf: str) -> str:
        return inf if x is None else f"{x:+.0f}"

    centre = bound(v.get("elo"), "-inf" if v.get("score", 0.5) < 0.5 else "+inf")
    return f"Elo {centre} [{bound(v.get('low'), '-inf')}, {bound(v.get('high'), '+inf')}]"


def verdict(v: dict[str, Any]) -> str:
    """W/D/L, score, Elo [95%] and how the games were decided, from the first player's view."""
    text = f"+{v['wins']} ={v['draws']} -{v['losses']}, score {_num(v['score'], 2)}, {_elo(v)}"
    decided = v.get("decided_by")
    if decided:
        games = max(1, sum(decided.values()))
        shares = {how: n / games for how, n in decided.items()}
        text += (
            f"; decided by the rules {shares['rules']:.0%}, by adjudication {shares['adjudication']:.0%},"
            f" drawn {shares['draw']:.0%}"
        )
    return text


def flipped(v: dict[str, Any]) -> dict[str, Any]:
    """A match result seen from the other player: wins and losses, score, Elo and interval swapped."""

    def neg(x: Any) -> Any:
        return None if x is None else -x

    return {
        **v,
        "wins": v["losses"],
        "losses": v["wins"],
        "score": 1 - v["score"],
        "elo": neg(v.get("elo")),
        "low": neg(v.get("high")),
        "high": neg(v.get("low")),
    }


def conditioning_row(matrix: dict[str, Any]) -> str:
    """A triples-v2 model's top-1 told the true ratings vs told "unknown" (chesscore.eval.conditioning)."""
    overall = matrix.get("overall") or {}
    rated = sum((matrix.get("positions") or {}).values())
    return (
        f"  conditioning: top-1 told the true ratings {_pct(overall.get('told true'))}, "
        f"told unknown {_pct(overall.get('told unknown'))} ({rated:,} rated moves)"
    )


def human_row(human: dict[str, Any]) -> str:
    """Top-1 on real Lichess games: the model, Stockfish at depth 1 and the random mover (chesscore.eval.human)."""
    overall = human["overall"]

    def top1(who: str) -> str:
        m = overall[who]
        return f"{_pct(m['top1'])} [{_pct(m['top1_ci95'][0])}, {_pct(m['top1_ci95'][1])}]"

    return (
        f"  human moves (real games, {overall['positions']:,} positions): top-1 model {top1('model')}, "
        f"Stockfish depth {human['stockfish']['depth']} {top1('stockfish')}, random {top1('random')}"
    )


def strength_row(curve: dict[str, Any]) -> str:
    """The arena's measured Elo [95%] at each told rating (chesscore.play.strength), low to high."""

    def elo(point: dict[str, Any]) -> str:
        centre = point.get("elo")
        text = ("+inf" if point.get("high") is None else "-inf") if centre is None else f"{centre:+.0f}"
        low, high = point.get("low"), point.get("high")
        return f"{text} [{'-inf' if low is None else f'{low:+.0f}'}, {'+inf' if high is None else f'{high:+.0f}'}]"

    points = curve["points"]
    games = {p["games"] for p in points}
    told = ", ".join(
        f"told {p['told']} {elo(p)}" + ("" if len(games) == 1 else f" ({p['games']} games)") for p in points
    )
    scale = curve.get("scale") or "Elo"
    if " vs " not in scale and curve.get("opponents"):  # anchored: say which opponents the Elo is measured on
        scale += f": {', '.join(curve['opponents'])}"
    each = f", {games.pop()} games each" if len(games) == 1 else ""
    return f"  {told} ({scale}{each}); rises with the rating: {'yes' if curve.get('rises') else 'no'}"


def lines(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """(stage, one line of its key numbers); "not run yet" where its report is missing."""
    rows: list[tuple[str, str]] = []
    v, c, t, e, a, s = (facts.get(stage) for stage in REPORTS)
    rows.append(
        (
            "validate",
            "not run yet"
            if v is None
            else f"{v['games_seen']:,} games seen: {v['accepted']:,} kept, {v['rejected']:,} rejected ("
            + ", ".join(
                f"{reason} {n}" for reason, n in sorted(v.get("by_reason", {}).items(), key=lambda item: -item[1])[:4]
            )
            + ")",
        )
    )
    rows.append(
        (
            "convert",
            "not run yet"
            if c is None
            else ", ".join(f"{split} {c['splits'][split]['games']:,}" for split in ("train", "validation", "test"))
            + f" games; fingerprint {c['fingerprint'][:12]}",
        )
    )
    if t is None:
        rows.append(("train", "not run yet"))
    else:
        history = t.get("history") or [{}]
        first, last = history[0].get("validation") or {}, history[-1].get("validation") or {}
        rows.append(
            (
                "train",
                f"validation NLL {_num(first.get('nll'))} -> best "
                f"{_num(t.get('best_validation_nll'))} at step {t.get('best_step')} "
                f"({t.get('status')}); triple legality {_pct(last.get('teacher_forced_triple_legality'))}",
            )
        )
    if e is None:
        rows.append(("evaluate", "not run yet"))
    else:
        free, tf = e["free_running"], e["teacher_forced"]
        rows.append(
            (
                "evaluate",
                f"test NLL {_num(tf['nll'])}; move accuracy top-1 {_pct(free['top1'])}, "
                f"top-3 {_pct(free.get('top3'))}; own move legal {_pct(free['move_legal'])} "
                f"({e['test_split']['games_evaluated']} test games)",
            )
        )
        if e.get("conditioning"):
            rows.append(("", conditioning_row(e["conditioning"])))
        if e.get("human"):
            rows.append(("", human_row(e["human"])))
    if s is None:
        rows.append(("selfplay", "not run yet"))
    else:
        ends = ", ".join(f"{name} {n}" for name, n in (s.get("terminations") or {}).items() if n)
        rows.append(
            (
                "selfplay",
                f"{s['games']} games (W {s['white_wins']} D {s['draws']} B {s['black_wins']}: {ends}), "
                f"mean {_num(s['plies']['mean'], 0)} plies; non-zero reward "
                f"{_pct(s.get('nonzero_reward_share'))}; illegal attempts {_pct(s['illegal_attempt_rate'])}",
            )
        )
        judge = s.get("judge") or {}
        if judge.get("positions"):  # its time is the run's (run.json), not the games'
            rows.append(("", f"  judge: {judge['positions']:,} positions scored"))
    if a is None:
        rows.append(("arena", "not run yet"))
    else:
        rating = a.get("rating") or {}
        if rating.get("rating") is not None:
            estimate = (
                f"rating {_num(rating['rating'], 0)} [{_num(rating.get('low'), 0)}, "
                f"{_num(rating.get('high'), 0)}] on the Stockfish anchors"
            )
        elif rating.get("high") is not None:  # every anchored game lost: only an upper bound exists
            estimate = f"rating below {_num(rating['high'], 0)} (95%; lost every game against the Stockfish anchors)"
        else:
            estimate = "no rating (no games against the Stockfish anchors)"
        rows.append(("arena", f"{estimate}; illegal attempts {_pct(a.get('illegal_attempt_rate'))}"))
        for name, o in a.get("opponents", {}).items():
            rows.append(("", f"  vs {name}: {verdict(o)}"))
        if a.get("strength"):
            rows.append(("", strength_row(a["strength"])))
    rows += verdict_rows(facts)
    runs = facts.get("runs") or {}
    if any(runs.values()):
        rows.append(("times", times_row(runs)))
    return rows


def times_row(runs: dict[str, Any]) -> str:
    """How long the last run of each timed stage took here, and how fast (their run.json)."""
    parts = []
    t, s, a = (runs.get(stage) or {} for stage in TIMED)
    if t.get("wall_seconds") is not None:
        speed = (t.get("throughput") or {}).get("useful_tokens_per_second")
        parts.append(f"train {t['wall_seconds']:.0f} s" + (f" ({speed:,.0f} useful tokens/s)" if speed else ""))
    if s.get("wall_seconds") is not None:
        workers = (s.get("execution") or {}).get("workers")
        speed = f"{s['moves_per_second']:,.0f} moves/s" if s.get("moves_per_second") else "nothing played"
        share = s.get("judge_share_of_play")
        parts.append(
            f"selfplay {s['wall_seconds']:.0f} s ({speed}"
            + (f" over {workers} workers" if workers else "")
            + (f"; judge {share:.0%} of play" if share is not None else "")
            + ")"
        )
    if a.get("seconds") is not None:
        parts.append(f"arena {a['seconds']:.0f} s (judge {a['judge_share']:.0%})")
    return ", ".join(parts) + " on this machine"


def verdict_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """The two verdicts a reader wants first: the supervised model against the random mover
    (arena) and the RL model against its supervised parent (self-play's evaluation games)."""
    a, s = facts.get("arena") or {}, facts.get("selfplay") or {}
    rows = []
    versus_random = next((o for o in (a.get("opponents") or {}).values() if o.get("kind") == "random"), None)
    if versus_random is not None:
        rows.append(("verdicts", f"supervised vs random mover: {verdict(versus_random)}"))
    if s.get("vs_supervised"):
        rows.append(("" if rows else "verdicts", f"RL vs its supervised parent: {verdict(s['vs_supervised'])}"))
    return rows


def next_steps(facts: dict[str, Any]) -> list[str]:
    steps = []
    if facts.get("report"):
        steps.append(f"{facts['report']}  (the evaluation report: metrics by rating, time control, phase)")
    steps += [
        f"{facts['arena_report']}  (arena games and Elo; games.pgn beside it)",
        "dvc metrics show; dvc plots show  (every metric; loss and accuracy plots as HTML)",
        f"python -m chesscore.lineage audit {facts['report'] or 'data/train/best.pt'}  (lineage to the raw dump)",
        "python -m flows.serve  (the same pipeline nightly, in the Prefect UI; see README)",
    ]
    return steps


def render_text(facts: dict[str, Any]) -> str:
    rows = lines(facts)
    width = max(len(name) for name, _ in rows)
    body = "\n".join(f"  {name:<{width}}  {text}" for name, text in rows)
    where = "\n".join(f"  {step}" for step in next_steps(facts))
    return f"== chess pipeline summary\n{body}\n\nwhere to look next:\n{where}\n"


def render_markdown(facts: dict[str, Any]) -> str:
    rows = "\n".join(f"| {name} | {text.strip()} |" for name, text in lines(facts))
    return f"| stage | key numbers |\n|---|---|\n{rows}"


SAMPLE_START = "```text\n== chess pipeline summary\n"


def replace_sample(readme: str, text: str) -> str:
    """The README with its sample summary (the fenced block that starts with the summary's
    title) replaced by `text`; ValueError when it has none."""
    start = readme.find(SAMPLE_START)
    if start < 0:
        raise ValueError(f"no sample summary (a block starting {SAMPLE_START!r})")
    body = start + len("```text\n")
    end = readme.find("```", body)
    return readme[:body] + text + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chesscore.pipeline.summary", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the project checkout")
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")
    parser.add_argument(
        "--readme", type=Path, help="write the summary into this README's sample block instead of printing it"
    )
    args = parser.parse_args(argv)
    facts = collect(args.root)
    if args.readme:  # the sample shows what every run repeats, not this machine's times
        facts["runs"] = {}
        try:
            update_text(args.readme, replace_sample(args.readme.read_text(encoding="utf-8"), render_text(facts)))
        except (OSError, ValueError) as error:
            parser.error(f"{args.readme}: {error}")
        return 0
    sys.stdout.write(json.dumps(facts, indent=2) + "\n" if args.json else render_text(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
