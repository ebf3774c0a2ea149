"""Each defect the hostile-input probes found, as a call through a real MCP client (or the
real CLI as a subprocess), with the answer the model must get instead."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from mcp.types import TextResourceContents

from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.server import build_server
from obsidian_mcp.server.app import AppState
from obsidian_mcp.sources.folder import FolderSource
from tests.conftest import folder_settings, rest_settings
from tests.fixture_vault import REPO_ROOT
from tests.memory_files import writer_paths
from tests.standin.process import StandinProcess


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error, text


def assert_actionable(is_error: bool, text: str, *expected: str) -> None:
    assert is_error, text
    for bad in ("errors.pydantic.dev", "validation error for", "Traceback"):
        assert bad not in text, text
    assert text.strip() and not text.rstrip().endswith(("tool_read_note", ":")), text
    for phrase in expected:
        assert phrase in text, text
    assert len(text) < 1500, len(text)


@pytest.mark.anyio
async def test_validation_errors_are_one_sentence(vault_copy: Path, tmp_path: Path) -> None:
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        assert await call(client, "vault_semantic_query", query="x", limit=-1) == (
            True,
            "limit must be a whole number between 1 and 50; you gave -1.",
        )
        assert await call(client, "vault_read_note") == (
            True,
            "path is required; add it (text of at most 1,024 characters).",
        )
        is_error, text = await call(client, "vault_quick_context", topic="Mira " * 400_000)
        assert_actionable(is_error, text, "topic is 2,000,000 characters long; the limit is 1,000")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("until", "phrase"),
    [
        ("99999999d", "outside the calendar"),
        ("9999-12-31", "outside the calendar"),
        ("0001-01-01T00:00", "outside the calendar"),
        ("9" * 30 + "d", "outside the calendar"),
        ("9" * 5000 + "d", "the limit is 40"),
    ],
)
async def test_recall_with_a_date_past_the_calendar(
    vault_copy: Path, tmp_path: Path, until: str, phrase: str
) -> None:
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        assert_actionable(*await call(client, "vault_recall", until=until), phrase)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "phrase"),
    [
        ("Home.md/x.md", "No note at 'Home.md/x.md'"),
        ("x" * 300 + ".md", "longer than 255 bytes"),
        ("é" * 200, "longer than 255 bytes"),
        ("a/" * 200_000 + "x.md", "longer than 1,024 characters"),
    ],
)
async def test_read_and_peek_odd_paths(
    vault_copy: Path, tmp_path: Path, path: str, phrase: str
) -> None:
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        for tool in ("vault_read_note", "vault_peek_file"):
            # Past the parameter's own limit the model reads the limit; within it, the
            # path check's reason.
            is_error, text = await call(client, tool, path=path)
            assert_actionable(is_error, text)
            assert phrase in text or "the limit is 1,024" in text, text


def test_path_checks_are_bounded_in_depth() -> None:
    # 200,000 segments once took 8.4 s and then failed without words; now the length is
    # refused before any work proportional to it.
    with pytest.raises(Exception, match="longer than 1,024 characters"):
        normalize_vault_path("a/" * 200_000 + "x.md")
    assert normalize_vault_path("a/" * 500 + "x.md").count("/") == 500


@pytest.mark.anyio
async def test_memory_folder_blocked_by_a_file(vault_copy: Path, tmp_path: Path) -> None:
    (vault_copy / "obsidian-mcp").write_text("not a folder")
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        assert_actionable(
            *await call(client, "vault_remember", content="c", tags=["t"], context=""),
            "rename or move that file",
        )
        assert_actionable(
            *await call(client, "vault_scratch_append", text="x"), "rename or move that file"
        )
        status = await client.read_resource("obsidian://status")
        contents = status.contents[0]
        assert isinstance(contents, TextResourceContents)
        assert "problem" in json.loads(contents.text)["memory"]


@pytest.mark.anyio
async def test_memory_file_that_is_a_folder(vault_copy: Path, tmp_path: Path) -> None:
    """A folder where this process's memory file goes: remember says what to move; reading
    skips it (it holds no memories) and answers."""
    (tmp_path / "device-id").write_text("dev1\n")
    (vault_copy / "obsidian-mcp" / "memory" / "dev1-0-0.jsonl").mkdir(parents=True)
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        assert_actionable(
            *await call(client, "vault_remember", content="c", tags=["t"], context=""),
            "rename or move that folder",
        )
        is_error, text = await call(client, "vault_recall")
        assert not is_error and text.startswith("No memories are stored yet"), text
        recent = await client.read_resource("obsidian://memory/recent")
        contents = recent.contents[0]
        assert isinstance(contents, TextResourceContents)
        assert "0 memories" in contents.text


@pytest.mark.anyio
async def test_a_folder_where_the_legacy_memory_file_was_is_no_obstacle(
    vault_copy: Path, tmp_path: Path
) -> None:
    """The single file of earlier versions is only read, and a folder in its place holds
    nothing to read: memories go to this process's own file as always."""
    (vault_copy / "obsidian-mcp" / "memory.jsonl").mkdir(parents=True)
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        is_error, text = await call(client, "vault_remember", content="c", tags=["t"])
        assert not is_error and text.startswith("Remembered as"), text
        is_error, text = await call(client, "vault_recall", tags=["t"])
        assert not is_error and text.startswith("1 memory"), text
    [written] = writer_paths(vault_copy)
    assert written.read_text("utf-8").count("\n") == 1
    assert (vault_copy / "obsidian-mcp" / "memory.jsonl").is_dir()


