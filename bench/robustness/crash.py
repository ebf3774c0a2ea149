"""Crash safety of every write: SIGKILL the server in the middle of bursts of writes.

    python -m bench --crash 50          # 50 kills per source; REPORT.md section "Crashes"

Each round starts the server (``obsidian-mcp serve`` as a stdio subprocess, driven by the
SDK's client) and runs three writers at once: ``vault_remember`` (tagged with the round),
``vault_forget`` of what this round remembered, and ``vault_scratch_append``. After a random
0.2-1.5 s the server is killed with SIGKILL. A second server of the same installation (a
bystander) remembers one fact of the round first and stays up meanwhile, so the killed
server writes a file of its own in another writer slot; the next process of the
installation that writes (the checking server below) folds the file the kill left, torn
tail and all, into its own (counted as compactions seen). Then, from the files as the kill
left them and from a fresh server:

- every line of every memory file is valid JSON, or is a torn last line (counted, skipped);
- every remember that was acknowledged is recalled, every acknowledged forget stays
  forgotten (a call in flight at the kill may have landed or not: both are fine);
- every scratch entry is whole;
- no response and no log line holds the API key.

Sources: the vault folder, and the stand-in Local REST API without the folder.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.types import TextContent

from bench.shared.generate_vault import generate
from bench.shared.harness import server_env, server_pid, stdio_params, with_endings
from obsidian_mcp.memory.files import writer_of
from tests.memory_files import memory_paths, writer_paths
from tests.standin.process import StandinProcess

SCRATCH = "obsidian-mcp/scratch.md"
REMEMBERED = re.compile(r"Remembered as (\S+?)\.")
SCRATCH_ENTRY = re.compile(r"^crash scratch r\d+ n\d+ x+ end$")
# At most this many remembers a round, so one recall (limit 100) sees the whole round; the
# trial runs acknowledged about 40 a round before the kill.
ROUND_REMEMBERS = 90
# A kill lands this many seconds, drawn uniformly, after the round's first acknowledged
# remember: counted from the start of writing, a kill at 0.2 s through the REST API came
# before any remember was acknowledged in 1 of 12 short runs (tests/test_crash.py).
KILL_AFTER = (0.2, 1.5)
# A round whose server acknowledges no remember in this many seconds fails the run.
FIRST_REMEMBER_TIMEOUT = 30


@dataclass
class CrashResult:
    source: str
    kills: int = 0
    acknowledged: int = 0
    forgets_acknowledged: int = 0
    scratch_acknowledged: int = 0
    compactions_seen: int = 0
    lost: list[str] = field(default_factory=list[str])
    resurrected: list[str] = field(default_factory=list[str])
    corrupt_lines: int = 0
    torn_tails: int = 0
    half_scratch_entries: int = 0
    leftover_temporaries: int = 0
    secret_hits: int = 0


@dataclass
class Round:
    number: int
    remembered: dict[str, str] = field(default_factory=dict[str, str])  # id -> content
    forgotten: set[str] = field(default_factory=set[str])  # acknowledged forgets
    forget_sent: set[str] = field(default_factory=set[str])  # acknowledged or in flight
    answers: list[str] = field(default_factory=list[str])


def check_memory_files(vault: Path, result: CrashResult) -> None:
    """Every memory file there is: each writer's, the legacy one, conflict copies."""
    for path in memory_paths(vault):
        check_memory_file(path, result)


def check_memory_file(path: Path, result: CrashResult) -> None:
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            result.corrupt_lines += 1
    if tail:
        result.torn_tails += 1


def check_scratch(path: Path, result: CrashResult) -> None:
    if not path.exists():
        return
    text = path.read_text("utf-8")
    if not text.endswith("\n"):
        result.half_scratch_entries += 1
    for line in text.splitlines():
        if line.startswith("crash scratch") and not SCRATCH_ENTRY.match(line):
            result.half_scratch_entries += 1


