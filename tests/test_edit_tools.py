"""The edit tools end to end through a real MCP client over a copy of the fixture vault:
versions from reads, receipts, refusals that say what to do, undo, the user-typing guard,
the paths edits never touch, and the off switch."""

import json
import os
import re
import time
from pathlib import Path

import pytest
from mcp import Client

from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.conftest import folder_settings, rest_settings
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

HANDOVER = "Dev/Handover.md"
_LONG_AGO = time.time() - 3600


def _settle(vault: Path, *paths: str) -> None:
    """Notes last changed an hour ago: nobody is typing in them."""
    for path in paths:
        os.utime(vault / path, (_LONG_AGO, _LONG_AGO))


def _version(reply: str) -> str:
    found = re.search(r"version ([0-9a-f]{12})", reply)
    assert found, reply
    return found.group(1)


@pytest.mark.anyio
async def test_read_edit_receipt_and_undo(vault_copy: Path, tmp_path: Path) -> None:
    _settle(vault_copy, HANDOVER)
    original = (vault_copy / HANDOVER).read_bytes()
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        peek = text_of(await client.call_tool("vault_peek_file", {"path": HANDOVER}))
        version = _version(peek)
        read = await client.call_tool(
            "vault_read_note", {"path": HANDOVER, "heading": "Current state", "format": "json"}
        )
        assert json.loads(text_of(read))["version"] == version
        edited = await client.call_tool(
            "vault_edit_note",
            {
                "path": HANDOVER,
                "operation": "append",
                "target": "Current state",
                "content": "- Edits land with a receipt.",
                "version": version,
            },
        )
        receipt = text_of(edited)
        assert not edited.is_error, receipt
        assert receipt.startswith(f"Edited {HANDOVER} · append at Handover > Current state")
        assert "+- Edits land with a receipt." in receipt
        assert _version(receipt) != version
        assert "- Edits land with a receipt." in (vault_copy / HANDOVER).read_text("utf-8")
        edit_id = re.search(r"edit_id (e-[0-9a-f]+)", receipt)
        assert edit_id
        # The receipt's version is current: the next edit needs no re-read.
        again = await client.call_tool(
            "vault_edit_note",
            {
                "path": HANDOVER,
                "operation": "set",
                "target": "status",
                "content": "handed over",
                "version": _version(receipt),
                "format": "json",
            },
        )
        data = json.loads(text_of(again))
        assert {"edit_id", "version", "diff"} <= set(data)
        assert "+status: handed over" in data["diff"]
        for edit in (data["edit_id"], edit_id.group(1)):
            undone = await client.call_tool("vault_undo_edit", {"edit_id": edit})
            assert not undone.is_error, text_of(undone)
        assert (vault_copy / HANDOVER).read_bytes() == original
        twice = await client.call_tool("vault_undo_edit", {"edit_id": edit_id.group(1)})
        assert twice.is_error and "already undone" in text_of(twice)


@pytest.mark.anyio
async def test_refusals_say_why_and_write_nothing(vault_copy: Path, tmp_path: Path) -> None:
    _settle(vault_copy, HANDOVER)
    original = (vault_copy / HANDOVER).read_bytes()
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        version = _version(text_of(await client.call_tool("vault_peek_file", {"path": HANDOVER})))
        text = original.decode("utf-8").replace("## Next steps\n", "## Next steps\n- urgent\n")
        (vault_copy / HANDOVER).write_text(text, "utf-8")
        _settle(vault_copy, HANDOVER)
        changed_text = (vault_copy / HANDOVER).read_bytes()
        stale = await client.call_tool(
            "vault_edit_note",
            {
                "path": HANDOVER,
                "operation": "append",
                "target": "Next steps",
                "content": "- mine",
                "version": version,
            },
        )
        assert stale.is_error
        message = text_of(stale)
        assert f"changed since version {version}" in message
        assert "+- urgent" in message  # what changed in the target section
        missing = await client.call_tool(
            "vault_edit_note",
            {"path": HANDOVER, "operation": "append", "target": "Nxt steps", "content": "x"},
        )
        assert missing.is_error and "Handover > Next steps (line" in text_of(missing)
        dry = await client.call_tool(
            "vault_edit_note",
            {
                "path": HANDOVER,
                "operation": "replace",
                "target": "Gotchas",
                "content": "none",
                "dry_run": True,
            },
        )
        assert text_of(dry).startswith("Dry run, nothing written")
        assert "+none" in text_of(dry)
        for path in (
            "obsidian-mcp/memory.md",
            "obsidian-mcp/memory/x.md",
            ".obsidian/app.md",
            "../outside.md",
        ):
            refused = await client.call_tool(
                "vault_edit_note", {"path": path, "operation": "create", "content": "x"}
            )
            assert refused.is_error, path
        exists = await client.call_tool(
            "vault_edit_note", {"path": HANDOVER, "operation": "create", "content": "new"}
        )
        assert exists.is_error and "create never overwrites" in text_of(exists)
    assert (vault_copy / HANDOVER).read_bytes() == changed_text
    assert not (vault_copy / "obsidian-mcp" / "memory.md").exists()
    assert not (tmp_path / "outside.md").exists()


