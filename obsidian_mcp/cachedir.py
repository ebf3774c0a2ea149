"""Where the server keeps what it can rebuild: the user's cache directory, never the vault
(vaults are synced, and a cache written there would travel to every device)."""

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/obsidian-mcp`, else `~/.cache/obsidian-mcp`; not created here."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "obsidian-mcp"
