"""Compaction racing with other processes' remembers: no acknowledged memory is lost, no
forgotten one comes back, every forget outlives the folds, and folded files are removed,
through the folder, through the REST API with the folder known, and through the REST API
alone.

Process A (`COMPACTOR`: the store opened as the CLI and the server open it, in a process
of its own) starts on files that earlier processes of its installation left in a slot no
process holds now: 180 memories with a long context, so each fold reads and writes about
1 MB at first. Its first forget folds them into its own file; then it forgets them all,
folding again every `FOLD_EVERY` forgets (compaction is no tool, hence the script).
Meanwhile, as real `obsidian-mcp serve` processes:

- B0, of A's installation (the same config folder, so the same device): one short-lived
  server after another, each remembering a few facts and ending, so that A (and the next
  B0, at its first write) folds the files the ended ones leave while a new one takes a
  slot;
- B1, of another installation: one server remembering all along, in a file only its own
  device may fold.

At the end one more process of A's installation folds every idle file of the device.
"""

import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import Client, StdioServerParameters

from obsidian_mcp.config import Settings
from obsidian_mcp.memory.files import MemoryFiles, writer_of
from obsidian_mcp.memory.model import Memory, encode
from obsidian_mcp.opening import open_memory, open_vault
from obsidian_mcp.sources.rest import build_http_client
from tests.fixture_vault import REPO_ROOT
from tests.memory_files import MEMORY, live_ids, memory_entries, writer_paths
from tests.standin.process import StandinProcess

DEVICE = "racedev"
# The idle slot the seeded memories are in (a process of the device once held it).
SEEDED_SLOT = 3
# 180 forgets folding every 12 give 15 folds, as 450 folding every 30 did, at two fifths of
# the forgets' work; the longer pause keeps A at it as long (about 11 s of pauses), so that
# B0's servers come and go several times meanwhile.
SEEDED = 180
# A folds after this many forgets, and pauses between forgets so that B's remembers go on
# through many folds.
FOLD_EVERY, FORGET_PAUSE = 12, 0.06
# Remembers of each short-lived B0 server before it ends; pause between remembers.
B0_REMEMBERS, REMEMBER_PAUSE = 6, 0.02
# Seeded memories carry a long context, so each fold reads and writes ~1 MB at first: the
# window in which another process's append can fall is that of a real, well-used file.
SEED_CONTEXT = "background " * 500
LATENCY_MS = 15
# (how A, which forgets and folds, is configured; how B0 and B1, which remember, are).
MODES = [
    ("folder", "folder"),
    ("rest+folder", "rest+folder"),
    ("rest", "rest"),
    # B appends through Obsidian while A folds on disk.
    ("rest+folder", "rest"),
]

COMPACTOR = """
import json, sys
import anyio
from obsidian_mcp.config import Settings
from obsidian_mcp.opening import open_memory, open_vault
from obsidian_mcp.sources.rest import build_http_client

async def main(ids, every, pause):
    settings = Settings()
    reports = []
    async with build_http_client(settings) as http:
        vault, note = await open_vault(settings, http)
        assert vault is not None, note
        store = open_memory(settings, vault, None)
        try:
            for n, memory_id in enumerate(ids, 1):
                await store.forget(memory_id)
                if n == 1:
                    print(json.dumps({"ready": True}), flush=True)
                if n % every == 0 or n == len(ids):
                    report = await store.compact()
                    reports.append([report.files_folded, report.kept, report.dropped_lines])
                await anyio.sleep(pause)
            if not ids:
                report = await store.compact()
                reports.append([report.files_folded, report.kept, report.dropped_lines])
        finally:
            store.close()
    print(json.dumps({"reports": reports}), flush=True)

anyio.run(main, json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
"""


def environment(mode: str, vault: Path, standin: StandinProcess, config_dir: Path
                ) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    # These processes race over the files; the embedding model (for
    # memories or passages) would only slow them down.
    env.update(PYTHONPATH=str(REPO_ROOT), OBSIDIAN_CONFIG_DIR=str(config_dir),
               OBSIDIAN_MEMORY_MEANING="false", OBSIDIAN_INDEX_EMBEDDINGS="false")
    if mode != "rest":
        env["OBSIDIAN_VAULT_PATH"] = str(vault)
    if mode != "folder":
        env.update(
            OBSIDIAN_API_KEY=standin.api_key, OBSIDIAN_HOST="127.0.0.1",
            OBSIDIAN_PORT=str(standin.port), OBSIDIAN_CERT=standin.cert,
        )
    return env


