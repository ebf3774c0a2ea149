"""The edit corpus (tests/edit_corpus/, rules in docs/editing.md), and one case run through
a real Editor over a real vault: edit, compare the bytes, undo, compare again, then check
that undo is refused once the edited text has changed."""

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from obsidian_mcp.editing.diff import changed_span
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.errors import VaultError

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


async def run_case(editor: Editor, vault_dir: Path, case: EditCase) -> list[str]:
    """What went wrong with one case (nothing: an empty list)."""
    problems = await _run_case(editor, vault_dir, case)
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


async def _run_case(editor: Editor, vault_dir: Path, case: EditCase) -> list[str]:
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
    assert receipt.edit_id is not None
    await editor.undo(receipt.edit_id)
    if _read(file) != case.before:
        return [f"undo gave {_read(file)!r}, not the original bytes"]
    if link is not None and not link.is_symlink():
        return ["the link was replaced by a file"]
    problems += await _undo_after_change_is_refused(editor, file, case)
    _place(file, case.before)
    return problems


async def _undo_after_change_is_refused(editor: Editor, file: Path, case: EditCase) -> list[str]:
    receipt = await editor.edit(case.vault_path(), case.request)
    assert receipt.edit_id is not None and case.after is not None
    before = (case.before or b"").decode("utf-8")
    after = case.after.decode("utf-8")
    span = changed_span(before, after)
    # Someone changes the text the edit wrote (its middle; where it only removed text,
    # right where the text was).
    middle = span.start + (span.new_end - span.start) // 2
    changed = after[:middle] + "USER" + after[middle:]
    file.write_bytes(changed.encode("utf-8"))
    try:
        await editor.undo(receipt.edit_id)
    except EditRefused:
        if file.read_bytes() != changed.encode("utf-8"):
            return ["a refused undo changed the file"]
        return []
    return ["undo went ahead after the edited text changed"]
