"""The SQLite file that holds the memory index between processes (or in memory, for tests).

It is a cache: the memory files in the vault stay the only truth, and everything here can be
rebuilt from it. It lives outside the vault (see `obsidian_mcp.cachedir`). Several server
processes may share it: WAL lets readers run beside the one writer, and a busy timeout makes
a second writer wait its turn instead of failing. A file that is not a database, or has
another schema version, is replaced, with a log line, never a crash.
"""

import hashlib
import logging
import sqlite3
from pathlib import Path

from obsidian_mcp.sqlite_wal import use_wal

logger = logging.getLogger(__name__)

# Raised whenever the tables below change: an older file is then rebuilt from the memory file.
SCHEMA_VERSION = 3
# A writer waits this long for another process's transaction (a rebuild of 100,000 entries
# holds the write lock for about 5 s on the 2-core test machine) before giving up.
_BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE state (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
-- Where the index stands in each memory file (`index.FileState`), by file name.
CREATE TABLE files (name TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID;
-- Live memories (not forgotten), by slot: the order they were read in. `at` is when it
-- happened (`occurred`, else when written), in microseconds. `superseded` is 1 while a
-- live memory names it in its `supersedes`, and `file` is where its line was first read.
CREATE TABLE memories (
    slot INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    ts TEXT NOT NULL,
    at INTEGER NOT NULL,
    content TEXT NOT NULL,
    tags TEXT NOT NULL,
    context TEXT NOT NULL,
    type TEXT,
    source TEXT,
    scope TEXT,
    occurred TEXT,
    supersedes TEXT NOT NULL,
    superseded INTEGER NOT NULL,
    file TEXT NOT NULL,
    key BLOB NOT NULL,
    repeat INTEGER NOT NULL,
    meaning BLOB NOT NULL
);
CREATE INDEX memories_by_key ON memories (key, slot);
CREATE INDEX memories_by_time ON memories (repeat, at, slot);
CREATE INDEX memories_by_meaning ON memories (meaning);
CREATE INDEX memories_by_file ON memories (file);
-- Scopes in use are listed with every recall that names none, and few memories have one.
CREATE INDEX memories_by_scope ON memories (scope) WHERE scope IS NOT NULL;
-- Memory lines read from each file: live (their memory is in `memories`) and dead (its id
-- was forgotten, so folding drops the line).
CREATE TABLE file_lines (file TEXT PRIMARY KEY, live INTEGER NOT NULL, dead INTEGER NOT NULL)
    WITHOUT ROWID;
-- Which live memory replaces which (old, new).
CREATE TABLE supersessions (old TEXT NOT NULL, new TEXT NOT NULL, PRIMARY KEY (old, new))
    WITHOUT ROWID;
CREATE INDEX supersessions_by_new ON supersessions (new);
-- Ids with a tombstone (forgotten for good), the file it was first read from, the file the
-- memory's own line was first read from (NULL while none was), and what that memory
-- replaced (a fact replacing it replaces those too).
CREATE TABLE retired (id TEXT PRIMARY KEY, ts TEXT NOT NULL, file TEXT NOT NULL,
    memory_file TEXT, supersedes TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE memory_tags (tag TEXT NOT NULL, slot INTEGER NOT NULL, PRIMARY KEY (tag, slot))
    WITHOUT ROWID;
-- The words of each slot, already reduced by `index.terms` (contentless: rowid = slot).
CREATE VIRTUAL TABLE words USING fts5 (
    tags, text, content='', tokenize="unicode61 remove_diacritics 0 tokenchars '_'"
);
-- Embeddings of memory contents by content hash, kept across rebuilds of the rest.
CREATE TABLE vectors (model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (model, hash)) WITHOUT ROWID;
"""
# Indexes made on every open where missing, so that a cache of an earlier version gains
# them without being rebuilt (and losing its vectors):
# - ids by their last characters, for showing each by its shortest unique ending and finding
#   it again from that (`index.SHORT_ID_CHARS`, which these five must equal);
# - what a text query's candidates are filtered by, beside their slot, so the filter never
#   reads the memories' rows (`MemoryIndex.select`): at 100,000 memories, about 5,300
#   candidates a query, that look-up took 9.2 ms median / 27 ms p95 from the rows and 3.8 /
#   12 from this index.
_ADDED_INDEXES = """
CREATE INDEX IF NOT EXISTS memories_by_id_ending ON memories (substr(id, -5));
CREATE INDEX IF NOT EXISTS retired_by_id_ending ON retired (substr(id, -5));
CREATE INDEX IF NOT EXISTS memories_by_slot_filters
    ON memories (slot, repeat, superseded, at, scope, type);
"""
_TABLES = (
    "state",
    "files",
    "file_lines",
    "memories",
    "supersessions",
    "retired",
    "memory_tags",
    "words",
    "vectors",
)


def memory_cache_path(cache_dir: Path, vault_identity: str, memory_path: str) -> Path:
    """The cache file of one memory file: keyed by the vault (its folder, or the REST API
    it is reached through) and the memory file's path inside it."""
    key = hashlib.blake2b(f"{vault_identity}\0{memory_path}".encode(), digest_size=8)
    return cache_dir / "memory" / f"{key.hexdigest()}.sqlite"


def _connect(target: str) -> sqlite3.Connection:
    # Autocommit: transactions are opened explicitly (BEGIN IMMEDIATE for writers). The
    # connection is used from worker threads, one at a time, under the store's lock.
    db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    return db


def _prepare(db: sqlite3.Connection, where: str) -> sqlite3.Connection:
    if where != ":memory:":
        use_wal(db, _BUSY_TIMEOUT_MS / 1000)
        db.execute("PRAGMA synchronous = NORMAL")  # a cache: a lost last commit is re-read
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            if version:
                logger.info(
                    "memory cache %s has schema %d, not %d; rebuilding it",
                    where,
                    version,
                    SCHEMA_VERSION,
                )
            for table in _TABLES:
                db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for statement in _ADDED_INDEXES.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return db


def open_cache(path: Path | None) -> sqlite3.Connection:
    """The cache at `path` (created if need be), or a private one in memory for None."""
    if path is None:
        return _prepare(_connect(":memory:"), ":memory:")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _prepare(_connect(str(path)), str(path))
    except sqlite3.OperationalError:
        raise  # locked or unwritable: not a damaged file, and deleting it would not help
    except sqlite3.DatabaseError as exc:
        logger.warning(
            "memory cache %s is unreadable (%s); rebuilding it from the memory file", path, exc
        )
        for suffix in ("", "-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        return _prepare(_connect(str(path)), str(path))
