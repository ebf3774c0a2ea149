"""``bench/REPORT.md`` as stamped sections, assembled whole in one fixed order.

Every run that measures writes only its own sections (``write_sections``); each is stamped
with the command that produced it, the commit, the date, the machine and its load, so a
reader knows what every table stands on without the report's history. The report is then
rewritten whole from its sections in ``ORDER`` (targets first, then subject by subject), so
it reads the same however many runs wrote it and in whichever order. History belongs in
``CHANGELOG.md``; the report holds only the latest figures.

This module knows the section names, not the subjects that write them: every subject may
use it, and it uses none of them.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.shared.harness import REPO_ROOT

REPORT = "REPORT.md"
TITLE = "# obsidian-mcp benchmark report"

# The report's order: what each figure is held against first, then one subject after
# another (retrieval, context economy, speed, memory, editing, robustness). A section not
# named here (a new runner's) goes last, until it is given its place.
ORDER = (
    "targets-economy",
    "targets-speed",
    "targets-memory",
    "targets-editing",
    "targets-run",
    # retrieval
    "retrieval",
    "vaults",
    "ablation",
    "ablation-dev",
    "ablation-heldout",
    # context economy
    "economy",
    "peer-answer",
    "definitions",
    "edit-economy",
    # speed
    "scale",
    "big",
    "first-day",
    "first-day-standin",
    "first-day-50000",
    "overhead",
    "usage-overhead",
    # memory
    "memory",
    # editing
    "editing",
    # robustness
    "races",
    "edit-races",
    "crash",
    "soak",
    "fuzz",
)

INTRODUCTION = (
    "Assembled from sections, each written by the command it names and stamped with the "
    "commit, date, machine and load it ran on; `python -m bench --full` rewrites the "
    "sections that fit in 20 minutes, and each long run rewrites its own. Do not edit: rerun "
    "the section's command. What changed between runs is in `CHANGELOG.md`."
)

_SECTION = re.compile(r"<!-- section (\S+) -->\n.*?\n<!-- /section \1 -->", re.DOTALL)


# What the runs write into the repository: not a change to the code that produced them.
_WRITTEN = (
    ":(exclude)bench/REPORT.md",
    ":(exclude)bench/*.png",
    ":(exclude)bench/peer-answer.md",
)


def _git(*words: str) -> str:
    found = subprocess.run(
        ["git", *words], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    return found.stdout.strip()


def machine() -> dict[str, Any]:
    """What a figure was measured on: CPU, cores, memory, software, and the commit."""
    cpu = platform.processor() or platform.machine()
    memory_kib = 0
    cpuinfo, meminfo = Path("/proc/cpuinfo"), Path("/proc/meminfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    if meminfo.exists():
        memory_kib = next(
            int(line.split()[1])
            for line in meminfo.read_text().splitlines()
            if line.startswith("MemTotal:")
        )
    commit = _git("rev-parse", "--short", "HEAD")
    # Changed code makes the commit's figures someone else's; the report a run is writing
    # (and its charts) does not.
    if _git("status", "--porcelain", "--untracked-files=no", "--", ".", *_WRITTEN):
        commit += "-dirty"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_kib / 2**20,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mcp": importlib.metadata.version("mcp"),
        "commit": commit or "unknown",
    }


@dataclass(frozen=True)
class Stamp:
    """What a run measured on, taken when it starts (so the commit is the code that ran,
    even if another is checked out before it ends): its command, date and machine."""

    command: str
    started: datetime
    machine: dict[str, Any]

    @classmethod
    def taken(cls, module: str, argv: Sequence[str] | None) -> Stamp:
        """For ``python -m module`` with ``argv`` (None: this process's arguments)."""
        words = ["python -m", module, *(sys.argv[1:] if argv is None else argv)]
        return cls(" ".join(words), datetime.now(UTC), machine())

    def line(self) -> str:
        """One line under a section's heading: what produced it, where and when."""
        found = self.machine
        # The load averages (1, 5 and 15 minutes) when the section is written: a figure
        # timed on a busy shared machine reads differently from one timed on an idle one.
        load = " ".join(f"{value:.1f}" for value in os.getloadavg())
        return (
            f"_`{self.command}` at {found['commit']}, {self.started:%Y-%m-%d %H:%M} UTC; "
            f"{found['cpu']}, {found['cores']} cores, {found['memory_gib']:.0f} GiB, "
            f"Python {found['python']}, mcp {found['mcp']}; load average at the end "
            f"{load}._"
        )


def stamped(name: str, markdown: str, stamp_line: str) -> str:
    """``markdown`` between its section marks, the stamp under its heading."""
    heading, _, body = markdown.partition("\n")
    return f"<!-- section {name} -->\n{heading}\n\n{stamp_line}\n{body}\n<!-- /section {name} -->"


def sections_of(text: str) -> dict[str, str]:
    """The report's sections by name, marks included, in the order they stand."""
    return {match.group(1): match.group(0) for match in _SECTION.finditer(text)}


def assemble(found: Mapping[str, str]) -> str:
    """The whole report from its sections, in ``ORDER`` (unknown names last)."""
    rank = {name: place for place, name in enumerate(ORDER)}
    names = sorted(found, key=lambda name: rank.get(name, len(ORDER)))
    return "\n\n".join([TITLE, INTRODUCTION, *(found[name] for name in names)]) + "\n"


def write_sections(out: Path, markdowns: Mapping[str, str], stamp: Stamp) -> Path:
    """Put each of ``markdowns`` (name: markdown starting with its heading) into
    ``out/REPORT.md``, stamped, replacing older sections of those names; keep
    the others; write the report whole in ``ORDER``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    found = sections_of(path.read_text("utf-8")) if path.exists() else {}
    line = stamp.line()
    found |= {name: stamped(name, markdown, line) for name, markdown in markdowns.items()}
    path.write_text(assemble(found), "utf-8")
    return path


def write_section(out: Path, name: str, markdown: str, stamp: Stamp) -> Path:
    """One section into ``out/REPORT.md`` (``write_sections`` for one)."""
    return write_sections(out, {name: markdown}, stamp)

