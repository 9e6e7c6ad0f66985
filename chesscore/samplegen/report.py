"""Tables about a generated sample: the one-screen summary and the README's count tables."""

from __future__ import annotations

from collections import Counter

from .generate import Summary, class_of
from .rejects import REJECT_KINDS

CLASSES = ("UltraBullet", "Bullet", "Blitz", "Rapid", "Classical", "Correspondence")


def counts(summary: Summary) -> dict[str, Counter]:
    rows = summary.rows
    return {
        "time control class": Counter(class_of(r) for r in rows),
        "result": Counter(r["result"] for r in rows),
        "termination": Counter(r["termination"] for r in rows),
        "ending": Counter(r["ending"] for r in rows),
        "reject": Counter(r["reject"] for r in rows if r["reject"]),
    }


def markdown(summary: Summary) -> str:
    """The count tables, ready to paste into data/raw/README.md."""
    c = counts(summary)
    plies = sorted(r["plies"] for r in summary.rows)
    elos = [e for r in summary.rows for e in (r["white_elo"], r["black_elo"])]
    rows = summary.rows
    lines = [
        f"- games: {len(rows)} (of them {sum(c['reject'].values())} to be rejected)",
        f"- plies: min {plies[0]}, median {plies[len(plies) // 2]}, max {plies[-1]}",
        f"- ratings: {min(elos)} .. {max(elos)}",
        f"- casual games (no RatingDiff): "
        f"{sum(r['event'].startswith('Casual') for r in rows)}; "
        f"arena/swiss games: {sum('https://' in r['event'] for r in rows)}; "
        f"with a BOT: {sum('BOT' in r['titles'] for r in rows)}; "
        f"with a human title: {sum(any(t != 'BOT' for t in r['titles']) for r in rows)}; "
        f"analysed ([%eval] and ?!/?/?? glyphs): {sum(r['analysed'] for r in rows)}",
        "",
    ]
    for title, order in (
        ("time control class", CLASSES),
        ("result", ("1-0", "0-1", "1/2-1/2")),
        ("termination", None),
        ("ending", None),
    ):
        keys = order or [k for k, _ in c[title].most_common()]
        lines += [f"| {title} | games |", "|---|---:|"]
        lines += [f"| {k} | {c[title][k]} |" for k in keys]
        lines.append("")
    lines += ["| reject kind | games | what |", "|---|---:|---|"]
    lines += [f"| {k} | {c['reject'][k]} | {what} |" for k, (_, what) in REJECT_KINDS.items()]
    return "\n".join(lines)


def reject_list(summary: Summary) -> str:
    lines = ["| index | Site id | kind | detail |", "|---:|---|---|---|"]
    lines += [f"| {i['index']} | {i['site']} | {i['kind']} | {i['note']} |" for i in summary.injected]
    return "\n".join(lines)


def one_screen(summary: Summary) -> str:
    c = counts(summary)

    def line(name: str) -> str:
        return f"  {name:<19}" + ", ".join(f"{k} {v}" for k, v in c[name].most_common())

    return "\n".join(
        [
            f"samplegen: wrote {summary.path} ({summary.bytes / 1e6:.2f} MB, "
            f"{len(summary.rows)} games) "
            f"in {summary.seconds:.0f} s with {summary.engine}",
            f"  sha256 .pgn.zst   {summary.sha256}",
            f"  sha256 .pgn       {summary.pgn_sha256}",
            line("time control class"),
            line("result"),
            line("termination"),
            line("ending"),
            line("reject"),
        ]
    )
