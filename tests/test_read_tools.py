"""Read tools end to end through a real MCP client: the same answers from the vault folder
and from the stand-in Local REST API (plugin 3.x, 5.x and 6.x), in process and over stdio."""

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.fixture_vault import REPO_ROOT
from tests.standin.process import StandinProcess

READ_CALLS: list[tuple[str, dict[str, object]]] = [
    ("vault_tree", {}),
    ("vault_tree", {"folder": "Lore", "depth": 4}),
    ("vault_tree", {"depth": 3, "format": "json"}),
    ("vault_peek_file", {"path": "Characters/Companion/Mira Vessant.md"}),
    ("vault_peek_file", {"path": "Characters/Æsa Þórdóttir.md", "format": "json"}),
    ("vault_peek_file", {"path": "Characters/Old Tomas (the ferryman).md"}),
    ("vault_read_note", {"path": "Characters/Old Tomas (the ferryman)"}),
    ("vault_read_note", {"path": "Sessions/Session 04 - The Lighthouse at Greyhook.md"}),
    ("vault_read_note", {"path": "Dev/Handover.md", "heading": "Next steps"}),
    ("vault_search_map", {"query": "lighthouse"}),
    ("vault_search_map", {"query": "Mira promise", "folder": "Sessions"}),
    ("vault_search_map", {"query": "zzzunfindable"}),
    # A note's name alone, and a block id, as wikilinks resolve them (issue 26.9).
    ("vault_read_note", {"path": "Rook"}),
    ("vault_peek_file", {"path": "kettle.md"}),
    ("vault_read_note", {"path": "Key Moments", "heading": "^moment-lighthouse-promise"}),
    ("vault_read_note", {"path": "Attachments/tide-tables.pdf"}),
    ("vault_tree", {"folder": "Dev", "depth": 1}),
    # Errors must read the same too.
    ("vault_read_note", {"path": "Characters/Mira Vesant.md"}),
    ("vault_read_note", {"path": "Characters"}),
    ("vault_read_note", {"path": "Attachments/map.png"}),
    ("vault_read_note", {"path": "../outside.md"}),
    ("vault_tree", {"folder": "Nowhere"}),
]


def text_of(result: object) -> str:
    content = getattr(result, "content", [])
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


async def answers(
    client: Client, calls: list[tuple[str, dict[str, object]]] = READ_CALLS
) -> list[tuple[bool, str]]:
    """Whether each call failed, and its text."""
    results: list[tuple[bool, str]] = []
    for name, arguments in calls:
        result = await client.call_tool(name, arguments)
        results.append((result.is_error, text_of(result)))
    return results


@pytest.mark.anyio
async def test_rest_and_folder_give_the_same_answers(
    standin: StandinProcess, shared_vault: Path, tmp_path: Path
) -> None:
    async with Client(build_server(folder_settings(shared_vault, tmp_path))) as client:
        from_folder = await answers(client)
    async with Client(build_server(rest_settings(standin, tmp_path))) as client:
        from_rest = await answers(client)
    for (name, arguments), folder_answer, rest_answer in zip(
        READ_CALLS, from_folder, from_rest, strict=True
    ):
        assert folder_answer == rest_answer, (standin.plugin_version, name, arguments)
    assert not from_folder[0][0] and "notes" in from_folder[0][1]
    assert [is_error for is_error, _ in from_folder[-5:]] == [True] * 5


@pytest.mark.anyio
async def test_stdio_subprocess_answers_like_the_in_process_server(
    shared_vault: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "OBSIDIAN_CONFIG_DIR": str(tmp_path)}
    env.pop("OBSIDIAN_API_KEY", None)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "obsidian_mcp", "serve", "--vault", str(shared_vault)],
        env=env,
        cwd=str(REPO_ROOT),
    )
    async with Client(params) as client:
        over_stdio = await answers(client)
    async with Client(build_server(folder_settings(shared_vault, tmp_path))) as client:
        in_process = await answers(client)
    assert over_stdio == in_process


@pytest.mark.anyio
async def test_error_messages_say_what_to_do(shared_vault: Path, tmp_path: Path) -> None:
    async with Client(build_server(folder_settings(shared_vault, tmp_path))) as client:
        missing = await client.call_tool("vault_read_note", {"path": "Characters/Mira Vesant.md"})
        folder = await client.call_tool("vault_read_note", {"path": "Characters"})
        heading = await client.call_tool(
            "vault_read_note", {"path": "Dev/Handover.md", "heading": "No such heading"}
        )
    assert missing.is_error and "Closest existing paths" in text_of(missing)
    assert "Mira Vessant" in text_of(missing)
    assert folder.is_error and "vault_tree(folder='Characters')" in text_of(folder)
    assert heading.is_error and "Its headings:" in text_of(heading)


