"""What an edit says back (issue 25 item 13): diffs that keep blank lines, undo that a
change next to the edit does not stop, refusals worded once and right, a version that is
not one, and an edit that changes nothing reported as such. Through a real Editor over a
vault folder."""

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from obsidian_mcp.editing.diff import diff_lines
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.server.edit_tools import format_receipt
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault

pytestmark = pytest.mark.anyio

NOTE = "Notes/Log.md"


def _write(vault: Path, text: str) -> Path:
    file = vault / NOTE
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, "utf-8", newline="")
    long_ago = time.time() - 3600
    os.utime(file, (long_ago, long_ago))
    return file


def _editor(vault: Vault, tmp_path: Path) -> Editor:
    return Editor(vault, EditJournal(tmp_path / "journal.sqlite3"), protected=lambda _: False)


def test_a_diff_shows_blank_lines_added_and_removed() -> None:
    assert diff_lines("## A\ntext\n", "## A\ntext\n\nmore\n") == [
        "@@ line 3 @@",
        " text",
        "+",
        "+more",
    ]
    assert diff_lines("a\n\n\nb\n", "a\nb\n") == ["@@ line 2 @@", " a", "-", "-", " b"]
    # The last line gaining the break it lacked is not a change.
    assert diff_lines("## Next", "## Next\n- ship") == ["@@ line 2 @@", " ## Next", "+- ship"]


@asynccontextmanager
async def _ticked_task(tmp_path: Path) -> AsyncIterator[tuple[Path, Editor, str]]:
    """A task list whose first task an edit ticked: the note's file, the editor, the
    edit's id."""
    file = _write(tmp_path, "## Tasks\n- [ ] write report ^w\n- [ ] call Ann\n")
    editor = _editor(Vault(None, FolderSource(tmp_path)), tmp_path)
    try:
        receipt = await editor.edit(NOTE, EditRequest("replace", "^w", "- [x] write report"))
        assert receipt.edit_id is not None
        yield file, editor, receipt.edit_id
    finally:
        editor.close()


async def test_undo_goes_ahead_when_only_text_near_the_edit_changed(tmp_path: Path) -> None:
    async with _ticked_task(tmp_path) as (file, editor, edit_id):
        # The user types on the lines right above and below the edit.
        _write(tmp_path, "## Tasks (today)\n- [x] write report ^w\n- [ ] call Ann now\n")
        await editor.undo(edit_id)
        assert (
            file.read_text("utf-8")
            == "## Tasks (today)\n- [ ] write report ^w\n- [ ] call Ann now\n"
        )


async def test_undo_is_refused_when_the_edited_text_changed(tmp_path: Path) -> None:
    async with _ticked_task(tmp_path) as (file, editor, edit_id):
        changed = "## Tasks\n- [-] write report ^w\n- [ ] call Ann\n"
        _write(tmp_path, changed)
        with pytest.raises(EditRefused, match="not there as the edit wrote it"):
            await editor.undo(edit_id)
        assert file.read_text("utf-8") == changed


async def test_a_version_not_handed_out_is_named_as_such(tmp_path: Path) -> None:
    _write(tmp_path, "## A\ntext\n")
    editor = _editor(Vault(None, FolderSource(tmp_path)), tmp_path)
    try:
        with pytest.raises(EditRefused) as refused:
            await editor.edit(NOTE, EditRequest("append", "A", "x"), version="garbage")
    finally:
        editor.close()
    message = str(refused.value)
    assert "'garbage' is not a version this server hands out" in message
    assert "changed since" not in message
    assert "at version " in message


async def test_an_edit_that_changes_nothing_says_so(tmp_path: Path) -> None:
    file = _write(tmp_path, "## A\ntext\n")
    editor = _editor(Vault(None, FolderSource(tmp_path)), tmp_path)
    try:
        receipt = await editor.edit(NOTE, EditRequest("replace", "A", "text"))
    finally:
        editor.close()
    assert receipt.edit_id is None
    shown = format_receipt(receipt)
    assert shown.startswith("Nothing changed: Notes/Log.md")
    assert "Edited" not in shown
    assert file.read_text("utf-8") == "## A\ntext\n"


class _UserSavesFirst(Vault):
    """A vault where the user's save lands between the edit's read and its write."""

    def __init__(self, folder: Path, saved: str) -> None:
        super().__init__(None, FolderSource(folder))
        self._folder = folder
        self._saved: str | None = saved

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        if self._saved is not None:
            (self._folder / path).write_text(self._saved, "utf-8")
            self._saved = None
        await super().replace_if(path, expected, content)


async def test_a_change_in_the_target_is_worded_once(tmp_path: Path) -> None:
    _write(tmp_path, "## A\none\n\n## B\ntwo\n")
    vault = _UserSavesFirst(tmp_path, "## A\none, edited by the user\n\n## B\ntwo\n")
    editor = _editor(vault, tmp_path)
    try:
        with pytest.raises(EditRefused) as refused:
            # force: the retry runs the typing guard again, and the user's save a moment
            # ago would be refused as the user typing before the target is compared.
            await editor.edit(NOTE, EditRequest("append", "A", "agent line"), force=True)
    finally:
        editor.close()
    message = str(refused.value)
    assert message.count("in its target") == 1
    assert "+one, edited by the user" in message
