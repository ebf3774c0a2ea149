"""Local REST API 6.x: a note's links are null until Obsidian's link index is ready.

The stand-in starts at 6.0 with the index pending, as Obsidian does right after start-up,
and is switched to ready at run time; vault_find_related must be right in both states.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import TextContent

from obsidian_mcp.retrieval.related import LINK_INDEX_PENDING
from obsidian_mcp.server import build_server
from tests.conftest import rest_settings
from tests.standin.process import StandinProcess
from tests.test_cli import run_cli, standin_env

NOTE = "Characters/Kettle.md"


@pytest.fixture(scope="module")
def pending_standin(shared_vault: Path) -> Iterator[StandinProcess]:
    with StandinProcess(shared_vault, plugin_version="6.0.0", link_index_pending=True) as lra:
        yield lra


async def related(settings_dir: Path, standin: StandinProcess) -> dict[str, object]:
    async with Client(build_server(rest_settings(standin, settings_dir))) as client:
        arguments = {"path": NOTE, "format": "json", "limit": 50}
        result = await client.call_tool("vault_find_related", arguments)
    block = result.content[0]
    assert isinstance(block, TextContent) and not result.is_error, block
    return json.loads(block.text)


def names(data: dict[str, object], key: str) -> list[object]:
    entries = data[key]
    assert isinstance(entries, list)
    return [entry["path"] for entry in entries]  # pyright: ignore[reportUnknownVariableType]


@pytest.mark.anyio
async def test_find_related_before_and_after_the_link_index_is_ready(
    pending_standin: StandinProcess, tmp_path: Path
) -> None:
    with pending_standin.client() as http:
        assert http.get("/").json()["linkIndexReady"] is False
        note = http.get(
            f"/vault/{NOTE}", headers={"Accept": "application/vnd.olrapi.note+json"}
        ).json()
        assert note["links"] is None and note["backlinks"] is None
        assert note["unresolvedLinks"] is None

    before = await related(tmp_path, pending_standin)
    assert before["links_note"] == LINK_INDEX_PENDING
    assert before["total_backlinks"], "backlinks come from the notes' text meanwhile"

    pending_standin.set_faults(link_index_pending=False)
    try:
        after = await related(tmp_path, pending_standin)
    finally:
        pending_standin.set_faults(link_index_pending=True)
    assert "links_note" not in after
    # The text of the notes and Obsidian's index agree on this vault.
    assert sorted(map(str, names(before, "backlinks"))) == sorted(
        map(str, names(after, "backlinks"))
    )
    assert before["total_backlinks"] == after["total_backlinks"]
    assert names(before, "outlinks") == names(after, "outlinks")


@pytest.mark.anyio
async def test_the_markdown_answer_says_the_index_is_not_ready(
    pending_standin: StandinProcess, tmp_path: Path
) -> None:
    async with Client(build_server(rest_settings(pending_standin, tmp_path))) as client:
        result = await client.call_tool("vault_find_related", {"path": NOTE})
    block = result.content[0]
    assert isinstance(block, TextContent)
    lines = block.text.splitlines()
    assert lines[1] == LINK_INDEX_PENDING
    assert any(line.startswith("## linked from (") and "(0" not in line for line in lines)


def test_doctor_names_6x_and_the_link_index_state(
    pending_standin: StandinProcess, tmp_path: Path
) -> None:
    env = standin_env(pending_standin, tmp_path, OBSIDIAN_CERT=pending_standin.cert)
    done = run_cli("doctor", env=env)
    assert "plugin version: 6.0.0 (6.x: links are null until Obsidian's link index" in (
        done.stdout
    )
    assert "NOT ready yet" in done.stdout
    assert "header-based PATCH is gone" in done.stdout
