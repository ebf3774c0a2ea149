"""Issue 25's write-path examples (items 4, 6, 10 and 13) and issue 26 item 10, as they were
reported, through the real sources: the vault folder, the stand-in Local REST API, and a
second server process started from the command line."""

import json
import os
import subprocess
import sys
import time
import unicodedata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.doctor import run_checks
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor, Receipt
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.errors import PathRefused
from obsidian_mcp.opening import open_editor, open_vault
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.identity import PLUGIN_DATA
from obsidian_mcp.sources.rest import build_http_client
from obsidian_mcp.vault import OtherVault, Vault
from tests.conftest import folder_settings, free_port, rest_settings
from tests.fixture_vault import REPO_ROOT
from tests.standin.process import StandinProcess

LONG_AGO = time.time() - 3600


def _place(file: Path, data: bytes | str, *, at: float = LONG_AGO) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    os.utime(file, (at, at))
    return file


def _editor(vault: Vault, tmp_path: Path) -> Editor:
    return Editor(vault, EditJournal(tmp_path / "journal.sqlite3"), protected=lambda _: False)


@asynccontextmanager
async def _served_editor(settings: Settings) -> AsyncIterator[Editor]:
    """The editor of a server started with `settings`."""
    async with build_http_client(settings) as http:
        vault, _ = await open_vault(settings, http)
        assert vault is not None
        editor = open_editor(settings, vault)
        try:
            yield editor
        finally:
            editor.close()


async def _server_edit(settings: Settings, path: str, request: EditRequest) -> Receipt:
    """The edit as a server started with `settings` makes it."""
    async with _served_editor(settings) as editor:
        return await editor.edit(path, request)


# -- item 4: every attempt runs every check -------------------------------------------


class _SaveCaughtHalfWay(Vault):
    """The user's in-place save truncates the note between the edit's read and its write
    (Node's `fs.writeFile` opens with truncation and writes later)."""

    def __init__(self, root: Path, path: str) -> None:
        super().__init__(None, FolderSource(root))
        self._file: Path | None = root / path

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        if self._file is not None:
            os.close(os.open(self._file, os.O_WRONLY | os.O_TRUNC))
            self._file = None
        await super().replace_if(path, expected, content)


@pytest.mark.anyio
async def test_a_retry_leaves_a_save_caught_half_way_alone_even_with_force(
    tmp_path: Path,
) -> None:
    note = _place(tmp_path / "Task.md", "---\nstatus: open\n---\n# Task\n\nThe user's words.\n")
    editor = _editor(_SaveCaughtHalfWay(tmp_path, "Task.md"), tmp_path)
    try:
        with pytest.raises(EditRefused, match="half done"):
            await editor.edit("Task.md", EditRequest("set", "status", "done"), force=True)
    finally:
        editor.close()
    assert note.read_bytes() == b""  # the save's write lands on what it truncated
    assert note.read_bytes() != b"---\nstatus: done\n---\n"


# -- item 6: through REST alone, what the folder refuses --------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["3.2.0", "6.0.0"])
async def test_invalid_utf8_is_refused_through_rest_alone(tmp_path: Path, version: str) -> None:
    vault_dir = tmp_path / "vault"
    note = _place(vault_dir / "Cafe.md", b"# Caf\xe9\n\nMenu.\n")
    with StandinProcess(vault_dir, plugin_version=version, smart="off") as process:
        settings = rest_settings(process, tmp_path / "config")
        with pytest.raises(Exception, match="not valid UTF-8"):
            await _server_edit(settings, "Cafe.md", EditRequest("append", "Café", "Soup."))
    assert note.read_bytes() == b"# Caf\xe9\n\nMenu.\n"


# -- item 10: the vault, not the address ------------------------------------------------


def _small_vault(root: Path, words: str) -> Path:
    for name in ("Home.md", "Ideas.md", "Log.md"):
        _place(root / name, f"# {name[:-3]}\n\n{words} in {name}.\n")
    _place(root / "Daily" / "2026-05-01.md", f"# Day\n\n{words}.\n")
    return root


