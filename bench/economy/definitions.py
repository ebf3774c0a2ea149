"""What a client pays for the tool definitions, with every request it makes.

The figure is the ``tools/list`` result as the server sends it, serialised with
``json.dumps`` (the way issue 19 counted it), plus the server's instructions; tokens are
characters / 4, as everywhere in the benchmark. Measured through an MCP client, so it
works the same for this server and for the peer.

    python -m bench.economy.definitions   # this server's figures now, per tool, memory alone, and
                                  # with two vaults (issue 28)
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client

from bench.shared.harness import markdown_table
from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.vault_set import configured_vaults


def tokens_of(characters: int) -> int:
    """Characters / 4, rounded up, as ``harness.count_tokens`` counts a reply."""
    return -(-characters // 4)


@dataclass(frozen=True)
class Definitions:
    tools: dict[str, int]  # characters of each tool's definition, in listing order
    tools_list: int  # characters of the whole tools/list result
    instructions: int  # characters of the server's instructions

    @property
    def total(self) -> int:
        return self.tools_list + self.instructions

    @property
    def tokens(self) -> int:
        return tokens_of(self.total)


async def measure_definitions(client: Client) -> Definitions:
    listed = await client.list_tools()
    result = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
    return Definitions(
        {tool["name"]: len(json.dumps(tool)) for tool in result["tools"]},
        len(json.dumps(result)),
        len(client.instructions or ""),
    )


async def server_definitions(
    families: str | None = None, vaults: Sequence[str] = ()
) -> Definitions:
    """This server's, with ``OBSIDIAN_TOOLS=families`` (None: every family), serving the
    vaults named (``serve --vault NAME=PATH`` each; none: one vault, as before issue 28)."""
    chosen = {"tools": families} if families is not None else {}
    settings = Settings.model_validate({"api_key": None, "vault_path": None, **chosen})
    with tempfile.TemporaryDirectory() as folder:
        # A folder each: the server refuses one vault served twice.
        for name in vaults:
            (Path(folder) / name).mkdir()
        named = configured_vaults(settings, [f"{name}={Path(folder) / name}" for name in vaults])
        async with Client(build_server(settings, vaults=named)) as client:
            return await measure_definitions(client)


# The names the bound for two vaults (issue 28's 2,600 tokens, 2,650 since issue 35 typed
# the vault argument) is measured with.
TWO_VAULTS = ("lore", "journal")


# Before issue 19, measured as above at commit 72eaeec: every description, the SDK's
# schema as generated, and one set of instructions whatever the tools.
BEFORE_COMMIT = "72eaeec"
BEFORE = Definitions(
    {
        "vault_read_note": 1851,
        "vault_peek_file": 1005,
        "vault_tree": 1069,
        "vault_search_map": 1176,
        "vault_scratch_append": 677,
        "vault_semantic_query": 2616,
        "vault_smart_search": 2329,
        "vault_find_related": 1475,
        "vault_quick_context": 1511,
        "vault_remember": 1922,
        "vault_recall": 3046,
        "vault_forget": 599,
    },
    19_469,
    1_675,
)
# The three memory tools alone (there was no OBSIDIAN_TOOLS yet), with those instructions.
BEFORE_MEMORY_ONLY = Definitions(
    {name: BEFORE.tools[name] for name in ("vault_remember", "vault_recall", "vault_forget")},
    5_584,
    1_675,
)


def main() -> None:
    every, memory = anyio.run(server_definitions), anyio.run(server_definitions, "memory")
    two = anyio.run(server_definitions, None, TWO_VAULTS)
    rows = [[name, chars, tokens_of(chars)] for name, chars in every.tools.items()]
    rows += [
        ["tools/list", every.tools_list, tokens_of(every.tools_list)],
        ["instructions", every.instructions, tokens_of(every.instructions)],
        ["total", every.total, every.tokens],
        ["OBSIDIAN_TOOLS=memory: total", memory.total, memory.tokens],
        [
            f"two vaults ({', '.join(TWO_VAULTS)}): tools/list",
            two.tools_list,
            tokens_of(two.tools_list),
        ],
        ["two vaults: instructions", two.instructions, tokens_of(two.instructions)],
        ["two vaults: total", two.total, two.tokens],
    ]
    print(markdown_table(["", "characters", "tokens"], rows))


if __name__ == "__main__":
    main()
