"""Open `obsidian-mcp stats --html` in a real headless browser and check its charts drew.

    python -m scripts.usage_report_browser [--cache-dir DIR] [--out DIR]

Makes a usage log first (a short conversation with the fixture vault through an in-process
MCP client, OBSIDIAN_USAGE_LOG=full, two server sessions), unless --cache-dir names a cache
folder that already holds one (`python -m bench` keeps its log in bench/out: --cache-dir
bench/out). Writes the page with the command a user runs, then has Chromium (Debian's
`chromium` package) take a screenshot of it from the file, offline, with a new empty
profile, and checks the screenshot's pixels: each chart's own colours must cover the area
its bars need, top to bottom in the page's order. Exit status 0 when every chart drew,
1 when one did not, 2 when there is no Chromium. The page and the screenshot stay in --out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np
from mcp import Client
from PIL import Image

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.usage.report import (
    CALLS_COLOUR,
    DAY_COLOUR,
    ERRORS_COLOUR,
    FOLLOW_UP_COLOUR,
    MEDIAN_COLOUR,
    P90_COLOUR,
)
from tests.fixture_vault import REPO_ROOT, copy_fixture_vault

# The flags the project's browser probe uses: no sandbox (root in a container), nothing
# fetched or synced, a profile of its own.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
WINDOW = (1100, 2200)
# Fewer pixels of a chart's colour than this and its bars did not draw: the smallest bar
# of the conversation below is one call of 1,000 px scale, about 40 x 12 pixels.
MIN_PIXELS = 300

CONVERSATION: list[tuple[str, dict[str, object]]] = [
    ("vault_semantic_query", {"query": "Where does Mira keep the compass?"}),
    ("vault_read_note", {"path": "Items/Tide-Compass.md"}),
    ("vault_semantic_query", {"query": "What did Rook buy at Saltwick Market?"}),
    ("vault_smart_search", {"query": "Saltwick Market"}),
    ("vault_peek_file", {"path": "Characters/Hobb Marrow.md"}),
    ("vault_quick_context", {"topic": "Hobb Marrow"}),
    ("vault_read_note", {"path": "Characters/Nobody.md"}),
    ("vault_recall", {"query": "harbour"}),
]


@dataclass(frozen=True)
class Chart:
    name: str
    colours: tuple[str, ...]


# Top to bottom, as html_report lays them out.
CHARTS = (
    Chart("calls per tool", (CALLS_COLOUR, ERRORS_COLOUR)),
    Chart("reply tokens per call", (MEDIAN_COLOUR, P90_COLOUR)),
    Chart("calls per day", (DAY_COLOUR,)),
    Chart("searches and follow-ups", (FOLLOW_UP_COLOUR,)),
)


async def make_log(cache: Path, work: Path) -> None:
    vault = copy_fixture_vault(work / "vault")
    settings = Settings.model_validate(
        {
            "vault_path": vault,
            "config_dir": work / "config",
            "cache_dir": cache,
            "usage_log": "full",
            "index_embeddings": False,
        }
    )
    for _ in range(2):
        async with Client(build_server(settings)) as client:
            for tool, arguments in CONVERSATION:
                await client.call_tool(tool, arguments)


def rgb(colour: str) -> tuple[int, int, int]:
    value = int(colour.removeprefix("#"), 16)
    return value >> 16, (value >> 8) & 255, value & 255


def colour_rows(pixels: np.ndarray, colour: str) -> tuple[int, int, int]:
    """Pixels of exactly `colour` (bars are flat fills), and the first and last row."""
    mask = (pixels == np.array(rgb(colour), dtype=pixels.dtype)).all(axis=2)
    rows = np.flatnonzero(mask.any(axis=1))
    if not len(rows):
        return 0, -1, -1
    return int(mask.sum()), int(rows[0]), int(rows[-1])


def check(screenshot: Path) -> list[str]:
    """What is wrong with the screenshot's charts; nothing when all drew, in order."""
    pixels = np.asarray(Image.open(screenshot).convert("RGB"))
    problems: list[str] = []
    previous_bottom = -1
    for chart in CHARTS:
        tops: list[int] = []
        for colour in chart.colours:
            count, first, last = colour_rows(pixels, colour)
            print(f"  {chart.name}: {colour} covers {count:,} pixels, rows {first}-{last}")
            if count < MIN_PIXELS:
                problems.append(f"{chart.name}: {colour} covers {count} pixels (< {MIN_PIXELS})")
            tops.append(first)
            if first < previous_bottom:
                problems.append(f"{chart.name} starts above the chart before it")
        previous_bottom = max(tops)
    return problems


def screenshot(page: Path, target: Path, browser: str) -> None:
    with tempfile.TemporaryDirectory(prefix="usage-browser-") as profile:
        subprocess.run(
            [
                browser,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                f"--screenshot={target}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.usage_report_browser")
    parser.add_argument("--cache-dir", type=Path, help="a cache folder holding a usage log")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "out" / "usage-html")
    args = parser.parse_args(argv)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("no chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="usage-log-") as work:
        cache: Path = args.cache_dir or Path(work) / "cache"
        if args.cache_dir is None:
            anyio.run(make_log, cache, Path(work))
        page = args.out / "usage.html"
        env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
        subprocess.run(
            [sys.executable, "-m", "obsidian_mcp", "stats", "--html", str(page)],
            env={**env, "OBSIDIAN_CACHE_DIR": str(cache)},
            cwd=REPO_ROOT,
            check=True,
        )
    shot = args.out / "usage.png"
    shot.unlink(missing_ok=True)
    screenshot(page, shot, browser)
    print(f"page {page}, screenshot {shot}")
    problems = check(shot)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    print("every chart drew" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
