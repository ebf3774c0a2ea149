"""Two server processes of one installation on one vault folder, remembering at once:
nothing lost, nothing interleaved, each process in a file of its own."""

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from obsidian_mcp.memory.files import writer_of
from tests.fixture_vault import REPO_ROOT
from tests.memory_files import memory_paths, writer_paths

# Issue 4 showed 2 x 8 x 500 (8,000 entries); 200 a task keep every task writing all along
# beside the other process's at two fifths of the suite's time.
PROCESSES, TASKS, PER_TASK = 2, 8, 200


def server_process(vault: Path, config_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    # These processes race over the file; the embedding model (for
    # memories or passages) would only slow them down.
    env.update(PYTHONPATH=str(REPO_ROOT), OBSIDIAN_CONFIG_DIR=str(config_dir),
               OBSIDIAN_MEMORY_MEANING="false", OBSIDIAN_INDEX_EMBEDDINGS="false")
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "obsidian_mcp", "serve", "--vault", str(vault)],
        cwd=str(REPO_ROOT),
        env=env,
    )


async def remember_from_one_process(vault: Path, config_dir: Path, process: int) -> None:
    async with Client(server_process(vault, config_dir)) as client:

        async def task(number: int) -> None:
            for n in range(PER_TASK):
                result = await client.call_tool(
                    "vault_remember",
                    {"content": f"process {process} task {number} fact {n}",
                     "tags": [f"p{process}", f"t{number}"], "context": ""},
                )
                assert not result.is_error, result.content

        async with anyio.create_task_group() as group:
            for number in range(TASKS):
                group.start_soon(task, number)


@pytest.mark.anyio
async def test_two_processes_eight_tasks_each_lose_nothing(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    async with anyio.create_task_group() as group:
        for process in range(PROCESSES):
            group.start_soon(remember_from_one_process, vault, tmp_path / "cfg", process)

    files = writer_paths(vault)
    assert memory_paths(vault) == files  # nothing written to the legacy file
    writers = [writer_of(path.name) for path in files]
    # One device (one config folder), one slot and one file per process.
    assert len({(w.device, w.slot) for w in writers if w is not None}) == PROCESSES
    assert len({w.device for w in writers if w is not None}) == 1
    entries: list[dict[str, object]] = []
    per_file: list[set[str]] = []
    for path in files:
        raw = path.read_bytes()
        assert raw.endswith(b"\n")
        lines = [json.loads(line) for line in raw.split(b"\n")[:-1]]  # every line valid JSON
        entries += lines
        # Each file is one process's: every line of it names that process.
        per_file.append({str(line["content"]).split(" task ")[0] for line in lines})
    assert sorted(map(sorted, per_file)) == [[f"process {p}"] for p in range(PROCESSES)]
    expected = {
        f"process {p} task {t} fact {n}"
        for p in range(PROCESSES)
        for t in range(TASKS)
        for n in range(PER_TASK)
    }
    assert len(entries) == PROCESSES * TASKS * PER_TASK
    assert {entry["content"] for entry in entries} == expected
    assert len({entry["id"] for entry in entries}) == PROCESSES * TASKS * PER_TASK
