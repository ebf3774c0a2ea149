# pyright: strict
"""Where a vault's passage index lives, and which vault it belongs to.

A vault is known by its folder (the resolved path) when the server has one. Through the
REST API alone there is no vault identifier to ask for, so it is known by the address of
the Obsidian that serves it (host:port): one Obsidian serves one vault at a time, and if
the user opens another vault there, the stat comparison finds every note changed and the
index is rebuilt for the new one; the cost is a rebuild, never a wrong answer.
"""

from pathlib import Path
from urllib.parse import urlsplit

from obsidian_mcp.config import Settings
from obsidian_mcp.index.store import index_file


def vault_identity(settings: Settings) -> tuple[str, str]:
    """(identity, a readable name) of the configured vault."""
    if settings.vault_path is not None:
        folder = settings.vault_path.expanduser().resolve()
        return f"folder:{folder}", folder.name
    return f"rest:{settings.rest_address}", f"obsidian-{urlsplit(settings.base_url).port}"


def index_path(settings: Settings) -> Path:
    identity, name = vault_identity(settings)
    return index_file(settings.index_dir or settings.cache_dir / "index", identity, name)
