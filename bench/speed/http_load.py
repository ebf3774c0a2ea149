"""Many MCP clients on one `obsidian-mcp serve --http` process.

    python -m bench.speed.http_load                     # 20 clients x 25 mixed calls, then
                                                  # 500 remembers from 5 clients
    python -m bench.speed.http_load --clients 50 --calls 40

Starts the server as a real subprocess over a copy of ``fixtures/vault`` and drives it with
the SDK's streamable HTTP client. Prints calls, errors and latency percentiles; the test
suite runs the same code at a smaller size (tests/test_http.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fixture_vault import copy_fixture_vault
from tests.memory_files import memory_lines as raw_memory_lines
from tests.standin.process import terminate

_SERVE_HTTP = (sys.executable, "-m", "obsidian_mcp", "serve", "--http")
_READY = re.compile(r"MCP over HTTP at (http://\S+)")

# The mixed workload: what an agent does in a session, cheapest tools included.
# Calls meant to fail, among the mixed ones: their error messages must not show the token
# either.
FAILING_CALLS: tuple[tuple[str, dict[str, object]], ...] = (
    ("vault_read_note", {"path": "Nowhere/Missing.md"}),
    ("vault_recall", {"until": "not a time"}),
)
MIXED_CALLS: tuple[tuple[str, dict[str, object]], ...] = (
    ("vault_semantic_query", {"query": "What did Mira promise at the lighthouse?"}),
    ("vault_smart_search", {"query": "lighthouse"}),
    ("vault_recall", {"tags": ["load"]}),
    ("vault_peek_file", {"path": "Characters/Rook.md"}),
    ("vault_tree", {"depth": 1}),
    ("vault_find_related", {"path": "Characters/Rook.md"}),
    ("vault_read_note", {"path": "Home.md", "max_chars": 400}),
    ("vault_quick_context", {"topic": "Kettle"}),
    *FAILING_CALLS,
)


@dataclass
class HttpServer:
    url: str
    token: str
    process: subprocess.Popen[str]
    stderr_file: Path

    def stderr(self) -> str:
        return self.stderr_file.read_text("utf-8", errors="replace")


@contextmanager
def http_server(
    vault: Path,
    workdir: Path,
    *,
    token: str | None = "bench-token",
    port: int = 0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[HttpServer]:
    """`obsidian-mcp serve --http` as a child process; `token=None` lets it generate one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    env["OBSIDIAN_CONFIG_DIR"] = str(workdir / "config")
    if token is not None:
        env["OBSIDIAN_MCP_HTTP_TOKEN"] = token
    stderr_file = workdir / "http-server.stderr"
    with stderr_file.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            [*_SERVE_HTTP, "--port", str(port), "--vault", str(vault), *extra_args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
        )
    try:
        url, printed_token = _wait_ready(process, stderr_file)
        yield HttpServer(url, token or printed_token, process, stderr_file)
    finally:
        terminate(process, grace_seconds=15)