@pytest.mark.anyio
async def test_a_name_alone_and_a_block_id_resolve_as_links_do(
    shared_vault: Path, tmp_path: Path
) -> None:
    """`path="Rook"` was refused ("Closest existing paths: Characters/Rook.md") and
    `heading="^moment-lighthouse-promise"` too, though links name notes and blocks so."""
    (shared_vault / "Inbox" / "Rook.md").write_text("# Another Rook\n")
    try:
        async with Client(build_server(folder_settings(shared_vault, tmp_path))) as client:
            kettle = text_of(await client.call_tool("vault_read_note", {"path": "kettle"}))
            twice = await client.call_tool("vault_read_note", {"path": "Rook"})
            block = text_of(await client.call_tool("vault_read_note", {
                "path": "Characters/Companion/Key Moments.md",
                "heading": "^moment-lighthouse-promise",
            }))
            unknown = await client.call_tool("vault_read_note", {
                "path": "Key Moments", "heading": "^moment-nope",
            })
            related = await client.call_tool("vault_find_related", {"path": "Kettle"})
    finally:
        (shared_vault / "Inbox" / "Rook.md").unlink()
    assert kettle.startswith("Characters/Kettle.md · [[Kettle]]")
    assert twice.is_error  # two notes have that name: both are named, neither is guessed
    assert "Characters/Rook.md, Inbox/Rook.md" in text_of(twice)
    assert "section: ^moment-lighthouse-promise · chars 0-254 of 254" in block
    assert block.rstrip().endswith("she makes a vow to Rook about the lamp. It is the first time "
                                   "she commits to anything beyond the next day. Details in "
                                   "[[Session 04 - The Lighthouse at Greyhook#The lamp room]]. "
                                   "^moment-lighthouse-promise")
    assert unknown.is_error and "Its block ids: ^moment-first-meeting" in text_of(unknown)
    assert not related.is_error and "Characters/Kettle.md" in text_of(related)


@pytest.mark.anyio
async def test_peek_counts_the_links_no_note_answers_and_sees_a_note_created_since(
    tmp_path: Path,
) -> None:
    """An outline's unresolved links are those the vault's link resolver finds no note for
    (a heading part ignored, a name matched case aside); a note this server creates is
    found by the next peek, however long `index_refresh_seconds`."""
    vault = tmp_path / "vault"
    (vault / "People").mkdir(parents=True)
    (vault / "Home.md").write_text("# Home\n")
    (vault / "People" / "Rook.md").write_text("# Rook\n")
    (vault / "Hub.md").write_text("# Hub\n\nSee [[Home#Top]], [[rook]] and [[Missing]].\n")
    settings = folder_settings(vault, tmp_path, index_refresh_seconds=600)
    async with Client(build_server(settings)) as client:
        peek = {"path": "Hub.md"}
        assert "3 links (1 unresolved)" in text_of(await client.call_tool("vault_peek_file", peek))
        created = await client.call_tool(
            "vault_edit_note", {"path": "Missing.md", "operation": "create", "content": "x"}
        )
        assert not created.is_error
        assert "3 links (0 unresolved)" in text_of(await client.call_tool("vault_peek_file", peek))


@pytest.mark.anyio
async def test_counts_read_as_words_and_numbers_do(shared_vault: Path, tmp_path: Path) -> None:
    """"1 folders", "2 matches in 1 files" and "chars 0-585 of 16324", as the issue saw."""
    async with Client(build_server(folder_settings(shared_vault, tmp_path))) as client:
        dev = text_of(await client.call_tool("vault_tree", {"folder": "Dev", "depth": 1}))
        hits = text_of(await client.call_tool(
            "vault_search_map", {"query": "Ressa", "folder": "Characters"}))
        note = largest_note(shared_vault).relative_to(shared_vault).as_posix()
        window = text_of(await client.call_tool("vault_read_note", {"path": note}))
    assert dev.startswith("Dev/: 8 notes, 1 folder, 0 attachments (to depth 1)"), dev
    assert "- Characters/Companion/: 1 match in 1 file\n" in hits, hits
    total = len(largest_note(shared_vault).read_text("utf-8"))
    assert f"of {total:,} · version" in window.splitlines()[1], window.splitlines()[1]


def largest_note(vault: Path) -> Path:
    notes = [p for p in vault.rglob("*.md") if not any(s.startswith(".") for s in p.parts)]
    return max(notes, key=lambda p: p.stat().st_size)


@pytest.mark.anyio
@pytest.mark.parametrize("max_chars", [None, 1000, 4321])
async def test_continuation_hints_read_the_largest_note_exactly(
    shared_vault: Path, tmp_path: Path, max_chars: int | None
) -> None:
    note = largest_note(shared_vault)
    path = note.relative_to(shared_vault).as_posix()
    content = note.read_bytes().decode("utf-8")
    settings = folder_settings(shared_vault, tmp_path)
    budget = max_chars or settings.read_max_chars
    pieces: list[str] = []
    offset: int | None = 0
    async with Client(build_server(settings)) as client:
        while offset is not None:
            arguments: dict[str, object] = {"path": path, "offset": offset}
            if max_chars:
                arguments["max_chars"] = max_chars
            as_json = await client.call_tool("vault_read_note", {**arguments, "format": "json"})
            window = json.loads(text_of(as_json))
            as_markdown = text_of(await client.call_tool("vault_read_note", arguments))
            assert len(window["text"]) <= budget
            assert window["text"] in as_markdown
            if window["next_offset"] is not None:
                assert f"offset={window['next_offset']})" in as_markdown
            pieces.append(window["text"])
            offset = window["next_offset"]
    assert len(pieces) > 1
    assert "".join(pieces) == content


@pytest.mark.anyio
async def test_tree_never_folds_one_file_and_lists_the_index_note_first(
    shared_vault: Path, tmp_path: Path
) -> None:
    async with Client(build_server(folder_settings(shared_vault, tmp_path))) as client:
        text = text_of(await client.call_tool("vault_tree", {"folder": "Sessions"}))
    lines = text.splitlines()
    assert lines[1] == "Session Index.md"  # 13 notes: the 13th is shown, not "… 1 more"
    assert len(lines) == 14 and "more" not in text