@pytest.mark.anyio
async def test_a_note_the_user_is_typing_in_waits_unless_forced(
    vault_copy: Path, tmp_path: Path
) -> None:
    note = vault_copy / HANDOVER
    note.write_text(note.read_text("utf-8") + "\nThe user just typed this.\n", "utf-8")
    async with Client(build_server(folder_settings(vault_copy, tmp_path))) as client:
        arguments = {
            "path": HANDOVER,
            "operation": "append",
            "target": "Contacts",
            "content": "- agent",
        }
        # The user's save "a moment ago" is dated now, at the call, not at the test's start:
        # a busy machine starts a server in more than the 5 s a save counts as typing.
        os.utime(note)
        typing = await client.call_tool("vault_edit_note", arguments)
        assert typing.is_error and "could be typing" in text_of(typing)
        forced = await client.call_tool("vault_edit_note", {**arguments, "force": True})
        assert not forced.is_error, text_of(forced)
        # The server's own change a moment ago is not the user's typing.
        follow = await client.call_tool(
            "vault_edit_note", {**arguments, "content": "- agent again"}
        )
        assert not follow.is_error, text_of(follow)
    assert "The user just typed this." in note.read_text("utf-8")


@pytest.mark.anyio
async def test_edits_off_and_the_edit_family(tmp_path: Path) -> None:
    async with Client(build_server(folder_settings(tmp_path, tmp_path / "c", edits=False))) as c:
        names = {tool.name for tool in (await c.list_tools()).tools}
        assert not names & {"vault_edit_note", "vault_undo_edit"}
        assert "vault_edit_note" not in (c.instructions or "")
    async with Client(build_server(folder_settings(tmp_path, tmp_path / "c", tools="edit"))) as c:
        names = {tool.name for tool in (await c.list_tools()).tools}
        assert names == {"vault_edit_note", "vault_undo_edit"}


class _InterferingVault(Vault):
    """A vault where someone else writes the note once, between the edit's read and its
    write, as a user saving in Obsidian would."""

    def __init__(self, root: Path, change: tuple[str, str]) -> None:
        super().__init__(None, FolderSource(root))
        self._root = root
        self._change: tuple[str, str] | None = change

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        if self._change is not None:
            old, new = self._change
            self._change = None
            file = self._root / path
            file.write_text(file.read_text("utf-8").replace(old, new), "utf-8")
        await super().replace_if(path, expected, content)


NOTE = "# N\n\n## A\nalpha\n\n## B\nbeta\n"


def _interfered(root: Path, change: tuple[str, str]) -> Editor:
    """An editor whose note someone changes once between its read and its write."""
    journal = EditJournal(root / f"journal-{change[0]}.sqlite3")
    return Editor(_InterferingVault(root, change), journal, protected=lambda _: False)


