"""Links out of the vault and files that are not notes, through both sources.

The vault gets a linked file and a linked folder pointing at a canary outside it that
holds a secret string, a pipe, a socket and a dangling link, all named like notes. No tool
may ever show the secret (through the folder, and through the stand-in, which follows links
as Obsidian desktop does, with the folder configured beside it); the pipe and the socket
give a clear error when read by name and are skipped by everything else, never a hang.
"""

import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.fixture_vault import copy_fixture_vault
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

SECRET = "canarysecretzq81"
LINKED_FILE = "Lore/Leak.md"
LINKED_FOLDER = "Linked"
PIPE = "Inbox/Pipe.md"
SOCKET = "Inbox/Socket.md"


def odd_vault(root: Path) -> Path:
    """A copy of the fixture vault with the odd entries, and the canary beside it."""
    vault = root / "vault"
    copy_fixture_vault(vault)
    outside = root / "outside"
    outside.mkdir()
    canary = outside / "canary.md"
    canary.write_text(f"# Canary\n\nThe bell keeper's {SECRET} is here.\n", "utf-8")
    (vault / LINKED_FILE).symlink_to(canary)
    (vault / LINKED_FOLDER).symlink_to(outside, target_is_directory=True)
    (vault / "Inbox" / "Dangling.md").symlink_to(root / "nowhere.md")
    os.mkfifo(vault / PIPE)
    return vault


@pytest.fixture
def bound_socket(tmp_path: Path) -> Iterator[Path]:
    vault = odd_vault(tmp_path)
    # A socket path must stay under ~108 bytes; pytest's tmp paths can be longer.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = Path.cwd()
    os.chdir(vault / "Inbox")
    try:
        sock.bind(Path(SOCKET).name)
    finally:
        os.chdir(cwd)
    try:
        yield vault
    finally:
        sock.close()


@pytest.fixture(params=["folder", "rest+folder"])
async def client(
    request: pytest.FixtureRequest, bound_socket: Path, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Client]:
    """The server on the odd vault; through the stand-in, no answer and no log line may
    hold its API key."""
    caplog.set_level(logging.DEBUG)
    vault = bound_socket
    config = vault.parent / "config"
    if request.param == "folder":
        async with Client(build_server(folder_settings(vault, config))) as connected:
            yield connected
        return
    async with StandinProcess(vault) as standin:
        settings = rest_settings(standin, config, vault_path=vault)
        async with Client(build_server(settings)) as connected:
            original = connected.call_tool

            async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
                result = await original(name, arguments)
                assert standin.api_key not in text_of(result)
                return result

            connected.call_tool = call_tool  # type: ignore[method-assign]
            yield connected
        assert standin.api_key not in caplog.text


# Every tool, aimed at the odd entries and at the words of the secret note.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("vault_read_note", {"path": LINKED_FILE}),
    ("vault_read_note", {"path": f"{LINKED_FOLDER}/canary.md"}),
    ("vault_read_note", {"path": f"{LINKED_FOLDER}/canary"}),
    ("vault_peek_file", {"path": LINKED_FILE}),
    ("vault_peek_file", {"path": f"{LINKED_FOLDER}/canary.md"}),
    ("vault_find_related", {"path": LINKED_FILE}),
    ("vault_smart_search", {"query": SECRET}),
    ("vault_smart_search", {"query": "bell keeper"}),
    ("vault_search_map", {"query": "canary bell keeper"}),
    ("vault_semantic_query", {"query": "what does the bell keeper hide in the canary"}),
    ("vault_quick_context", {"topic": "canary bell keeper"}),
    ("vault_tree", {}),
    ("vault_tree", {"folder": LINKED_FOLDER}),
]


@pytest.mark.anyio
async def test_no_tool_shows_a_secret_behind_a_link(client: Client) -> None:
    for tool, arguments in CALLS:
        answer = text_of(await client.call_tool(tool, arguments))
        # A search repeats its query in quotes; the secret must not appear beyond that.
        assert SECRET not in answer.replace(f'"{SECRET}"', ""), (tool, arguments)


@pytest.mark.anyio
async def test_find_related_on_a_refused_link_says_why_and_offers_no_same_path(
    client: Client,
) -> None:
    result = await client.call_tool("vault_find_related", {"path": LINKED_FILE})
    assert result.is_error
    assert "outside the vault" in text_of(result)
    assert f"Closest existing paths: {LINKED_FILE}" not in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize("path", [PIPE, SOCKET])
async def test_a_pipe_or_socket_gives_a_clear_error_and_searches_skip_it(
    client: Client, path: str
) -> None:
    read = await client.call_tool("vault_read_note", {"path": path})
    assert read.is_error
    assert "not a regular file" in text_of(read)
    searched = await client.call_tool("vault_smart_search", {"query": "ferry"})
    assert not searched.is_error
    assert path not in text_of(searched)
