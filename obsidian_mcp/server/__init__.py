"""The MCP surface: a thin layer that parses arguments, calls domain code and formats."""

from collections.abc import AsyncGenerator, Collection
from contextlib import asynccontextmanager

import httpx
from mcp.server import MCPServer

from obsidian_mcp import __version__
from obsidian_mcp.config import Settings, ToolFamily
from obsidian_mcp.server.app import AppState, StateRef, app_lifespan
from obsidian_mcp.server.boundary import VaultServer
from obsidian_mcp.server.edit_tools import register_edit_tools
from obsidian_mcp.server.memory_tools import register_memory_tools
from obsidian_mcp.server.read_tools import register_read_tools
from obsidian_mcp.server.search_tools import register_search_tools
from obsidian_mcp.server.status import register_status_resource
from obsidian_mcp.usage.log import usage_recorder
from obsidian_mcp.vault_set import VaultConfigError, VaultSet, configured_vaults

# The tool-selection guide, the one place it is written, by family in the order an agent
# should reach for them; each family's part is sent only when OBSIDIAN_TOOLS lists it.
_GUIDES: dict[ToolFamily, str] = {
    "memory": (
        "Start with vault_recall (earlier sessions' memories); save what will matter with "
        "vault_remember."
    ),
    "search": (
        "Questions: vault_semantic_query first; exact names or quotes: vault_smart_search; "
        "a topic overview: vault_quick_context; a note's neighbours: vault_find_related."
    ),
    "read": "To read: vault_peek_file (outline), then vault_read_note by heading.",
    "edit": "To change a note: peek or read it, then vault_edit_note with its version.",
}
_INTRO = "The user's Obsidian vault (markdown notes)."
_FOLLOW_HINTS = (
    "Replies are markdown (format='json' for JSON) within max_tokens (default 1,000); "
    "follow the call a reply names to get what it left out. Flags are off unless set."
)


def _several_intro(vaults: VaultSet) -> str:
    """The one description of the `vault` argument every tool takes, with the names."""
    default = vaults.default
    names = ", ".join(name + (" (default)" if name == default else "") for name in vaults.names)
    return (
        f"Obsidian vaults: {names}. vault=NAME picks one; unset, searches cover all. Paths "
        "read back as shown (NAME:path)."
    )


def server_instructions(families: Collection[ToolFamily], vaults: VaultSet | None = None) -> str:
    """The guide to the tools of these families, and to no other."""
    guides = [guide for family, guide in _GUIDES.items() if family in families]
    intro = _several_intro(vaults) if vaults is not None and vaults.several else _INTRO
    return "\n".join([intro, *guides, _FOLLOW_HINTS])


def build_server(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    configuration_error: str | None = None,
    vaults: VaultSet | None = None,
) -> VaultServer:
    """The server for these settings and `vaults` (default: those the settings name, see
    `vault_set`); `transport` replaces the network for the REST client. With a
    `configuration_error` it still serves, and every call answers with that error."""
    if vaults is None and configuration_error is None:
        try:
            vaults = configured_vaults(settings)
        except VaultConfigError as exc:
            configuration_error = str(exc)

    state_ref = StateRef()

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppState]) -> AsyncGenerator[AppState, None]:
        async with app_lifespan(settings, transport, configuration_error, vaults) as state:
            state_ref.set(state)
            try:
                yield state
            finally:
                state_ref.set(None)

    mcp = VaultServer(
        "obsidian-mcp",
        version=__version__,
        instructions=server_instructions(settings.families, vaults),
        lifespan=lifespan,
        several_vaults=vaults is not None and vaults.several,
        # The file of several vaults may switch the usage log on (`vault_set.SERVER_KEYS`).
        usage=usage_recorder(vaults.settings if vaults is not None else settings),
    )
    register_read_tools(mcp)
    register_search_tools(mcp)
    register_memory_tools(mcp)
    register_edit_tools(mcp)
    mcp.keep_tools(settings.listed_tools)
    register_status_resource(mcp, state_ref)
    return mcp
