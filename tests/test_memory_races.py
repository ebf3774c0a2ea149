"""Short runs of the memory race benchmark (bench/robustness/memory_races.py; `python -m
bench.robustness.memory_races` is the long one): real server processes remember (and forget) at once
through the stand-in REST API, through the folder and REST together, and on two devices
kept in step by a file sync tool; no acknowledged memory is lost on any device (from the
files, nor from a fresh process's recall) and no acknowledged forget comes back."""

from pathlib import Path

import pytest

from bench.robustness.memory_races import SCENARIOS, Sizes, run_scenario

# A device's 15 remembers span about 2 s: the sync's rounds (every 0.5-1 s) fall amid them.
SMALL = Sizes(processes=3, per_process=20, per_device=15, forget_every=4, device_pause=0.15)


@pytest.mark.anyio
@pytest.mark.parametrize("number", sorted(SCENARIOS), ids=[SCENARIOS[n] for n in sorted(SCENARIOS)])
async def test_racing_writers_lose_nothing_acknowledged(tmp_path: Path, number: int) -> None:
    outcome = await run_scenario(number, tmp_path, SMALL)
    assert outcome.acknowledged > 0
    assert sorted(outcome.lost) == [], outcome.notes
    assert sorted(outcome.back) == [], outcome.notes
    # Present in some file is not enough: a fresh process must recall it too (a memory
    # only in a sync conflict copy that the store never reads is lost to the user).
    assert sorted(outcome.recall_missing) == [], outcome.notes
    assert sorted(outcome.recall_back) == [], outcome.notes
    assert outcome.errors == 0, outcome.notes
