"""The report's targets: a ``Target`` (an issue's figure, its target, met or not), the
table a subject's targets are rendered as (``targets_section``, "## Targets: <subject>"),
and the figures' formats every subject's tables share (``pct``, ``num``). It imports no
subject; each subject's targets are in its own ``report`` module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.shared.harness import markdown_table


@dataclass(frozen=True)
class Target:
    issue: str
    what: str
    target: str
    figure: str
    met: bool | None  # None: not measured in this run

    @property
    def verdict(self) -> str:
        return {True: "met", False: "**not met**", None: "not measured"}[self.met]


def pct(value: float) -> str:
    return f"{value:.0f}%"


def num(value: float | None, unit: str = "") -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:,.0f}{unit}" if abs(value) >= 10 else f"{value:,.1f}{unit}"


def targets_section(title: str, found: Sequence[Target]) -> str:
    return "\n".join(
        [
            f"## Targets: {title}",
            "",
            markdown_table(
                ["issue", "what", "target", "this run", "verdict"],
                [[t.issue, t.what, t.target, t.figure, t.verdict] for t in found],
            ),
        ]
    )
