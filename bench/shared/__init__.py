"""What the subjects share, and nothing that measures: servers and the stand-in started as
processes, sessions that count tokens, question sets and the hit test (``harness``),
generated vaults (``generate_vault``), the peer ``mcp-obsidian`` (``peer``), and the
report's stamped sections (``sections``). It imports no subject."""
