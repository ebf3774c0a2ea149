"""The undo journal: each edit's span before and after, in the cache folder, never the vault.

One SQLite file per vault beside the passage index (several server processes share it;
SQLite serialises their writes), keyed by the vault, not by the address serving it
(`sources/identity.journal_identity`). Bounded: the oldest entries go once there are more
than `KEPT_EDITS`, so it never grows with the vault's history.

It also keeps, per note, digests of the texts this server wrote there lately, shared by the
server's processes: a note changed a moment ago by another of them is not the user typing.
A text is noted before it is written, so that no other process reads it unnoted; one whose
write then failed is noted for nothing (a note never holds it, unless someone types exactly
it).
"""

import hashlib
import logging
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from obsidian_mcp.sqlite_wal import use_wal

logger = logging.getLogger(__name__)

# Another process's write of the journal (a row, a few milliseconds) is waited for this long.
_BUSY_TIMEOUT_MS = 5000

# Enough for every edit of a long working session, and a few megabytes at most.
KEPT_EDITS = 500
# What a note last received from this server is asked about only while its change is
# recent (the typing guard's seconds); an hour leaves room for a clock that jumps.
WRITTEN_KEPT_SECONDS = 3600.0
# An edit's id as `record` makes it, not already named with its vault (`work:e-...`): how
# a message's ids are found to name their vault.
EDIT_ID = re.compile(r"(?<![\w:-])e-[0-9a-f]{8}\b")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS edits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    at REAL NOT NULL,
    start INTEGER NOT NULL,
    old_text TEXT,
    new_text TEXT,
    before TEXT NOT NULL,
    after TEXT NOT NULL,
    undone_by TEXT,
    place TEXT
);
CREATE TABLE IF NOT EXISTS written (
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (path, digest)
);
"""


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """`old_text` became `new_text` at `start` of `path`. None means the note did not
    exist (before a create, after an undone create); then the texts are whole notes."""

    id: str
    path: str
    at: float
    start: int
    old_text: str | None
    new_text: str | None
    before: str  # the text just before the span, to find it again if lines above moved
    after: str
    undone_by: str | None
    # Where the edit put its text: the section holding it (`places.place_of`); None in
    # an entry written before the journal kept it.
    place: str | None = None


def _open(file: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        use_wal(db, _BUSY_TIMEOUT_MS / 1000)
        db.executescript(_SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(edits)")}
        if "place" not in columns:  # a journal from before undo knew places
            db.execute("ALTER TABLE edits ADD COLUMN place TEXT")
    except sqlite3.Error:
        db.close()
        raise
    return db


class EditJournal:
    def __init__(self, file: Path, *, kept: int = KEPT_EDITS) -> None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            self._db = _open(file)
        except (OSError, sqlite3.Error) as exc:
            # A full or read-only cache disk must not stop the server: edits still work,
            # and undo reaches back only through this session.
            logger.warning(
                "undo journal %s cannot be used (%s); keeping it in memory for this session",
                file,
                exc,
            )
            self._db = _open(":memory:")
        self._lock = threading.Lock()
        self._kept = kept

    def record(
        self,
        path: str,
        start: int,
        old_text: str | None,
        new_text: str | None,
        context: tuple[str, str],
        place: str | None = None,
    ) -> str:
        edit_id = "e-" + secrets.token_hex(4)
        row = (edit_id, path, time.time(), start, old_text, new_text, *context, place)
        with self._lock:
            try:
                self._insert(row)
            except sqlite3.Error as exc:
                # The edit is written already: its undo must not be what fails it.
                logger.warning("undo journal cannot be written (%s); keeping it in memory", exc)
                self._db.close()
                self._db = _open(":memory:")
                self._insert(row)
        return edit_id

    def _insert(self, row: tuple[object, ...]) -> None:
        self._db.execute(
            "INSERT INTO edits (id, path, at, start, old_text, new_text, before, after, place) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        self._db.execute(
            "DELETE FROM edits WHERE seq <= (SELECT MAX(seq) FROM edits) - ?", (self._kept,)
        )

    def get(self, edit_id: str) -> JournalEntry | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, path, at, start, old_text, new_text, before, after, undone_by, "
                "place FROM edits WHERE id = ?",
                (edit_id.strip(),),
            ).fetchone()
        return JournalEntry(*row) if row is not None else None

    def wrote(self, path: str, text: str) -> None:
        """This server is about to leave `text` in `path`, or just did."""
        now = time.time()
        with self._lock:
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO written (path, digest, at) VALUES (?, ?, ?)",
                    (path, _digest(text), now),
                )
                self._db.execute("DELETE FROM written WHERE at < ?", (now - WRITTEN_KEPT_SECONDS,))
            except sqlite3.Error as exc:
                logger.warning("undo journal cannot be written (%s)", exc)

    def wrote_lately(self, path: str, text: str) -> bool:
        """Whether this server (any of its processes) wrote `text` in `path` lately."""
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT 1 FROM written WHERE path = ? AND digest = ?", (path, _digest(text))
                ).fetchone()
            except sqlite3.Error:
                return False
        return row is not None

    def mark_undone(self, edit_id: str, by: str) -> None:
        with self._lock:
            self._db.execute("UPDATE edits SET undone_by = ? WHERE id = ?", (by, edit_id))

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
