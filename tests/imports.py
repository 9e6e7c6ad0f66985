"""The project's import graph, read from the source (nothing is imported): which files of code a
stage runs, and which packages of chesscore import which. Shared by the tests of dvc.yaml's
code deps and of the package layout."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
ROOTS = ("chesscore", "stages")


def module_file(name: str) -> Path | None:
    """The file of a dotted module name of the project (a package's __init__.py), else None."""
    parts = name.split(".")
    if parts[0] not in ROOTS:
        return None
    for candidate in (PROJECT.joinpath(*parts).with_suffix(".py"), PROJECT.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def with_packages(path: Path) -> set[Path]:
    """A module and the __init__.py of every package above it: importing it runs them all."""
    files = {path}
    for folder in path.parents:
        if folder == PROJECT:
            break
        if (folder / "__init__.py").is_file():
            files.add(folder / "__init__.py")
    return files


def imported_files(path: Path) -> set[Path]:
    """Project files `path` imports anywhere in its body (lazy imports in functions included)."""
    package = ".".join(path.relative_to(PROJECT).with_suffix("").parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.relative_to(PROJECT).parts[:-1])
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for file in filter(None, map(module_file, names)):
            found |= with_packages(file)
    return found - {path}


@functools.cache
def code_closure(entry: Path) -> frozenset[Path]:
    """Every project file that running `entry` imports, directly or not (entry included)."""
    seen, todo = set(), [entry]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += imported_files(path)
    return frozenset(seen)


def unit(path: Path) -> str:
    """What a file counts as in dvc.yaml and in the package graph: its sub-package of chesscore
    (`chesscore/train`), else the file itself (`chesscore/tokens.py`, `stages/train.py`)."""
    parts = path.relative_to(PROJECT).parts
    if parts[0] == "chesscore" and len(parts) > 2:
        return f"chesscore/{parts[1]}"
    return "/".join(parts)


def library_files() -> list[Path]:
    return sorted((PROJECT / "chesscore").rglob("*.py"))


def package_graph() -> dict[str, set[str]]:
    """chesscore's units (sub-packages and top-level modules) -> the units they import."""
    graph: dict[str, set[str]] = {}
    for path in library_files():
        if path.name == "__init__.py" and path.parent.name == "chesscore":
            continue  # the package's own docstring
        graph.setdefault(unit(path), set()).update(unit(f) for f in imported_files(path) if unit(f) != unit(path))
    for targets in graph.values():
        targets.discard("chesscore/__init__.py")
    return graph


def external_imports(path: Path) -> set[str]:
    """Top-level names of what `path` imports from outside the project (e.g. torch, dvc)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - set(ROOTS)
