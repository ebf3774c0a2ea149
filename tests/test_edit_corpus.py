"""Every corpus case gives its expected bytes through the engine, the vault folder and the
stand-in Local REST API at plugin 3.2, 4.1, 5.1 and 6.0; a refusal leaves the file as it
was; undo restores the original bytes. Through the folder, undo is also refused once the
edited text has changed, and goes ahead when only text near it did."""

from pathlib import Path

import anyio
import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import apply_edit, created_text
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.vault import Vault
from tests.conftest import rest_settings
from tests.edit_cases import EditCase, load_cases, run_case
from tests.standin.process import StandinProcess

CASES = load_cases()
# Cases run at once through one editor: with 8, the folder run takes 33 s wall for 11.5 s
# of CPU (farm-bench medians of 3, shared machine): each write's settle pause and fsync
# overlap the others'.
CASES_AT_ONCE = 8


def test_the_corpus_covers_what_the_issues_list() -> None:
    """Issue 18's contract cases and issue 25's shapes of real notes."""
    assert len(CASES) >= 300
    names = " ".join(case.name for case in CASES)
    for topic in (
        "duplicate",
        "fence",
        "setext",
        "callout",
        "list",
        "table",
        "block",
        "crlf",
        "non-ascii",
        "no-frontmatter",
        "last-section",
        "empty",
        # issue 25
        "tab-nested",
        "space-nested",
        "ordered",
        "task",
        "multiline-item",
        "lazy",
        "indented-code",
        "math",
        "comment",
        "html",
        "rule",
        "anchor",
        "mixed-endings",
        "bom",
        "no-final-newline",
        "nul",
        "c-sharp",
        "quoted",
    ):
        assert topic in names, topic
    assert sum(1 for case in CASES if case.refused) >= 30
    assert all(case.spec.get("why") for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_engine_gives_the_expected_bytes(case: EditCase) -> None:
    try:
        if case.before is None:
            result = created_text(case.request)
        else:
            result = apply_edit(case.spec["path"], case.before.decode("utf-8"), case.request).text
    except EditRefused as refused:
        assert case.refused is not None, str(refused)
        assert case.refused in str(refused).lower()
        return
    assert case.refused is None, "expected a refusal"
    assert case.after is not None
    assert result.encode("utf-8") == case.after


def _editor(vault: Vault, tmp_path: Path) -> Editor:
    return Editor(vault, EditJournal(tmp_path / "journal.sqlite3"), protected=lambda _: False)


async def _run_all(
    editor: Editor, vault_dir: Path, *, undo_after_changes: bool
) -> dict[str, list[str]]:
    """Every case, several at once: each has its own note, and a case's time is mostly the
    write's settle pause and the stand-in's round trips, which overlap."""
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
        for case in CASES:
            group.start_soon(run, case)
    return failures


@pytest.mark.anyio
async def test_corpus_through_the_vault_folder(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    editor = _editor(Vault(None, FolderSource(vault_dir)), tmp_path)
    try:
        assert await _run_all(editor, vault_dir, undo_after_changes=True) == {}
    finally:
        editor.close()


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["3.2.0", "4.1.7", "5.1.0", "6.0.0"])
async def test_corpus_through_the_rest_api(version: str, tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    with StandinProcess(vault_dir, plugin_version=version) as process:
        settings: Settings = rest_settings(process, tmp_path / "config")
        async with build_http_client(settings) as http:
            editor = _editor(Vault(RestSource(http, settings), None), tmp_path)
            try:
                assert await _run_all(editor, vault_dir, undo_after_changes=False) == {}
            finally:
                editor.close()
