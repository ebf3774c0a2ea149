"""SQLite files that several server processes open at once: the index, the memory cache,
the undo journal (each in the shared cache folder).

Each is put in WAL mode when it opens. Two processes opening a new file together both ask
for that, each holding the lock the other needs, so SQLite tells one "database is locked"
at once instead of waiting (a wait could never end), whatever its busy timeout. The other
is done in milliseconds: the one refused asks again. Measured before this: four processes
opening a fresh undo journal together, 22 of 240 opens failed, and a failed journal fell
back to memory, so the other processes took this one's edits for the user typing (CI,
tests/test_edit_races.py).
"""

import sqlite3
import time

# Between two tries: the switch another process makes takes a few milliseconds.
_PAUSE_SECONDS = (0.002, 0.05)


def use_wal(db: sqlite3.Connection, wait_seconds: float) -> str:
    """Put `db` in WAL mode, asking again while another process's switch holds it up;
    the journal mode the file has after (``memory`` for an in-memory database)."""
    deadline = time.monotonic() + wait_seconds
    pause = _PAUSE_SECONDS[0]
    while True:
        try:
            return str(db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            # The primary code: an extended one (SQLITE_BUSY_RECOVERY...) is busy too.
            busy = exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, _PAUSE_SECONDS[1])
