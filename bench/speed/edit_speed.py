"""Edits on a 1 MB note: append, block replace and set, each the median of 20 (issue 34).

    python -m bench.speed.edit_speed [--size 1000000] [--runs 20]

The note is generated: sections of the shapes the fixture vault holds (a heading, two
paragraphs, a task list with nested items and block ids, a callout, a table with its id),
repeated under numbered headings until it is `--size` characters, with frontmatter. Each
edit goes through the real Editor over the vault folder, on a note the read handed out a
version for, in two ways:

* **warm**: the agent read the note (vault_read_note), then edits it, as an agent works:
  the note's structure is kept from the read that handed out the version;
* **cold**: the note's structure is not kept (a new text each time: the parse is paid).

Prints each operation's median, min and max in milliseconds, and markdown-it's own parse
of the note for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import anyio

from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.reading import read_note_window
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.text.markdown import parse_structure
from obsidian_mcp.vault import Vault

NOTE = "Big/Long log.md"


def section(number: int) -> str:
    return (
        f"## Session {number}\n\n"
        f"Mira lit the lamp on the north tower in session {number}, and the harbour "
        "watched the signal fade. Rook kept the ledger of every tide and every vow.\n\n"
        "The second paragraph says what was promised, and what it cost them later, in "
        f"more words than the first. ^p{number}\n\n"
        f"- [ ] ask the keeper about the lamp ^t{number}\n"
        "\t- [x] find the key\n"
        "\t- [ ] climb the stairs\n"
        "- [ ] write it down\n\n"
        f"> [!note] Session {number} aside\n> The tide turned early.\n\n"
        "| who | what |\n|---|---|\n| Mira | lamp |\n| Rook | ledger |\n"
        f"^tbl{number}\n\n"
    )


def long_note(size: int) -> str:
    parts = ["---\ntitle: Long log\nstatus: draft\ntags:\n  - log\n---\n# Long log\n\n"]
    number = 0
    while sum(map(len, parts)) < size:
        number += 1
        parts.append(section(number))
    return "".join(parts)


async def _timed(
    editor: Editor, vault: Vault, request: EditRequest, runs: int, warm: bool
) -> list[float]:
    times: list[float] = []
    for run in range(runs):
        # Each run writes new text, so that every edit changes the note.
        edit = replace(request, content=f"{request.content} {run}")
        if warm:
            # The agent's read: it hands out the version, and its parse is kept.
            await read_note_window(vault, NOTE, heading=None, offset=0, max_chars=200)
        started = time.perf_counter()
        receipt = await editor.edit(NOTE, edit, force=True)
        times.append((time.perf_counter() - started) * 1000)
        assert receipt.edit_id is not None, receipt.note
    return times


async def run(size: int, runs: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="edit-speed-") as work:
        root = Path(work) / "vault"
        (root / "Big").mkdir(parents=True)
        text = long_note(size)
        (root / NOTE).write_text(text, "utf-8")
        long_ago = time.time() - 3600
        os.utime(root / NOTE, (long_ago, long_ago))
        vault = Vault(None, FolderSource(root))
        editor = Editor(
            vault, EditJournal(Path(work) / "journal.sqlite3"), protected=lambda _: False
        )
        middle = text.count("## Session ") // 2
        requests = {
            "append": EditRequest("append", f"Session {middle}", "- [ ] one more task"),
            "block replace": EditRequest("replace", f"^p{middle}", "A new second paragraph."),
            "set": EditRequest("set", "status", "in review"),
        }
        results: dict[str, dict[str, float]] = {}
        started = time.perf_counter()
        parse_structure(NOTE, text)
        results["markdown-it parse of the note"] = {
            "median": (time.perf_counter() - started) * 1000
        }
        try:
            for warm in (True, False):
                for name, request in requests.items():
                    times = await _timed(editor, vault, request, runs, warm)
                    results[f"{name} ({'warm' if warm else 'cold'})"] = {
                        "median": statistics.median(times),
                        "min": min(times),
                        "max": max(times),
                    }
        finally:
            editor.close()
        return results


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    results = anyio.run(run, args.size, args.runs)
    for name, figures in results.items():
        shown = " ".join(f"{key} {value:,.0f} ms" for key, value in figures.items())
        print(f"{name}: {shown}")
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
