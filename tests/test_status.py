"""The status resource says which sources are in use, and what the memory file holds."""

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import TextResourceContents

from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.standin.process import StandinProcess


async def read_status(client: Client) -> dict[str, object]:
    result = await client.read_resource("obsidian://status")
    contents = result.contents[0]
    assert isinstance(contents, TextResourceContents)
    return json.loads(contents.text)


@pytest.mark.anyio
async def test_folder_status_counts_a_torn_memory_line(vault_copy: Path, tmp_path: Path) -> None:
    memory = vault_copy / "obsidian-mcp" / "memory.jsonl"
    memory.parent.mkdir()
    memory.write_text('{"id": "0000000000aaa", "ts": "2026-11-01T10:00:00Z", "content": "x"')
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        status = await read_status(client)
    assert status["live_source"] == f"vault folder {vault_copy.resolve()}"
    assert status["smart_env"] == str(vault_copy.resolve() / ".smart-env")
    memory_status = status["memory"]
    assert isinstance(memory_status, dict)
    assert memory_status["torn_tail"] is True


@pytest.mark.anyio
async def test_rest_status_names_the_plugin_and_the_folder(
    standin: StandinProcess, shared_vault: Path, tmp_path: Path
) -> None:
    settings = rest_settings(standin, tmp_path, vault_path=shared_vault)
    async with Client(build_server(settings)) as client:
        await client.call_tool("vault_tree", {"depth": 1})
        status = await read_status(client)
    assert status["live_source"] == (
        f"Local REST API at https://127.0.0.1:{standin.port} (plugin {standin.plugin_version})"
    )
    assert status["vault_folder"] == f"vault folder {shared_vault.resolve()}"


@pytest.mark.anyio
async def test_without_any_source_every_tool_says_what_to_set(tmp_path: Path) -> None:
    settings = folder_settings(tmp_path / "missing", tmp_path).model_copy(
        update={"vault_path": None}
    )
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("vault_tree", {})
        status = await read_status(client)
    assert result.is_error
    assert "OBSIDIAN_VAULT_PATH" in result.content[0].text  # type: ignore[union-attr]
    assert status["vault"] is None
