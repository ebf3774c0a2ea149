"""A short crash run (bench/robustness/crash.py; `python -m bench --crash 50` is the long one): the
server is SIGKILLed during bursts of remembers, forgets, compactions and scratch appends,
through the folder and through the stand-in, and nothing acknowledged is lost or torn."""

from pathlib import Path

import pytest

from bench.robustness.crash import crash_run


@pytest.mark.anyio
@pytest.mark.parametrize(("source", "kills"), [("folder", 2), ("rest", 1)])
async def test_sigkill_during_writes_loses_nothing_acknowledged(
    tmp_path: Path, source: str, kills: int
):
    result = await crash_run(kills, tmp_path, source, None)
    assert result.kills == kills
    assert result.acknowledged > 0
    assert result.scratch_acknowledged > 0
    assert result.compactions_seen >= kills  # each kill's file folded by the next writer
    assert result.lost == []
    assert result.resurrected == []
    assert result.corrupt_lines == 0
    assert result.half_scratch_entries == 0
    assert result.leftover_temporaries == 0
    assert result.secret_hits == 0
