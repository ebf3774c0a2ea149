"""The edit corpus (tests/edit_corpus/, rules in docs/editing.md), and one case run through
a real Editor over a real vault: edit, compare the bytes, undo, compare again, then check
that undo is refused once the edited text has changed. tests/test_edit_corpus.py runs it
(through the REST API a slice), bench/edit_corpus.py runs all of it through every source."""

import json
import os
import time
from collections.abc import AsyncIterator, Sequence
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


async def run_case(
    editor: Editor, vault_dir: Path, case: EditCase, *, undo_after_changes: bool = True
) -> list[str]:
    """What went wrong with one case (nothing: an empty list). `undo_after_changes`: also
    check that undo is refused once the edited text changed and goes ahead when only text
    near it did (how undo finds the text is the same on every source, so one is enough)."""
    path = case.vault_path()
    file = vault_dir / path
    _place(file, case.before)
    problems: list[str] = []
    try:
        receipt = await editor.edit(path, case.request)
    except EditRefused as refused:
        if case.refused is None or case.refused not in str(refused).lower():
            problems.append(f"refused: {refused}")
        if _read(file) != case.before:
            problems.append("a refused edit changed the file")
        return problems
    if case.refused is not None:
        return [f"expected a refusal ({case.refused}), the edit was made"]
    if _read(file) != case.after:
        return [f"bytes differ: got {_read(file)!r}, expected {case.after!r}"]
    assert receipt.edit_id is not None
    await editor.undo(receipt.edit_id)
    if _read(file) != case.before:
        return [f"undo gave {_read(file)!r}, not the original bytes"]
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
    file.write_bytes(changed.encode("utf-8"))
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
    file.write_bytes((after[:at] + "USER" + after[at:]).encode("utf-8"))
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


async def run_cases(
    editor: Editor, vault_dir: Path, cases: Sequence[EditCase], *, undo_after_changes: bool
) -> dict[str, list[str]]:
    """What went wrong, by case name (nothing: an empty dict). Several cases at once: each
    has its own note."""
    failures: dict[str, list[str]] = {}
    limiter = anyio.CapacityLimiter(CASES_AT_ONCE)

    async def run(case: EditCase) -> None:
        async with limiter:
            problems = await run_case(
                editor, vault_dir, case, undo_after_changes=undo_after_changes
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
async def corpus_editor(
    vault_dir: Path, work_dir: Path, plugin_version: str | None
) -> AsyncIterator[Editor]:
    """An editor over `vault_dir`: through the folder (`plugin_version` None) or through
    the stand-in Local REST API at that plugin version."""
    if plugin_version is None:
        editor = _editor(Vault(None, FolderSource(vault_dir)), work_dir)
        try:
            yield editor
        finally:
            editor.close()
        return
    with StandinProcess(vault_dir, plugin_version=plugin_version) as process:
        settings = rest_settings(process, work_dir / "config")
        async with build_http_client(settings) as http:
            editor = _editor(Vault(RestSource(http, settings), None), work_dir)
            try:
                yield editor
            finally:
                editor.close()
