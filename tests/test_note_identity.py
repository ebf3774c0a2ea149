"""A note keeps its identity through an edit, as through Obsidian's own save (issue 25 item
9): the same inode, its hard links, its extended attributes and its creation time; a
symlinked note stays a link whose target is rewritten, and a link that leaves the vault is
refused. Undo keeps the identity too."""

import errno
import os
import time
from pathlib import Path

import pytest

from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.errors import PathRefused
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.statx import birth_time_ns

NOTE = "---\nstatus: draft\n---\n# Report\n\n## Log\n- first\n"
LONG_AGO = time.time() - 3600


def _place(file: Path, text: str) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, "utf-8")
    os.utime(file, (LONG_AGO, LONG_AGO))


def _editor(vault_dir: Path, tmp_path: Path) -> Editor:
    return Editor(
        Vault(None, FolderSource(vault_dir)),
        EditJournal(tmp_path / "journal.sqlite3"),
        protected=lambda _: False,
    )


def _tag(file: Path) -> bool:
    """Give the file a Finder-style tag; False where the filesystem refuses user xattrs."""
    try:
        os.setxattr(file, "user.com.apple.metadata:_kMDItemUserTags", b"Red\n6")
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EPERM, errno.EACCES):
            return False
        raise
    return True


@pytest.mark.anyio
async def test_an_edit_and_its_undo_keep_the_file(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    note = vault_dir / "Work" / "Report.md"
    _place(note, NOTE)
    outside = tmp_path / "elsewhere" / "Report hard link.md"
    outside.parent.mkdir()
    os.link(note, outside)
    tagged = _tag(note)
    before = os.stat(note)
    born = birth_time_ns(note)
    editor = _editor(vault_dir, tmp_path)
    try:
        edited = await editor.edit("Work/Report.md", EditRequest("set", "status", "final"))
        await editor.edit("Work/Report.md", EditRequest("append", "Log", "- second"))
        after = os.stat(note)
        assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
        assert after.st_nlink == 2
        assert outside.read_text("utf-8") == note.read_text("utf-8")
        assert "status: final" in note.read_text("utf-8")
        if tagged:
            assert os.getxattr(note, "user.com.apple.metadata:_kMDItemUserTags") == b"Red\n6"
        if born is not None:
            assert birth_time_ns(note) == born
        assert edited.edit_id is not None
        await editor.undo(edited.edit_id)
    finally:
        editor.close()
    assert os.stat(note).st_ino == before.st_ino
    assert "status: draft" in note.read_text("utf-8")
    assert "- second" in outside.read_text("utf-8")
    # The edit left nothing behind: no temporary file, no sibling.
    assert sorted(p.name for p in note.parent.iterdir()) == ["Report.md"]


@pytest.mark.anyio
async def test_a_symlinked_note_stays_a_link(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    target = vault_dir / "Archive" / "Real report.md"
    _place(target, NOTE)
    link = vault_dir / "Report.md"
    link.symlink_to(Path("Archive") / "Real report.md")
    editor = _editor(vault_dir, tmp_path)
    try:
        receipt = await editor.edit("Report.md", EditRequest("append", "Log", "- via link"))
        assert link.is_symlink()
        assert os.readlink(link) == str(Path("Archive") / "Real report.md")
        assert target.read_text("utf-8").endswith("- first\n- via link\n")
        assert receipt.edit_id is not None
        await editor.undo(receipt.edit_id)
        assert link.is_symlink() and target.read_text("utf-8") == NOTE
    finally:
        editor.close()


@pytest.mark.anyio
async def test_a_link_that_leaves_the_vault_is_refused(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    outside = tmp_path / "private.md"
    _place(outside, NOTE)
    (vault_dir / "Report.md").symlink_to(outside)
    editor = _editor(vault_dir, tmp_path)
    try:
        with pytest.raises(PathRefused, match="outside the vault"):
            await editor.edit("Report.md", EditRequest("append", "Log", "- leak"))
    finally:
        editor.close()
    assert outside.read_text("utf-8") == NOTE


@pytest.mark.anyio
async def test_a_loop_of_links_is_neither_listed_nor_followed(tmp_path: Path) -> None:
    """Two links pointing at each other lead to no file: the vault still lists, reads and
    edits its notes, and the loop itself is refused with what it is (it used to stop every
    listing with Python's "Symlink loop" error)."""
    vault_dir = tmp_path / "vault"
    _place(vault_dir / "Report.md", NOTE)
    (vault_dir / "Loop A.md").symlink_to("Loop B.md")
    (vault_dir / "Loop B.md").symlink_to("Loop A.md")
    vault = Vault(None, FolderSource(vault_dir))
    assert list(await vault.note_stats()) == ["Report.md"]
    editor = _editor(vault_dir, tmp_path)
    try:
        await editor.edit("Report.md", EditRequest("append", "Log", "- second"))
        with pytest.raises(PathRefused, match="loop of links"):
            await editor.edit("Loop A.md", EditRequest("append", "Log", "- lost"))
        with pytest.raises(PathRefused, match="loop of links"):
            await vault.read_note("Loop B.md")
    finally:
        editor.close()
