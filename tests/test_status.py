"""The status resource says which sources are in use, and what the memory files hold."""

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


async def read_overview(client: Client) -> str:
    result = await client.read_resource("obsidian://memory/recent")
    contents = result.contents[0]
    assert isinstance(contents, TextResourceContents)
    return contents.text


@pytest.mark.anyio
async def test_folder_status_counts_a_torn_memory_line(vault_copy: Path, tmp_path: Path) -> None:
    memory = vault_copy / "obsidian-mcp" / "memory.jsonl"
    memory.parent.mkdir()
    memory.write_text('{"id": "0000000000aaa", "ts": "2026-11-01T10:00:00Z", "content": "x"')
    # Another device's file, with a line that is not a memory.
    other = vault_copy / "obsidian-mcp" / "memory" / "elsewhere-0-0.jsonl"
    other.parent.mkdir()
    other.write_text('not json\n{"id": "0000000000bbb", "ts": "2026-11-01T10:00:00Z", '
                     '"content": "from elsewhere", "tags": ["t"], "context": ""}\n')
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        status = await read_status(client)
        overview = await read_overview(client)
        remembered = await client.call_tool("vault_remember", {"content": "y", "tags": ["t"]})
        assert not remembered.is_error
        after = await read_status(client)
    assert status["live_source"] == f"vault folder {vault_copy.resolve()}"
    assert status["smart_env"] == str(vault_copy.resolve() / ".smart-env")
    memory_status = status["memory"]
    assert isinstance(memory_status, dict)
    assert memory_status["torn_tail"] is True
    assert (memory_status["files"], memory_status["invalid_lines"]) == (2, 1)
    assert (memory_status["memories"], memory_status["own_file"]) == (1, None)
    assert overview.splitlines()[1] == (
        "Files: 2 files read; 1 invalid line skipped; a torn last line (an interrupted "
        "write) skipped."
    )
    memory_after = after["memory"]
    assert isinstance(memory_after, dict)
    [own] = [path for path in other.parent.iterdir() if path != other]
    assert memory_after["own_file"] == f"obsidian-mcp/memory/{own.name}"
    assert (memory_after["files"], memory_after["memories"], memory_after["dead_lines"]) == (
        3, 2, 0)


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


@pytest.mark.anyio
async def test_status_counts_what_memory_list_shows_and_names_the_folder(
    vault_copy: Path, tmp_path: Path
) -> None:
    """status said 13 memories where `memory list` said 12 (it counted a superseded one),
    and named the legacy file as where memories live."""
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        old = await client.call_tool("vault_remember", {"content": "Mira is 29", "tags": ["mira"]})
        old_id = str(getattr(old.content[0], "text", "")).split()[2].rstrip(".")
        await client.call_tool(
            "vault_remember",
            {"content": "Mira is 30", "tags": ["mira"], "supersedes": [old_id]},
        )
        await client.call_tool("vault_remember", {"content": "Rook rows", "tags": ["rook"]})
        memory = (await read_status(client))["memory"]
        overview = await read_overview(client)
    assert isinstance(memory, dict)
    assert (memory["memories"], memory["superseded"]) == (2, 1)
    assert memory["folder"] == "obsidian-mcp/memory/"
    assert memory["legacy_file"] == "obsidian-mcp/memory.jsonl"
    assert overview.startswith("# Memory: 2 memories (and 1 superseded), 2 tags (obsidian-mcp/")
