"""The first day on a large vault: what a new user's agent gets while the first build runs.

    python -m bench.speed.first_day --notes 10000 --minutes 10    # about 12 minutes

Generates the vault (``bench.shared.generate_vault``, planted passages: each names an
invented person found nowhere else, so keywords alone can find it), starts a new server
over it with no index (stdio subprocess, fresh config and index folders), and from the
first second asks, one after another, a planted question (``vault_semantic_query``) then
a keyword search of it (``vault_smart_search``), round the planted questions, until the
minutes are up. Each minute's row: the questions asked, how many had their planted passage
in the first response, each tool's median and slowest call, and how far the build had got
(``obsidian://status``: notes read, passages with a vector). Against issue 38: planted
questions answered >= 80% within 5 minutes of the first start at 10,000 notes; any tool
<= 1 s while the first build runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp.types import TextResourceContents

from bench.shared.generate_vault import Planted, generate
from bench.shared.harness import (
    REPO_ROOT,
    KeywordPicker,
    Session,
    is_hit,
    markdown_table,
    median,
    prime_standin,
    server_env,
    stdio_session,
)
from bench.shared.sections import Stamp, write_section
from tests.standin.process import StandinProcess

OUT = REPO_ROOT / "bench" / "out" / "first-day"
SEMANTIC = "vault_semantic_query"
KEYWORDS = "vault_smart_search"


@dataclass(frozen=True)
class Asked:
    """One call: seconds since the server started, which tool, its time, a planted hit."""

    at: float
    tool: str
    seconds: float
    hit: bool
    error: bool


@dataclass(frozen=True)
class Progress:
    at: float
    notes: int
    passages: int
    embedded: int
    searchable: int = 0  # a vector for at least one text (any, before this was counted)


async def _status(session: Session) -> dict[str, Any]:
    result = await session.client.read_resource("obsidian://status")
    text = next(c.text for c in result.contents if isinstance(c, TextResourceContents))
    return json.loads(text)


def _progress(at: float, status: dict[str, Any]) -> Progress:
    index = status.get("index") or {}
    return Progress(
        at,
        int(index.get("notes") or 0),
        int(index.get("passages") or 0),
        int(index.get("embedded_passages") or 0),
        int(index.get("passages_found_by_meaning") or 0),
    )


async def run(
    notes: int,
    minutes: float,
    out: Path,
    repo: Path = REPO_ROOT,
    *,
    source: str = "folder",
    smart_connections: bool = False,
    settings: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One first day. `source`: "folder", or "standin" (the stand-in Local REST API 5.x
    over the vault); `smart_connections`: Smart Connections' files beside the notes, made
    of the generated vectors (hashed bags of words, not a language model's), which the
    stand-in's /search/smart then ranks by; `settings`: the server's environment beyond
    the defaults (``OBSIDIAN_INDEX_READ_WAIT_SECONDS``: "0.5"), to weigh a default."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    started = time.perf_counter()
    planted = generate(out, notes, vectors=smart_connections)
    took = time.perf_counter() - started
    print(f"generated {notes:,} notes ({len(planted)} planted) in {took:.0f} s", flush=True)
    vault = out / "vault"
    picker = KeywordPicker(vault)
    primed: float | None = None  # the stand-in's own first listing, before the server
    async with contextlib.AsyncExitStack() as stack:
        if source == "standin":
            standin = await stack.enter_async_context(
                StandinProcess(
                    vault,
                    plugin_version="5.1.0",
                    query_vectors=out / "query_vectors.jsonl" if smart_connections else None,
                    startup_timeout=300,
                )
            )
            primed = await prime_standin(standin)
            print(f"the stand-in's own first listing: {primed:.2f} s", flush=True)
            env = server_env(standin=standin, config_dir=out / "config")
        else:
            env = server_env(vault=vault, config_dir=out / "config")
        asked, progress = await _ask(env | (settings or {}), repo, planted, picker, minutes)
    found = {
        "source": source,
        "smart_connections": smart_connections,
        "settings": settings or {},
        "notes": notes,
        "planted": len(planted),
        "minutes": minutes,
        "standin_first_listing_seconds": primed,
        "asked": [asdict(a) for a in asked],
        "progress": [asdict(p) for p in progress],
    }
    (out / "first-day.json").write_text(json.dumps(found, indent=1), "utf-8")
    return found


async def _ask(
    env: dict[str, str],
    repo: Path,
    planted: Sequence[Planted],
    picker: KeywordPicker,
    minutes: float,
) -> tuple[list[Asked], list[Progress]]:
    """From the server's start until `minutes` have passed: a planted question, then a
    keyword search of it, round the planted questions; the build's progress each 30 s."""
    asked: list[Asked] = []
    progress: list[Progress] = []
    async with stdio_session(env, timeout=600, repo=repo) as session:
        start = time.perf_counter()
        deadline = start + minutes * 60
        next_status = start
        turn = 0
        while time.perf_counter() < deadline:
            now = time.perf_counter()
            if now >= next_status:
                progress.append(_progress(now - start, await _status(session)))
                next_status += 30
            question = planted[turn % len(planted)]
            for tool, arguments in (
                (SEMANTIC, {"query": question.question}),
                (KEYWORDS, {"query": picker.pick(question.question)}),
            ):
                at = time.perf_counter() - start
                result = await session.call(tool, arguments)
                hit = is_hit(result.text, [question.gold])
                asked.append(Asked(at, tool, result.seconds, hit, result.is_error))
            turn += 1
        progress.append(_progress(time.perf_counter() - start, await _status(session)))
    return asked, progress


