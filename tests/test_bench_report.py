"""``python -m bench --quick`` end to end: the report and its charts are produced.

The quick run is the full pipeline on a handful of questions, a 200-note generated vault
and small memory stores: the stand-in and our server. The peer (``mcp-obsidian``, 72 MB
from PyPI) is left out with ``--no-peer`` so the suite runs offline; ``python -m bench``
runs it. No figure is checked against a target here; that is the report's job.
"""

import json
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from bench import MOVED
from bench.__main__ import main as bench_main
from bench.economy.report import ECONOMY_CHART, PEER_ANSWER, PEER_SKIPPED
from bench.shared.harness import REPO_ROOT
from bench.shared.sections import TITLE, Stamp, sections_of, write_section
from bench.speed.report import SCALE_CHART

QUICK_RUN = (sys.executable, "-m", "bench", "--quick", "--no-peer")
SECTIONS = (
    "# obsidian-mcp benchmark report",
    "## Targets: retrieval and context economy",
    "## Targets: speed",
    "## Targets: memory",
    "## Targets: editing",
    "## Targets: the whole run",
    "## Ablation: each retrieval stage off in turn",
    "## Context economy",
    "### What a conversation costs",
    "### Tool definitions, per tool",
    "### Answer in the first response, and within two calls, per slice",
    "### The usage log agrees with the benchmark",
    "### Retrieval issue figures",
    "## The peer's raw answer",
    "## Updating a section: tokens for a handover round trip",
    "## Speed and scale",
    "### Through the folder",
    "### Through the stand-in",
    "## Tool-call overhead over the raw REST request",
    "## Memory: recall and remember",
    "## Editing: the read/edit laws",
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
    # Every section stamped with the command that wrote it, between its marks.
    marks = re.findall(r"<!-- section (\S+) -->\n## [^\n]*\n\n(_[^\n]*_)\n", report)
    assert len(marks) == report.count("<!-- /section "), marks
    assert all("`python -m bench --quick --no-peer" in stamp for _, stamp in marks)
    assert PEER_SKIPPED in report
    # The raw answers stand in a file of their own, linked from the report.
    assert f"]({PEER_ANSWER})" in report
    answers = (out / PEER_ANSWER).read_text("utf-8")
    assert "this server, vault_semantic_query, call 1" in answers
    assert "mcp-obsidian, call 1" not in answers
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


def test_sections_are_replaced_by_name_and_kept_in_the_subjects_order(tmp_path: Path) -> None:
    memory = Stamp.taken("bench", ["memory"])
    write_section(tmp_path, "soak", "## Soak\n\nfirst soak", Stamp.taken("bench", ["soak"]))
    write_section(tmp_path, "memory", "## Memory\n\nrows", memory)
    write_section(tmp_path, "soak", "## Soak\n\nsecond soak", Stamp.taken("bench", ["--soak", "1"]))
    write_section(tmp_path, "targets-memory", "## Targets: memory\n\nmet", memory)
    report = (tmp_path / "REPORT.md").read_text("utf-8")
    found = sections_of(report)
    assert list(found) == ["targets-memory", "memory", "soak"]
    assert "second soak" in found["soak"] and "first soak" not in report
    assert "`python -m bench --soak 1` at " in found["soak"]
    assert report.startswith(TITLE)


def test_old_module_names_still_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CHANGELOG entries cite the flat modules of earlier versions by name."""
    for old, new in MOVED.items():
        assert (REPO_ROOT / "bench" / (new.replace(".", "/") + ".py")).is_file(), old
    # As `python -m bench.lens --cases 20 --out DIR` runs it.
    monkeypatch.setattr(sys, "argv", ["bench.lens", "--cases", "20", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as ended:
        runpy.run_module("bench.lens", run_name="__main__")
    assert ended.value.code == 0
    # What bench.editing.lens writes.
    assert json.loads((tmp_path / "lens.json").read_text("utf-8"))["cases"] == 20


def test_one_subject_writes_its_sections_only(tmp_path: Path) -> None:
    out = tmp_path / "report"
    write_section(out, "soak", "## Soak\n\nkept", Stamp.taken("bench", ["soak"]))
    bench_main(["editing", "--quick", "--verbose", "--out", str(out), "--cache", str(tmp_path)])
    found = sections_of((out / "REPORT.md").read_text("utf-8"))
    # Not the whole run: no run-time target; another run's section is kept, after it.
    assert list(found) == ["targets-editing", "editing", "soak"]
    assert "`python -m bench editing --quick" in found["editing"]
    assert "| 34 | read/edit laws on 50 generated notes: failures | 0 | 0 of " in found[
        "targets-editing"
    ]