@pytest.mark.anyio
async def test_an_edit_id_does_not_undo_in_another_vault_on_the_same_port(
    tmp_path: Path,
) -> None:
    port = free_port()
    first = _small_vault(tmp_path / "first", "Same words")
    second = _small_vault(tmp_path / "second", "Same words")
    cache = {"cache_dir": tmp_path / "cache"}
    with StandinProcess(first, port=port, api_key="a" * 64, smart="off") as process:
        settings = rest_settings(process, tmp_path / "config", **cache)
        receipt = await _server_edit(settings, "Ideas.md", EditRequest("append", "Ideas", "- new"))
    assert receipt.edit_id is not None
    before = (second / "Ideas.md").read_bytes()
    with StandinProcess(second, port=port, api_key="b" * 64, smart="off") as process:
        settings = rest_settings(process, tmp_path / "config", **cache)
        async with _served_editor(settings) as editor:
            # The same note, the same text: only the journal's key tells the vaults apart.
            await editor.edit("Ideas.md", EditRequest("append", "Ideas", "- new"))
            (second / "Ideas.md").write_bytes(before)
            with pytest.raises(EditRefused, match="No edit"):
                await editor.undo(receipt.edit_id)
    assert (second / "Ideas.md").read_bytes() == before


@pytest.mark.anyio
@pytest.mark.parametrize("evidence", ["plugin key", "notes"])
async def test_a_folder_and_a_key_of_two_vaults_refuse_edits(tmp_path: Path, evidence: str) -> None:
    served = _small_vault(tmp_path / "served", "Served")
    folder = tmp_path / "folder"
    if evidence == "plugin key":
        # The same notes, but the folder's own plugin settings hold another key.
        _small_vault(folder, "Served")
        for file in served.rglob("*.md"):
            other = folder / file.relative_to(served)
            st = file.stat()
            os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        _place(folder / PLUGIN_DATA, json.dumps({"apiKey": "c" * 64, "port": 27124}))
    else:
        for name in ("Recipes.md", "Garden.md", "Travel.md", "Books.md"):
            _place(folder / name, f"# {name[:-3]}\n\nOther words.\n")
    with StandinProcess(served, smart="off") as process:
        settings = rest_settings(process, tmp_path / "config", vault_path=folder)
        with pytest.raises(OtherVault, match="not the same vault"):
            await _server_edit(settings, "Home.md", EditRequest("append", "Home", "- x"))
        report = await run_checks(settings)
        [same] = [check for check in report.checks if check.name == "same vault"]
        assert same.outcome == "fail", same
        # The folder and key of one vault agree.
        settings = rest_settings(process, tmp_path / "config", vault_path=served)
        report = await run_checks(settings)
        [same] = [check for check in report.checks if check.name == "same vault"]
        assert same.outcome == "ok", same
        await _server_edit(settings, "Home.md", EditRequest("append", "Home", "- agreed"))
    assert (served / "Home.md").read_text("utf-8").endswith("- agreed\n")


@pytest.mark.anyio
async def test_with_obsidian_closed_the_folder_is_edited(tmp_path: Path) -> None:
    folder = _small_vault(tmp_path / "vault", "Words")
    settings = Settings.model_validate(
        {
            "vault_path": folder,
            "config_dir": tmp_path / "config",
            "api_key": "d" * 64,
            "port": free_port(),
            "protocol": "http",
            "connect_timeout": 0.5,
            "request_timeout": 1.0,
            "retry_budget": 1.0,
            "index_meaning_wait_seconds": 0,
        }
    )
    await _server_edit(settings, "Log.md", EditRequest("append", "Log", "- offline"))
    assert (folder / "Log.md").read_text("utf-8").endswith("- offline\n")


# -- item 13: future times, Unicode forms, long names ----------------------------------


@pytest.mark.anyio
async def test_a_modification_time_in_the_future_is_not_someone_typing(tmp_path: Path) -> None:
    _place(tmp_path / "Synced.md", "# Synced\n\nFrom the laptop.\n", at=time.time() + 3 * 3600)
    editor = _editor(Vault(None, FolderSource(tmp_path)), tmp_path)
    try:
        receipt = await editor.edit("Synced.md", EditRequest("append", "Synced", "- agent"))
    finally:
        editor.close()
    assert "3 h ahead" in receipt.note
    assert (tmp_path / "Synced.md").read_text("utf-8").endswith("- agent\n")


