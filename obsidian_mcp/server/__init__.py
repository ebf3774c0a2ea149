"""The MCP surface: a thin layer that parses arguments, calls domain code and formats."""

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import httpx
from mcp.server import MCPServer

from obsidian_mcp import __version__
from obsidian_mcp.config import Settings
from obsidian_mcp.server.app import AppState, StateRef, app_lifespan
from obsidian_mcp.server.boundary import VaultServer
from obsidian_mcp.server.memory_tools import MEMORY_GUIDE, register_memory_tools
from obsidian_mcp.server.read_tools import register_read_tools
from obsidian_mcp.server.search_tools import register_search_tools
from obsidian_mcp.server.status import register_status_resource

INSTRUCTIONS = f"""\
Tools for the user's Obsidian vault (markdown notes). Cheapest path to an answer first:
1. vault_recall: what you saved in earlier sessions. Check it before searching the vault.
2. vault_semantic_query: THE default for any question; returns the few passages that answer
   it, grouped by file, within a token budget.
3. vault_smart_search: exact words or phrases (names, quotes, code terms), every match as a
   snippet. vault_quick_context: a short overview of a topic before deeper work.
4. vault_find_related: a note's links, backlinks and similar notes.
5. vault_peek_file (outline and section sizes), then vault_read_note with heading= to read
   just the section you need. Read whole long notes only when you must.
6. vault_tree (structure) and vault_search_map (match counts per folder) are for orientation
   in an unfamiliar vault, not for answers.
Writes: vault_remember / vault_forget (your memory file) and vault_scratch_append (your
scratch note) are the only tools that write; they never touch the user's other notes.
Results say what was left out and the exact call that continues; follow those hints.
{MEMORY_GUIDE}"""


def build_server(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    configuration_error: str | None = None,
) -> MCPServer[AppState]:
    """The server for these settings; `transport` replaces the network for the REST client.
    With a `configuration_error` it still serves, and every call answers with that error."""

    state_ref = StateRef()

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppState]) -> AsyncGenerator[AppState, None]:
        async with app_lifespan(settings, transport, configuration_error) as state:
            state_ref.set(state)
            try:
                yield state
            finally:
                state_ref.set(None)

    mcp: MCPServer[AppState] = VaultServer(
        "obsidian-mcp",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
    )
    register_read_tools(mcp)
    register_search_tools(mcp)
    register_memory_tools(mcp)
    register_status_resource(mcp, state_ref)
    return mcp
