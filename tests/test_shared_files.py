"""The SQLite files several server processes share (the undo journal, the passage index,
the memory cache), opened by several processes at the same moment, as when two MCP clients
start their servers together on a new vault: each process gets the file, none a private
copy in memory or an error (`obsidian_mcp/sqlite_wal.py`). Real processes: the race is
between their file locks."""

import multiprocessing
import multiprocessing.synchronize
from pathlib import Path

import pytest

from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.memory.cache import open_cache

PROCESSES = 4
# Before the fix, one new file in about 13 came out wrong (22 of 240 opens failed, four
# processes at once): 60 new files leave a broken opening a chance of passing under 1%.
ROUNDS = 60

_started_together: multiprocessing.synchronize.Barrier | None = None


def _share_barrier(barrier: multiprocessing.synchronize.Barrier) -> None:
    global _started_together  # a pool worker's one shared object
    _started_together = barrier


def _open_each_round(kind: str, folder: str, number: int) -> list[str]:
    """Open the round's new file with the others; what went wrong, if anything."""
    assert _started_together is not None
    wrong: list[str] = []
    for round_number in range(ROUNDS):
        file = Path(folder) / f"{round_number}.sqlite3"
        _started_together.wait()
        try:
            if kind == "journal":
                journal = EditJournal(file)
                journal.wrote("note.md", f"process {number}")
                journal.close()
            elif kind == "index":
                store = IndexStore(file)
                if store.path == ":memory:":
                    wrong.append(f"round {round_number}: the index was kept in memory")
                store.close()
            else:
                open_cache(file).close()
        except Exception as exc:  # what the test reports
            wrong.append(f"round {round_number}: {exc!r}")
    return wrong


@pytest.mark.parametrize("kind", ["journal", "index", "memory cache"])
def test_processes_opening_a_new_file_at_once_all_share_it(kind: str, tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES, timeout=60)
    with context.Pool(PROCESSES, initializer=_share_barrier, initargs=(barrier,)) as pool:
        outcomes = pool.starmap(
            _open_each_round, [(kind, str(tmp_path), n) for n in range(PROCESSES)]
        )
    assert [line for wrong in outcomes for line in wrong] == []
    if kind == "journal":
        # Each process's note of its write is in the file the others read.
        for round_number in range(ROUNDS):
            journal = EditJournal(tmp_path / f"{round_number}.sqlite3")
            for number in range(PROCESSES):
                assert journal.wrote_lately("note.md", f"process {number}"), round_number
            journal.close()