def server(mode: str, vault: Path, standin: StandinProcess, config_dir: Path
           ) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "obsidian_mcp", "serve"], cwd=str(REPO_ROOT),
        env=environment(mode, vault, standin, config_dir),
    )


async def run_compactor(
    env: dict[str, str], ids: list[str], log: Path, ready: anyio.Event | None = None
) -> list[list[int]]:
    """A's process: forget `ids` (folding as it goes), or fold once if there are none;
    (files folded, lines kept, lines dropped) of each fold. Its stderr goes to `log`."""
    command = [sys.executable, "-c", COMPACTOR, json.dumps(ids), str(FOLD_EVERY),
               str(FORGET_PAUSE)]
    with log.open("ab") as errors:
        process = await anyio.open_process(command, env=env, cwd=REPO_ROOT, stderr=errors)
    async with process:
        assert process.stdout is not None
        reports: list[list[int]] | None = None
        buffered = ""
        async for chunk in TextReceiveStream(process.stdout):
            buffered += chunk
            *lines, buffered = buffered.split("\n")
            for line in lines:
                message = json.loads(line)
                if message.get("ready") and ready is not None:
                    ready.set()
                reports = message.get("reports", reports)
        code = await process.wait()
    problem = log.read_text("utf-8", errors="replace")[-3000:]
    assert code == 0 and reports is not None, f"the compactor failed ({code}): {problem}"
    return reports


def seeded_ids() -> list[str]:
    return [f"0seed{n:08d}" for n in range(SEEDED)]


def seeded_file(vault: Path) -> Path:
    return vault / MemoryFiles(MEMORY).folder / f"{DEVICE}-{SEEDED_SLOT}-0.jsonl"


def seed(vault: Path) -> None:
    at = datetime.now(UTC) - timedelta(days=3)
    lines = [
        encode(Memory(id=memory_id, ts=at, content=f"seeded fact {n}", tags=("seed",),
                      context=SEED_CONTEXT))
        for n, memory_id in enumerate(seeded_ids())
    ]
    seeded_file(vault).parent.mkdir(parents=True, exist_ok=True)
    seeded_file(vault).write_text("".join(lines), "utf-8")


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandinProcess]:
    vault = tmp_path / "vault"
    vault.mkdir()
    seed(vault)
    with StandinProcess(vault, plugin_version="5.1.0") as process:
        yield process


