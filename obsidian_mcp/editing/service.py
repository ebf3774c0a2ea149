"""Edits as the tools make them: read, check, apply, write with a check, journal, receipt.

The stages, each in its own module: `operations` turns a note's text into the edited text
(pure); `versions` gives the tokens reads hand out; `vault.replace_if` writes only over
the text the edit was made from; `journal` keeps what undo needs; `diff` makes the
receipt's short diff. This module only orders them and decides when to refuse.

Why the server splices notes itself and never sends the plugin's PATCH: no version of it
can be made safe or byte-identical (`shared/reference/editing.md` §1). 3.x-4.x apply a
patch with no precondition, and 5.x checks `ifMatch` before a read-modify-write that is no
more atomic (`vaultOperations.ts`); duplicate headings resolve to the last one, a missing
nested target is created at the top level, any frontmatter change rewrites the whole YAML
block; 1.x and 2.0 own whitespace differently, and 6.0 drops 1.x. So every edit is
computed here from the note's text and written whole, only over that text
(`Vault.replace_if`): the same bytes through the folder and every plugin version.
"""

import difflib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from obsidian_mcp.editing.diff import changed_span, context_around, diff_lines
from obsidian_mcp.editing.journal import EditJournal, JournalEntry
from obsidian_mcp.editing.lines import newline_of, split_lines
from obsidian_mcp.editing.operations import (
    Applied,
    EditRequest,
    apply_edit,
    created_text,
)
from obsidian_mcp.editing.places import WHOLE_NOTE, place_of, region_of
from obsidian_mcp.editing.targets import (
    EditRefused,
    NoteStructure,
    TargetUnresolved,
    heading_matches,
    resolve_target,
    structure_of,
)
from obsidian_mcp.errors import NoteNotFound
from obsidian_mcp.limits import excerpt
from obsidian_mcp.paths import is_hidden, is_markdown, normalize_vault_path
from obsidian_mcp.sources.base import NoteData
from obsidian_mcp.sources.swap import NoteChanged
from obsidian_mcp.text.versions import is_version_token, split_version, version_of
from obsidian_mcp.vault import Vault

logger = logging.getLogger(__name__)

# A note changed this recently by someone other than this server, and open in Obsidian,
# is being typed in: Obsidian saves about 2 s after the last keystroke, so 5 s covers a
# pause between sentences without holding an agent back for long.
USER_EDIT_SECONDS = 5.0
# A save on this machine stamps the note with this machine's clock, so a modification
# time ahead of it came from elsewhere: a sync from a device whose clock runs ahead, or a
# network drive's server. Up to this far ahead it is taken as "now" (a network drive's
# clock a little off); beyond, the time says nothing about typing here.
CLOCK_AHEAD_SECONDS = 2.0
# An edit without a version whose note changed elsewhere between the read and the write
# is made again on the new text this many times, when its own section did not change.
_REAPPLY_ATTEMPTS = 3
# Undo finds an edit's text again by the characters right next to it: this many on a side
# (the journal keeps 40, so a change a little further away does not stop an undo; fewer
# would let a chance match of a short span pass).
_SIDE_CHARS = 16
# Lines of a changed section a refusal shows.
_CHANGED_LINES_SHOWN = 8


class UnknownEdit(EditRefused):
    """An undo of an id this vault's journal does not hold."""

    def __init__(self, edit_id: str) -> None:
        self.edit_id = edit_id.strip()
        super().__init__(
            f"No edit {excerpt(edit_id, 40)} in the journal (it keeps the last edits of "
            "this vault, made by this server). Use the edit_id from an edit's receipt."
        )


@dataclass(frozen=True, slots=True)
class Receipt:
    path: str
    operation: str
    target: str
    diff: list[str]
    chars_before: int
    chars_after: int
    version: str  # the note's version after the edit (before it, for a dry run)
    edit_id: str | None  # None for a dry run or an edit that changed nothing
    dry_run: bool = False
    note: str = ""  # what else the agent should know (a retry, a user change)