@pytest.mark.anyio
@pytest.mark.parametrize("nfd_on_disk", [True, False])
async def test_a_name_in_another_unicode_form_is_the_same_note(
    tmp_path: Path, nfd_on_disk: bool
) -> None:
    name = "Café crème/Résumé.md"
    nfc, nfd = unicodedata.normalize("NFC", name), unicodedata.normalize("NFD", name)
    stored, asked = (nfd, nfc) if nfd_on_disk else (nfc, nfd)
    note = _place(tmp_path / stored, "# Résumé\n\nWork.\n")
    vault = Vault(None, FolderSource(tmp_path))
    assert (await vault.read_note(asked)).path == stored
    editor = _editor(vault, tmp_path)
    try:
        receipt = await editor.edit(asked, EditRequest("append", "Résumé", "- more"))
        assert receipt.path == stored
        with pytest.raises(EditRefused, match="case or Unicode form"):
            await editor.edit(asked, EditRequest("create", None, "# Twin\n"))
    finally:
        editor.close()
    assert note.read_text("utf-8").endswith("- more\n")
    assert sorted(p.name for p in note.parent.iterdir()) == [stored.split("/")[1]]


@pytest.mark.anyio
async def test_a_name_in_another_case_is_refused_for_create(tmp_path: Path) -> None:
    """Issue 34, kind 10: macOS and Windows keep `plan.md` and `Plan.md` in one file."""
    _place(tmp_path / "casing" / "Plan.md", "# Plan\n")
    editor = _editor(Vault(None, FolderSource(tmp_path)), tmp_path)
    try:
        with pytest.raises(EditRefused, match=r"at 'casing/Plan\.md'.* case or Unicode form"):
            await editor.edit("casing/plan.md", EditRequest("create", None, "# plan\n"))
    finally:
        editor.close()
    assert sorted(p.name for p in (tmp_path / "casing").iterdir()) == ["Plan.md"]


@pytest.mark.anyio
async def test_names_near_the_limit_work_and_longer_ones_are_named(tmp_path: Path) -> None:
    editor = _editor(Vault(None, FolderSource(tmp_path)), tmp_path)
    near = "n" * 249 + ".md"  # 252 bytes: fits, but not with a long temporary name beside
    try:
        await editor.edit(near, EditRequest("create", None, "# Near\n\nText.\n"))
        _place(tmp_path / near, (tmp_path / near).read_bytes())
        await editor.edit(near, EditRequest("append", "Near", "- more"))
        assert (tmp_path / near).read_text("utf-8").endswith("- more\n")
        # 253 bytes as given, 256 with the ".md" an edit adds: too long for any file.
        with pytest.raises(PathRefused, match="longer than 255 bytes"):
            await editor.edit("é" * 126 + "x", EditRequest("create", None, "# Long\n"))
    finally:
        editor.close()


# -- issue 26 item 10: this server's other process is not the user ---------------------


def _cli_edit(vault: Path, config: Path, content: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "obsidian_mcp",
            "call",
            "--vault",
            str(vault),
            "vault_edit_note",
            "path=Plan.md",
            "operation=append",
            "target=Plan",
            f"content={content}",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "OBSIDIAN_CONFIG_DIR": str(config)},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.anyio
async def test_an_edit_by_another_server_process_is_not_the_user_typing(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    note = _place(vault_dir / "Plan.md", "# Plan\n\n- first\n")
    done = _cli_edit(vault_dir, tmp_path / "config", "- from the other process")
    assert done.returncode == 0, done.stdout + done.stderr
    settings = folder_settings(vault_dir, tmp_path / "config")
    async with _served_editor(settings) as editor:
        # Changed a moment ago, by the server: no "the user could be typing".
        await editor.edit("Plan.md", EditRequest("append", "Plan", "- from this one"))
        # Changed a moment ago by someone else: that is the user.
        note.write_text(note.read_text("utf-8") + "- the user\n", "utf-8")
        with pytest.raises(EditRefused, match="could be typing"):
            await editor.edit("Plan.md", EditRequest("append", "Plan", "- too soon"))
    assert note.read_text("utf-8") == (
        "# Plan\n\n- first\n- from the other process\n- from this one\n- the user\n"
    )