@pytest.mark.anyio
async def test_recall_holds_its_budget_whatever_the_file_holds(
    vault_copy: Path, tmp_path: Path
) -> None:
    huge = {
        "id": "0000000000abc",
        "ts": "2026-01-01T00:00:00.000Z",
        "content": "c" * 3_000_000,
        "tags": ["t" * 500] * 50,
        "context": "x" * 3_000_000,
        "type": "y" * 1000,
        "source": "s" * 3_000_000,
    }
    memory = vault_copy / "obsidian-mcp" / "memory.jsonl"
    memory.parent.mkdir()
    memory.write_text(json.dumps(huge) + "\n")
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        for max_tokens in (100, 1000):
            for output in ("markdown", "json"):
                is_error, text = await call(
                    client, "vault_recall", max_tokens=max_tokens, format=output
                )
                assert not is_error, text
                # The first entry always shows, squeezed to a readable minimum per field.
                assert len(text) / 4 <= max_tokens + 100, (max_tokens, output, len(text))


@pytest.mark.anyio
async def test_a_crash_in_a_tool_says_what_to_try(vault_copy: Path, tmp_path: Path) -> None:
    server = build_server(folder_settings(vault_copy, tmp_path))

    @server.tool(name="vault_broken")
    async def vault_broken(ctx: Context[AppState]) -> str:
        raise ZeroDivisionError("internal detail")

    async with Client(server) as client:
        is_error, text = await call(client, "vault_broken")
    assert is_error
    assert "vault_broken failed on an internal error (ZeroDivisionError)" in text
    assert "internal detail" not in text and "Try the call once more" in text


@pytest.mark.anyio
async def test_lone_surrogate_in_process(vault_copy: Path, tmp_path: Path) -> None:
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        assert_actionable(
            *await call(client, "vault_recall", tags=["ok", "\ud800"]),
            "tags[1] contains half of a UTF-16 surrogate pair",
        )