def _wait_ready(process: subprocess.Popen[str], stderr_file: Path) -> tuple[str, str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = stderr_file.read_text("utf-8", errors="replace")
        found = _READY.search(text)
        if found:
            token = re.search(r"bearer token for this run: (\S+)", text)
            if token or "OBSIDIAN_MCP_HTTP_TOKEN" not in text:
                return found[1], token[1] if token else ""
        if process.poll() is not None:
            raise RuntimeError(f"obsidian-mcp serve --http exited: {text[-2000:]}")
        time.sleep(0.1)
    raise RuntimeError("obsidian-mcp serve --http did not start within 60 s")


@asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    """The SDK's streamable HTTP client, sending the bearer token (when given)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        # MCP clients wait long for a tool; httpx's default 5 s read timeout is not theirs
        # (20 clients' first queries at once took longer on the loaded 2-core machine).
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


@dataclass
class LoadResult:
    calls: int
    errors: list[str]
    latencies_ms: list[float]
    seconds: float
    # Replies that show the bearer token (must be 0).
    token_shown: int = 0

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


Call = tuple[str, dict[str, object]]


async def run_clients(
    url: str, token: str, clients: int, calls_of: Callable[[int], list[Call]]
) -> LoadResult:
    """`clients` sessions at once, client number n making the calls `calls_of(n)`."""
    errors: list[str] = []
    latencies: list[float] = []
    token_shown = 0

    async def one_client(number: int) -> None:
        nonlocal token_shown
        async with http_client(url, token) as client:
            for tool, arguments in calls_of(number):
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                latencies.append((time.perf_counter() - started) * 1000)
                token_shown += token in str(result.content)
                if result.is_error and (tool, arguments) not in FAILING_CALLS:
                    errors.append(f"{tool}: {result.content}")

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(clients):
            group.start_soon(one_client, number)
    elapsed = time.perf_counter() - started
    return LoadResult(len(latencies), errors, latencies, elapsed, token_shown)


async def mixed_load(url: str, token: str, clients: int, calls_each: int) -> LoadResult:
    """Each client makes `calls_each` calls, cycling through MIXED_CALLS from its own start."""
    return await run_clients(
        url,
        token,
        clients,
        lambda number: [MIXED_CALLS[(number + n) % len(MIXED_CALLS)] for n in range(calls_each)],
    )


async def concurrent_remembers(url: str, token: str, clients: int, each: int) -> LoadResult:
    """Each client remembers `each` distinct memories."""
    return await run_clients(
        url,
        token,
        clients,
        lambda number: [
            ("vault_remember", {"content": f"client {number} fact {n}", "tags": ["load"]})
            for n in range(each)
        ],
    )


def memory_lines(vault: Path) -> list[dict[str, object]]:
    """Every line of every memory file (each writer's, the legacy one, conflict copies),
    each of which must be JSON."""
    return [json.loads(line) for line in raw_memory_lines(vault)]


def _describe(name: str, result: LoadResult) -> str:
    return (
        f"{name}: {result.calls} calls, {len(result.errors)} errors, {result.seconds:.1f} s "
        f"({result.calls / result.seconds:.0f} calls/s); latency p50 "
        f"{result.percentile(0.5):.0f} ms, p95 {result.percentile(0.95):.0f} ms"
    )


def main(argv: list[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed.http_load", description=__doc__)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--calls", type=int, default=25, help="calls per client")
    parser.add_argument("--remember-clients", type=int, default=5)
    parser.add_argument("--remembers", type=int, default=100, help="remembers per client")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="http-load-") as tmp:
        workdir = Path(tmp)
        vault = workdir / "vault"
        copy_fixture_vault(vault)
        with http_server(vault, workdir) as server:
            mixed = anyio.run(mixed_load, server.url, server.token, args.clients, args.calls)
            print(_describe(f"{args.clients} clients x {args.calls} mixed calls", mixed), file=out)
            remembered = anyio.run(
                concurrent_remembers,
                server.url,
                server.token,
                args.remember_clients,
                args.remembers,
            )
            stored = len(memory_lines(vault))
            expected = args.remember_clients * args.remembers
            print(
                _describe(f"{args.remember_clients} clients remembering", remembered)
                + f"; {stored} of {expected} memories in the files",
                file=out,
            )
            in_log = server.stderr().count(server.token)
        replies = mixed.calls + remembered.calls
        shown = mixed.token_shown + remembered.token_shown
        print(
            f"HTTP token shown: {shown} of {replies} replies, {in_log} times in the server log",
            file=out,
        )
        for error in (mixed.errors + remembered.errors)[:5]:
            print(f"error: {error}", file=out)
    clean = not mixed.errors and not remembered.errors and not shown and not in_log
    return 0 if clean and stored == expected else 1


if __name__ == "__main__":
    sys.exit(main())