class Editor:
    def __init__(
        self,
        vault: Vault,
        journal: EditJournal,
        *,
        protected: Callable[[str], bool],
        clock: Callable[[], float] = time.time,
        user_edit_seconds: float = USER_EDIT_SECONDS,
    ) -> None:
        """`protected`: paths edits never touch (the memory files and their page)."""
        self._vault = vault
        self._journal = journal
        self._protected = protected
        self._clock = clock
        self._user_edit_seconds = user_edit_seconds

    def close(self) -> None:
        self._journal.close()

    def holds(self, edit_id: str) -> bool:
        """Whether this vault's journal has an edit of this id (to undo, or undone)."""
        return self._journal.get(edit_id) is not None

    # -- edit --------------------------------------------------------------------------

    def _check_path(self, raw_path: str) -> str:
        path = normalize_vault_path(raw_path)
        if not is_markdown(path):
            # Checked again with the extension: it may make a name too long for a file.
            path = normalize_vault_path(path + ".md")
        if is_hidden(path) or self._protected(path):
            raise EditRefused(
                f"{path!r} is not a note agents may edit (the memory files, their page and "
                "hidden folders are the server's or Obsidian's). Use vault_remember for "
                "memories; edit notes elsewhere in the vault."
            )
        return path

    async def edit(
        self,
        raw_path: str,
        request: EditRequest,
        *,
        version: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> Receipt:
        path = self._check_path(raw_path)
        if request.operation == "create":
            return await self._create(path, request, dry_run=dry_run)
        read = await self._vault.read_for_edit(path)
        path = read.path
        window: tuple[int, int] | None = None
        if version is not None:
            version, window = split_version(version)
            if version != version_of(read.content):
                raise EditRefused(self._stale_version(path, version, read.content, request))
        if window is not None and request.operation == "replace":
            request = _windowed(path, read.content, request, window)
        if dry_run:
            # What the real edit would be told, the typing guard's refusal included.
            await self._refuse_if_user_is_typing(read, force=force)
            applied = apply_edit(path, read.content, request)
            return self._receipt(
                path, request.operation, read.content, applied, edit_id=None, dry_run=True
            )
        notes: list[str] = []
        earlier: str | None = None
        for _ in range(_REAPPLY_ATTEMPTS):
            # Every attempt runs every check, on the text and the stat it read: a note
            # caught half saved, or being typed in, is left alone on a retry too.
            text = read.content
            said = await self._refuse_if_user_is_typing(read, force=force)
            notes += [said] if said and said not in notes else []
            if earlier is not None:
                self._refuse_if_target_changed(path, request, earlier, text, version)
            applied = apply_edit(path, text, request)
            if applied.text == text:
                return self._receipt(
                    path, request.operation, text, applied, edit_id=None, note=" ".join(notes)
                )
            self._journal.wrote(path, applied.text)  # before: no process reads it unnoted
            try:
                await self._vault.replace_if(path, text, applied.text)
            except NoteChanged as changed:
                if changed.current is None:
                    raise NoteNotFound(path) from None
                earlier = text
                read = await self._vault.read_for_edit(path)
                again = (
                    "The note changed elsewhere while this edit was made; the target "
                    "section had not, so the edit was made on the new text."
                )
                notes += [again] if again not in notes else []
                continue
            return self._written_receipt(path, request, text, applied, " ".join(notes))
        raise EditRefused(
            f"{path!r} kept changing while this edit was made ({_REAPPLY_ATTEMPTS} tries); "
            "nothing was written. Someone is editing it: wait, read it again and retry."
        )

    def _written_receipt(
        self, path: str, request: EditRequest, old: str, applied: Applied, note: str
    ) -> Receipt:
        edit_id = self._record(path, old, applied.text)
        self._wrote(path, applied.text)
        return self._receipt(path, request.operation, old, applied, edit_id=edit_id, note=note)

    def _record(self, path: str, old: str, new: str) -> str:
        """Journal what changed from `old` to `new`, and where it stands (its place)."""
        span = changed_span(old, new)
        return self._journal.record(
            path,
            span.start,
            old[span.start : span.old_end],
            new[span.start : span.new_end],
            context_around(new, span.start, span.new_end),
            # The section as the text stood before (its parse kept from the read): what
            # stood there is where the new text went.
            place_of(path, old, span.start, span.old_end),
        )

    def _wrote(self, path: str, text: str | None) -> None:
        # In the journal, which this server's processes share: a change one of them made
        # a moment ago is not the user typing, for the others either.
        if text is not None:
            self._journal.wrote(path, text)
            self._vault.handed_out(text)

    def _refuse_if_target_changed(
        self, path: str, request: EditRequest, text: str, current: str, version: str | None
    ) -> None:
        """After a conflict: EditRefused when the edit's own target changed between `text`
        and `current` (or the agent named the version it read)."""
        if version is not None:
            raise EditRefused(self._stale_version(path, version, current, request))
        before, after = _target_text(path, text, request), _target_text(path, current, request)
        if before != after:
            raise EditRefused(
                f"{path!r} changed while this edit was made, {_what_changed(before, after)} "
                f"Nothing was written; read the section again (version "
                f"{self._vault.handed_out(current)}) and edit that."
            )

    def _stale_version(self, path: str, version: str, current: str, request: EditRequest) -> str:
        now = self._vault.handed_out(current)
        if not is_version_token(version):
            return (
                f"{excerpt(version, 40)} is not a version this server hands out (a version is "
                "12 hexadecimal characters, from vault_read_note, vault_peek_file or an "
                f"edit's receipt); nothing was written. {path!r} is at version {now}: pass "
                "that after reading the note, or leave version out."
            )
        old = self._vault.recent.get(version)
        if old is None:
            what = "Its target now reads: " + _what_changed(
                None, _target_text(path, current, request)
            )
        else:
            what = _what_changed(
                _target_text(path, old, request), _target_text(path, current, request)
            )
        return (
            f"{path!r} changed since version {version} (it is {now} now); nothing was "
            f"written. {what} Make the edit against the current text with version={now}."
        )

    async def _refuse_if_user_is_typing(self, read: NoteData, *, force: bool) -> str:
        """Leave a note alone that someone else changed a moment ago and may still be
        saving. `force` overrides only what can be overridden safely: the user's typing in
        a note whose write is checked on disk. What the receipt should say, if anything."""
        path, text = read.path, read.content
        age = self._clock() - read.stat.mtime_ms / 1000
        if age < -CLOCK_AHEAD_SECONDS:
            return (
                f"Its modification time is {_span(-age)} ahead of this machine's clock (a sync "
                "from a device whose clock runs ahead?), so it was not taken as a sign of "
                "someone typing in it."
            )
        age = max(age, 0.0)
        if age >= self._user_edit_seconds or self._journal.wrote_lately(path, text):
            return ""
        wait = f"Wait {self._user_edit_seconds:.0f} s and read it again."
        if not text:
            # A save truncates the file before it writes it: an empty note changed a
            # moment ago is most likely half saved, and an edit made on it would replace
            # the whole text the save is about to write (measured: bench/robustness/edit_races.py).
            raise EditRefused(
                f"{path!r} is empty and changed {age:.0f} s ago: a save may be half "
                f"done, so nothing was written. {wait}"
            )
        if not self._vault.writes_checked:
            raise EditRefused(
                f"{path!r} changed {age:.0f} s ago, so nothing was written, even with "
                "force: through Obsidian's API alone a write cannot be checked against a save "
                "landing at the same moment (the plugin has no conditional write). "
                f"{wait} Setting OBSIDIAN_VAULT_PATH lets edits be checked on disk."
            )
        if force:
            return ""
        if await self._vault.open_in_obsidian(path) is False:
            return ""  # changed recently, but not in the note the user has open
        raise EditRefused(
            f"{path!r} changed {age:.0f} s ago and may be open in Obsidian: the user "
            f"could be typing in it, so nothing was written. Wait {self._user_edit_seconds:.0f} "
            "s and read it again, or pass force=true if the user asked for this edit now."
        )

    async def _create(self, path: str, request: EditRequest, *, dry_run: bool) -> Receipt:
        text = created_text(request)
        applied = Applied(text, "new note")
        twin = await self._vault.existing_spelling(path)
        if twin is not None:
            raise EditRefused(
                f"A note already exists at {twin!r}: the same name as {path!r} but for its "
                "letters' case or Unicode form, so the two would look alike in Obsidian (and "
                "be one file on macOS and Windows). Nothing was written. Edit that note, or "
                "choose another name."
            )
        if dry_run:
            try:
                await self._vault.read_for_edit(path)
            except NoteNotFound:
                return self._receipt(
                    path, request.operation, "", applied, edit_id=None, dry_run=True
                )
            raise EditRefused(_exists(path))
        self._journal.wrote(path, text)
        try:
            await self._vault.replace_if(path, None, text)
        except NoteChanged:
            raise EditRefused(_exists(path)) from None
        edit_id = self._journal.record(path, 0, None, text, ("", ""))
        self._wrote(path, text)
        return self._receipt(path, request.operation, "", applied, edit_id=edit_id)

    def _receipt(
        self,
        path: str,
        operation: str,
        old: str,
        applied: Applied,
        *,
        edit_id: str | None,
        dry_run: bool = False,
        note: str = "",
    ) -> Receipt:
        new = applied.text
        if new == old and not dry_run:
            note = note or "The note already reads so; nothing was written."
        return Receipt(
            path=path,
            operation=operation,
            target=applied.target,
            diff=diff_lines(old, new),
            chars_before=len(old),
            chars_after=len(new),
            version=self._vault.handed_out(new if not dry_run else old),
            edit_id=edit_id,
            dry_run=dry_run,
            note=note,
        )

    # -- undo --------------------------------------------------------------------------

    async def undo(self, edit_id: str) -> Receipt:
        entry = self._journal.get(edit_id)
        if entry is None:
            raise UnknownEdit(edit_id)
        if entry.undone_by is not None:
            raise EditRefused(
                f"Edit {entry.id} was already undone (by {entry.undone_by}); undo that one to "
                "make it again."
            )
        if entry.new_text is None or entry.old_text is None:
            return await self._undo_whole(entry)
        read = await self._vault.read_for_edit(entry.path)
        path, current = read.path, read.content
        # An undo writes into the note like an edit: never over the user's typing.
        await self._refuse_if_user_is_typing(read, force=False)
        try:
            start = _locate(path, current, entry)
        except EditRefused:
            # The note's line endings changed since (an editor that saves CRLF): the
            # edit's text, line for line, in the note's newline.
            converted = _in_newline(entry, newline_of(current))
            if converted == entry:
                raise
            entry = converted
            start = _locate(path, current, entry)
        assert entry.new_text is not None and entry.old_text is not None
        restored = current[:start] + entry.old_text + current[start + len(entry.new_text) :]
        self._journal.wrote(path, restored)
        try:
            await self._vault.replace_if(path, current, restored)
        except NoteChanged:
            raise EditRefused(
                f"{path!r} changed while the undo was made; nothing was written. Try again."
            ) from None
        undo_id = self._record(path, current, restored)
        self._journal.mark_undone(entry.id, undo_id)
        self._wrote(path, restored)
        return self._receipt(
            path, "undo", current, Applied(restored, f"undo of {entry.id}"), edit_id=undo_id
        )

    async def _undo_whole(self, entry: JournalEntry) -> Receipt:
        """Undo a create (the note goes, if nobody changed it) or the undo of one."""
        path = entry.path
        if entry.new_text is not None:
            try:
                await self._vault.remove_if(path, entry.new_text)
            except NoteChanged:
                raise EditRefused(
                    f"{path!r} changed since edit {entry.id} created it, so it was not "
                    "removed. Read it and remove it by hand if it should go."
                ) from None
            undo_id = self._journal.record(path, 0, entry.new_text, None, ("", ""))
            self._wrote(path, None)
            applied = Applied("", f"undo of {entry.id}: note removed")
            old = entry.new_text
        else:
            assert entry.old_text is not None
            self._journal.wrote(path, entry.old_text)
            try:
                await self._vault.replace_if(path, None, entry.old_text)
            except NoteChanged:
                raise EditRefused(
                    f"A note exists at {path!r} again, so edit {entry.id} cannot be undone."
                ) from None
            undo_id = self._journal.record(path, 0, None, entry.old_text, ("", ""))
            self._wrote(path, entry.old_text)
            applied = Applied(entry.old_text, f"undo of {entry.id}: note restored")
            old = ""
        self._journal.mark_undone(entry.id, undo_id)
        return self._receipt(path, "undo", old, applied, edit_id=undo_id)


def _windowed(path: str, text: str, request: EditRequest, window: tuple[int, int]) -> EditRequest:
    """`replace` with the version of a cut read: the content replaces that window of the
    target's text (as the read returned it) and the rest of the target stays, so a part
    read is never taken for the whole."""
    structure = structure_of(path, text)
    try:
        view = structure.text_of(resolve_target(structure, request.target or ""))
    except TargetUnresolved as exc:
        raise EditRefused(f"{exc} Nothing was written.") from None
    start, end = window
    if end > len(view):
        raise EditRefused(
            f"The version names characters {start:,}-{end:,} of a cut read, but the target "
            f"{excerpt(request.target or '', 80)} is {len(view):,} characters long: it was "
            "read with another target. Nothing was written. Pass the target you read, or "
            "read it again."
        )
    content = request.content or ""
    # A window cut at a line break ends with it; content sent back without it must not
    # join the next line.
    if view[start:end].endswith(("\n", "\r")) and content and not content.endswith(("\n", "\r")):
        content += "\n"
    return replace(request, content=view[:start] + content + view[end:])


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def _exists(path: str) -> str:
    return (
        f"A note already exists at {path!r}; create never overwrites one. Nothing was "
        "written. Edit it with append, prepend or replace, or choose a new path."
    )


def _in_newline(entry: JournalEntry, newline: str) -> JournalEntry:
    """The entry's texts with the note's newline now: a note whose line endings changed
    since (an editor that saves CRLF) still holds the edit's text, line for line."""
    texts = [entry.old_text or "", entry.new_text or "", entry.before, entry.after]
    was = newline_of("".join(texts))
    if was == newline or not any(("\r" in text or "\n" in text) for text in texts):
        return entry

    def convert(text: str | None) -> str | None:
        if text is None:
            return None
        return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", newline)

    return replace(
        entry,
        old_text=convert(entry.old_text),
        new_text=convert(entry.new_text),
        before=convert(entry.before) or "",
        after=convert(entry.after) or "",
    )


def _locate(path: str, current: str, entry: JournalEntry) -> int:
    """`_find` in the edit's section; where the section no longer holds it as written
    (its heading or the frontmatter around it broken by the user's typing), anywhere
    with the text on both sides as recorded."""
    region = None if entry.place is None else region_of(path, current, entry.place)
    try:
        return _find(path, current, entry, region)
    except EditRefused as in_section:
        if region is None:
            raise
        refused = in_section
    try:
        return _find(path, current, entry, None)
    except EditRefused:
        raise refused from None  # what the section holds says more than the whole note


def _find(path: str, current: str, entry: JournalEntry, region: tuple[int, int] | None) -> int:
    """Where the edit's new text still stands as the edit wrote it, within `region` (its
    section; None: the whole note); EditRefused, saying what changed, when it does not or
    cannot be told apart from other places. The same words elsewhere (pasted into another
    section) are never taken; text the user typed next to it, or moved within the
    section, does not stop the undo. In its section, a text found once is it when it is
    long enough not to be there by chance, or when the text on one side of it still reads
    as recorded; several are told apart by their sides, then by the recorded offset. A
    removal left no text: its place is where the text on both sides of it still meets."""
    assert entry.new_text is not None
    new = entry.new_text
    # No section to look in: anywhere, but only with the text on both sides as recorded.
    strict = region is None
    low, high = region or (0, len(current))

    def sides(at: int) -> int:
        return _side_kept(current, entry.before, at, before=True) + _side_kept(
            current, entry.after, at + len(new), before=False
        )

    if new:
        found = [at for at in _occurrences(current, new) if low <= at and at + len(new) <= high]
        long_and_alone = len(found) == 1 and len(new) >= _SIDE_CHARS and not strict
        places = [at for at in found if long_and_alone or sides(at) > int(strict)]
    else:
        join = entry.before[-_SIDE_CHARS:] + entry.after[:_SIDE_CHARS]
        found = [at + len(entry.before[-_SIDE_CHARS:]) for at in _occurrences(current, join)]
        places = [at for at in found if low <= at <= high and sides(at) == 2]
    ranked = [(sides(at), at == entry.start) for at in places]
    best = max(ranked, default=None)
    winners = [at for at, rank in zip(places, ranked, strict=True) if rank == best]
    if len(winners) == 1:
        return winners[0]
    where = {"": " above the first heading", WHOLE_NOTE: ""}.get(
        entry.place or "", f" in the section {entry.place}"
    )
    if strict and entry.place:
        where += " (no longer in the note)"
    wrote = excerpt(new, 120) if new else "a removal"
    now = excerpt(current[low:high].strip(), 240)
    why = (
        "it stands there more than once, and nothing tells which is the edit's"
        if len(winners) > 1
        else "it is not there as the edit wrote it: changed, moved out or removed since"
    )
    raise EditRefused(
        f"Edit {entry.id} wrote {wrote}{where} of {path!r}, and {why}; undo takes back "
        f"only the edit's own text, so nothing was written. The section now reads: {now}"
    )


def _side_kept(current: str, side: str, at: int, *, before: bool) -> bool:
    """Whether the text next to `at` still reads as recorded: its nearest characters, and
    where the recorded side was short because it reached the note's start or end, that
    edge too."""
    near = side[-_SIDE_CHARS:] if before else side[:_SIDE_CHARS]
    reaches_edge = len(side) < _SIDE_CHARS
    if before:
        return current.endswith(near, 0, at) and (not reaches_edge or at == len(near))
    return current.startswith(near, at) and (not reaches_edge or at + len(near) == len(current))


def _occurrences(text: str, part: str) -> list[int]:
    found: list[int] = []
    at = text.find(part)
    while at >= 0:
        found.append(at)
        at = text.find(part, at + 1)
    return found


def _target_text(path: str, text: str, request: EditRequest) -> str:
    """The part of the note an edit's target covers, to tell whether it changed."""
    target = (request.target or "").strip()
    if request.operation == "replace_text":
        # The text is replaced wherever it stands: what matters is how often it does.
        return f"{text.count(request.target or '')} matches of the text"
    lines = split_lines(text)
    structure = NoteStructure.of(path, lines)
    if request.operation in ("set", "delete"):
        return "\n".join(line.text for line in lines[: structure.body_line])
    if target.startswith("^"):
        return "\n".join(line.text for line in lines if target in line.text)
    matches = heading_matches(structure, target)
    if len(matches) != 1:
        return f"{len(matches)} matching headings"
    heading = matches[0]
    return "\n".join(line.text for line in lines[heading.heading_line : heading.end_line])


def _what_changed(before: str | None, after: str) -> str:
    if before is None:
        shown = after.splitlines()[:_CHANGED_LINES_SHOWN]
        return "\n".join(shown) + ("\n…" if len(after.splitlines()) > len(shown) else "")
    if before == after:
        return "its target section did not change (the change is elsewhere in the note)."
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    shown = changed[:_CHANGED_LINES_SHOWN]
    more = len(changed) - len(shown)
    return "in its target: " + " | ".join(shown) + (f" (and {more} more lines)." if more else ".")
