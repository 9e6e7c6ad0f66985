"""The fuzz harness (tests/hardening/fuzz.py) for a fixed budget: validate and convert on
seeded mutations of the sample and small fixtures. Every input must exit 0 or 65 with no
traceback, account for every game, reject nothing as internal_error, stay within the time
factor per byte and per game, and the process must stay under the RSS bound of docs/limits.md.

More, or another seed, from the command line (or CHESSCORE_FUZZ_INPUTS / CHESSCORE_FUZZ_SEED):
    python -m tests.hardening.fuzz --inputs 2000 --seed 7 --save /tmp/findings
"""

from __future__ import annotations

import json
import os

import pytest

from tests.hardening.pgnfiles import run_stage
from tests.hardening.test_bounds import PEAK_RSS_MIB

INPUTS = int(os.environ.get("CHESSCORE_FUZZ_INPUTS", "100"))
SEED = int(os.environ.get("CHESSCORE_FUZZ_SEED", "0"))


@pytest.mark.slow
def test_validate_and_convert_survive_mutated_inputs(tmp_path):
    run = run_stage("tests.hardening.fuzz", "--inputs", INPUTS, "--seed", SEED, "--save", tmp_path / "found")
    report = json.loads(run.stdout)
    summary = {k: v for k, v in report.items() if k != "findings"}
    print(f"fuzz: {json.dumps(summary)}")  # shown with pytest -s: inputs tried, mutations, costs
    assert report["findings"] == [], json.dumps(report["findings"], indent=1)[:5000]
    assert run.code == 0, run.stderr[-2000:]
    assert report["inputs"] == INPUTS and report["games_seen"] > INPUTS
    assert len(report["mutations"]) >= 15 and len(report["containers"]) >= 6  # the mutators all ran
    assert run.peak_rss_mib < PEAK_RSS_MIB and report["peak_rss_mib"] < PEAK_RSS_MIB


def test_the_same_seed_makes_the_same_inputs():
    from tests.hardening.fuzz import generate, sample_games

    games = sample_games()
    first = [generate(3, n, games) for n in range(30)]
    assert first == [generate(3, n, games) for n in range(30)]
    assert len({packed for _, _, packed, _ in first}) == 30
