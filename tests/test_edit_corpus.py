"""Every corpus case gives its expected bytes through the engine, the vault folder and the
stand-in Local REST API at plugin 3.2, 4.1, 5.1 and 6.0; undo restores the original bytes
and is refused once the edited text has changed."""

from pathlib import Path

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


def test_the_corpus_covers_what_the_issue_lists() -> None:
    assert len(CASES) >= 60
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
    ):
        assert topic in names, topic
    assert sum(1 for case in CASES if case.refused) >= 10


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_engine_gives_the_expected_bytes(case: EditCase) -> None:
    if case.write_path_only:
        # The sources refuse it before the engine is asked (the sources' tests below).
        assert case.refused is not None
        if case.refused == "not valid utf-8":
            assert case.before is not None and not _utf8(case.before)
        return
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


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _editor(vault: Vault, tmp_path: Path) -> Editor:
    return Editor(vault, EditJournal(tmp_path / "journal.sqlite3"), protected=lambda _: False)


async def _run_all(
    editor: Editor, vault_dir: Path, beside_folder: Editor | None = None
) -> dict[str, list[str]]:
    """Every case through `editor`; those only the folder can refuse through
    `beside_folder` when given (the REST API with the vault folder known)."""
    failures: dict[str, list[str]] = {}
    for case in CASES:
        chosen = beside_folder if case.needs_folder and beside_folder is not None else editor
        problems = await run_case(chosen, vault_dir, case)
        if problems:
            failures[case.name] = problems
    return failures


@pytest.mark.anyio
async def test_corpus_through_the_vault_folder(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    editor = _editor(Vault(None, FolderSource(vault_dir)), tmp_path)
    try:
        assert await _run_all(editor, vault_dir) == {}
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
            rest = RestSource(http, settings)
            beside = _editor(Vault(rest, FolderSource(vault_dir)), tmp_path / "beside")
            try:
                assert await _run_all(editor, vault_dir, beside) == {}
            finally:
                editor.close()
                beside.close()
