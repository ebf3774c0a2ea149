"""Speed and scale: every tool on generated vaults, through the folder and the stand-in.

For each vault size, ``bench.shared.generate_vault.generate`` writes a deterministic vault with
planted passages; then, for each source (the vault folder, and the stand-in Local REST
API 5.x over the same folder with its ``/search/smart`` on the generated vectors), a fresh
server (stdio subprocess, fresh config dir, so nothing is cached from before) gets every
tool it lists, in a fixed order, ``vault_semantic_query`` first:

- the **first call** of each tool in that process, with progress notifications asked for
  (for ``vault_semantic_query`` this is the cold query that builds the indexes; tools
  after it find them built);
- then **warm calls** (``calls`` of them, fewer if a tool's warm calls pass
  ``budget_seconds``), cycling through the planted questions and their notes;
- through the stand-in, ``calls`` raw ``POST /search/smart`` requests of the same
  questions, so ``vault_semantic_query``'s time can be split into the plugin's and ours.

The planted hit rate of ``vault_semantic_query`` (the gold in the response) is kept too.
The overhead of a tool call over its raw REST request reuses
``bench.speed.read_overhead.measure`` (both interleaved in the same run, as a ratio).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.shared.generate_vault import Planted, generate
from bench.shared.harness import (
    FIXTURE_VAULT,
    KeywordPicker,
    Question,
    Session,
    is_hit,
    load_questions,
    median,
    percentile,
    prime_standin,
    server_env,
    server_pid,
    stdio_session,
    tool_names,
)
from bench.speed import read_overhead
from tests.standin.process import StandinProcess

SEMANTIC = "vault_semantic_query"
_REMEMBERED = re.compile(r"Remembered as (\S+?)\.")


@dataclass(frozen=True)
class Probe:
    """What one call of a tool is given: the n-th planted passage and its keywords."""

    planted: Planted
    keywords: str
    n: int


Args = Callable[[Probe, list[str]], dict[str, Any] | None]

# Every tool, in the order a run calls them; ``vault_forget`` retires what the warm
# ``vault_remember`` calls stored (none left: no call).
TOOLS: dict[str, Args] = {
    SEMANTIC: lambda p, ids: {"query": p.planted.question},
    "vault_smart_search": lambda p, ids: {"query": p.keywords},
    "vault_search_map": lambda p, ids: {"query": p.keywords},
    "vault_quick_context": lambda p, ids: {"topic": p.keywords},
    "vault_find_related": lambda p, ids: {"path": p.planted.path},
    "vault_read_note": lambda p, ids: {"path": p.planted.path},
    "vault_peek_file": lambda p, ids: {"path": p.planted.path},
    "vault_tree": lambda p, ids: {},
    "vault_recall": lambda p, ids: {"query": p.keywords},
    "vault_remember": lambda p, ids: {
        "content": f"Speed run {p.n}: {p.planted.question} {p.planted.gold}",
        "tags": ["bench", "speed"],
        "context": "written by the speed benchmark",
    },
    "vault_forget": lambda p, ids: {"id": ids.pop()} if ids else None,
    "vault_scratch_append": lambda p, ids: {"text": f"speed run entry {p.n}"},
}


@dataclass
class ToolTiming:
    notes: int
    source: str
    tool: str
    first_ms: float
    progress_events: int
    warm_median_ms: float
    warm_p95_ms: float
    warm_calls: int
    errors: int
    hit_rate: float | None = None  # planted gold found (vault_semantic_query only)


@dataclass
class SourceRun:
    notes: int
    source: str
    connect_ms: float  # start the server process and initialise the session
    tools: list[ToolTiming]
    raw_smart_ms: float | None = None  # the stand-in's POST /search/smart alone, median
    # The stand-in's own first listing, made before the server starts (`prime_standin`).
    primed_ms: float | None = None
    rss_mib: float | None = None  # the server's resident memory after every tool ran
    peak_rss_mib: float | None = None  # its high-water mark over the run


async def time_tools(
    session: Session,
    notes: int,
    source: str,
    probes: Sequence[Probe],
    calls: int,
    budget_seconds: float,
) -> list[ToolTiming]:
    ids: list[str] = []
    timings: list[ToolTiming] = []
    for tool, make_args in TOOLS.items():
        args = make_args(probes[0], ids)
        if args is None:
            continue
        first = await session.call(tool, args, progress=True)
        errors = int(first.is_error)
        warm: list[float] = []
        hits: list[bool] = []
        spent = 0.0
        for index in range(1, calls + 1):
            probe = probes[index % len(probes)]
            args = make_args(probe, ids)
            if args is None or (spent > budget_seconds and len(warm) >= 3):
                break
            result = await session.call(tool, args)
            spent += result.seconds
            warm.append(1000 * result.seconds)
            errors += int(result.is_error)
            if tool == SEMANTIC and len(hits) < len(probes):
                hits.append(is_hit(result.text, [probe.planted.gold]))
            if tool == "vault_remember":
                ids += _REMEMBERED.findall(result.text)
        timings.append(
            ToolTiming(
                notes,
                source,
                tool,
                1000 * first.seconds,
                first.progress,
                median(warm),
                percentile(warm, 95),
                len(warm),
                errors,
                100 * sum(hits) / len(hits) if hits else None,
            )
        )
    return timings


async def _source_run(
    env: dict[str, str],
    notes: int,
    source: str,
    probes: Sequence[Probe],
    calls: int,
    budget_seconds: float,
    timeout: float,
) -> SourceRun:
    started = time.perf_counter()
    async with stdio_session(env, timeout) as session:
        await tool_names(session)  # the first request completes the connection
        connect_ms = 1000 * (time.perf_counter() - started)
        pid = server_pid(os.getpid())
        timings = await time_tools(session, notes, source, probes, calls, budget_seconds)
        memory = resident_mib(pid) if pid is not None else (None, None)
    semantic = next((t for t in timings if t.tool == SEMANTIC), None)
    print(
        f"  {notes:,} notes, {source}: {len(timings)} tools"
        + (
            f"; {SEMANTIC} first {semantic.first_ms:,.0f} ms, warm median "
            f"{semantic.warm_median_ms:,.0f} ms"
            if semantic
            else ""
        ),
        flush=True,
    )
    return SourceRun(notes, source, connect_ms, timings, None, *memory)


def resident_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


async def raw_smart_search_ms(
    standin: StandinProcess, questions: Sequence[Question], calls: int
) -> float:
    """Median of the stand-in's own POST /search/smart, with no MCP in between."""
    times: list[float] = []
    async with standin.async_client(timeout=300) as http:
        for index in range(calls):
            body = json.dumps({"query": questions[index % len(questions)].question})
            started = time.perf_counter()
            response = await http.post(
                "/search/smart", content=body, headers={"Content-Type": "text/plain"}
            )
            response.raise_for_status()
            times.append(1000 * (time.perf_counter() - started))
    return median(times)


