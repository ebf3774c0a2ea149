"""An edit cut short by a killed process is recovered by the next start (issue 25 item 9).

A real server process edits a note on disk and is SIGKILLed half-way through writing it
(the write is slowed down in that process only, so the kill lands between two chunks):
the note is left half new, half old. The next start (`open_vault`, as `serve` runs it)
finds the record the edit kept in the cache folder and puts the previous text back. If the
user changed the note after the crash, the note is left as it is and the previous text is
saved in the recovered folder, which `obsidian-mcp doctor` names."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.doctor import run_checks
from obsidian_mcp.opening import open_vault
from obsidian_mcp.sources.identity import recovery_log
from obsidian_mcp.sources.recovery import cut_short
from obsidian_mcp.sources.rest import build_http_client
from tests.conftest import folder_settings
from tests.fixture_vault import REPO_ROOT

OLD = "# Log\n\n" + "".join(f"- old line {n:03d}\n" for n in range(200))
ADDED = "".join(f"- new line {n:03d}\n" for n in range(400))

# The child: a server's vault and editor, its writes slowed to one small chunk at a time
# once the edit's write begins; it says "writing" after the first chunk.
CHILD = """
import os, sys, time, anyio
from pathlib import Path
from obsidian_mcp.config import Settings
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.opening import open_editor, open_vault
from obsidian_mcp.sources import swap
from obsidian_mcp.sources.rest import build_http_client

def slow_write(descriptor, data):
    for start in range(0, len(data), 64):
        os.pwrite(descriptor, data[start:start + 64], start)
        if start == 64 * 20:
            print("writing", flush=True)
        time.sleep(0.01)

async def main():
    settings = Settings.model_validate(
        {"vault_path": sys.argv[1], "config_dir": sys.argv[2], "index_meaning_wait_seconds": 0}
    )
    async with build_http_client(settings) as http:
        vault, _ = await open_vault(settings, http)
        editor = open_editor(settings, vault)
        swap._write_all = slow_write
        await editor.edit("Log.md", EditRequest("append", "Log", sys.argv[3]))

anyio.run(main)
"""


def _place(vault: Path) -> Path:
    note = vault / "Log.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(OLD, "utf-8")
    old = time.time() - 3600
    os.utime(note, (old, old))
    return note


def _kill_mid_write(settings: Settings) -> None:
    assert settings.vault_path is not None
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(settings.vault_path), str(settings.config_dir), ADDED],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "writing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


async def _start(settings: Settings) -> None:
    async with build_http_client(settings) as http:
        vault, _ = await open_vault(settings, http)
        assert vault is not None


@pytest.mark.anyio
async def test_the_next_start_puts_the_previous_text_back(tmp_path: Path) -> None:
    settings = folder_settings(tmp_path / "vault", tmp_path / "config")
    note = _place(tmp_path / "vault")
    _kill_mid_write(settings)
    torn = note.read_bytes()
    assert torn != OLD.encode() and torn.startswith(b"# Log\n")  # half new, half old
    log = recovery_log(settings)
    assert len(log.pending()) == 1
    await _start(settings)
    assert note.read_text("utf-8") == OLD
    assert log.pending() == [] and log.kept_files() == []


@pytest.mark.anyio
async def test_a_note_changed_since_is_left_and_its_old_text_offered(tmp_path: Path) -> None:
    settings = folder_settings(tmp_path / "vault", tmp_path / "config")
    note = _place(tmp_path / "vault")
    _kill_mid_write(settings)
    # Obsidian showed the half-written note and the user went on typing in it.
    typed = note.read_text("utf-8", errors="replace") + "the user typed on\n"
    note.write_text(typed, "utf-8")
    await _start(settings)
    assert note.read_text("utf-8") == typed
    log = recovery_log(settings)
    [kept] = log.kept_files()
    assert kept.read_text("utf-8") == OLD
    report = await run_checks(settings)
    [check] = [c for c in report.checks if c.name == "interrupted edits"]
    assert check.outcome == "warn" and str(kept) in check.detail


def test_what_a_cut_write_leaves_is_told_from_other_texts() -> None:
    old, new = b"abcdef", b"abXYZdefgh"
    padded = old + b"\0" * 4
    for cut in range(len(new)):
        assert cut_short(new[:cut] + padded[cut:], old, new) == (cut > 0 or padded != old)
    assert not cut_short(old, old, new)
    assert not cut_short(new, old, new)
    assert not cut_short(b"abcdef typed", old, new)
    # A shorter new text: its start over the old one, before the cut to its length.
    assert cut_short(b"abcdef", b"xycdef", b"ab")
    assert not cut_short(b"abZdef", b"xycdef", b"ab")
