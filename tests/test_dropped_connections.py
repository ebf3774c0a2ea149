"""A connection dropped before Obsidian answers (the stand-in's fault switch) is retried
for an idempotent request within the retry budget, and never for an append (issue 28)."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from obsidian_mcp.errors import ObsidianConnectionLost
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.rest import RestSource, build_http_client
from tests.conftest import rest_settings
from tests.fixture_vault import copy_fixture_vault
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

pytestmark = pytest.mark.anyio

NOTE = "Characters/Companion/Mira Vessant.md"


async def test_thirty_reads_survive_every_third_connection_dropped(tmp_path: Path) -> None:
    vault = copy_fixture_vault(tmp_path / "vault")
    # Dropping from the start: the server's own index read (8 requests at a time) runs
    # beside the agent's reads, as it does in a session's first minutes.
    with StandinProcess(vault, drop_every=3) as standin:
        settings = rest_settings(standin, tmp_path / "config", index_embeddings=False)
        async with Client(build_server(settings)) as client:
            results = [await client.call_tool("vault_read_note", {"path": NOTE}) for _ in range(30)]
        dropped = standin.stats()["injected"]["drop"]
    failures = [text_of(result) for result in results if result.is_error]
    assert failures == []
    assert dropped >= 10  # the fault really was there
    assert all("Mira Vessant" in text_of(result) for result in results)


async def test_concurrent_reads_survive_every_second_connection_dropped(tmp_path: Path) -> None:
    """Harsher: half of all requests dropped, 30 reads at once. Counting each drop against
    the three attempts (before issue 28), 6 of the 30 reads failed."""
    vault = copy_fixture_vault(tmp_path / "vault")
    with StandinProcess(vault, drop_every=2) as standin:
        settings = rest_settings(standin, tmp_path / "config")
        failures: list[Exception] = []
        async with build_http_client(settings) as http:
            source = RestSource(http, settings)

            async def read() -> None:
                try:
                    await source.read_note(NOTE)
                except Exception as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as group:
                for _ in range(30):
                    group.start_soon(read)
    assert failures == []


async def test_a_dropped_append_is_not_sent_again(tmp_path: Path) -> None:
    vault = copy_fixture_vault(tmp_path / "vault")
    with StandinProcess(vault, drop_every=1) as standin:
        settings = rest_settings(standin, tmp_path / "config")
        async with build_http_client(settings) as http:
            with pytest.raises(ObsidianConnectionLost, match="broke before it answered"):
                await RestSource(http, settings).append("Inbox/Ideas.md", "\n- once\n")
        posts = standin.stats()["by_route"]
    assert sum(count for route, count in posts.items() if route.startswith("POST")) == 1
