"""``python -m bench --quick`` end to end: the report and its charts are produced.

The quick run is the full pipeline on a handful of questions, a 200-note generated vault
and small memory stores: the stand-in and our server. The peer (``mcp-obsidian``, 72 MB
from PyPI) is left out with ``--no-peer`` so the suite runs offline; ``python -m bench``
runs it. No figure is checked against a target here; that is the report's job.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import REPO_ROOT
from bench.report import ECONOMY_CHART, PEER_SKIPPED, SCALE_CHART

QUICK_RUN = (sys.executable, "-m", "bench", "--quick", "--no-peer")
SECTIONS = (
    "# obsidian-mcp benchmark report",
    "## Targets",
    "## Context economy",
    "### What a conversation costs",
    "### Tool definitions, per tool",
    "### Answer in the first response, and within two calls, per slice",
    "### The usage log agrees with the benchmark",
    "### Retrieval issue figures",
    "## Ablation: each retrieval stage off in turn",
    "## The peer's raw answer",
    "## Speed and scale",
    "### Through the folder",
    "### Through the stand-in",
    "## Memory: recall and remember",
    "## Tool-call overhead over the raw REST request",
)


# Bounds against a hang, not deadlines: beside the other tests on a busy 2-core machine
# the quick run took over 9 minutes.
@pytest.mark.timeout(1260)
def test_quick_run_writes_the_report_and_charts(tmp_path: Path) -> None:
    out, cache = tmp_path / "report", tmp_path / "cache"
    done = subprocess.run(
        [*QUICK_RUN, "--out", str(out), "--cache", str(cache)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = (out / "REPORT.md").read_text("utf-8")
    positions = [report.find(section) for section in SECTIONS]
    assert -1 not in positions, [s for s, p in zip(SECTIONS, positions, strict=True) if p < 0]
    assert positions == sorted(positions)
    assert "python -m bench --quick --no-peer" in report
    assert PEER_SKIPPED in report and "mcp-obsidian, call 1" not in report
    assert "this server, vault_semantic_query, call 1" in report
    for row in (
        "| drill-down |",
        "| simple+note |",
        "| original 58 |",
        "| dev |",
        "| one call: 2 requests x definitions + the reply |",
        "| `vault_semantic_query` |",
        "| `OBSIDIAN_TOOLS=memory`: total |",
    ):
        assert row in report
    for chart in (ECONOMY_CHART, SCALE_CHART):
        assert f"]({chart})" in report
        assert (out / chart).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert list(cache.glob("bench-*.json"))
    # The run's own usage log, kept for `OBSIDIAN_CACHE_DIR=<cache> obsidian-mcp stats`.
    assert (cache / "usage" / "usage.jsonl").stat().st_size > 0
