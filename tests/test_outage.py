"""Obsidian stopping and coming back: the stand-in keeps its certificate across a restart on
the same port, as the plugin does, and with the vault folder configured an outage is
remembered, so reads do not each wait through a full timeout before falling back."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.vault import Vault
from tests.conftest import rest_settings
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

NOTE = "Characters/Companion/Mira Vessant.md"


@pytest.mark.anyio
async def test_client_keeps_working_across_a_standin_restart_on_the_same_port(
    vault_copy: Path, tmp_path: Path
) -> None:
    certs = tmp_path / "certs"
    first = StandinProcess(vault_copy, cert_dir=certs)
    async with first:
        settings = rest_settings(first, tmp_path / "config")
        port, key = first.port, first.api_key
        async with Client(build_server(settings)) as client:
            before = await client.call_tool("vault_read_note", {"path": NOTE})
            await first.__aexit__(None, None, None)
            down = await client.call_tool("vault_read_note", {"path": NOTE})
            async with StandinProcess(vault_copy, cert_dir=certs, port=port, api_key=key):
                after = await client.call_tool("vault_read_note", {"path": NOTE})
    assert not before.is_error
    assert down.is_error
    assert "did not answer" in text_of(down)
    assert not after.is_error, text_of(after)
    assert "Mira" in text_of(after)


def requests_for(standin: StandinProcess, path: str) -> int:
    return sum(count for key, count in standin.stats()["by_path"].items() if key.endswith(path))


@pytest.mark.anyio
async def test_an_outage_is_remembered_and_reprobed_cheaply(
    vault_copy: Path, tmp_path: Path
) -> None:
    async with StandinProcess(vault_copy) as standin:
        settings: Settings = rest_settings(standin, tmp_path, request_timeout=1.0)
        async with build_http_client(settings) as http:
            vault = Vault(RestSource(http, settings), FolderSource(vault_copy), outage_seconds=2)
            standin.set_faults(hang_pattern="Mira")
            first = await vault.read_note(NOTE)  # waits through one timeout, then the folder
            standin.reset_stats()
            remembered = [await vault.read_note(NOTE) for _ in range(3)]
            asked_during_outage = requests_for(standin, "Mira%20Vessant.md")
            standin.clear_faults()
            await anyio.sleep(2.1)
            standin.reset_stats()
            back = await vault.read_note(NOTE)
            asked_after = requests_for(standin, "Mira%20Vessant.md")
    assert "Mira" in first.content
    assert all("Mira" in note.content for note in remembered)
    assert asked_during_outage == 0
    assert asked_after == 1
    assert back.backlinks is not None  # from Obsidian again: the folder has no backlinks