def _serve(env: dict[str, str], lines: list[str], answers: int) -> list[dict[str, Any]]:
    """Raw JSON-RPC lines to `obsidian-mcp serve` on stdio, as a client writes them."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    script = [json.dumps(initialize), '{"jsonrpc":"2.0","method":"notifications/initialized"}']
    with subprocess.Popen(
        [sys.executable, "-m", "obsidian_mcp", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, **env},
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("\n".join([*script, *lines]) + "\n")
        process.stdin.flush()
        # Every request gets its answer; without one this read blocks until the timeout.
        replies = [json.loads(process.stdout.readline()) for _ in range(answers + 1)]
        process.stdin.close()
        process.wait(timeout=30)
    return replies[1:]


async def _string_parameters(vault: Path, config: Path) -> list[tuple[str, str, bool]]:
    """(tool, parameter, is a list) for every text-taking parameter of every tool."""
    async with Client(build_server(folder_settings(vault, config))) as client:
        tools = (await client.list_tools()).tools
    found: list[tuple[str, str, bool]] = []
    for tool in tools:
        for name, spec in tool.input_schema["properties"].items():
            options = spec.get("anyOf", [spec])
            kinds = {option.get("type") for option in options}
            if "string" in kinds and "enum" not in options[0]:
                found.append((tool.name, name, False))
            elif "array" in kinds:
                found.append((tool.name, name, True))
    return found


@pytest.mark.timeout(90)
def test_lone_surrogate_over_stdio_gets_an_answer(shared_vault: Path, tmp_path: Path) -> None:
    """A lone surrogate escape in any text argument of any tool, written on the wire as
    clients do: each request is answered (it once never was) with what to change."""
    parameters = anyio.run(_string_parameters, shared_vault, tmp_path)
    lines = []
    for request_id, (tool, name, is_list) in enumerate(parameters, start=1):
        value = '["ok","a\\ud800"]' if is_list else '"a\\ud800b"'
        lines.append(
            f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":'
            f'{{"name":"{tool}","arguments":{{"{name}":{value}}}}}}}'
        )
    lines.append(
        '{"jsonrpc":"2.0","id":999,"method":"resources/read",'
        '"params":{"uri":"obsidian://\\ud800"}}'
    )
    replies = _serve({"OBSIDIAN_VAULT_PATH": str(shared_vault)}, lines, len(lines))
    by_id = {reply["id"]: reply for reply in replies}
    assert len(parameters) >= 20
    assert set(by_id) == {*range(1, len(parameters) + 1), 999}
    for request_id, (tool, name, is_list) in enumerate(parameters, start=1):
        result = by_id[request_id]["result"]
        text = result["content"][0]["text"]
        where = f"{name}[1]" if is_list else name
        assert result["isError"], (tool, name, text)
        assert text.startswith(f"{where} contains half of a UTF-16 surrogate pair"), text
    assert "error" in by_id[999]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("env", "phrase"),
    [
        ({"OBSIDIAN_PORT": "abc"}, "OBSIDIAN_PORT must be a whole number between 1 and"),
        (
            {"OBSIDIAN_API_KEY": "k", "OBSIDIAN_CERT": "/no/such/cert.pem"},
            "OBSIDIAN_CERT=/no/such/cert.pem cannot be used as a certificate",
        ),
    ],
)
def test_bad_settings_still_start_and_every_call_names_the_fix(
    tmp_path: Path, env: dict[str, str], phrase: str
) -> None:
    lines = [
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"vault_tree",'
        '"arguments":{}}}'
    ]
    [reply] = _serve({**env, "OBSIDIAN_CONFIG_DIR": str(tmp_path)}, lines, 1)
    text = reply["result"]["content"][0]["text"]
    assert reply["result"]["isError"] and phrase in text and "restart the server" in text


@pytest.mark.anyio
@pytest.mark.parametrize("problem", ["wrong key", "unreachable port", "untrusted cert"])
async def test_status_reports_rest_problems(
    standin: StandinProcess, tmp_path: Path, problem: str
) -> None:
    overrides: dict[str, object] = {
        "wrong key": {"api_key": "wrong"},
        "unreachable port": {"port": 9},
        "untrusted cert": {"cert": None},
    }[problem]
    settings = rest_settings(standin, tmp_path, **overrides)
    async with Client(build_server(settings)) as client:
        result = await client.read_resource("obsidian://status")
    contents = result.contents[0]
    assert isinstance(contents, TextResourceContents)
    status = json.loads(contents.text)
    assert "problem" in status["memory"], status


def _many_notes(root: Path, count: int) -> Path:
    vault = root / "many"
    vault.mkdir()
    for n in range(count):
        (vault / f"note{n}.md").write_text(f"# Note {n}\n\nlighthouse keeper {n}\n")
    return vault


@pytest.mark.anyio
async def test_a_cancelled_exact_scan_stops(tmp_path: Path) -> None:
    vault = _many_notes(tmp_path, 3000)
    source = FolderSource(vault)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:

            async def cancel_once_started() -> None:
                # The scan caches each note it reads; cancel once it is under way.
                while not source._texts:  # pyright: ignore[reportPrivateUsage]
                    await anyio.sleep(0.001)
                scope.cancel()

            group.start_soon(cancel_once_started)
            await source.search_text("lighthouse keeper", context_length=0)
    scanned = len(source._texts)  # pyright: ignore[reportPrivateUsage]
    assert scope.cancelled_caught
    assert scanned < 3000, "the scan went on to the end after it was cancelled"


@pytest.mark.anyio
async def test_search_words_are_bounded(vault_copy: Path, tmp_path: Path) -> None:
    query = " ".join(f"w{n}" for n in range(200))
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        for tool in ("vault_search_map", "vault_smart_search"):
            assert_actionable(
                *await call(client, tool, query=query), "query has 200 distinct words"
            )


@pytest.mark.anyio
async def test_a_long_query_is_not_echoed_whole(vault_copy: Path, tmp_path: Path) -> None:
    """A 992-character query once came back three times over, 2,186 characters against a
    100-token budget; a reply quotes its start and length."""
    query = "Mira lighthouse " * 62
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        for tool, arguments in (
            ("vault_semantic_query", {"query": query, "max_tokens": 100}),
            ("vault_search_map", {"query": query}),
        ):
            is_error, text = await call(client, tool, **arguments)
            assert not is_error, text
            assert "(992 characters)" in text and query not in text
            assert len(text) < 1000, (tool, len(text))
        is_error, text = await call(client, "vault_quick_context", topic=query, max_tokens=100)
        assert not is_error and query not in text, text


@pytest.mark.anyio
async def test_json_search_holds_the_budget(vault_copy: Path, tmp_path: Path) -> None:
    """The long fuzz run found a JSON answer at 1.5x its budget: JSON costs more per
    passage than the markdown the packing measured."""
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        for max_tokens in (200, 573, 1000):
            is_error, text = await call(
                client,
                "vault_semantic_query",
                query="Mira lighthouse promise",
                limit=37,
                format="json",
                max_tokens=max_tokens,
                include_context=False,
            )
            assert not is_error, text
            data = json.loads(text)
            assert data["shown"] == sum(len(g["passages"]) for g in data["groups"])
            assert len(text) / 4 <= max_tokens or data["shown"] == 1, (max_tokens, len(text))


def test_doctor_reports_an_unusable_certificate(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OBSIDIAN_API_KEY": "k",
        "OBSIDIAN_CERT": str(tmp_path / "missing.pem"),
        "OBSIDIAN_CONFIG_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "obsidian_mcp", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert done.returncode == 1
    assert "cannot be used as a certificate" in done.stdout
    assert "Traceback" not in done.stderr
