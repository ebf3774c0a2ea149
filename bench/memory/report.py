"""Memory's part of ``bench/REPORT.md``: its targets (recall and remember at 100,000
entries: "Targets: memory") and the section "Memory: recall and remember".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bench.shared.harness import markdown_table
from bench.shared.targets import Target, num, targets_section


def _memory_targets(memory: Sequence[dict[str, Any]]) -> list[Target]:
    at = {(row["entries"], row["source"], row["operation"]): row["median_ms"] for row in memory}
    tool = "folder, MCP tool"
    recall = [at.get((100_000, tool, op)) for op in ("recall by tag", "recall by query")]
    remember = at.get((100_000, tool, "remember"))
    measured = None not in recall
    rest = [
        at.get((100_000, "stand-in, MCP tool", op))
        for op in ("recall by tag", "remember", "cold load (first recall)")
    ]
    return [
        Target(
            "4.5",
            "100,000 entries, folder, through the MCP tool: warm recall median (tag; query)",
            "<= 50 ms",
            "; ".join(num(v, " ms") for v in recall) if measured else "not run",
            all(v is not None and v <= 50 for v in recall) if measured else None,
        ),
        Target(
            "4.5",
            "100,000 entries, folder, through the MCP tool: remember median",
            "<= 10 ms",
            num(remember, " ms") if remember is not None else "not run",
            remember <= 10 if remember is not None else None,
        ),
        Target(
            "4.5",
            "100,000 entries, stand-in: recall by tag, remember, cold load",
            "reported",
            " / ".join(num(v, " ms") for v in rest) if None not in rest else "not run",
            True if None not in rest else None,
        ),
    ]


def _memory_section(results: dict[str, Any]) -> str:
    memory = results["memory"]
    sizes = sorted({row["entries"] for row in memory})
    keys = list(dict.fromkeys((row["source"], row["operation"]) for row in memory))
    at = {(row["entries"], row["source"], row["operation"]): row for row in memory}
    rows: list[list[object]] = []
    for source, operation in keys:
        row: list[object] = [source, operation]
        for entries in sizes:
            found = at.get((entries, source, operation))
            row.append(
                "—"
                if found is None
                else num(found["median_ms"])
                + ("" if math.isnan(found["p95_ms"]) else f" / {num(found['p95_ms'])}")
            )
        rows.append(row)
    return "\n".join(
        [
            "## Memory: recall and remember",
            "",
            f"`bench/memory/recall.py` at each store size, {results['config']['memory_runs']} "
            "runs per operation; milliseconds, median / p95 (cold load: one measurement). "
            "`domain` calls the store directly; `MCP tool` goes through an in-process MCP "
            "client.",
            "",
            markdown_table(["source", "operation", *[f"{n:,} entries" for n in sizes]], rows),
        ]
    )


def sections(results: dict[str, Any]) -> dict[str, str]:
    """Memory's sections by name."""
    return {
        "targets-memory": targets_section("memory", _memory_targets(results["memory"])),
        "memory": _memory_section(results),
    }
