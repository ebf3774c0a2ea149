"""`obsidian-mcp serve --http` as a real subprocess, driven by the SDK's HTTP client.

The full load (20 clients x 25 calls, 500 remembers) is `python -m bench.speed.http_load`; here
the same code runs at a size that keeps the suite quick, with exact counts.
"""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import MCPError
from mcp.types import TextContent

from bench.speed.http_load import (
    HttpServer,
    concurrent_remembers,
    http_client,
    http_server,
    memory_lines,
    mixed_load,
)
from obsidian_mcp.config import Settings
from tests.conftest import seed_index
from tests.test_cli import run_cli

TOKEN = "test-token-4f1c9a7e"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, shared_vault: Path, fixture_index: Path
) -> Iterator[HttpServer]:
    # The child shares this run's cache folder: given the vault's index, its first question
    # does not wait for the meaning index to be built (the index's own tests do that).
    seed_index(Settings(vault_path=shared_vault), fixture_index)
    with http_server(shared_vault, tmp_path_factory.mktemp("http"), token=TOKEN) as running:
        yield running


def _initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    """A raw initialize POST, to see the status code the SDK client hides."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx.post(url, json=body, headers={**base, **headers}, timeout=10)


@pytest.mark.anyio
async def test_tools_list_and_a_query_with_the_token(server: HttpServer) -> None:
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
    async with http_client(server.url, TOKEN) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool(
            "vault_semantic_query", {"query": "What did Mira promise at the lighthouse?"}
        )
    assert {"vault_semantic_query", "vault_remember", "vault_recall"} <= tools
    assert not result.is_error
    block = result.content[0]
    assert isinstance(block, TextContent) and "lighthouse" in block.text.lower()


def test_no_or_wrong_token_gets_401_and_a_foreign_origin_403(server: HttpServer) -> None:
    good = _initialize(server.url, {"Authorization": f"Bearer {TOKEN}"})
    assert good.status_code == 200, good.text
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
        refused = _initialize(server.url, headers)
        assert refused.status_code == 401, headers
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        assert "OBSIDIAN_MCP_HTTP_TOKEN" in refused.json()["error"]
    foreign = _initialize(
        server.url, {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    local = _initialize(
        server.url, {"Authorization": f"Bearer {TOKEN}", "Origin": "http://localhost:3000"}
    )
    assert local.status_code == 200


@pytest.mark.anyio
async def test_without_the_token_no_tool_runs(server: HttpServer, shared_vault: Path) -> None:
    with pytest.raises(ExceptionGroup) as refused:
        async with http_client(server.url, None) as client:
            await client.list_tools()
    assert refused.group_contains(MCPError)
    before = memory_lines(shared_vault)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "vault_remember", "arguments": {"content": "x", "tags": ["y"]}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    sneaked = httpx.post(server.url, json=call, headers=headers, timeout=10)
    assert sneaked.status_code == 401
    assert memory_lines(shared_vault) == before


@pytest.mark.anyio
async def test_concurrent_clients_share_one_process(server: HttpServer, shared_vault: Path) -> None:
    mixed = await mixed_load(server.url, TOKEN, clients=8, calls_each=8)
    assert mixed.errors == []  # the calls meant to fail (FAILING_CALLS) aside
    assert len(mixed.latencies_ms) == 64
    assert mixed.token_shown == 0  # no reply, error or not, shows the token
    before = len(memory_lines(shared_vault))
    remembered = await concurrent_remembers(server.url, TOKEN, clients=5, each=20)
    assert remembered.errors == []
    assert len(memory_lines(shared_vault)) - before == 100  # every remember landed, once
    assert TOKEN not in server.stderr()


def test_a_generated_token_is_printed_once_and_works(tmp_path: Path, shared_vault: Path) -> None:
    with http_server(shared_vault, tmp_path, token=None) as running:
        assert running.token and running.stderr().count(running.token) == 1
        assert _initialize(running.url, {}).status_code == 401
        ok = _initialize(running.url, {"Authorization": f"Bearer {running.token}"})
        assert ok.status_code == 200


def test_a_non_loopback_bind_needs_an_explicit_flag(shared_vault: Path, tmp_path: Path) -> None:
    refused = run_cli("serve", "--http", "--host", "0.0.0.0", "--vault", str(shared_vault))
    assert refused.returncode != 0
    assert "--allow-remote" in refused.stderr
    remote = ("--host", "0.0.0.0", "--allow-remote")
    with http_server(shared_vault, tmp_path, token=TOKEN, extra_args=remote) as running:
        assert "WARNING" in running.stderr() and "other machines can reach" in running.stderr()
        assert running.url.startswith("http://0.0.0.0:")
        assert TOKEN not in running.stderr()
