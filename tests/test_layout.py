"""The package tree is the map: sub-packages that document and export what they hold, an acyclic
import graph between them, a library that knows nothing of DVC or Prefect, and failure kinds
that are classes (so a moved module cannot silently turn an expected failure into a bug)."""

from __future__ import annotations

import importlib

import pytest

from chesscore import failures
from tests.imports import PROJECT, external_imports, library_files, package_graph

PACKAGES = sorted(p.parent.name for p in (PROJECT / "chesscore").glob("*/__init__.py"))


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a list of nodes, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_packages_import_each_other_without_cycles():
    graph = package_graph()
    assert {f"chesscore/{name}" for name in PACKAGES} <= set(graph)
    assert cycle(graph) is None, f"import cycle between chesscore's packages: {' -> '.join(cycle(graph))}"


def test_the_library_imports_neither_dvc_nor_prefect():
    offenders = {
        path.relative_to(PROJECT).as_posix(): sorted(external_imports(path) & {"dvc", "prefect"})
        for path in library_files()
    }
    assert not {k: v for k, v in offenders.items() if v}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_says_what_it_holds_and_exports_its_public_names(name: str):
    package = importlib.import_module(f"chesscore.{name}")
    assert package.__doc__ and len(package.__doc__.split()) > 15, f"chesscore.{name} needs a docstring"
    for exported in getattr(package, "__all__", []):
        assert hasattr(package, exported), f"chesscore.{name}.__all__ names {exported}, which it lacks"


@pytest.mark.parametrize(
    "module, name, kind",
    [
        ("chesscore.data.dataset", "IntegrityError", failures.BadInput),
        ("chesscore.pgn.inputs", "InputError", failures.BadInput),
        ("chesscore.ingest.convert", "LeakageError", failures.BadInput),
        ("chesscore.checkpoint", "CheckpointError", failures.Refused),
        ("chesscore.resume", "ResumeRefused", failures.Refused),
        ("chesscore.eval.evaluate", "DatasetMismatch", failures.Refused),
        ("chesscore.play.engine", "StockfishMissing", failures.Refused),
        ("chesscore.selfplay.plan", "WorkerDied", failures.Temporary),
    ],
)
def test_expected_errors_are_failure_kinds_by_class(module: str, name: str, kind: type):
    error_class = getattr(importlib.import_module(module), name)
    assert issubclass(error_class, kind)
    error = error_class.__new__(error_class)  # classified by class alone, whatever its arguments
    assert failures.classify(error) is kind


def test_out_of_memory_is_temporary_and_anything_else_a_bug():
    import torch

    assert failures.classify(MemoryError()) is failures.Temporary
    assert failures.classify(torch.OutOfMemoryError("CUDA out of memory")) is failures.Temporary
    assert failures.classify(ZeroDivisionError()) is None


def test_the_code_run_identities_hash_exists():
    """Training's and self-play's identities hash named files and folders of chesscore; a module
    moved without its entry here broke `dvc repro` at the train stage, past every other test."""
    from chesscore.selfplay.run import CODE
    from chesscore.train.config import TRAINING_CODE

    missing = [path for path in (*TRAINING_CODE, *CODE) if not path.exists()]
    assert not missing, f"identity code lists name paths that do not exist: {missing}"
