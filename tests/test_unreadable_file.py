"""A note this process may not read gives a clear error and is skipped by searches.

Root reads any file whatever its mode, so when the tests run as root the folder source runs
in a child process stripped of the capabilities that override file modes (setpriv)."""

import os
import subprocess
import sys
from pathlib import Path

from tests.fixture_vault import REPO_ROOT

# Root without these two capabilities is held to file modes like any user.
WITHOUT_OVERRIDE = [
    "setpriv",
    "--bounding-set",
    "-dac_override,-dac_read_search",
    "--inh-caps",
    "-dac_override,-dac_read_search",
    "--",
]
CHILD = """
import sys, anyio
from pathlib import Path
from obsidian_mcp.errors import NotReadable
from obsidian_mcp.sources.folder import FolderSource

async def main():
    source = FolderSource(Path(sys.argv[1]))
    try:
        await source.read_note("Locked.md")
    except NotReadable as exc:
        print("READ:", exc)
    hits = await source.search_text("lantern", 100)
    print("SEARCH:", sorted(hit.path for hit in hits))

anyio.run(main)
"""


def test_an_unreadable_note_is_named_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "Open.md").write_text("# Open\n\nA lantern in the window.\n", "utf-8")
    locked = tmp_path / "Locked.md"
    locked.write_text("# Locked\n\nThe lantern is hidden.\n", "utf-8")
    locked.chmod(0o000)
    prefix = WITHOUT_OVERRIDE if os.geteuid() == 0 else []
    completed = subprocess.run(
        [*prefix, sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert completed.returncode == 0, completed.stderr
    assert "READ: 'Locked.md' cannot be read: permission denied" in completed.stdout
    assert "SEARCH: ['Open.md']" in completed.stdout
