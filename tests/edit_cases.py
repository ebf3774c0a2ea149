"""The edit corpus (tests/edit_corpus/, rules in docs/editing.md), and one case run through
a real Editor over a real vault: edit, compare the bytes, undo, compare again, then check
that undo is refused once the edited text has changed. tests/test_edit_corpus.py runs it
(through the REST API a slice), bench/editing/corpus.py runs all of it through every source."""

import json
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from obsidian_mcp.editing.diff import changed_span
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.errors import VaultError
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.vault import Vault
from tests.conftest import rest_settings
from tests.standin.process import StandinProcess

CORPUS = Path(__file__).parent / "edit_corpus"
# Notes are written this long before an edit, so the user-typing guard lets it through.
_LONG_AGO_SECONDS = 3600


@dataclass(frozen=True)
class EditCase:
    name: str
    spec: dict[str, Any]
    before: bytes | None
    after: bytes | None

    @property
    def request(self) -> EditRequest:
        spec = self.spec
        return EditRequest(
            spec["operation"],
            spec.get("target"),
            spec.get("content"),
            spec.get("expected_count"),
            spec.get("create_target", False),
        )

    @property
    def refused(self) -> str | None:
        return self.spec.get("refused")

    def vault_path(self) -> str:
        """Each case's note under its own folder, so all cases share one vault."""
        return f"corpus/{self.name}/{self.spec['path']}"

    @property
    def write_path_only(self) -> bool:
        """Decided before the engine sees the text: the path (a name too long, a link out
        of the vault), or bytes that are not UTF-8 (`"write_path": true`)."""
        return bool(self.spec.get("write_path"))

    @property
    def needs_folder(self) -> bool:
        """Only the vault folder can refuse it: a link whose target leaves the vault, which
        Obsidian (and so the REST API alone) follows."""
        return bool(self.spec.get("link_outside"))

    def files(self, vault_dir: Path) -> tuple[Path, Path | None]:
        """Where the note's bytes are, and the link at the edited path when the case has
        one. `disk_path`: the name on disk, when it differs from the path the edit gives
        (another Unicode form); `link_to`: the path (in the case's folder) a symlink at
        `path` points to; `link_outside`: the link points out of the vault."""
        folder = vault_dir / "corpus" / self.name
        spec = self.spec
        if spec.get("link_outside"):
            return vault_dir.parent / "outside" / self.name / "note.md", folder / spec["path"]
        if "link_to" in spec:
            return folder / spec["link_to"], folder / spec["path"]
        return folder / spec.get("disk_path", spec["path"]), None


def load_cases() -> list[EditCase]:
    cases: list[EditCase] = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        before, after = folder / "before.md", folder / "after.md"
        cases.append(
            EditCase(
                folder.name,
                json.loads((folder / "edit.json").read_text(encoding="utf-8")),
                before.read_bytes() if before.exists() else None,
                after.read_bytes() if after.exists() else None,
            )
        )
    return cases


def _read(file: Path) -> bytes | None:
    return file.read_bytes() if file.exists() else None


