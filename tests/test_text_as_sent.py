"""Text parameters receive the text they were sent (issue 25, item 3).

The MCP SDK reads a string argument that looks like JSON as JSON before validation
(`FuncMetadata.pre_parse_json`): `content="null"` reached vault_edit_note as no content,
`'["a", "b"]'` as a list. The server turns that off for text parameters
(`boundary.TextAsSent`), and `obsidian-mcp call` gives a text parameter the text typed.
"""

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

from obsidian_mcp.cli import is_text_parameter, tool_arguments
from obsidian_mcp.server import build_server
from obsidian_mcp.server.boundary import TextAsSent, VaultServer
from tests.conftest import folder_settings
from tests.test_cli import run_cli
from tests.test_read_tools import text_of

# Texts a JSON parser would turn into something else: null, a boolean, a number, a list,
# an object.
LOOKS_LIKE_JSON = ("null", "true", "3", '["a","b"]', '{"a":1}')
# A valid value for each parameter a call needs besides the one under test.
REQUIRED = {
    "path": "Home.md",
    "query": "lantern",
    "topic": "lantern",
    "content": "x",
    "tags": ["t"],
    "operation": "append",
    "text": "x",
    "id": "x",
    "edit_id": "x",
}


def text_parameters(server: VaultServer) -> list[tuple[str, str, dict[str, Any]]]:
    """(tool, parameter, its listed schema) for every text parameter of every tool."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    for tool in server._tool_manager.list_tools():  # pyright: ignore[reportPrivateUsage]
        properties: dict[str, dict[str, Any]] = tool.parameters["properties"]
        found.extend(
            (tool.name, name, spec)
            for name, spec in properties.items()
            if is_text_parameter(spec)
        )
    return found


def received_by_the_tools(server: VaultServer) -> list[dict[str, Any]]:
    """Each tool's function replaced by one that records what it was called with: what
    the SDK's argument handling delivered, after validation."""
    calls: list[dict[str, Any]] = []
    for tool in server._tool_manager.list_tools():  # pyright: ignore[reportPrivateUsage]

        async def record(_name: str = tool.name, **kwargs: Any) -> str:
            calls.append({"tool": _name, **kwargs})
            return "recorded"

        tool.fn = record
        tool.is_async = True
    return calls


@pytest.mark.anyio
async def test_every_text_parameter_receives_the_text_sent_over_mcp(tmp_path: Path) -> None:
    server = build_server(folder_settings(tmp_path, tmp_path / "config"))
    parameters = text_parameters(server)
    assert {("vault_edit_note", "content"), ("vault_remember", "context")} <= {
        (tool, name) for tool, name, _ in parameters
    }
    calls = received_by_the_tools(server)
    async with Client(server) as client:
        for tool, name, spec in parameters:
            schema = server.full_schema(tool)
            needed = {k: REQUIRED[k] for k in schema.get("required", []) if k != name}
            for text in LOOKS_LIKE_JSON:
                calls.clear()
                result = await client.call_tool(tool, {**needed, name: text})
                if "enum" in spec:  # a choice of words: refused, quoting the text sent
                    assert result.is_error and f"you gave {text!r}" in text_of(result), (
                        tool, name, text, text_of(result))
                    continue
                assert not result.is_error, (tool, name, text, text_of(result))
                assert calls[0][name] == text, (tool, name, text, calls)


def test_call_gives_a_text_parameter_the_text_typed(tmp_path: Path) -> None:
    server = build_server(folder_settings(tmp_path, tmp_path / "config"))
    for tool, name, _ in text_parameters(server):
        schema = server.full_schema(tool)
        for text in LOOKS_LIKE_JSON:
            assert tool_arguments([(name, text)], schema) == {name: text}, (tool, name)
    remember = server.full_schema("vault_remember")
    typed = [("tags", '["a", "b"]'), ("content", "[1, 2]")]
    assert tool_arguments(typed, remember) == {"tags": ["a", "b"], "content": "[1, 2]"}
    assert tool_arguments([("limit", "3")], server.full_schema("vault_recall")) == {"limit": 3}


@pytest.mark.anyio
async def test_the_words_of_the_issue_are_written_as_sent(tmp_path: Path) -> None:
    """`replace_text target=undefined content=null` wrote 'let x = ;'; content '["a", "b"]'
    was refused as a list."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Code.md").write_text("let x = undefined;\n")
    async with Client(build_server(folder_settings(vault, tmp_path / "config"))) as client:
        edited = await client.call_tool(
            "vault_edit_note",
            {"path": "Code.md", "operation": "replace_text", "target": "undefined",
             "content": "null", "force": True},
        )
        assert not edited.is_error, text_of(edited)
        listed = await client.call_tool(
            "vault_edit_note",
            {"path": "Code.md", "operation": "replace_text", "target": "null",
             "content": '["a", "b"]', "force": True},
        )
        assert not listed.is_error, text_of(listed)
    assert (vault / "Code.md").read_text() == 'let x = ["a", "b"];\n'


def test_call_stores_the_word_null_as_typed(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    env = {"OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
           "OBSIDIAN_CACHE_DIR": str(tmp_path / "cache"), "OBSIDIAN_MEMORY_MEANING": "false"}
    stored = run_cli("call", "vault_remember", "content=null", "tags=words", "--vault",
                     str(vault), env=env)
    assert stored.returncode == 0, stored.stdout + stored.stderr
    listed = run_cli("memory", "list", "--vault", str(vault), env=env)
    assert "\n  null" in listed.stdout and "#words" in listed.stdout, listed.stdout


@pytest.mark.anyio
async def test_the_sdk_still_reads_json_in_text_it_is_given() -> None:
    """What TextAsSent works around, on a plain MCPServer: when this fails, the SDK no
    longer pre-parses text (TextAsSent may go) or does it elsewhere (it must follow)."""
    assert "pre_parse_json" in vars(FuncMetadata)
    assert set(TextAsSent.model_fields) == set(FuncMetadata.model_fields)
    plain: MCPServer[Any] = MCPServer("plain")

    @plain.tool()
    def echo(text: str | None = None) -> str:
        return repr(text)

    async with Client(plain) as client:
        result = await client.call_tool("echo", {"text": "null"})
    assert text_of(result) == "None"
