"""What the usage log adds to a tool call (issue 29: at most 1 ms median).

    python -m bench.speed.usage_overhead [--rounds 200]

Three servers in one process on one copy of ``fixtures/vault`` (its passage index built
once and shared, 1,000 memories in the memory file), with ``OBSIDIAN_USAGE_LOG`` off,
``on`` and ``full``, each behind the SDK's in-process ``Client``. After warm-up calls,
every round calls warm ``vault_semantic_query`` (a question of ``fixtures/questions.jsonl``)
and ``vault_recall`` (two words) once on each server, in an order that rotates, so the
three see the same machine noise. Reported per tool and mode: the median call; the median
of the round-by-round differences from the log off (on a loaded 2-core machine a warm
query varies by tens of milliseconds, so this one is noise at the 1 ms scale); and, on
the very calls, the time the log adds itself: everything ``VaultServer.call_tool`` does
around the tool (the hook: timing, collecting the facts, the line written), and within it
the writer (``UsageRecorder.record``: the line built, hashed, the file opened, written,
closed). Writes its section of ``REPORT.md`` and the figures to
``bench/out/usage-overhead.json``. A benchmark, not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.memory.recall import MEMORY, build_file
from bench.shared import sections
from bench.shared.harness import OUT_DIR, REPO_ROOT, load_questions, markdown_table, median
from obsidian_mcp.config import Settings
from obsidian_mcp.opening import model_loader, open_retriever
from obsidian_mcp.server import build_server
from obsidian_mcp.server.boundary import VaultServer
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.usage.log import UsageRecorder
from obsidian_mcp.vault import Vault
from tests.fixture_vault import copy_fixture_vault

MODES = ("off", "on", "full")
TOOLS = ("vault_semantic_query", "vault_recall")
MEMORIES = 1000
WARM_UP_CALLS = 5
SECTION = "usage-overhead"


@dataclass(frozen=True)
class ModeFigures:
    tool: str
    mode: str
    calls: int
    median_ms: float
    median_added_ms: float | None  # round by round, against the log off
    hook_median_ms: float  # in VaultServer.call_tool around the tool
    writer_median_ms: float | None  # inside UsageRecorder.record


class WriterClock:
    """Times `UsageRecorder.record` on every call, per log folder (one per server)."""

    def __init__(self) -> None:
        self.samples: dict[tuple[Path, str], list[float]] = {}
        self._original: Callable[..., None] = UsageRecorder.record

    def __enter__(self) -> WriterClock:
        original = self._original
        samples = self.samples

        def timed(recorder: UsageRecorder, call: Any) -> None:
            started = time.perf_counter()
            original(recorder, call)
            elapsed = time.perf_counter() - started
            samples.setdefault((recorder.log.files.folder, call.tool), []).append(elapsed)

        UsageRecorder.record = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        UsageRecorder.record = self._original  # type: ignore[method-assign]


class HookClock:
    """Times what `VaultServer.call_tool` does around the tool (`_checked_call`) on every
    call, per server and tool. The bench makes one call at a time, so the tool's own time
    of the call just made is the last one taken."""

    def __init__(self) -> None:
        self.samples: dict[tuple[int, str], list[float]] = {}
        self._outer = VaultServer.call_tool
        self._inner = VaultServer._checked_call

    def __enter__(self) -> HookClock:
        outer, inner, samples = self._outer, self._inner, self.samples
        tool_time = [0.0]

        async def timed_inner(server: VaultServer, *args: Any) -> Any:
            started = time.perf_counter()
            try:
                return await inner(server, *args)
            finally:
                tool_time[0] = time.perf_counter() - started

        async def timed_outer(server: VaultServer, name: str, *args: Any) -> Any:
            started = time.perf_counter()
            try:
                return await outer(server, name, *args)
            finally:
                around = time.perf_counter() - started - tool_time[0]
                samples.setdefault((id(server), name), []).append(around)

        VaultServer.call_tool = timed_outer  # type: ignore[method-assign]
        VaultServer._checked_call = timed_inner  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        VaultServer.call_tool = self._outer  # type: ignore[method-assign]
        VaultServer._checked_call = self._inner  # type: ignore[method-assign]


def settings_for(vault: Path, root: Path, mode: str) -> Settings:
    return Settings.model_validate(
        {
            "vault_path": vault,
            "config_dir": root / "config",
            "index_dir": root / "index",
            "cache_dir": root / f"cache-{mode}",
            "usage_log": mode,
        }
    )


async def build_index(settings: Settings) -> None:
    retriever = open_retriever(
        Vault(None, FolderSource(settings.vault_path or Path())), settings, model_loader(settings)
    )
    try:
        await retriever.build_index()
    finally:
        retriever.close()


@asynccontextmanager
async def clients(servers: dict[str, VaultServer]) -> AsyncIterator[dict[str, Client]]:
    async with AsyncExitStack() as stack:
        yield {
            mode: await stack.enter_async_context(Client(server, raise_exceptions=True))
            for mode, server in servers.items()
        }


@dataclass(frozen=True)
class Asks:
    questions: list[str]  # for vault_semantic_query
    recalls: list[str]  # two words of a stored memory each, for vault_recall

    def arguments(self, tool: str, n: int) -> dict[str, Any]:
        asks = self.questions if tool == "vault_semantic_query" else self.recalls
        return {"query": asks[n % len(asks)]}


def recall_queries(memory_file: Path) -> list[str]:
    contents = [json.loads(line)["content"] for line in memory_file.read_text("utf-8").splitlines()]
    return [" ".join(content.split()[1:3]) for content in contents[::10]]


async def measure(root: Path, rounds: int) -> list[ModeFigures]:
    vault = copy_fixture_vault(root / "vault")
    build_file(vault / MEMORY, MEMORIES)
    settings = {mode: settings_for(vault, root, mode) for mode in MODES}
    print("building the passage index once", flush=True)
    await build_index(settings["off"])
    asks = Asks([q.question for q in load_questions()], recall_queries(vault / MEMORY))
    times: dict[tuple[str, str], list[float]] = {(t, m): [] for t in TOOLS for m in MODES}
    servers = {mode: build_server(s) for mode, s in settings.items()}
    with WriterClock() as clock, HookClock() as hook:
        async with clients(servers) as by_mode:
            for n in range(WARM_UP_CALLS):
                for tool in TOOLS:
                    for client in by_mode.values():
                        await client.call_tool(tool, asks.arguments(tool, n))
            clock.samples.clear()
            hook.samples.clear()
            print(f"{rounds} rounds of {', '.join(TOOLS)} on {', '.join(MODES)}", flush=True)
            for n in range(rounds):
                order = MODES[n % 3 :] + MODES[: n % 3]
                for tool in TOOLS:
                    for mode in order:
                        started = time.perf_counter()
                        result = await by_mode[mode].call_tool(tool, asks.arguments(tool, n))
                        times[tool, mode].append(time.perf_counter() - started)
                        if result.is_error:
                            raise SystemExit(f"{tool} failed with the log {mode}: {result}")
    figures: list[ModeFigures] = []
    for tool in TOOLS:
        off = times[tool, "off"]
        for mode in MODES:
            mine = times[tool, mode]
            writer = clock.samples.get((settings[mode].usage_log_dir, tool), [])
            figures.append(
                ModeFigures(
                    tool,
                    mode,
                    len(mine),
                    median(mine) * 1000,
                    median([a - b for a, b in zip(mine, off, strict=True)]) * 1000
                    if mode != "off"
                    else None,
                    median(hook.samples[id(servers[mode]), tool]) * 1000,
                    median(writer) * 1000 if writer else None,
                )
            )
    return figures


def section(figures: list[ModeFigures], rounds: int, command: str, load: str) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = [
        [f"`{f.tool}`", f.mode, f.calls, ms(f.median_ms), ms(f.median_added_ms),
         ms(f.hook_median_ms), ms(f.writer_median_ms)]
        for f in figures
    ]  # fmt: skip
    return "\n".join(
        [
            "## Usage log overhead (issue 29)",
            "",
            f"`{command}`: three in-process servers on one copy of `fixtures/vault` (1,000 "
            "memories), the usage log off, `on` and `full`; "
            f"{rounds} rounds, each calling warm `vault_semantic_query` and `vault_recall` "
            "once per server in a rotating order. Paired difference: the median of the "
            "round-by-round differences from the log off (noise at this scale on a loaded "
            "machine). Added by the log: the median time `VaultServer.call_tool` spends "
            "around the tool on those calls (target: at most 1 ms); writer: the part of it "
            f"in `UsageRecorder.record` (the line built, hashed, appended). {load}",
            "",
            markdown_table(
                [
                    "tool",
                    "log",
                    "calls",
                    "median ms",
                    "paired difference ms",
                    "added by the log ms",
                    "writer ms",
                ],
                rows,
            ),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.speed.usage_overhead",
        description="What the usage log adds to a warm tool call, off, on and full.",
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench")
    parser.add_argument("--cache", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    stamp = sections.Stamp.taken("bench.speed.usage_overhead", argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-usage-") as work:
        figures = anyio.run(measure, Path(work), args.rounds)
    load = (
        f"Load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        f"({os.cpu_count()} cores)."
    )
    command = "python -m bench.speed.usage_overhead" + (
        f" --rounds {args.rounds}" if args.rounds != 200 else ""
    )
    markdown = section(figures, args.rounds, command, load)
    print(markdown)
    args.cache.mkdir(parents=True, exist_ok=True)
    (args.cache / "usage-overhead.json").write_text(
        json.dumps([asdict(f) for f in figures], indent=1) + "\n", "utf-8"
    )
    print(f"report: {sections.write_section(args.out, SECTION, markdown, stamp)}")


if __name__ == "__main__":
    main()