@pytest.mark.anyio
async def test_a_change_elsewhere_is_kept_and_a_change_in_the_target_refuses(
    tmp_path: Path,
) -> None:
    (tmp_path / "n.md").write_text(NOTE, "utf-8")
    _settle(tmp_path, "n.md")
    elsewhere = _interfered(tmp_path, ("beta", "beta typed"))
    # A retry runs every check again: the note just changed, so without force the user
    # could be typing in it (issue 25 item 4).
    with pytest.raises(EditRefused, match="could be typing"):
        await elsewhere.edit("n.md", EditRequest("append", "A", "more"))
    assert (tmp_path / "n.md").read_text("utf-8") == NOTE.replace("beta", "beta typed")
    (tmp_path / "n.md").write_text(NOTE, "utf-8")
    _settle(tmp_path, "n.md")
    elsewhere = _interfered(tmp_path, ("beta", "beta typed"))
    receipt = await elsewhere.edit("n.md", EditRequest("append", "A", "more"), force=True)
    assert "made on the new text" in receipt.note
    assert (tmp_path / "n.md").read_text(
        "utf-8"
    ) == "# N\n\n## A\nalpha\n\nmore\n\n## B\nbeta typed\n"
    (tmp_path / "n.md").write_text(NOTE, "utf-8")
    in_target = _interfered(tmp_path, ("alpha", "alpha typed"))
    with pytest.raises(EditRefused, match="in its target"):
        await in_target.edit("n.md", EditRequest("replace", "A", "mine"), force=True)
    assert (tmp_path / "n.md").read_text("utf-8") == NOTE.replace("alpha", "alpha typed")


def test_the_journal_is_bounded(tmp_path: Path) -> None:
    journal = EditJournal(tmp_path / "j.sqlite3", kept=3)
    ids = [journal.record("n.md", 0, "a", "b", ("", "")) for _ in range(5)]
    assert [journal.get(i) is not None for i in ids] == [False, False, True, True, True]
    journal.close()


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["3.6.2", "6.0.0"])
async def test_through_obsidian_only_the_open_note_waits(
    version: str, vault_copy: Path, tmp_path: Path
) -> None:
    """With Obsidian and the vault folder, the guard asks Obsidian which note is open
    (`GET /active/`): a note changed a moment ago waits only if it is that one. Through
    Obsidian alone, where no write can be checked, a note changed a moment ago always
    waits, even with force."""
    note = vault_copy / HANDOVER
    note.write_text(note.read_text("utf-8") + "\nJust typed.\n", "utf-8")
    arguments = {
        "path": HANDOVER,
        "operation": "append",
        "target": "Contacts",
        "content": "- agent",
    }
    with StandinProcess(vault_copy, plugin_version=version) as process:
        async with Client(build_server(rest_settings(process, tmp_path))) as client:
            os.utime(note)  # a moment ago is at the call (see the test above)
            alone = await client.call_tool("vault_edit_note", {**arguments, "force": True})
            assert alone.is_error and "even with force" in text_of(alone)
        settings = rest_settings(process, tmp_path, vault_path=vault_copy)
        async with Client(build_server(settings)) as client:
            process.set_active(HANDOVER)
            os.utime(note)
            open_note = await client.call_tool("vault_edit_note", arguments)
            assert open_note.is_error and "could be typing" in text_of(open_note)
            process.set_active("Dev/Architecture.md")
            os.utime(note)
            elsewhere = await client.call_tool("vault_edit_note", arguments)
            assert not elsewhere.is_error, text_of(elsewhere)
    assert "- agent" in note.read_text("utf-8") and "Just typed." in note.read_text("utf-8")


def test_hostile_values_are_refused_or_kept_short() -> None:
    """Found by the hostile-input run: a value that contains itself (YAML anchors), now
    stored as the text it is, and a 200,000-character line whose receipt was as long."""
    from obsidian_mcp.editing.diff import DIFF_LINE_CHARS, diff_lines
    from obsidian_mcp.editing.operations import apply_edit

    for value in ("&a [*a, *a]", "[&a [*a], 1]"):
        edited = apply_edit("n.md", "---\na: 1\n---\n", EditRequest("set", "t", value))
        assert edited.text == f'---\na: 1\nt: "{value}"\n---\n'
    old, new = "a\n", "a\n" + "y" * 200_000 + "\n"
    shown = diff_lines(old, new)
    assert max(len(line) for line in shown) < DIFF_LINE_CHARS + 40
