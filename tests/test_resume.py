"""chesscore.resume's refusal message: the keys that differ, both values, and a bound on both."""

from __future__ import annotations

from pathlib import Path

import pytest

from chesscore.resume import ResumeRefused, check_identity


def test_a_refusal_names_the_keys_and_both_values_even_where_keys_hold_dots():
    saved = {"seed": 1, "code": {"chesscore/model.py": "aaa", "chesscore/runtime/seeds.py": "same"}}
    current = {"seed": 1, "code": {"chesscore/model.py": "bbb", "chesscore/runtime/seeds.py": "same"}}
    with pytest.raises(ResumeRefused) as refused:
        check_identity(Path("last.pt"), saved, current)
    message = str(refused.value)
    assert "1 key(s): code.chesscore/model.py" in message
    assert "checkpoint 'aaa', this run 'bbb'" in message and "<absent>" not in message


def test_a_refusal_lists_at_most_twelve_keys_and_counts_the_rest():
    saved = {f"k{i:02d}": i for i in range(48)}
    current = {f"k{i:02d}": -i - 1 for i in range(48)}
    with pytest.raises(ResumeRefused) as refused:
        check_identity(Path("last.pt"), saved, current)
    message = str(refused.value)
    assert "48 key(s): k00, k01" in message and "k11, ... (36 more)" in message and "k12," not in message
    assert "k05: checkpoint 5, this run -6; ..." in message and "k06:" not in message  # six value pairs