def _place(file: Path, data: bytes | None) -> None:
    if data is None:
        file.unlink(missing_ok=True)
        return
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data)
    old = time.time() - _LONG_AGO_SECONDS
    os.utime(file, (old, old))


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _names(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


async def run_case(
    editor: Editor, vault_dir: Path, case: EditCase, *, undo_after_changes: bool = True
) -> list[str]:
    """What went wrong with one case (nothing: an empty list). `undo_after_changes`: also
    check that undo is refused once the edited text changed and goes ahead when only text
    near it did (how undo finds the text is the same on every source, so one is enough)."""
    problems = await _run_case(editor, vault_dir, case, undo_after_changes)
    folder = vault_dir / "corpus" / case.name
    placed = {
        str(p.relative_to(folder))
        for p in case.files(vault_dir)
        if p is not None and p.is_relative_to(folder)
    }
    # Nothing beside the note: no twin in another Unicode form, no temporary file.
    if {n for n in _names(folder) if not (folder / n).is_dir()} - placed:
        problems.append(f"files left beside the note: {_names(folder)}")
    return problems


async def _run_case(
    editor: Editor, vault_dir: Path, case: EditCase, undo_after_changes: bool
) -> list[str]:
    path = case.vault_path()
    file, link = case.files(vault_dir)
    _place(file, case.before)
    if link is not None:
        _link(link, file)
    problems: list[str] = []
    try:
        receipt = await editor.edit(path, case.request)
    except VaultError as refused:  # EditRefused, or the path refused before any I/O
        if case.refused is None or case.refused not in str(refused).lower():
            problems.append(f"refused: {refused}")
        if _read(file) != case.before:
            problems.append("a refused edit changed the file")
        return problems
    if case.refused is not None:
        return [f"expected a refusal ({case.refused}), the edit was made"]
    if _read(file) != case.after:
        return [f"bytes differ: got {_read(file)!r}, expected {case.after!r}"]
    if case.after == case.before:
        # A target's text sent back as read (issue 34's GetPut): nothing written, and so
        # nothing to undo.
        return [] if receipt.edit_id is None else ["an edit that changed nothing got an id"]
    assert receipt.edit_id is not None
    await editor.undo(receipt.edit_id)
    if _read(file) != case.before:
        return [f"undo gave {_read(file)!r}, not the original bytes"]
    if link is not None and not link.is_symlink():
        return ["the link was replaced by a file"]
    if undo_after_changes:
        problems += await _undo_after_change_is_refused(editor, file, case)
        problems += await _undo_after_change_nearby(editor, file, case)
        _place(file, case.before)
    return problems


def _texts(case: EditCase) -> tuple[str, str]:
    assert case.after is not None
    return (case.before or b"").decode("utf-8"), case.after.decode("utf-8")


async def _undo_after_change_is_refused(editor: Editor, file: Path, case: EditCase) -> list[str]:
    _place(file, case.before)
    receipt = await editor.edit(case.vault_path(), case.request)
    assert receipt.edit_id is not None
    before, after = _texts(case)
    span = changed_span(before, after)
    # Someone changes the text the edit wrote: a character in its middle becomes "USER"
    # (where it only removed text, "USER" goes right where the text was).
    middle = span.start + (span.new_end - span.start) // 2
    replaced = 1 if span.new_end > span.start else 0
    changed = after[:middle] + "USER" + after[middle + replaced :]
    _place(file, changed.encode("utf-8"))  # typed a while ago: undo's typing guard lets it by
    try:
        await editor.undo(receipt.edit_id)
    except EditRefused:
        if file.read_bytes() != changed.encode("utf-8"):
            return ["a refused undo changed the file"]
        return []
    return ["undo went ahead after the edited text changed"]


# Far enough from an edit to leave what undo matches on intact, near enough that the
# context the journal keeps (40 characters either side) changed.
_NEARBY_CHARS = 20


async def _undo_after_change_nearby(editor: Editor, file: Path, case: EditCase) -> list[str]:
    """Text typed next to an edit (not in it) does not stop its undo, and stays."""
    before, after = _texts(case)
    span = changed_span(before, after)
    if span.start >= _NEARBY_CHARS:
        at, at_before = span.start - _NEARBY_CHARS, span.start - _NEARBY_CHARS
    elif len(after) - span.new_end >= _NEARBY_CHARS:
        at, at_before = span.new_end + _NEARBY_CHARS, span.old_end + _NEARBY_CHARS
    else:
        return []
    _place(file, case.before)
    receipt = await editor.edit(case.vault_path(), case.request)
    assert receipt.edit_id is not None
    _place(file, (after[:at] + "USER" + after[at:]).encode("utf-8"))
    try:
        await editor.undo(receipt.edit_id)
    except EditRefused as refused:
        return [f"undo refused after a change near the edit: {refused}"]
    expected = before[:at_before] + "USER" + before[at_before:]
    if file.read_bytes() != expected.encode("utf-8"):
        return [f"undo after a nearby change gave {file.read_bytes()!r}, not {expected!r}"]
    return []


# Cases run at once through one editor: with 8, the folder run takes 33 s wall for 11.5 s
# of CPU (farm-bench medians of 3, shared machine): each write's settle pause and fsync
# overlap the others'.
CASES_AT_ONCE = 8


# The editor a case runs through (`corpus_editors`).
EditorFor = Callable[[EditCase], Editor]


async def run_cases(
    editor_for: EditorFor,
    vault_dir: Path,
    cases: Sequence[EditCase],
    *,
    undo_after_changes: bool,
) -> dict[str, list[str]]:
    """What went wrong, by case name (nothing: an empty dict). Several cases at once: each
    has its own note."""
    failures: dict[str, list[str]] = {}
    limiter = anyio.CapacityLimiter(CASES_AT_ONCE)

    async def run(case: EditCase) -> None:
        async with limiter:
            problems = await run_case(
                editor_for(case), vault_dir, case, undo_after_changes=undo_after_changes
            )
        if problems:
            failures[case.name] = problems

    async with anyio.create_task_group() as group:
        for case in cases:
            group.start_soon(run, case)
    return failures


def _editor(vault: Vault, work_dir: Path) -> Editor:
    return Editor(vault, EditJournal(work_dir / "journal.sqlite3"), protected=lambda _: False)


@asynccontextmanager
async def corpus_editors(
    vault_dir: Path, work_dir: Path, plugin_version: str | None
) -> AsyncIterator[EditorFor]:
    """The editor for each case over `vault_dir`: through the folder (`plugin_version`
    None) or through the stand-in Local REST API at that plugin version; there the cases
    only the folder can refuse (`needs_folder`) go through the REST API with the vault
    folder known, since Obsidian follows links."""
    if plugin_version is None:
        editor = _editor(Vault(None, FolderSource(vault_dir)), work_dir)
        try:
            yield lambda _: editor
        finally:
            editor.close()
        return
    with StandinProcess(vault_dir, plugin_version=plugin_version) as process:
        settings = rest_settings(process, work_dir / "config")
        async with build_http_client(settings) as http:
            rest = RestSource(http, settings)
            alone = _editor(Vault(rest, None), work_dir)
            beside = _editor(Vault(rest, FolderSource(vault_dir)), work_dir / "beside")
            try:
                yield lambda case: beside if case.needs_folder else alone
            finally:
                alone.close()
                beside.close()
