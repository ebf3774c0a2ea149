"""Scratch entries from several servers at once: the plugin's append is a read-modify-write
(the stand-in performs it as upstream does), so with the vault folder known entries are
appended on disk and none is lost."""

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from obsidian_mcp.opening import open_vault
from obsidian_mcp.reading import append_scratch
from obsidian_mcp.sources.rest import build_http_client
from tests.conftest import rest_settings
from tests.standin.process import StandinProcess

WRITERS, ENTRIES = 3, 15
SCRATCH = "obsidian-mcp/scratch.md"


@pytest.mark.anyio
async def test_scratch_entries_of_servers_writing_at_once_are_all_kept(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    with StandinProcess(vault_dir, plugin_version="5.1.0") as lra:
        lra.set_faults(write_yield_ms=5)  # wide enough that overlapping POSTs lose entries

        async def writer(number: int) -> None:
            settings = rest_settings(lra, tmp_path / f"cfg{number}", vault_path=vault_dir)
            async with build_http_client(settings) as http:
                vault, _ = await open_vault(settings, http)
                assert vault is not None
                for entry in range(ENTRIES):
                    await append_scratch(vault, SCRATCH, f"writer {number} entry {entry}",
                                         datetime.now(UTC))

        async with anyio.create_task_group() as group:
            for number in range(WRITERS):
                group.start_soon(writer, number)
    text = (vault_dir / SCRATCH).read_text("utf-8")
    missing = [(n, e) for n in range(WRITERS) for e in range(ENTRIES)
               if f"writer {n} entry {e}\n" not in text]
    assert missing == []
