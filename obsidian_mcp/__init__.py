"""obsidian-mcp: passages, not files, from an Obsidian vault, for AI agents."""

__version__ = "0.1.0"
