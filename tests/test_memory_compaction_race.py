"""Compaction racing with another process's remembers: no acknowledged memory is lost and
no forgotten one comes back, through the folder, through the REST API with the folder
known, and through the REST API alone.

Two real `obsidian-mcp serve` processes share one vault (through the stand-in Local REST
API where the mode says so). Process A forgets hundreds of seeded memories, which makes
it compact the file again and again; process B remembers meanwhile.
"""

import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from obsidian_mcp.memory.model import Memory, encode
from tests.fixture_vault import REPO_ROOT
from tests.standin.process import StandinProcess

MEMORY = "obsidian-mcp/memory.jsonl"
SEEDED, REMEMBER_TASKS = 450, 2
# B pauses between remembers so that A's forgets outpace them: dead lines must come to
# outnumber live memories for A to compact at all.
REMEMBER_PAUSE = 0.02
# Seeded memories carry a long context, so each compaction reads and writes ~1 MB: the
# window in which another process's append can fall is that of a real, well-used file.
SEED_CONTEXT = "background " * 200
LATENCY_MS = 15
# (how A, which forgets and compacts, is configured; how B, which remembers, is).
MODES = [
    ("folder", "folder"),
    ("rest+folder", "rest+folder"),
    ("rest", "rest"),
    # B appends through Obsidian, which takes no lock, while A compacts on disk.
    ("rest+folder", "rest"),
]


def server(
    mode: str, vault: Path, standin: StandinProcess, config_dir: Path
) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    # These processes race over the file; the embedding model would only slow them down.
    env.update(PYTHONPATH=str(REPO_ROOT), OBSIDIAN_CONFIG_DIR=str(config_dir),
               OBSIDIAN_MEMORY_MEANING="false")
    args = ["-m", "obsidian_mcp", "serve"]
    if mode != "rest":
        args += ["--vault", str(vault)]
    if mode != "folder":
        env.update(
            OBSIDIAN_API_KEY=standin.api_key, OBSIDIAN_HOST="127.0.0.1",
            OBSIDIAN_PORT=str(standin.port), OBSIDIAN_CERT=standin.cert,
        )
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO_ROOT), env=env)


def seeded_ids() -> list[str]:
    return [f"0seed{n:08d}" for n in range(SEEDED)]


def seed(vault: Path) -> None:
    at = datetime.now(UTC) - timedelta(days=3)
    lines = [
        encode(Memory(id=memory_id, ts=at, content=f"seeded fact {n}", tags=("seed",),
                      context=SEED_CONTEXT))
        for n, memory_id in enumerate(seeded_ids())
    ]
    (vault / MEMORY).parent.mkdir(parents=True, exist_ok=True)
    (vault / MEMORY).write_text("".join(lines), "utf-8")


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandinProcess]:
    vault = tmp_path / "vault"
    vault.mkdir()
    seed(vault)
    with StandinProcess(vault, plugin_version="5.1.0") as process:
        yield process


@pytest.mark.anyio
@pytest.mark.parametrize(("mode_a", "mode_b"), MODES)
async def test_compaction_never_loses_another_process_s_remembers(
    mode_a: str, mode_b: str, standin: StandinProcess, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    acknowledged: list[str] = []
    forgetting_done = anyio.Event()

    async def forget_everything() -> None:
        async with Client(server(mode_a, vault, standin, tmp_path / "cfg-a")) as client:
            for memory_id in seeded_ids():
                result = await client.call_tool("vault_forget", {"id": memory_id})
                assert not result.is_error, result.content
        forgetting_done.set()

    async def remember(task: int) -> None:
        async with Client(server(mode_b, vault, standin, tmp_path / f"cfg-b{task}")) as client:
            n = 0
            while not forgetting_done.is_set():  # remember for as long as A compacts
                n += 1
                content = f"process b{task} fact {n}"
                result = await client.call_tool(
                    "vault_remember", {"content": content, "tags": ["race"], "context": ""}
                )
                assert not result.is_error, result.content
                acknowledged.append(content)
                await anyio.sleep(REMEMBER_PAUSE)

    # Every request waits a little before Obsidian handles it, as on a busy machine: the
    # time between a compaction's read and its write is then long enough to be hit.
    standin.set_faults(latency_ms=LATENCY_MS)
    async with anyio.create_task_group() as group:
        group.start_soon(forget_everything)
        for task in range(REMEMBER_TASKS):
            group.start_soon(remember, task)

    entries = [json.loads(line) for line in (vault / MEMORY).read_text("utf-8").splitlines()]
    retired = {entry["id"] for entry in entries if entry.get("forgotten")}
    live = [e for e in entries if "content" in e and e["id"] not in retired]
    live_contents = [entry["content"] for entry in live]
    lost = sorted(set(acknowledged) - set(live_contents))
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged memories lost"
    came_back = [entry["id"] for entry in live if entry["id"].startswith("0seed")]
    assert not came_back, f"{len(came_back)} forgotten memories came back"
    assert len(live_contents) == len(set(live_contents)) == len(acknowledged)
    dropped_lines = 2 * SEEDED + len(acknowledged) - len(entries)
    if mode_a == "rest":
        assert dropped_lines == 0, "compacted through the REST API alone, where it is unsafe"
    else:
        assert dropped_lines > 0, "the race never happened: the file was not compacted"