async def scale(
    sizes: Sequence[int],
    work: Path,
    calls: int,
    budget_seconds: float,
    *,
    rest: bool = True,
    timeout: float = 300,
    embeddings: bool = True,
) -> list[SourceRun]:
    """Every tool at each size through the folder and, when ``rest``, the stand-in; one
    call taking longer than ``timeout`` seconds ends the run. Without ``embeddings`` the
    servers rank by words and the plugin's stored vectors, and the local model embeds
    nothing."""
    runs: list[SourceRun] = []
    for notes in sizes:
        out = work / f"gen-{notes}"
        started = time.perf_counter()
        planted = generate(out, notes)
        vault = out / "vault"
        picker = KeywordPicker(vault)
        probes = [Probe(p, picker.pick(p.question), n) for n, p in enumerate(planted)]
        print(
            f"  generated {notes:,} notes ({len(planted)} planted) in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        folder_env = server_env(
            vault=vault, config_dir=work / f"config-{notes}-folder", embeddings=embeddings
        )
        runs.append(
            await _source_run(folder_env, notes, "folder", probes, calls, budget_seconds, timeout)
        )
        if not rest:
            shutil.rmtree(out)
            continue
        async with StandinProcess(
            vault,
            plugin_version="5.1.0",
            smart="upstream",
            query_vectors=out / "query_vectors.jsonl",
            startup_timeout=300,
        ) as standin:
            # As a running Obsidian has long before a session: a fresh stand-in's first
            # listing and first search by Smart Connections took 5 s of the first call at
            # 10,000 notes, no server's doing.
            primed = await prime_standin(standin, planted[0].question)
            env = server_env(
                standin=standin, config_dir=work / f"config-{notes}-rest", embeddings=embeddings
            )
            run = await _source_run(env, notes, "stand-in", probes, calls, budget_seconds, timeout)
            run.primed_ms = 1000 * primed
            questions = load_questions(out / "planted.jsonl")
            run.raw_smart_ms = await raw_smart_search_ms(standin, questions, calls)
            runs.append(run)
        shutil.rmtree(out)
    return runs


