"""The status resource: which sources are in use, and why."""

import logging
from dataclasses import asdict

from mcp.server import MCPServer

from obsidian_mcp.errors import VaultError
from obsidian_mcp.server.app import AppState, ServedVault, StateRef, VaultServices
from obsidian_mcp.server.common import to_json

logger = logging.getLogger(__name__)


async def _memory_status(services: VaultServices) -> dict[str, object]:
    # Status is what a user reads when something is wrong, so a failure to read the
    # memory file (Obsidian down, key rejected, a folder where the file should be) is
    # reported in it, never raised.
    try:
        return asdict(await services.memory.status())
    except VaultError as exc:
        return {"problem": str(exc)}
    except Exception as exc:
        logger.exception("memory status failed")
        return {
            "problem": f"the memory file could not be read ({type(exc).__name__}); see "
            "the server's log."
        }


async def _vault_status(served: ServedVault) -> dict[str, object]:
    services = served.services
    if services is None:
        return {"vault": None, "problem": served.unavailable_reason}
    vault = services.vault
    status = vault.status()
    memory = await _memory_status(services)
    return {
        "live_source": status.live,
        "vault_folder": status.disk,
        "smart_env": str(vault.smart_env_dir) if vault.smart_env_dir else None,
        "notes": status.notes,
        "memory": memory,
        "index": services.retriever.index_status(),
        "scratch_path": served.settings.scratch_path,
    }


async def status_data(state: AppState) -> dict[str, object]:
    """The vault's status; with several, each vault's by name and which is the default."""
    if not state.several:
        return await _vault_status(state.served())
    return {
        "default_vault": state.default,
        "vaults": {served.name: await _vault_status(served) for served in state.vaults},
    }


def register_status_resource(mcp: MCPServer[AppState], state_ref: StateRef) -> None:
    @mcp.resource(
        "obsidian://status",
        name="status",
        description="Which vault sources this server uses (REST API, vault folder, semantic "
        "source), the passage index (path, notes, passages, size, last update; the embedding "
        "model's id, dimensions, pooling and prompts once loaded) and "
        "any problem with them.",
        mime_type="application/json",
    )
    async def status() -> str:
        return to_json(await status_data(state_ref.get()))
