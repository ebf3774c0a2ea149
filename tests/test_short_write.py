"""A disk that fills part way through an append, for real: the server runs as a stdio
subprocess under RLIMIT_FSIZE (SIGXFSZ ignored), so a write past the limit is cut short and
the next one fails with EFBIG, as a full disk cuts a write short and then gives ENOSPC.

The error names the cause, nothing acknowledged is lost, and the process's memory file has
no half line: the next process of the installation takes the same file, and its append,
after the limit is gone, starts on a clean line."""

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.fixture_vault import REPO_ROOT
from tests.memory_files import memory_paths, writer_paths
from tests.test_read_tools import text_of

LIMIT_BYTES = 4096
# The real command line entry point, started after the limit is set.
SERVE_UNDER_LIMIT = f"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT_BYTES}, {LIMIT_BYTES}))
from obsidian_mcp.cli import main
sys.argv = ["obsidian-mcp", "serve"]
main()
"""


def server(vault: Path, config: Path, *, limited: bool) -> StdioServerParameters:
    args = ["-c", SERVE_UNDER_LIMIT] if limited else ["-m", "obsidian_mcp", "serve"]
    return StdioServerParameters(
        command=sys.executable,
        args=args,
        env={
            "OBSIDIAN_VAULT_PATH": str(vault),
            "OBSIDIAN_CONFIG_DIR": str(config),
            # The session's cache folder (tests/conftest.py): under the limit the passage
            # and memory indexes cannot be written there either, and stay in memory.
            "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
            # Under the limit, a bytecode cache write would be cut short and poison the cache.
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        cwd=REPO_ROOT,
    )


def lines_of(path: Path) -> list[str]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "the file ends in half a line"
    return data.decode("utf-8").splitlines()


@pytest.mark.anyio
async def test_a_full_disk_is_named_and_leaves_no_half_line(vault_copy: Path, tmp_path: Path):
    scratch = vault_copy / "obsidian-mcp" / "scratch.md"
    acknowledged: list[str] = []
    async with Client(server(vault_copy, tmp_path, limited=True)) as client:
        scratch_error = await client.call_tool("vault_scratch_append", {"text": "x" * 6000})
        failure = None
        for n in range(100):
            content = f"short write entry {n}: " + "the tide tables were wrong again " * 4
            result = await client.call_tool(
                "vault_remember", {"content": content, "tags": ["shortwrite"], "context": "t"}
            )
            if result.is_error:
                failure = text_of(result)
                break
            acknowledged.append(content.strip())
    assert scratch_error.is_error
    assert "EFBIG" in text_of(scratch_error)
    assert not scratch.exists() or lines_of(scratch) == []
    assert failure is not None, "the limit was never reached"
    assert "EFBIG" in failure and "Nothing was stored" in failure
    assert acknowledged
    [memory] = writer_paths(vault_copy)
    assert memory_paths(vault_copy) == [memory]
    stored = lines_of(memory)
    assert all(json.loads(line) for line in stored)
    assert sorted(json.loads(line)["content"] for line in stored) == sorted(acknowledged)

    async with Client(server(vault_copy, tmp_path, limited=False)) as client:
        again = await client.call_tool(
            "vault_remember",
            {"content": "after the disk was freed", "tags": ["shortwrite"], "context": "t"},
        )
        recalled = await client.call_tool(
            "vault_recall",
            {"tags": ["shortwrite"], "limit": 100, "max_tokens": 20000, "format": "json"},
        )
    assert not again.is_error, text_of(again)
    found = text_of(recalled)
    for content in [*acknowledged, "after the disk was freed"]:
        assert content in found
    assert writer_paths(vault_copy) == [memory]  # the same slot, the same file
    after = lines_of(memory)
    assert all(json.loads(line) for line in after)
    assert after[: len(stored)] == stored
    assert json.loads(after[-1])["content"] == "after the disk was freed"