@dataclass
class Overhead:
    rounds: int
    note: str
    raw_median_ms: float
    tool_median_ms: float

    @property
    def ratio(self) -> float:
        return self.tool_median_ms / self.raw_median_ms


async def overhead(work: Path, rounds: int) -> Overhead:
    vault = work / "overhead-vault"
    shutil.copytree(FIXTURE_VAULT, vault)
    async with StandinProcess(vault, plugin_version="5.1.0") as standin:
        raw, tool = await read_overhead.measure(standin, work / "overhead-config", rounds)
    return Overhead(rounds, read_overhead.NOTE, 1000 * raw, 1000 * tool)


def big_section(runs: Sequence[SourceRun]) -> str:
    """The big-vault table: each tool at the smallest and largest size, and the growth."""
    from bench.shared.harness import markdown_table

    small, large = runs[0], runs[-1]
    by_tool = {t.tool: t for t in small.tools}
    rows: list[tuple[object, ...]] = []
    for timing in large.tools:
        base = by_tool.get(timing.tool)
        growth = timing.warm_median_ms / base.warm_median_ms if base else math.nan
        rows.append(
            (
                timing.tool,
                base.first_ms if base else math.nan,
                base.warm_median_ms if base else math.nan,
                timing.first_ms,
                timing.warm_median_ms,
                timing.warm_p95_ms,
                timing.warm_calls,
                timing.errors,
                f"{growth:.1f}x",
            )
        )
    n_small, n_large = f"{small.notes:,}", f"{large.notes:,}"
    headers = (
        "tool",
        f"first ms ({n_small})",
        f"warm median ms ({n_small})",
        f"first ms ({n_large})",
        f"warm median ms ({n_large})",
        f"warm p95 ms ({n_large})",
        "warm calls",
        "errors",
        "median growth",
    )

    def mib(value: float | None) -> str:
        return "n/a" if value is None else f"{value:,.0f} MiB"

    memory = "\n".join(
        f"- {run.notes:,} notes: connect {run.connect_ms:,.0f} ms; RSS after every tool "
        f"{mib(run.rss_mib)}, peak {mib(run.peak_rss_mib)}"
        for run in runs
    )
    return "\n\n".join(
        [
            "## Big vault through the folder",
            f"Generated vaults (`bench/shared/generate_vault.py`) of {n_small} and {n_large} "
            "notes, one fresh server each (stdio, the folder source); the first call of each tool "
            "in the process, then warm calls (see `bench/speed/scale.py`). Re-run with "
            "`python -m bench --big`. Each server starts with no index and with the "
            "generated Smart Connections files, as a user's first session does: it reads "
            "the notes into its index (seconds per thousand) and embeds their passages "
            "(hours at 50,000 notes) in the background while the calls are timed, so these "
            "are first-session figures; `python -m bench.speed.index` measures a server "
            "on a built index.",
            markdown_table(headers, rows),
            memory,
        ]
    )
