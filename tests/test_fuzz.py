"""Hostile inputs, short profile: every tool, generated arguments, through the folder and
the stand-in, with a real MCP client. Every answer must be a result or an actionable
error, and nothing outside the memory files and the scratch note may change
(`bench.robustness.fuzz.WRITABLE`, `WRITABLE_FOLDERS`). The edit tools run on a copy of their own
(`bench.robustness.fuzz.edit_fuzz`): each call may change only the note it names, and only with a
receipt saying so; every other file under the run's folder (memory files, hidden folders,
the canary, the config and cache folders) must keep its bytes.

`python -m bench --fuzz` runs the long profile (1,000+ calls per tool) for the report.
"""

from functools import partial
from pathlib import Path
from typing import Any

from bench.robustness.fuzz import (
    EDIT_TOOLS,
    JOURNAL_FOLDER,
    WRITABLE,
    EditGuard,
    EditRun,
    Guard,
    Tally,
    edit_call,
    edit_fuzz,
    prepare_vault,
    run_fuzz,
)
from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.fixture_vault import FIXTURE_VAULT
from tests.standin.process import StandinProcess

# Calls per tool and source: about half a minute for both sources on the 2-core CI box.
EXAMPLES_PER_TOOL = 12


def _check(tally: Tally) -> None:
    rows = tally.rows()
    assert tally.failures() == 0, "\n".join(tally.examples)
    assert {row["tool"] for row in rows} >= {"vault_read_note", "vault_remember", *EDIT_TOOLS}
    edits = [row for row in rows if row["tool"] in EDIT_TOOLS]
    assert all(row["calls"] == EXAMPLES_PER_TOOL for row in edits), edits
    assert sum(row["outside"] for row in edits) == 0, "\n".join(tally.examples)


def _merge(first: Tally, second: Tally) -> Tally:
    first.counts.update(second.counts)
    first.examples += second.examples
    first.wrote.update(second.wrote)
    first.outside.update(second.outside)
    return first


def test_hostile_arguments_through_the_folder(tmp_path: Path) -> None:
    vault, canary = prepare_vault(FIXTURE_VAULT, tmp_path / "tools")
    guard = Guard(vault, canary, WRITABLE)
    server = build_server(folder_settings(vault, tmp_path / "config"))
    tally = run_fuzz(server, guard, EXAMPLES_PER_TOOL)

    root = tmp_path / "edits"
    edit_vault, _ = prepare_vault(FIXTURE_VAULT, root)
    settings = folder_settings(edit_vault, root / "config", cache_dir=root / "cache")
    edits = edit_fuzz(
        partial(build_server, settings), root, edit_vault, root / "cache", EXAMPLES_PER_TOOL
    )
    _check(_merge(tally, edits))


def test_hostile_arguments_through_the_standin(tmp_path: Path) -> None:
    vault, canary = prepare_vault(FIXTURE_VAULT, tmp_path / "tools")
    guard = Guard(vault, canary, WRITABLE)
    with StandinProcess(vault, plugin_version="5.1.0") as standin:
        server = build_server(rest_settings(standin, tmp_path / "config"))
        tally = run_fuzz(server, guard, EXAMPLES_PER_TOOL)

    root = tmp_path / "edits"
    edit_vault, _ = prepare_vault(FIXTURE_VAULT, root)
    with StandinProcess(edit_vault, plugin_version="5.1.0") as standin:
        settings = rest_settings(standin, root / "config", cache_dir=root / "cache")
        edits = edit_fuzz(
            partial(build_server, settings), root, edit_vault, root / "cache", EXAMPLES_PER_TOOL
        )
    _check(_merge(tally, edits))


def _fake_edit(tmp_path: Path, write: dict[str, str], reply: str) -> Tally:
    """One edit call judged by `edit_call`, with a fake server that writes `write`
    (vault paths and texts) and answers `reply`."""
    root = tmp_path / "run"
    vault, _ = prepare_vault(FIXTURE_VAULT, root)
    (root / "cache" / JOURNAL_FOLDER).mkdir(parents=True)
    tally = Tally()

    def call(tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
        for path, text in write.items():
            (vault / path).parent.mkdir(parents=True, exist_ok=True)
            (vault / path).write_text(text, "utf-8")
        (root / "cache" / JOURNAL_FOLDER / "journal").write_text("the journal may change")
        return "normal", reply

    run = EditRun(EditGuard(root, vault, root / "cache" / JOURNAL_FOLDER))
    arguments = {"path": "Dev/Handover", "operation": "append", "target": "Contacts"}
    edit_call(run, call, tally, "vault_edit_note", {**arguments, "content": "- x"})
    return tally


RECEIPT = "Edited Dev/Handover.md · append at Contacts · 1 → 2 chars · edit_id e-0123abcd"


def test_the_edit_check_accepts_a_write_of_the_named_note(tmp_path: Path) -> None:
    tally = _fake_edit(tmp_path, {"Dev/Handover.md": "new"}, RECEIPT)
    assert tally.failures() == 0, tally.examples
    assert tally.rows()[0]["wrote"] == 1


def test_the_edit_check_catches_writes_outside_the_named_note(tmp_path: Path) -> None:
    for number, path in enumerate(
        ["Home.md", "obsidian-mcp/memory/x-0-0.jsonl", ".obsidian/app.json", "New/Note.md"]
    ):
        tally = _fake_edit(tmp_path / str(number), {"Dev/Handover.md": "new", path: "x"}, RECEIPT)
        assert tally.rows()[0]["outside"] == 1, path
        assert tally.failures() == 1, path


def test_the_edit_check_leaves_sqlite_working_files_alone(tmp_path: Path) -> None:
    """SQLite writes a database's -wal and -shm files on its own schedule (a busy machine
    checkpoints the index mid-call): not a write the edit made. The database is checked."""
    root = tmp_path / "run"
    vault, _ = prepare_vault(FIXTURE_VAULT, root)
    cache = root / "cache"
    cache.mkdir()
    guard = EditGuard(root, vault)
    before = guard.snapshot()
    for name in ("index.sqlite-wal", "index.sqlite-shm", "memory.sqlite-journal"):
        (cache / name).write_bytes(b"pages")
    assert guard.judge(before, guard.snapshot(), None) == ("", [])
    (cache / "index.sqlite").write_bytes(b"changed")
    assert guard.judge(before, guard.snapshot(), None) == ("", ["cache/index.sqlite"])


def test_the_edit_check_catches_a_write_without_a_receipt(tmp_path: Path) -> None:
    tally = _fake_edit(tmp_path, {"Dev/Handover.md": "new"}, "Error: refused; nothing written")
    assert tally.failures() == 1
    tally = _fake_edit(tmp_path / "2", {}, RECEIPT)  # a receipt, and nothing changed
    assert tally.failures() == 1