@pytest.mark.anyio
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("mode_a", "mode_b"), MODES)
async def test_compaction_never_loses_another_process_s_remembers(
    mode_a: str, mode_b: str, standin: StandinProcess, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    config_a, config_b1 = tmp_path / "cfg-a", tmp_path / "cfg-b1"
    config_a.mkdir()
    (config_a / "device-id").write_text(DEVICE + "\n", "utf-8")
    acknowledged: list[str] = []
    reports: list[list[int]] = []
    ready, forgetting_done = anyio.Event(), anyio.Event()
    b0_servers = 0

    async def forget_everything() -> None:
        env = environment(mode_a, vault, standin, config_a)
        reports.extend(await run_compactor(env, seeded_ids(), tmp_path / "a.log", ready))
        forgetting_done.set()

    async def remember(name: str, config_dir: Path, most: int | None) -> None:
        """One server of `config_dir` remembering until A is done, or `most` times."""
        async with Client(server(mode_b, vault, standin, config_dir)) as client:
            n = 0
            while not forgetting_done.is_set() and (most is None or n < most):
                n += 1
                content = f"process {name} fact {n}"
                result = await client.call_tool(
                    "vault_remember", {"content": content, "tags": ["race"], "context": ""}
                )
                assert not result.is_error, result.content
                acknowledged.append(content)
                await anyio.sleep(REMEMBER_PAUSE)

    async def come_and_go() -> None:
        nonlocal b0_servers
        while not forgetting_done.is_set():
            b0_servers += 1
            await remember(f"b0-{b0_servers}", config_a, B0_REMEMBERS)

    # Every request waits a little before Obsidian handles it, as on a busy machine: the
    # time between a fold's read and its removal of what it read is then long enough to hit.
    standin.set_faults(latency_ms=LATENCY_MS)
    async with anyio.create_task_group() as group:
        group.start_soon(forget_everything)
        await ready.wait()  # A has folded the seeded file into its own
        group.start_soon(come_and_go)
        group.start_soon(remember, "b1", config_b1, None)

    assert not seeded_file(vault).exists(), "the seeded idle file was never folded"
    dropped = sum(report[2] for report in reports)
    assert len(reports) >= SEEDED // FOLD_EVERY and dropped > 0, reports
    assert b0_servers > 1, "B0 never came and went"

    def check(when: str) -> None:
        entries = memory_entries(vault)
        live = live_ids(vault)
        live_contents = [e["content"] for e in entries
                         if e["id"] in live and not e.get("forgotten")]
        lost = sorted(set(acknowledged) - set(live_contents))
        assert not lost, f"{when}: {len(lost)} of {len(acknowledged)} acknowledged lost: {lost}"
        came_back = sorted(memory_id for memory_id in live if memory_id.startswith("0seed"))
        assert not came_back, f"{when}: {len(came_back)} forgotten memories came back"
        assert sorted(live_contents) == sorted(set(acknowledged)), when  # each line once
        assert len(acknowledged) == len(set(acknowledged))
        tombstones = {e["id"] for e in entries if e.get("forgotten")}
        missing = sorted(set(seeded_ids()) - tombstones)
        assert not missing, f"{when}: {len(missing)} acknowledged forgets lost: {missing[:5]}"
        assert tombstones == set(seeded_ids())
        forgotten_lines = [e["id"] for e in entries
                           if e["id"] in tombstones and not e.get("forgotten")]
        assert forgotten_lines == [], f"{when}: forgotten memories' lines not dropped"

    check("after the race")
    # Every process has ended: one more of A's installation folds every idle file of it.
    await run_compactor(environment(mode_a, vault, standin, config_a), [], tmp_path / "a.log")
    check("after the last fold")
    writers = [writer_of(path.name) for path in writer_paths(vault)]
    assert all(writer is not None and writer.exact for writer in writers), writers
    devices = [writer.device for writer in writers if writer is not None]
    assert devices.count(DEVICE) == 1 and len(devices) == 2, writers


@pytest.mark.anyio
async def test_processes_of_one_installation_never_share_a_file_whatever_their_source(
    standin: StandinProcess, tmp_path: Path
) -> None:
    """One client configured with the vault folder (and the API key), another with the API
    key alone, on one machine (one config folder): two processes of one device, each of
    which must have a slot, and so a file, of its own. Sharing one, the REST process's
    appends (a read-modify-write in the plugin) and the other's folds lose lines."""
    vault = tmp_path / "vault"
    base: dict[str, object] = {
        "api_key": standin.api_key, "host": "127.0.0.1", "port": standin.port,
        "cert": Path(standin.cert), "config_dir": tmp_path / "cfg", "memory_meaning": False,
    }
    both = Settings.model_validate({**base, "vault_path": vault})
    rest_only = Settings.model_validate(base)
    async with build_http_client(both) as http_a, build_http_client(rest_only) as http_b:
        vault_a, _ = await open_vault(both, http_a)
        vault_b, _ = await open_vault(rest_only, http_b)
        assert vault_a is not None and vault_b is not None
        a, b = open_memory(both, vault_a, None), open_memory(rest_only, vault_b, None)
        try:
            await a.remember("written with the vault folder known", ["x"])
            await b.remember("written through the REST API alone", ["x"])
            own_a, own_b = (await a.status()).own_file, (await b.status()).own_file
        finally:
            a.close()
            b.close()
    writer_a, writer_b = writer_of(str(own_a)), writer_of(str(own_b))
    assert writer_a is not None and writer_b is not None
    assert writer_a.device == writer_b.device  # one installation
    assert own_a != own_b, f"both processes write {own_a}"