def table(found: dict[str, Any]) -> str:
    asked = [Asked(**a) for a in found["asked"]]
    progress = [Progress(**p) for p in found["progress"]]
    rows: list[Sequence[object]] = []
    for minute in range(int(found["minutes"] + 0.999)):
        inside = [a for a in asked if minute * 60 <= a.at < (minute + 1) * 60]
        semantic = [a for a in inside if a.tool == SEMANTIC]
        keywords = [a for a in inside if a.tool == KEYWORDS]
        built = [p for p in progress if p.at < (minute + 1) * 60]
        last = built[-1] if built else Progress(0, 0, 0, 0, 0)

        def times(calls: list[Asked]) -> str:
            if not calls:
                return "-"
            return f"{median([c.seconds for c in calls]):.2f} / {max(c.seconds for c in calls):.2f}"

        def hits(calls: list[Asked]) -> str:
            if not calls:
                return "-"
            return f"{sum(c.hit for c in calls)}/{len(calls)}"

        rows.append(
            [
                minute + 1,
                hits(semantic),
                times(semantic),
                hits(keywords),
                times(keywords),
                sum(a.error for a in inside),
                f"{last.notes:,}",
                f"{last.searchable:,} / {last.embedded:,} / {last.passages:,}",
            ]
        )
    header = [
        "minute",
        "planted answered (meaning)",
        "s median / max",
        "planted found (keywords)",
        "s median / max",
        "errors",
        "notes read",
        "passages found by meaning / with every vector / in all",
    ]
    where = "the stand-in" if found.get("source") == "standin" else "the folder"
    smart = ""
    if found.get("smart_connections"):
        smart = ", Smart Connections' files (generated vectors)"
    primed = found.get("standin_first_listing_seconds")
    before = (
        ""
        if primed is None
        else f"The stand-in answered its own first listing before the server started, as a "
        f"running Obsidian has (`prime_standin`): {primed:.1f} s, not in any call.\n\n"
    )
    return (
        f"### First day, {found['notes']:,} generated notes ({found['planted']} planted), "
        f"through {where}{smart}\n\n" + before + markdown_table(header, rows) + "\n"
    )


def section_name(notes: int, source: str) -> str:
    """The report's section for a run: one per source at 10,000 notes, and one per size
    beside them, so that a 50,000-note run does not replace the 10,000-note figures."""
    name = "first-day-standin" if source == "standin" else "first-day"
    return name if notes == 10_000 else f"{name}-{notes}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The first day on a large vault.")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--server-repo",
        type=Path,
        default=REPO_ROOT,
        help="the checkout whose server runs (another commit's worktree, for a 'before')",
    )
    parser.add_argument("--source", choices=("folder", "standin"), default="folder")
    parser.add_argument(
        "--smart-connections",
        action="store_true",
        help="write Smart Connections' files of generated vectors beside the notes",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting other than its default (index_read_wait_seconds=0.5), to "
        "weigh a default; the run's table then stays out of bench/REPORT.md",
    )
    parser.add_argument("--table-only", action="store_true", help="re-print the last run's table")
    args = parser.parse_args(argv)
    settings: dict[str, str] = {}
    for setting in args.setting:
        name, equals, value = setting.partition("=")
        if not equals or not name.strip():
            parser.error(f"--setting {setting!r}: write it NAME=VALUE")
        if "KEY" in name.upper():
            # The run's settings are saved with its figures: a key would be written there.
            parser.error(f"--setting {name.strip()}: a key is not a setting to weigh")
        settings["OBSIDIAN_" + name.strip().upper()] = value
    stamp = Stamp.taken("bench.speed.first_day", argv)
    if args.table_only:
        found = json.loads((args.out / "first-day.json").read_text("utf-8"))
    else:
        found = anyio.run(
            partial(
                run,
                args.notes,
                args.minutes,
                args.out,
                args.server_repo,
                source=args.source,
                smart_connections=args.smart_connections,
                settings=settings,
            )
        )
    markdown = table(found)
    print(markdown)
    if not args.table_only and args.server_repo == REPO_ROOT and not settings:
        write_section(REPO_ROOT / "bench", section_name(args.notes, args.source), markdown, stamp)


if __name__ == "__main__":
    main()