def writer_files(vault: Path) -> set[str]:
    """The writers' files now: a fold removes those it folded (appending their lines to
    the folding process's own file, or writing them to its slot's next generation)."""
    return {path.name for path in writer_paths(vault)
            if (writer := writer_of(path.name)) is not None and writer.exact}


def folds_between(before: set[str], after: set[str]) -> int:
    """Files folded away between two looks."""
    return len(before - after)


async def _writers(client: Any, round_: Round, with_forget: bool) -> None:
    """Write until the server dies under them."""

    async def text_of(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        answer = await client.call_tool(tool, arguments)
        text = "\n".join(b.text for b in answer.content if isinstance(b, TextContent))
        round_.answers.append(text)
        return bool(answer.is_error), text

    async def remember() -> None:
        for n in range(ROUND_REMEMBERS):
            content = f"crash memory r{round_.number} n{n} about the tide tables"
            error, text = await text_of(
                "vault_remember",
                {"content": content, "tags": [f"round{round_.number}"], "context": "crash"},
            )
            if not error and (stored := REMEMBERED.search(text)):
                round_.remembered[stored.group(1)] = content

    async def forget() -> None:
        while True:
            pending = [i for i in round_.remembered if i not in round_.forget_sent]
            if len(pending) < 2:
                await anyio.sleep(0.01)
                continue
            round_.forget_sent.add(pending[0])
            error, _ = await text_of("vault_forget", {"id": pending[0]})
            if not error:
                round_.forgotten.add(pending[0])

    async def scratch() -> None:
        for n in range(10_000):
            await text_of(
                "vault_scratch_append",
                {"text": f"crash scratch r{round_.number} n{n} " + "x" * 300 + " end"},
            )

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(remember)
            group.start_soon(scratch)
            if with_forget:
                group.start_soon(forget)
    except BaseException:  # the kill closes the connection under every writer
        return


async def _bystander(client: Any, round_: Round) -> None:
    """The bystander's one remember: it takes a writer slot before the killed server does."""
    content = f"crash bystander r{round_.number}"
    answer = await client.call_tool(
        "vault_remember",
        {"content": content, "tags": [f"round{round_.number}"], "context": "crash"},
    )
    text = "\n".join(b.text for b in answer.content if isinstance(b, TextContent))
    round_.answers.append(text)
    if answer.is_error or not (stored := REMEMBERED.search(text)):
        raise RuntimeError(f"the bystander's remember failed: {text}")
    round_.remembered[stored.group(1)] = content


async def _kill_round(env: dict[str, str], round_: Round, with_forget: bool) -> None:
    from mcp import Client

    killed = False
    try:
        async with Client(stdio_params(env), read_timeout_seconds=30) as client:
            pid = server_pid(os.getpid())  # the only server so far
            if pid is None:
                raise RuntimeError("the server process was not found")
            async with Client(stdio_params(env), read_timeout_seconds=30) as bystander:
                await _bystander(bystander, round_)
                async with anyio.create_task_group() as group:
                    group.start_soon(_writers, client, round_, with_forget)
                    with anyio.fail_after(FIRST_REMEMBER_TIMEOUT):
                        while len(round_.remembered) < 2:  # the bystander's, and one more
                            await anyio.sleep(0.01)
                    await anyio.sleep(random.uniform(*KILL_AFTER))
                    os.kill(pid, signal.SIGKILL)
                    killed = True
    except Exception:  # the client's own teardown after the kill; anything before is raised
        if not killed:
            raise


async def _verify(env: dict[str, str], round_: Round, result: CrashResult) -> None:
    from mcp import Client

    async with Client(stdio_params(env), read_timeout_seconds=60) as client:
        answer = await client.call_tool(
            "vault_recall",
            {
                "tags": [f"round{round_.number}"],
                "limit": 100,
                "max_tokens": 20000,
                "format": "json",
            },
        )
        text = "\n".join(b.text for b in answer.content if isinstance(b, TextContent))
        round_.answers.append(text)
        recalled = {m["id"] for m in json.loads(text)["memories"]} if not answer.is_error else set()
        # Forget what is left, so the next rounds' compactions have dead lines to drop.
        for memory_id in recalled:
            await client.call_tool("vault_forget", {"id": memory_id})
    # A receipt names its memory by the shortest ending of its id no other has; the JSON
    # recall, by the whole id.
    recalled_endings = with_endings(recalled)
    for memory_id in round_.remembered:
        if memory_id in round_.forgotten:
            if memory_id in recalled_endings:
                result.resurrected.append(memory_id)
        elif memory_id not in recalled_endings and memory_id not in round_.forget_sent:
            result.lost.append(memory_id)


async def crash_run(kills: int, work: Path, source: str, log: Path | None) -> CrashResult:
    """``kills`` rounds on ``source`` ("folder" or "rest"); ``log`` holds the children's
    stderr, searched for the API key at the end."""
    root = work / f"crash-{source}"
    generate(root, 50, vectors=False)
    vault = root / "vault"
    result = CrashResult(source)
    standin = StandinProcess(vault) if source == "rest" else None
    secret = ""
    if standin is not None:
        await standin.__aenter__()
        secret = standin.api_key
    try:
        env = server_env(
            standin=standin,
            vault=None if standin is not None else vault,
            config_dir=root / "config",
        )
        # Smaller rounds keep the per-round recall under its limit of 100.
        seen = writer_files(vault)

        def count_folds() -> None:
            nonlocal seen
            now = writer_files(vault)
            result.compactions_seen += folds_between(seen, now)
            seen = now

        for number in range(kills):
            round_ = Round(number)
            await _kill_round(env, round_, with_forget=True)
            result.kills += 1
            count_folds()
            check_memory_files(vault, result)
            check_scratch(vault / SCRATCH, result)
            await _verify(env, round_, result)
            count_folds()
            result.acknowledged += len(round_.remembered)
            result.forgets_acknowledged += len(round_.forgotten)
            result.scratch_acknowledged += sum("Appended" in a for a in round_.answers)
            if secret:
                result.secret_hits += sum(secret in a for a in round_.answers)
        result.leftover_temporaries = sum(
            1 for p in (vault / "obsidian-mcp").rglob("*") if p.name.endswith(".tmp")
        )
    finally:
        if standin is not None:
            await standin.__aexit__(None, None, None)
    if secret and log is not None and log.exists():
        result.secret_hits += log.read_text("utf-8", errors="replace").count(secret)
    return result


def section(results: list[CrashResult]) -> str:
    from bench.shared.harness import markdown_table

    rows = [
        (
            r.source,
            r.kills,
            r.acknowledged,
            len(r.lost),
            r.forgets_acknowledged,
            len(r.resurrected),
            r.corrupt_lines,
            r.torn_tails,
            r.scratch_acknowledged,
            r.half_scratch_entries,
            r.compactions_seen,
            r.leftover_temporaries,
            r.secret_hits,
        )
        for r in results
    ]
    headers = (
        "source",
        "kills",
        "remembers acknowledged",
        "lost",
        "forgets acknowledged",
        "forgotten came back",
        "corrupt lines (not a torn tail)",
        "torn tails skipped",
        "scratch appends acknowledged",
        "half scratch entries",
        "compactions seen",
        "leftover temporary files",
        "API key occurrences",
    )
    return "\n\n".join(
        [
            "## Crashes",
            "SIGKILL of the server (stdio subprocess) at a random moment 0.2-1.5 s into a "
            "burst of concurrent `vault_remember`, `vault_forget` and `vault_scratch_append`, "
            "beside a second server of the installation, so the killed one writes a memory "
            "file of its own, which the next writing process folds (compactions seen); "
            "checked from the files and from a fresh server after each kill (see "
            "`bench/robustness/crash.py`).",
            markdown_table(headers, rows),
        ]
    )
