"""Editing's part of ``bench/REPORT.md``: its targets (the read/edit laws hold on generated
notes and through the tools: "Targets: editing") and the section "Editing: the read/edit
laws".
"""

from __future__ import annotations

from typing import Any

from bench.shared.harness import markdown_table
from bench.shared.targets import Target, targets_section


def editing_targets(editing: dict[str, Any]) -> list[Target]:
    """The read/edit laws (docs/editing.md) hold everywhere they were checked."""
    lens, trips = editing["lens"], editing["round_trips"]
    failed = sum(found["failures"] for found in trips.values())
    return [
        Target(
            "34",
            f"read/edit laws on {lens['cases']:,} generated notes: failures",
            "0",
            f"{lens['failures']:,} of {sum(lens['checks'].values()):,} checks",
            lens["failures"] == 0,
        ),
        Target(
            "34",
            "round trips through the tools, every heading and block of both vaults: failures",
            "0",
            f"{failed:,} of {sum(sum(f['checks'].values()) for f in trips.values()):,} checks"
            if trips
            else "not run",
            failed == 0 if trips else None,
        ),
    ]


def _editing_section(editing: dict[str, Any]) -> str:
    lens, trips = editing["lens"], editing["round_trips"]
    laws = sorted(lens["checks"])
    parts = [
        "## Editing: the read/edit laws",
        "",
        f"`bench/editing/lens.py`: {lens['cases']:,} generated notes (seed {lens['seed']}), "
        f"{lens['targets']:,} targets; each law checked on every target, in "
        f"{lens['seconds']:.0f} s. `bench/editing/round_trips.py`: every heading and block "
        "of both development vaults read and written back through a real MCP client, per "
        "source; a failure is a changed byte the law forbids (the first are in the run's "
        "JSON).",
        "",
        markdown_table(
            ["", "targets", *laws, "failures"],
            [
                [
                    "generated notes",
                    f"{lens['targets']:,}",
                    *(f"{lens['checks'][law]:,}" for law in laws),
                    lens["failures"],
                ]
            ],
        ),
    ]
    if trips:
        checks = sorted({check for found in trips.values() for check in found["checks"]})
        parts += [
            "",
            markdown_table(
                ["vault/source", "targets", *checks, "failures", "seconds"],
                [
                    [
                        key,
                        f"{found['targets']:,}",
                        *(f"{found['checks'].get(check, 0):,}" for check in checks),
                        found["failures"],
                        f"{found['seconds']:.0f}",
                    ]
                    for key, found in trips.items()
                ],
            ),
        ]
    return "\n".join(parts)


def sections(results: dict[str, Any]) -> dict[str, str]:
    """Editing's sections by name."""
    return {
        "targets-editing": targets_section("editing", editing_targets(results["editing"])),
        "editing": _editing_section(results["editing"]),
    }
