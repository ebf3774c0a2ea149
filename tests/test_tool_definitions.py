"""What a client is sent and what it may send: the tool definitions stay small (clients
send them with every request), OBSIDIAN_TOOLS picks the families a client sees, and an
argument a tool does not take is refused with the ones it does. All through a real MCP
client."""

import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import TextContent

from bench.economy.definitions import measure_definitions, tokens_of
from bench.economy.report import DEFINITIONS_TOKENS, INSTRUCTIONS_TOKENS, MEMORY_ONLY_TOKENS
from obsidian_mcp.config import TOOL_FAMILIES, Settings
from obsidian_mcp.server import build_server
from tests.conftest import folder_settings
from tests.test_cli import run_cli

pytestmark = pytest.mark.anyio

MEMORY_TOOLS = {"vault_remember", "vault_recall", "vault_forget"}


def _text(content: object) -> str:
    assert isinstance(content, TextContent)
    return content.text


async def test_the_definitions_stay_small(tmp_path: Path) -> None:
    """Issue 19's bounds, in tokens (characters / 4) of the tools/list result as json.dumps
    writes it plus the instructions; the tools still to come must fit under them too."""
    async with Client(build_server(folder_settings(tmp_path, tmp_path / "c"))) as client:
        every = await measure_definitions(client)
    memory_settings = folder_settings(tmp_path, tmp_path / "c", tools="memory")
    async with Client(build_server(memory_settings)) as client:
        memory = await measure_definitions(client)
    advice = "shorten descriptions; the schema already gives types, bounds and defaults"
    assert every.tokens <= DEFINITIONS_TOKENS, f"{every.tokens} tokens with every tool: {advice}"
    assert tokens_of(every.instructions) <= INSTRUCTIONS_TOKENS, "instructions grew"
    assert memory.tokens <= MEMORY_ONLY_TOKENS, f"{memory.tokens} tokens, memory alone: {advice}"


async def test_every_tool_belongs_to_one_family(tmp_path: Path) -> None:
    async with Client(build_server(folder_settings(tmp_path, tmp_path / "c"))) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
    families = [name for names in TOOL_FAMILIES.values() for name in names]
    assert sorted(listed) == sorted(families)


async def test_a_family_alone_lists_its_tools_and_the_instructions_name_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBSIDIAN_TOOLS", "memory")
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH", str(tmp_path))
    async with Client(build_server(Settings())) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        instructions = client.instructions or ""
        remembered = {"content": "Gale sails", "tags": ["gale"]}
        answer = await client.call_tool("vault_remember", remembered)
    assert listed == MEMORY_TOOLS
    assert set(re.findall(r"vault_\w+", instructions)) <= MEMORY_TOOLS
    assert "vault_recall" in instructions
    assert not answer.is_error, _text(answer.content[0])


async def test_families_are_read_comma_separated_in_any_case(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OBSIDIAN_TOOLS", " Search, memory ,edit")
    assert Settings().tools == {"search", "memory", "edit"}
    assert "vault_read_note" not in Settings().listed_tools


def test_an_unknown_family_is_a_configuration_error_naming_the_families(
    shared_vault: Path,
) -> None:
    done = run_cli(
        "call", "--vault", str(shared_vault), "vault_tree", env={"OBSIDIAN_TOOLS": "memory,serch"}
    )
    assert done.returncode == 1
    assert (
        "OBSIDIAN_TOOLS: there is no tool family 'serch'; the families are search, read, "
        "memory, scratch, edit." in done.stdout
    )


async def test_an_argument_a_tool_does_not_take_is_refused_with_the_ones_it_does(
    tmp_path: Path,
) -> None:
    async with Client(build_server(folder_settings(tmp_path, tmp_path / "c"))) as client:
        tools = (await client.list_tools()).tools
        recall = await client.call_tool("vault_recall", {"tags": ["gale"], "limt": 3})
        answers = {
            tool.name: await client.call_tool(tool.name, {"unknown_argument": 1})
            for tool in tools
        }
        several = await client.call_tool("vault_tree", {"depht": 1, "x": 2, "y": 3, "z": 4})
    takes = {tool.name: list(tool.input_schema["properties"]) for tool in tools}
    assert recall.is_error
    assert _text(recall.content[0]) == (
        "vault_recall has no argument 'limt' (did you mean 'limit'?); it takes: "
        + ", ".join(takes["vault_recall"])
        + "."
    )
    for name, answer in answers.items():
        assert answer.is_error, name
        assert _text(answer.content[0]) == (
            f"{name} has no argument 'unknown_argument'; it takes: {', '.join(takes[name])}."
        )
    assert _text(several.content[0]) == (
        "vault_tree has no arguments 'depht' (did you mean 'depth'?), 'x', 'y' and 1 more; "
        "it takes: folder, depth, format."
    )
    assert not (tmp_path / "obsidian-mcp").exists()  # nothing was written
