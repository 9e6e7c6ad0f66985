"""The README and docs/ are executable truth: every `python -m` command they show exists, and
every flag it is shown with is one its --help lists."""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
import subprocess

import pytest

from tests.imports import PROJECT
from tests.inprocess import run_module

PAGES = [PROJECT / "README.md", PROJECT / "bench" / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]
# `python -m module args...` or torchrun's `-m module args...`, up to a comment, a pipe or the end
COMMAND = re.compile(r"(?:python|torchrun[^`\n]*?) -m ([a-z_][a-z_.]*)((?: +[^\s#`|&;)]+)*)")
INLINE = re.compile(r"(?<!`)`[^`]+`(?!`)")  # `code` in a paragraph, which may wrap across lines
RENAMED = {"chesscore.uci"}  # named by the changelog as gone
# Only the project's own commands are checked. Another's (`python -m pip wheel ...`) is not ours to
# test, and importing pip here would switch setuptools' distutils shim off for the rest of this
# process, so that a later inductor compile in the same xdist worker fails.
OWN = {"chesscore", "stages", "flows", "tests", "bench"}


def shown_commands() -> list[tuple[str, str, tuple[str, ...]]]:
    """(page, module, arguments) of every command the pages show."""
    found = []
    for page in PAGES:
        text = re.sub(r"\\\n[ \t]*", " ", page.read_text(encoding="utf-8"))  # a shell line continued
        text = INLINE.sub(lambda code: code.group(0).replace("\n", " "), text)  # inline code wrapped in prose
        for match in COMMAND.finditer(text):
            module, rest = match.group(1).rstrip("."), match.group(2)
            if module.split(".")[0] not in OWN:
                continue
            if module in RENAMED or "<" in rest or text[match.end(1) : match.end(1) + 1] == "<":
                continue  # a placeholder such as stages.<name>
            try:
                args = tuple(shlex.split(rest))
            except ValueError:
                args = tuple(rest.split())
            found.append((page.relative_to(PROJECT).as_posix(), module, args))
    return found


@functools.cache
def help_text(module: str, words: tuple[str, ...]) -> str:
    """What `python -m module words --help` prints, run in this process (tests.inprocess: no new
    interpreter importing torch again)."""
    done = run_module(module, *words, "--help", cwd=PROJECT)
    assert done.returncode == 0, (
        f"python -m {module} {' '.join(words)} --help exited {done.returncode}:\n{done.stderr[-2000:]}"
    )
    return done.stdout


def test_the_pages_show_commands():
    modules = {module for _, module, _ in shown_commands()}
    assert {"stages.train", "stages.validate", "chesscore.lineage", "flows.pipeline"} <= modules


@pytest.mark.parametrize("page, module, args", shown_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_a_shown_command_and_its_flags_exist(page, module, args):
    assert importlib.util.find_spec(module) is not None, f"{page}: `python -m {module}`: no such module"
    words = tuple(arg for arg in args[: next((i for i, a in enumerate(args) if a.startswith("-")), len(args))])
    flags = {arg.split("=", 1)[0] for arg in args if arg.startswith("--")}
    text = help_text(module, words[:1])  # a subcommand (lineage audit) has its own help
    missing = sorted(flag for flag in flags if not re.search(rf"{re.escape(flag)}(?![\w-])", text))
    assert not missing, f"{page}: `python -m {module} {' '.join(args)}`: no such flag(s) {missing}"


def summary_groups(rows: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The summary's rows by stage: a row without a label continues the one above it."""
    groups: dict[str, list[str]] = {}
    stage = ""
    for name, text in rows:
        stage = name or stage
        groups.setdefault(stage, []).append(text.strip())
    return groups


def committed(path: str) -> str | None:
    done = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=PROJECT, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def test_the_readmes_sample_summary_is_what_the_committed_run_gives():
    """README.md's sample summary is generated from the last run (`make lock`, or `python -m
    chesscore.pipeline.summary --readme README.md`). The stages whose records git holds (the
    uncached records beside the metrics) must give its lines, figure for figure, as committed;
    train's and convert's come from cached outputs and are checked by the generation itself."""
    import json

    from chesscore.pipeline import summary

    readme = committed("README.md")
    assert readme is not None and summary.SAMPLE_START in readme, "README.md has no sample summary"
    block = readme[readme.index(summary.SAMPLE_START) + len("```text\n") :].split("```", 1)[0]
    shown = summary_groups(
        [(line[:12].strip(), line[12:]) for line in block.split("\n\n")[0].splitlines()[1:]]  # after the title
    )
    folders = summary.folders(PROJECT)
    facts: dict = {stage: None for stage in summary.REPORTS}
    for stage in ("validate", "evaluate", "arena", "selfplay"):
        text = committed(f"{folders[stage]}/{summary.REPORTS[stage][1]}")
        assert text is not None, f"{folders[stage]}/{summary.REPORTS[stage][1]} is not committed: `make lock`"
        facts[stage] = json.loads(text)
    given = summary_groups(summary.lines(facts))
    for stage in ("validate", "evaluate", "selfplay", "arena", "verdicts"):
        assert shown.get(stage) == given[stage], f"README's {stage} lines are stale: `make lock`"
    assert set(shown) == {"validate", "convert", "train", "evaluate", "selfplay", "arena", "verdicts"}
