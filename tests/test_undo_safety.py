"""Undo takes back only the agent's own text, where the edit put it (issue 34, kind 2).

After an agent's edit, the user (or another agent) does what people do to a note; then
the agent undoes. Each row: what happened, and whether undo must go ahead or refuse. In
every row no word the user or the other agent wrote is lost: a refusal leaves the note
byte for byte as it was, and an undo that goes ahead changes the agent's span alone.
"""

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault

NOTE = "Plans.md"
BEFORE = "# Plans\n\n## A\nAlpha notes here.\n\n## B\nBeta notes here.\n\n## C\nGamma.\n"
AGENT = "Meeting moved to Friday at 10."
EDITED = BEFORE.replace("Beta notes here.", AGENT)


@dataclass(frozen=True)
class UserAction:
    name: str
    change: Callable[[str], str]
    undoes: bool  # True: undo goes ahead; False: it must refuse
    user_words: tuple[str, ...]  # what the user (or the other agent) wrote, to keep


ACTIONS = (
    UserAction(
        "typed inside it",
        lambda t: t.replace("Friday at 10", "Friday at 11, says Ana"),
        False,
        ("says Ana",),
    ),
    UserAction(
        "typed right under it",
        lambda t: t.replace(AGENT + "\n", AGENT + "\nBring the slides.\n"),
        True,
        ("Bring the slides.",),
    ),
    UserAction(
        "typed above it, lines moving it down",
        lambda t: t.replace("## B\n", "## B\nFirst a word.\n\n"),
        True,
        ("First a word.",),
    ),
    UserAction(
        "moved it below their own paragraph",
        lambda t: t.replace(AGENT + "\n", "User line.\n\n" + AGENT + "\n"),
        True,
        ("User line.",),
    ),
    UserAction(
        "pasted the agent's words into another section and rewrote its own",
        lambda t: t.replace(AGENT, "Beta rewritten by the user.").replace(
            "Alpha notes here.", "Alpha notes here. " + AGENT
        ),
        False,
        ("Beta rewritten by the user.", "Alpha notes here. " + AGENT),
    ),
    UserAction(
        "pasted a copy into another section, the original kept",
        lambda t: t.replace("Alpha notes here.", "Alpha notes here. " + AGENT),
        True,
        ("Alpha notes here. " + AGENT,),
    ),
    UserAction(
        "changed the note's line endings",
        lambda t: t.replace("\n", "\r\n"),
        True,
        (),
    ),
    UserAction(
        "another agent edited the same section, beside it",
        lambda t: t.replace(AGENT + "\n", AGENT + "\n\n- [ ] follow up\n"),
        True,
        ("- [ ] follow up",),
    ),
    UserAction(
        "another agent rewrote the agent's sentence",
        lambda t: t.replace(AGENT, "Meeting cancelled."),
        False,
        ("Meeting cancelled.",),
    ),
    UserAction(
        "retyped the section's heading",
        lambda t: t.replace("## B\n", "## Bee\n"),
        True,
        ("## Bee",),
    ),
    UserAction(
        "moved the section up and renamed it",
        lambda t: t.replace("## B\n" + AGENT + "\n\n", "").replace(
            "## A\n", "## Bee\n" + AGENT + "\n\n## A\n"
        ),
        False,
        ("## Bee",),
    ),
    UserAction(
        "removed the section",
        lambda t: t.replace("## B\n" + AGENT + "\n\n", ""),
        False,
        (),
    ),
)


def _settle(file: Path) -> None:
    long_ago = time.time() - 3600
    os.utime(file, (long_ago, long_ago))


def _note_and_editor(tmp_path: Path) -> tuple[Path, Editor]:
    """BEFORE in a vault folder, written an hour ago, and an editor over the folder."""
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    file = vault_dir / NOTE
    file.write_text(BEFORE, "utf-8", newline="")
    _settle(file)
    journal = EditJournal(tmp_path / "journal.sqlite3")
    return file, Editor(Vault(FolderSource(vault_dir), None), journal, protected=lambda _: False)


@pytest.mark.anyio
@pytest.mark.parametrize("action", ACTIONS, ids=[action.name for action in ACTIONS])
async def test_undo_never_takes_the_users_words(tmp_path: Path, action: UserAction) -> None:
    file, editor = _note_and_editor(tmp_path)
    try:
        receipt = await editor.edit(NOTE, EditRequest("replace", "B", AGENT))
        assert file.read_bytes().decode() == EDITED
        assert receipt.edit_id is not None
        changed = action.change(EDITED)
        file.write_bytes(changed.encode())
        _settle(file)
        if not action.undoes:
            with pytest.raises(EditRefused, match="nothing was written") as refused:
                await editor.undo(receipt.edit_id)
            assert file.read_bytes().decode() == changed  # byte for byte
            assert "now reads" in str(refused.value) or "no longer in" in str(refused.value)
            return
        await editor.undo(receipt.edit_id)
        after = file.read_bytes().decode()
        newline = "\r\n" if "\r\n" in changed else "\n"
        # The agent's sentence went back to what it replaced, at its own place only.
        assert after == _undone(changed, newline)
        for words in action.user_words:
            assert words in after, words
    finally:
        editor.close()


def _undone(changed: str, newline: str) -> str:
    """`changed` with the agent's sentence in section B put back to B's old text."""
    b_start = changed.index("## B")
    at = changed.index(AGENT, b_start)
    return changed[:at] + "Beta notes here." + changed[at + len(AGENT) :]


@pytest.mark.anyio
async def test_undo_waits_while_the_user_is_typing_and_a_dry_run_says_so(tmp_path: Path) -> None:
    file, editor = _note_and_editor(tmp_path)
    try:
        receipt = await editor.edit(NOTE, EditRequest("replace", "B", AGENT))
        assert receipt.edit_id is not None
        file.write_text(EDITED + "typed just now\n", "utf-8")  # modified a moment ago
        with pytest.raises(EditRefused, match=r"changed [0-9]+ s ago"):
            await editor.undo(receipt.edit_id)
        with pytest.raises(EditRefused, match=r"changed [0-9]+ s ago"):
            await editor.edit(NOTE, EditRequest("append", "C", "x"), dry_run=True)
        assert file.read_text("utf-8") == EDITED + "typed just now\n"
    finally:
        editor.close()
