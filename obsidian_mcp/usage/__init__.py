# pyright: strict
"""The local usage log and what `obsidian-mcp stats` reads from it.

One JSON line per tool call, in the cache folder (never the vault, never sent anywhere),
when `OBSIDIAN_USAGE_LOG` is `on` or `full`:

- `facts`: what a tool's domain result says it returned (sources, notes, sections), filled
  by the tool while the call is being logged;
- `record`: a call as one privacy-minded JSON object (`on` hashes questions and paths);
- `log`: the bounded, rotated file, whose failures never fail a tool call;
- `stats` and `report`: the log read back into figures, as a table, JSON or HTML.

Nothing here knows MCP: the server's single dispatch point (`server.boundary`) hands a
plain `ToolCall` to `UsageRecorder`.
"""
