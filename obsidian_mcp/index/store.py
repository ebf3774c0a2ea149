# pyright: strict
"""The persistent passage index: one SQLite file per vault, outside the vault.

It holds what a new server process needs to answer without reading a note: each note's
stat, content hash, text and the terms that name it; its passages (heading path, span,
index terms and their count); the texts embedded for each passage (a few sentences each,
see `obsidian_mcp.retrieval.corpus.WINDOW_CHARS`); and vectors keyed by the hash of such a
text, so an unchanged text is never embedded twice, whichever note it moves to.

Keywords are searched here, not in memory: two FTS5 tables index the passages' terms and
headings' terms (`passage_terms`) and the notes' name terms (`note_labels`), kept in step
by triggers, and read through `fts5vocab` tables (a term's postings with their counts, a
term's document frequency, terms by prefix). The terms are ours (`keyword.terms`: folded,
stemmed, joined by spaces), so BM25 is computed exactly as before FTS5, by
`retrieval.keyword.Bm25Index`.

Several server processes share one file: WAL (readers never wait for the writer), a busy
timeout, and every write in `BEGIN IMMEDIATE` (one writer at a time, taken up front so two
writers never deadlock upgrading their locks). `PRAGMA user_version` is the schema version:
`_MIGRATIONS[n]` takes a file from version n to n + 1, so a later change (the memory
vectors table, for one) is a new entry at the end; rows SQL cannot convert (float32
vectors to int8 codes, version 3) are converted in Python in the same transaction. A
file that SQLite cannot read, or that a newer program wrote, is set aside and rebuilt,
with a log line.

Everything here blocks; callers on the event loop run the heavy calls in a worker thread.
"""

import hashlib
import json
import logging
import os
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, chain, pairwise, repeat
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from obsidian_mcp.index import shortlist
from obsidian_mcp.index.coding import Codes, Matrix, quantized
from obsidian_mcp.sqlite_wal import use_wal

logger = logging.getLogger(__name__)

Ids = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Postings:
    """Where an index term occurs: one entry per passage and column, by passage id
    ascending, each with whether it is the passage's headings rather than its text and how
    often the term occurs there."""

    passages: Ids
    in_headings: npt.NDArray[np.bool_]
    occurrences: Ids


# How long a writer waits for another process's transaction before giving up; a batch of
# embeddings commits in well under a second, so this only trips on a hung process.
BUSY_TIMEOUT_MS = 10_000

# FTS5's trigram tokenizer came with SQLite 3.34 (December 2020).
TRIGRAMS = sqlite3.sqlite_version_info >= (3, 34, 0)
# Characters of a trigram: a shorter word has none to look up.
_TRIGRAM = 3

_MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: notes, passages, their embedded texts, vectors.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE notes (
        path TEXT PRIMARY KEY,
        mtime_ms INTEGER NOT NULL,
        size INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        label_terms TEXT NOT NULL,
        backlinks TEXT,
        content TEXT NOT NULL,
        indexed_at REAL NOT NULL
    );
    CREATE TABLE passages (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL REFERENCES notes(path) ON DELETE CASCADE,
        section TEXT NOT NULL,
        start INTEGER NOT NULL,
        "end" INTEGER NOT NULL,
        terms TEXT NOT NULL,
        heading_terms TEXT NOT NULL
    );
    CREATE INDEX passages_by_path ON passages(path);
    CREATE TABLE passage_texts (
        passage_id INTEGER NOT NULL REFERENCES passages(id) ON DELETE CASCADE,
        text_hash TEXT NOT NULL,
        text TEXT NOT NULL
    );
    CREATE INDEX passage_texts_by_passage ON passage_texts(passage_id);
    CREATE INDEX passage_texts_by_hash ON passage_texts(text_hash);
    CREATE TABLE passage_vectors (
        seq INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vector BLOB NOT NULL,
        UNIQUE (model, text_hash)
    );
    """,
    # 1 -> 2: keyword search in SQLite (FTS5) instead of an in-memory index rebuilt by every
    # new process. The terms indexed are ours (folded and stemmed by `keyword.terms`,
    # joined by spaces), so the `ascii` tokenizer only splits them on spaces and keeps
    # them byte for byte. Filled from the stored passages: an existing index upgrades
    # without reading a note and keeps its vectors.
    """
    ALTER TABLE passages ADD COLUMN length INTEGER NOT NULL DEFAULT 0;
    UPDATE passages SET length =
        CASE WHEN terms = '' THEN 0 ELSE length(terms) - length(replace(terms, ' ', '')) + 1 END;
    CREATE VIRTUAL TABLE passage_terms USING fts5(
        terms, heading_terms, content='passages', content_rowid='id',
        tokenize="ascii tokenchars '_'"
    );
    CREATE VIRTUAL TABLE passage_terms_instances USING fts5vocab(passage_terms, instance);
    CREATE VIRTUAL TABLE passage_terms_columns USING fts5vocab(passage_terms, col);
    CREATE TRIGGER passages_indexed AFTER INSERT ON passages BEGIN
        INSERT INTO passage_terms (rowid, terms, heading_terms)
        VALUES (new.id, new.terms, new.heading_terms);
    END;
    CREATE TRIGGER passages_unindexed AFTER DELETE ON passages BEGIN
        INSERT INTO passage_terms (passage_terms, rowid, terms, heading_terms)
        VALUES ('delete', old.id, old.terms, old.heading_terms);
    END;
    INSERT INTO passage_terms (passage_terms) VALUES ('rebuild');
    CREATE VIRTUAL TABLE note_labels USING fts5(
        label_terms, content='notes', content_rowid='rowid', tokenize="ascii tokenchars '_'"
    );
    CREATE VIRTUAL TABLE note_labels_instances USING fts5vocab(note_labels, instance);
    CREATE TRIGGER notes_indexed AFTER INSERT ON notes BEGIN
        INSERT INTO note_labels (rowid, label_terms) VALUES (new.rowid, new.label_terms);
    END;
    CREATE TRIGGER notes_unindexed AFTER DELETE ON notes BEGIN
        INSERT INTO note_labels (note_labels, rowid, label_terms)
        VALUES ('delete', old.rowid, old.label_terms);
    END;
    INSERT INTO note_labels (note_labels) VALUES ('rebuild');
    """,
    # 2 -> 3: vectors stored as int8 codes with a scale each (`quantized`), as a process
    # holds them: the table takes a quarter of the room, and a new process reads 62 MB
    # instead of 245 MB at 159,646 texts (0.17 s against 0.37 s with the coding). Stored
    # float32 rows are coded in place, by `_code_float_vectors`. Seqs never come back
    # (AUTOINCREMENT): a process reads the vectors stored after the last seq it saw, and
    # without it a vector stored after the newest ones were pruned took a seq already seen.
    """
    CREATE TABLE passage_vectors_coded (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vector BLOB NOT NULL,
        scale REAL,
        UNIQUE (model, text_hash)
    );
    INSERT INTO passage_vectors_coded (seq, model, text_hash, vector)
        SELECT seq, model, text_hash, vector FROM passage_vectors;
    DROP TABLE passage_vectors;
    ALTER TABLE passage_vectors_coded RENAME TO passage_vectors;
    """,
    # 3 -> 4: every note's text as trigrams, made by `_TRIGRAM_SCRIPT` when a file opens
    # (so a file an older SQLite brought to version 4 gains them once a newer one opens it).
    # The version tells a program older than the trigrams' triggers to rebuild, not write.
    "",
    # 4 -> 5: each note's links as its parse found them (JSON [[target, start, end], ...]),
    # so a built index's backlinks are found from them instead of parsing every note: the
    # first `vault_quick_context` of a new process at 10,000 notes took 6 s, all of it
    # parsing (python -m bench.speed.index). NULL for a note stored before: it is parsed
    # once when backlinks are first looked for, and its links kept then (`put_parsed`).
    # And the passages' lengths on their own, so BM25's totals (`keyword_totals`, counted
    # again after every write) read a small index, not every passage row: at 10,000 notes
    # the question right after an edit counted them 7 times, 0.66 s of its 1.5 s.
    """
    ALTER TABLE notes ADD COLUMN links TEXT;
    CREATE INDEX passages_by_length ON passages(length);
    """,
    # 5 -> 6: each model's vectors also in one row (`save_vector_snapshot`), so a new process
    # reads three blobs instead of a row a text: at 10,000 notes (159,646 texts) 0.24 s
    # against 0.55 s. The rows stay the truth (what is embedded, `unembedded`); the copy
    # holds every row of the model up to `through_seq` when it was written, and the rows
    # after it are read as before. A copy may still hold rows pruned since (texts no
    # passage has, never ranked into an answer); `prune_vectors` drops it. Filled by
    # `_migrate` for an index built before.
    # And each note's title as its parse found it (`ParsedNote.title`), so an exact search
    # weighs a match in a note's title without parsing every note that holds its words: at
    # 10,000 notes "harbour" parsed 6,289 notes, 4.8 s of its first call. NULL for a note
    # stored before: parsed when needed, and its title kept then (`put_parsed`).
    """
    ALTER TABLE notes ADD COLUMN title TEXT;
    CREATE TABLE vector_snapshots (
        model TEXT PRIMARY KEY,
        through_seq INTEGER NOT NULL,
        hashes BLOB NOT NULL,
        codes BLOB NOT NULL,
        scales BLOB NOT NULL
    );
    """,
    # 6 -> 7: every note as a process keeps it (`StoredNote`, its passages with their ids and
    # text hashes) also in one row (`save_note_snapshot`), so a new process makes its notes
    # from four blobs instead of a row per text, passage and note: at 10,000 notes (66,690
    # passages, 159,646 texts) 0.64-0.8 s of a new server's 1.9-2.2 s to its first answer
    # (python -m bench.speed.restart). The rows stay the truth: triggers log every note
    # written, deleted or updated, by any process, in `note_changes`, and a load takes the
    # notes logged after the snapshot's `through_seq` from their rows. Seqs never come back
    # (AUTOINCREMENT), so a log pruned up to a snapshot still orders what came after it.
    """
    CREATE TABLE note_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL);
    CREATE TRIGGER notes_logged_inserted AFTER INSERT ON notes BEGIN
        INSERT INTO note_changes (path) VALUES (new.path);
    END;
    CREATE TRIGGER notes_logged_deleted AFTER DELETE ON notes BEGIN
        INSERT INTO note_changes (path) VALUES (old.path);
    END;
    CREATE TRIGGER notes_logged_updated AFTER UPDATE ON notes BEGIN
        INSERT INTO note_changes (path) VALUES (old.path);
        INSERT INTO note_changes (path) VALUES (new.path);
    END;
    CREATE TABLE note_snapshot (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        through_seq INTEGER NOT NULL,
        held INTEGER NOT NULL,
        notes BLOB NOT NULL,
        sections BLOB NOT NULL,
        passages BLOB NOT NULL,
        hashes BLOB NOT NULL
    );
    """,
    # 7 -> 8: a model's snapshot of SHORTLIST_FROM_ROWS rows or more has its shortlist
    # beside it (`shortlist.Shortlisted`: the mean and directions as float32, each row's
    # projection coded), so a new process takes it in instead of fitting it again: at
    # 50,000 notes the fit took 3.9 s of both cores beside the notes' load at every start,
    # and a vault that grew kept the directions its first start found. A row of its own,
    # for the snapshot's `through_seq`: added to the snapshot's row, it rewrote all 385 MB
    # of it. `_migrate` adds it for a snapshot written before.
    """
    CREATE TABLE vector_shortlists (
        model TEXT PRIMARY KEY,
        through_seq INTEGER NOT NULL,
        mean BLOB NOT NULL,
        basis BLOB NOT NULL,
        codes BLOB NOT NULL,
        scales BLOB NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)
# Every note's text as trigrams (FTS5's `trigram` tokenizer), so `vault_smart_search` looks
# at only the notes that may hold its words instead of reading, parsing and matching every
# note: at 10,000 generated notes its first call took 37.8 s during a first build and each
# later one 0.37 s (python -m bench.speed.first_day). Case is folded; a word shorter than
# three characters has no trigram and narrows nothing. The text is the notes table's own
# (an external content table): the file grows by about 2.5 times the notes' text (22 MB of
# text: 56 MB).
_TRIGRAM_SCRIPT = """
CREATE VIRTUAL TABLE note_trigrams USING fts5(
    content, content='notes', content_rowid='rowid', tokenize='trigram'
);
CREATE TRIGGER notes_trigrams_indexed AFTER INSERT ON notes BEGIN
    INSERT INTO note_trigrams (rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER notes_trigrams_unindexed AFTER DELETE ON notes BEGIN
    INSERT INTO note_trigrams (note_trigrams, rowid, content)
    VALUES ('delete', old.rowid, old.content);
END;
INSERT INTO note_trigrams (note_trigrams) VALUES ('rebuild');
"""
# Rows coded per statement batch when an index is brought to version 3.
_CODING_BATCH = 4096
# Vectors stored outside a model's snapshot before it is written again: a share of those
# in it, and never fewer than this many rows (reading 4,096 rows takes about 15 ms, so a
# small vault needs no snapshot at all).
SNAPSHOT_REWRITE_SHARE = 0.1
SNAPSHOT_MIN_ROWS = 4096
# Notes changed (rows of `note_changes`) outside the notes' snapshot before it is written
# again: a share of the notes it holds (as for the vectors), and never fewer than this many.
# A changed note is loaded from its rows, 0.09-0.15 ms each against 0.03 ms from the
# snapshot (10,000 notes, 64 to 1,000 notes changed), so this many add about 0.05 s to a
# new process; a vault that never reaches it loads from its rows in about that.
NOTE_SNAPSHOT_MIN_CHANGES = 512
# A passage in the notes' snapshot: id, heading path (its index in the snapshot's list),
# start, end, length (index terms) and how many embedded texts it has.
_PASSAGE_COLUMNS_HELD = 6
# Values bound in one `IN (...)`: SQLite allows 32,766 variables, older builds 999.
_IN_CLAUSE_MAX = 500
_TABLES = (
    "meta",
    "notes",
    "passages",
    "passage_texts",
    "passage_vectors",
    "passage_terms",
    "vector_snapshots",
    "vector_shortlists",
    "note_changes",
    "note_snapshot",
)


def _statements(script: str) -> Generator[str]:
    """The statements of a migration script, triggers (with their inner `;`) whole."""
    statement = ""
    for piece in script.split(";"):
        statement += piece + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                yield statement
            statement = ""


def _code_float_vectors(db: sqlite3.Connection) -> int:
    """Code the vectors stored as float32 (a scale of NULL) in place; how many. Also rows
    a process of an older version wrote after the upgrade."""
    coded = 0
    while rows := db.execute(
        "SELECT seq, vector FROM passage_vectors WHERE scale IS NULL LIMIT ?", (_CODING_BATCH,)
    ).fetchall():
        seqs, blobs = zip(*rows, strict=True)
        codes, scales = quantized(np.stack([_row_floats(blob, None) for blob in blobs]))
        db.executemany(
            "UPDATE passage_vectors SET vector = ?, scale = ? WHERE seq = ?",
            zip((row.tobytes() for row in codes), scales.tolist(), seqs, strict=True),
        )
        coded += len(rows)
    return coded


def _row_floats(blob: bytes, scale: float | None) -> Matrix:
    """One stored vector as float32, whether stored coded or (by an older version) not."""
    if scale is None:
        return np.frombuffer(blob, dtype=np.float32)
    return np.frombuffer(blob, dtype=np.int8).astype(np.float32) * np.float32(scale)


def _vectors_after(db: sqlite3.Connection, model: str, seq: int) -> int:
    return int(
        db.execute(
            "SELECT count(*) FROM passage_vectors WHERE seq > ? AND +model = ?", (seq, model)
        ).fetchone()[0]
    )


def _vector_snapshot_due(db: sqlite3.Connection, model: str) -> bool:
    """Whether enough vectors are stored outside the model's snapshot, or its rows have
    reached the size that has a shortlist and it has none."""
    row = db.execute(
        "SELECT through_seq, length(scales) / 4, EXISTS (SELECT 1 FROM vector_shortlists l "
        "WHERE l.model = s.model AND l.through_seq = s.through_seq) "
        "FROM vector_snapshots s WHERE model = ?",
        (model,),
    ).fetchone()
    through_seq, held, has_shortlist = row or (0, 0, False)
    outside = _vectors_after(db, model, through_seq)
    if not has_shortlist and held + outside >= shortlist.SHORTLIST_FROM_ROWS:
        return True
    return outside >= max(SNAPSHOT_MIN_ROWS, SNAPSHOT_REWRITE_SHARE * held)


def _write_vector_snapshot(db: sqlite3.Connection, model: str) -> int:
    """Copy every vector of `model` into its snapshot row, in the caller's write transaction
    (no vector is stored meanwhile); how many. Each row is copied into one buffer as SQLite
    steps through them, so no list of 160,000 small objects is left behind in the
    allocator's arenas of the process that writes."""
    through_seq = int(db.execute("SELECT coalesce(max(seq), 0) FROM passage_vectors").fetchone()[0])
    count = _vectors_after(db, model, 0)
    if not count:
        db.execute("DELETE FROM vector_snapshots WHERE model = ?", (model,))
        return 0
    hashes = bytearray()
    codes = bytearray()
    scales = np.empty(count, dtype=np.float32)
    for row, (digest, blob, scale) in enumerate(
        db.execute(
            "SELECT text_hash, vector, scale FROM passage_vectors WHERE +model = ? ORDER BY seq",
            (model,),
        )
    ):
        if scale is None:  # float32, stored by a process of an older version
            coded, coded_scale = quantized(_row_floats(blob, None)[None, :])
            blob, scale = coded.tobytes(), float(coded_scale[0])
        if row:
            hashes += b"\n"
        hashes += digest.encode("utf-8")
        codes += blob
        scales[row] = scale
    db.execute(
        "INSERT OR REPLACE INTO vector_snapshots VALUES (?, ?, ?, ?, ?)",
        (model, through_seq, bytes(hashes), bytes(codes), scales.tobytes()),
    )
    db.execute("DELETE FROM vector_shortlists WHERE model = ?", (model,))
    _put_snapshot_shortlist(
        db, model, through_seq, np.frombuffer(codes, dtype=np.int8).reshape(count, -1), scales
    )
    return count


def _coded_rows(codes: bytes, scales: bytes) -> tuple[Codes, Matrix] | None:
    """A vector snapshot's codes and scales as arrays, a scale a row; None when they do not
    fit together (a damaged row)."""
    scale_array = np.frombuffer(scales, dtype=np.float32)
    if not len(scale_array) or len(codes) % len(scale_array):
        return None
    return np.frombuffer(codes, dtype=np.int8).reshape(len(scale_array), -1), scale_array


def _put_snapshot_shortlist(
    db: sqlite3.Connection, model: str, through_seq: int, codes: Codes, scales: Matrix
) -> None:
    """Store the shortlist of the model's snapshot through `through_seq`, whose rows are
    `codes` and `scales`, once they are SHORTLIST_FROM_ROWS or more: 1.2 s at 801,960
    rows, in the snapshot's write transaction, as it describes exactly those rows."""
    if len(codes) < shortlist.SHORTLIST_FROM_ROWS:
        return
    found = shortlist.shortlisted(codes, scales)
    db.execute(
        "INSERT OR REPLACE INTO vector_shortlists VALUES (?, ?, ?, ?, ?, ?)",
        (
            model,
            through_seq,
            found.projection.mean.tobytes(),
            found.projection.basis.tobytes(),
            found.codes.tobytes(),
            found.scales.tobytes(),
        ),
    )


def _snapshot_shortlist(
    dims: int,
    rows: int,
    mean: bytes | None,
    basis: bytes | None,
    codes: bytes | None,
    scales: bytes | None,
) -> shortlist.Shortlisted | None:
    """The shortlist stored for a snapshot of `rows` rows of `dims`; None without one, or
    with one that does not fit its rows (the process fits one again)."""
    if mean is None or basis is None or codes is None or scales is None:
        return None
    mean_array = np.frombuffer(mean, dtype=np.float32)
    basis_array = np.frombuffer(basis, dtype=np.float32)
    code_array = np.frombuffer(codes, dtype=np.int8)
    scale_array = np.frombuffer(scales, dtype=np.float32)
    if (
        len(mean_array) != dims
        or not len(basis_array)
        or len(basis_array) % dims
        or len(scale_array) != rows
        or len(code_array) != rows * (len(basis_array) // dims)
    ):
        return None
    projection = shortlist.Projection(mean_array, basis_array.reshape(dims, -1))
    return shortlist.Shortlisted(projection, code_array.reshape(rows, -1), scale_array)


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def index_file(index_dir: Path, identity: str, name: str) -> Path:
    """The index of the vault known by `identity`; `name` only makes the file recognisable."""
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
    readable = _UNSAFE_NAME.sub("-", name).strip("-")[:40] or "vault"
    return index_dir / f"{readable}-{digest}.sqlite3"


@dataclass(frozen=True, slots=True)
class PassageRow:
    section: tuple[str, ...]
    start: int
    end: int
    terms: tuple[str, ...]
    heading_terms: tuple[str, ...]
    # What the embedding model sees: a few sentences each, with where they sit.
    texts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StoredPassage:
    """A stored passage as a process keeps it: its terms stay in the index (FTS5)."""

    id: int
    path: str
    section: tuple[str, ...]
    start: int
    end: int
    text_hashes: tuple[str, ...]
    # Its text's index terms (`PassageRow.terms`), as BM25 weighs it: held, so a query's
    # postings need no join on the passages (half of a common word's 10-30 ms).
    length: int


LinkSpan = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class NoteRow:
    """A note as cut, to store: its text and its passages (`PassageRow`)."""

    path: str
    mtime_ms: int
    size: int
    content: str
    label_terms: tuple[str, ...]
    backlinks: tuple[str, ...] | None
    passages: tuple[PassageRow, ...]
    # Where the note links (target as written, start, end), as its parse found them.
    links: tuple[LinkSpan, ...]
    # Its title as its parse found it (`ParsedNote.title`).
    title: str


@dataclass(frozen=True, slots=True)
class StoredNote:
    """A stored note as a process keeps it: its passages with ids and text hashes, and its
    text named by its hash, not held (`IndexStore.note_contents` reads it): the notes' text
    was 22 MB of a server at 10,000 notes, and a call shows a few of them."""

    path: str
    mtime_ms: int
    size: int
    content_hash: str
    label_terms: tuple[str, ...]
    backlinks: tuple[str, ...] | None
    passages: tuple[StoredPassage, ...]
    # None for a note stored before the index kept them (links: schema 4 and older; title:
    # schema 5 and older).
    links: tuple[LinkSpan, ...] | None
    title: str | None


@dataclass(frozen=True)
class VectorSnapshot:
    """A model's vectors as its snapshot holds them: the seq it holds every row through,
    the text hashes, codes and scales, and their shortlist if it holds one."""

    through_seq: int
    hashes: list[str]
    codes: Codes
    scales: Matrix
    shortlisted: shortlist.Shortlisted | None


@dataclass(frozen=True, slots=True)
class IndexStats:
    path: str
    notes: int
    passages: int
    embedded_passages: int
    # Passages with a vector for at least one text: found by meaning (a build embeds every
    # passage's first text before the rest, `unembedded`).
    searchable_passages: int
    model: str | None
    bytes_on_disk: int
    last_updated: float | None


_NOTE_COLUMNS = "SELECT path, mtime_ms, size, content_hash, label_terms, backlinks, links, title "
_NOTE_BY_PATH = "WHERE path = ? "
_PASSAGE_COLUMNS = 'SELECT id, path, section, start, "end", length FROM passages '
_PASSAGE_OF_NOTE = "WHERE path = ? "
_PASSAGE_ORDER = "ORDER BY id"
_TEXT_COLUMNS = "SELECT passage_id, text_hash FROM passage_texts "
_TEXT_OF_NOTE = "WHERE passage_id IN (SELECT id FROM passages WHERE path = ?) "
_TEXT_ORDER = "ORDER BY passage_id, rowid"


def _json_values(texts: Collection[str]) -> dict[str, Any]:
    """Each JSON text's value, parsed in one call."""
    ordered = list(texts)
    return dict(zip(ordered, json.loads("[" + ",".join(ordered) + "]"), strict=True))


def _notes_from_rows(db: sqlite3.Connection, paths: list[str] | None) -> dict[str, StoredNote]:
    """Stored notes with their passages, from their rows: all of them, or those of `paths`.

    Texts and passages are taken as SQLite steps through their rows, not fetched whole
    first: at 10,000 notes (66,690 passages, 159,646 texts) the fetched rows left part-
    used allocator arenas behind, and the load grew the process by 115 MB instead of
    91 MB, in the same time (0.5-0.9 s on a loaded machine, four runs each)."""
    # The texts first, then the passages holding them, then the notes holding those.
    hashes: dict[int, tuple[str, ...]] = {}
    for passage_id, digest in _rows_of(db, _TEXT_COLUMNS, _TEXT_OF_NOTE, _TEXT_ORDER, paths):
        # Interned, so the passage vectors (`vectors_since`) hold the same strings.
        hashes[passage_id] = (*hashes.get(passage_id, ()), sys.intern(digest))
    note_rows = list(_rows_of(db, _NOTE_COLUMNS + "FROM notes ", _NOTE_BY_PATH, "", paths))
    shared = _sharing(row[0] for row in note_rows)
    sections: dict[str, tuple[str, ...]] = {}
    by_note: dict[str, list[StoredPassage]] = {}
    for pid, path, section, start, end, length in _rows_of(
        db, _PASSAGE_COLUMNS, _PASSAGE_OF_NOTE, _PASSAGE_ORDER, paths
    ):
        heading_path = sections.get(section)
        if heading_path is None:
            heading_path = sections[section] = _shared_all(shared, json.loads(section))
        path = shared(path, path)
        by_note.setdefault(path, []).append(
            StoredPassage(pid, path, heading_path, start, end, hashes.get(pid, ()), length)
        )
    del hashes
    # Every note's links and backlinks, parsed in one call rather than one a note.
    lists = _json_values({text for row in note_rows for text in row[5:7] if text is not None})
    return {
        path: _stored_note(
            shared,
            (path, mtime_ms, size, content_hash, label_terms),
            None if backlinks is None else lists[backlinks],
            tuple(by_note.get(path, ())),
            None if links is None else lists[links],
            title,
        )
        for path, mtime_ms, size, content_hash, label_terms, backlinks, links, title in note_rows
    }


# Shares one string among every holder of it: `shared(text, text)`.
_Sharing = Callable[[str, str], str]


def _sharing(paths: Iterable[str]) -> _Sharing:
    """One string per path, heading path, heading, link target and label term, shared by
    every passage, section or note holding it, whether the notes come from rows or from
    the snapshot: at 10,000 notes, each parsed afresh took 11 MB more (a note's title
    leads each of its sections). Paths first, so a note's path is the one its passages
    hold."""
    return {path: path for path in paths}.setdefault


def _shared_all(shared: _Sharing, texts: Iterable[str]) -> tuple[str, ...]:
    return tuple([shared(text, text) for text in texts])


def _stored_note(
    shared: _Sharing,
    fields: tuple[str, int, int, str, str],
    backlinks: Iterable[str] | None,
    passages: tuple[StoredPassage, ...],
    links: Iterable[Sequence[Any]] | None,
    title: str | None,
) -> StoredNote:
    """A note as a process keeps it, made alike from its rows and from the snapshot
    (`load_notes` is the same either way): `fields` are its path, modification time,
    size, content hash and label terms (joined by spaces), as stored."""
    path, mtime_ms, size, content_hash, label_terms = fields
    return StoredNote(
        path,
        mtime_ms,
        size,
        sys.intern(content_hash),
        _shared_all(shared, label_terms.split()),
        None if backlinks is None else _shared_all(shared, backlinks),
        passages,
        None if links is None else tuple([(shared(t, t), a, b) for t, a, b in links]),
        title,
    )


def _rows_of(
    db: sqlite3.Connection, select: str, of_note: str, order: str, paths: list[str] | None
) -> Iterable[Any]:
    """The rows of `select`: all of them, or note by note those `of_note` selects."""
    if paths is None:
        return db.execute(select + order)
    return chain.from_iterable(db.execute(select + of_note + order, (path,)) for path in paths)


def _last_note_change(db: sqlite3.Connection) -> int:
    """The seq of the last note change ever logged (kept by SQLite when the log is pruned)."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'note_changes'").fetchone()
    return int(row[0]) if row else 0


def _note_snapshot_due(db: sqlite3.Connection) -> bool:
    row = db.execute("SELECT through_seq, held FROM note_snapshot").fetchone()
    if row is None:
        # Every note is read from its rows; and the log grows with each edit until a
        # snapshot prunes it, so a small vault edited for long gains one too.
        outside = max(
            int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("notes", "note_changes")
        )
        return outside >= NOTE_SNAPSHOT_MIN_CHANGES
    through_seq, held = row
    outside = int(
        db.execute("SELECT count(*) FROM note_changes WHERE seq > ?", (through_seq,)).fetchone()[0]
    )
    return outside >= max(NOTE_SNAPSHOT_MIN_CHANGES, SNAPSHOT_REWRITE_SHARE * held)


def _encoded_note_snapshot(notes: Iterable[StoredNote]) -> tuple[bytes, bytes, bytes, bytes]:
    """The notes as the snapshot holds them: the notes' own fields (JSON, with how many
    passages each has), the distinct heading paths (JSON), the passages' numbers (int64
    columns, `_PASSAGE_COLUMNS_HELD`) and their text hashes, one a line, in order."""
    heading_paths: dict[tuple[str, ...], int] = {}
    note_fields: list[list[Any]] = []
    numbers: list[tuple[int, int, int, int, int, int]] = []
    hashes: list[str] = []
    for note in notes:
        note_fields.append(
            [
                note.path,
                note.mtime_ms,
                note.size,
                note.content_hash,
                " ".join(note.label_terms),
                note.backlinks,
                note.links,
                note.title,
                len(note.passages),
            ]
        )
        for passage in note.passages:
            heading_path = heading_paths.setdefault(passage.section, len(heading_paths))
            numbers.append(
                (
                    passage.id,
                    heading_path,
                    passage.start,
                    passage.end,
                    passage.length,
                    len(passage.text_hashes),
                )
            )
            hashes.extend(passage.text_hashes)
    columns = np.array(numbers, dtype=np.int64).reshape(-1, _PASSAGE_COLUMNS_HELD).T
    return (
        _json_bytes(note_fields),
        _json_bytes(list(heading_paths)),
        np.ascontiguousarray(columns).tobytes(),
        "\n".join(hashes).encode("ascii"),
    )


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _decoded_note_snapshot(
    notes_blob: bytes, sections_blob: bytes, passages_blob: bytes, hashes_blob: bytes
) -> dict[str, StoredNote] | None:
    """The notes `_encoded_note_snapshot` coded, with the strings a load from rows shares
    shared alike; None if the blobs do not fit together. Built column by column (`map`
    over the passages' fields): a loop building each passage took 0.27-0.31 s at 10,000
    notes, most of what the snapshot saves."""
    try:
        note_fields: list[list[Any]] = json.loads(notes_blob)
        heading_lists: list[list[str]] = json.loads(sections_blob)
        numbers = np.frombuffer(passages_blob, dtype=np.int64)
        if numbers.size % _PASSAGE_COLUMNS_HELD:
            return None
        ids, heading_ids, starts, ends, lengths, text_counts = numbers.reshape(
            _PASSAGE_COLUMNS_HELD, -1
        ).tolist()
        digests = hashes_blob.decode("ascii").split("\n") if hashes_blob else []
        if len(digests) != sum(text_counts) or len(ids) != sum(f[8] for f in note_fields):
            return None
        shared = _sharing(fields[0] for fields in note_fields)
        heading_paths = [_shared_all(shared, headings) for headings in heading_lists]
        interned = tuple(map(sys.intern, digests))  # a tuple's slice is the tuple held
        bounds = list(accumulate(text_counts, initial=0))
        texts = [interned[a:b] for a, b in pairwise(bounds)]
        paths = list(chain.from_iterable(repeat(shared(f[0], f[0]), f[8]) for f in note_fields))
        passages = list(
            map(
                StoredPassage,
                ids,
                paths,
                [heading_paths[i] for i in heading_ids],
                starts,
                ends,
                texts,
                lengths,
            )
        )
        notes: dict[str, StoredNote] = {}
        first = 0
        for (
            path,
            mtime_ms,
            size,
            content_hash,
            labels,
            backlinks,
            links,
            title,
            count,
        ) in note_fields:
            notes[path] = _stored_note(
                shared,
                (path, mtime_ms, size, content_hash, labels),
                backlinks,
                tuple(passages[first : first + count]),
                links,
                title,
            )
            first += count
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # JSON, ASCII, shapes
        logger.debug("notes' snapshot unreadable: %s", exc)
        return None
    return notes


class IndexStore:
    """The index file of one vault. One connection, shared by threads under a lock."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        # Write transactions of this connection, and the cached keyword totals with the
        # (writes, PRAGMA data_version) they were counted at.
        self._writes = 0
        self._totals: tuple[tuple[int, int], tuple[int, int]] | None = None
        # Whether the file has the notes' trigrams (`notes_holding`); set when it opens.
        self.trigrams = False
        self._db = self._open_or_rebuild()
        # Vectors are read on a connection of their own, so a new process loads them while
        # it loads the notes: at 10,000 notes the two took 0.68 s and 0.3-0.7 s one after
        # the other, and a new server's first answer came after 2.93 s (folder) and 2.95 s
        # (stand-in) instead of 2.54 s and 2.23 s side by side (bench.speed.index --prebuilt).
        # Notes' texts are read on it too, so showing a passage never waits for a write.
        self._vector_reads = _ReadConnection(self.path)
        # A question's keyword postings, counts, labels and passage texts have a connection
        # of their own: behind the one connection's lock, each read of a question beside a
        # first build waited for a batch of notes being stored (0.3-1 s at 10,000 notes,
        # python -m bench.speed.first_day); beside the vectors and notes' texts, whose
        # pages pushed the postings out of its cache, a warm question on a built 10,000-note
        # index took 39.4 against 36.0-37.3 ms (in process, 240 each, alternating).
        self._question_reads = _ReadConnection(self.path)
        # What is left to embed is looked for on a connection of its own: each look-up reads
        # every passage text (2.1 s at 50,000 notes), and under the one connection's lock
        # the question that embedded its keyword candidates meanwhile waited for it to
        # store them (6.7 s), and the question after an edit 3.8 s (in process).
        self._build_reads = _ReadConnection(self.path)

    # -- opening -----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        use_wal(db, BUSY_TIMEOUT_MS / 1000)
        # WAL with NORMAL loses at most the last transactions on power loss, never
        # consistency; the index is a cache, rebuilt from the vault.
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        coded = 0
        with self._write(db):
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise _NewerSchema(version)
            for script in _MIGRATIONS[version:]:
                for statement in _statements(script):
                    db.execute(statement)
            if TRIGRAMS and "note_trigrams" not in self._note_indexes(db):
                for statement in _statements(_TRIGRAM_SCRIPT):
                    db.execute(statement)
            if version < 3:
                coded = _code_float_vectors(db)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        if 0 < version < 6:  # a built index gains its vectors' snapshots
            for (model,) in db.execute("SELECT DISTINCT model FROM passage_vectors").fetchall():
                if _vector_snapshot_due(db, model):
                    self._write_snapshot(db, model)
        if 0 < version < 7 and _note_snapshot_due(db):  # and its notes' snapshot
            self._write_note_snapshot(db)
        if 5 < version < 8:  # a large vector snapshot gains its shortlist
            self._add_snapshot_shortlists(db)
        if coded:
            self._compact(db, coded)
        # Touch every table: a truncated or overwritten file fails here, not mid-query.
        for table in _TABLES:
            db.execute(f"SELECT count(*) FROM {table}").fetchone()
        self.trigrams = "note_trigrams" in self._note_indexes(db)

    @staticmethod
    def _note_indexes(db: sqlite3.Connection) -> list[str]:
        """The full-text indexes over the notes table this file has (the trigrams only
        where the SQLite that made it had the tokenizer)."""
        names = {
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE name IN ('note_labels', 'note_trigrams')"
            )
        }
        return sorted(names)

    def _compact(self, db: sqlite3.Connection, coded: int) -> None:
        """Give the room the coded vectors freed back to the disk (three quarters of the
        vector table): once, after an upgrade. A busy or full disk leaves the room inside
        the file, where new rows reuse it."""
        before = self._bytes_on_disk()
        try:
            db.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            logger.warning(
                "passage index %s: vectors coded, file not compacted (%s)", self.path, exc
            )
            return
        # VACUUM may renumber the rows of a table without an INTEGER PRIMARY KEY (notes),
        # and the note indexes point at notes by row: they are made again from the notes.
        with self._write(db):
            for table in self._note_indexes(db):
                db.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
        logger.info(
            "passage index %s: %d vectors coded as int8; file %.0f MB -> %.0f MB",
            self.path,
            coded,
            before / 1e6,
            self._bytes_on_disk() / 1e6,
        )

    def _bytes_on_disk(self) -> int:
        return sum(
            os.path.getsize(self.path + suffix)
            for suffix in ("", "-wal")
            if self.path != ":memory:" and os.path.exists(self.path + suffix)
        )

    def _open_or_rebuild(self) -> sqlite3.Connection:
        try:
            return self._open()
        except sqlite3.OperationalError as exc:
            # The disk is full, read-only or failing: the file may be fine, so it is kept.
            return self._in_memory(exc)
        except (sqlite3.DatabaseError, _NewerSchema) as exc:
            if self.path == ":memory:":
                raise
            logger.warning("passage index %s is unusable (%s); rebuilding it", self.path, exc)
            try:
                for suffix in ("", "-wal", "-shm"):
                    Path(self.path + suffix).unlink(missing_ok=True)
                return self._open()
            except (sqlite3.DatabaseError, OSError) as again:
                return self._in_memory(again)
        except OSError as exc:  # the cache folder cannot be created
            return self._in_memory(exc)

    def _open(self) -> sqlite3.Connection:
        db = self._connect()
        try:
            self._migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _in_memory(self, exc: Exception) -> sqlite3.Connection:
        """An index that lives as long as this process: the server answers on, and the
        next process tries the file again."""
        logger.warning(
            "passage index %s cannot be written (%s); keeping it in memory for this session",
            self.path,
            exc,
        )
        self.path = ":memory:"
        return self._open()

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._vector_reads.close()
        self._question_reads.close()
        self._build_reads.close()

    def _reader(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection vectors and notes' texts are read on (`_vector_reads`)."""
        return self._read_on(self._vector_reads)

    def _question_reader(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection a question's keyword postings, counts, labels and passage texts
        are read on (`_question_reads`): it never waits for a write transaction."""
        return self._read_on(self._question_reads)

    @contextmanager
    def _read_on(self, reads: "_ReadConnection") -> Generator[sqlite3.Connection]:
        """`reads`' own connection for a file (WAL lets it read while the other writes);
        the one connection, under its lock, for an index in memory."""
        if self.path == ":memory:":
            with self._lock:
                yield self._db
            return
        with reads.connection() as db:
            yield db

    @contextmanager
    def _write(
        self, db: sqlite3.Connection | None = None, *, locked: bool = True
    ) -> Generator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE); under this store's lock
        unless on a connection no other thread shares (`locked=False`)."""
        db = db or self._db
        with self._lock if locked else nullcontext():
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            if locked:  # counted are the shared connection's writes
                self._writes += 1

    # -- notes and passages ------------------------------------------------------------------

    def put_notes(self, notes: Sequence[NoteRow]) -> dict[str, StoredNote]:
        """Store (or replace) notes and their passages in one transaction; each note as
        stored, its passages with their ids."""
        stored: dict[str, StoredNote] = {}
        now = time.time()
        with self._write() as db:
            for note in notes:
                content_hash = text_hash(note.content)
                db.execute("DELETE FROM notes WHERE path = ?", (note.path,))
                db.execute(
                    "INSERT INTO notes (path, mtime_ms, size, content_hash, label_terms, "
                    "backlinks, content, indexed_at, links, title) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        note.path,
                        note.mtime_ms,
                        note.size,
                        content_hash,
                        " ".join(note.label_terms),
                        None if note.backlinks is None else json.dumps(note.backlinks),
                        note.content,
                        now,
                        json.dumps(note.links),
                        note.title,
                    ),
                )
                passages: list[StoredPassage] = []
                for passage in note.passages:
                    cursor = db.execute(
                        'INSERT INTO passages (path, section, start, "end", terms, '
                        "heading_terms, length) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            note.path,
                            json.dumps(passage.section),
                            passage.start,
                            passage.end,
                            " ".join(passage.terms),
                            " ".join(passage.heading_terms),
                            len(passage.terms),
                        ),
                    )
                    passage_id = int(cursor.lastrowid or 0)
                    digests = tuple(sys.intern(text_hash(text)) for text in passage.texts)
                    db.executemany(
                        "INSERT INTO passage_texts VALUES (?, ?, ?)",
                        [
                            (passage_id, digest, text)
                            for digest, text in zip(digests, passage.texts, strict=True)
                        ],
                    )
                    passages.append(
                        StoredPassage(
                            passage_id,
                            note.path,
                            passage.section,
                            passage.start,
                            passage.end,
                            digests,
                            len(passage.terms),
                        )
                    )
                stored[note.path] = StoredNote(
                    note.path,
                    note.mtime_ms,
                    note.size,
                    content_hash,
                    note.label_terms,
                    note.backlinks,
                    tuple(passages),
                    note.links,
                    note.title,
                )
        return stored

    def delete_notes(self, paths: Iterable[str]) -> None:
        with self._write() as db:
            db.executemany("DELETE FROM notes WHERE path = ?", [(p,) for p in paths])

    def load_notes(self, paths: Iterable[str] | None = None) -> dict[str, StoredNote]:
        """Stored notes with their passages: all of them, or those of `paths`. All of them
        come from the notes' snapshot (`save_note_snapshot`) and the rows of the notes
        changed since, read in one transaction; from their rows where there is none."""
        with self._lock:
            if paths is not None:
                return _notes_from_rows(self._db, list(paths))
            if self.path == ":memory:":  # lives as long as this process: no snapshot
                return _notes_from_rows(self._db, None)
            self._db.execute("BEGIN")
            try:
                snapshot, damaged = self._notes_from_snapshot(self._db)
                notes = snapshot if snapshot is not None else _notes_from_rows(self._db, None)
            finally:
                self._db.execute("COMMIT")
            if damaged is not None:
                self._drop_damaged_note_snapshot(damaged)
            return notes

    def _notes_from_snapshot(
        self, db: sqlite3.Connection
    ) -> tuple[dict[str, StoredNote] | None, int | None]:
        """Every stored note, from the snapshot and the rows of the notes changed after it
        (None without a snapshot, or with one that cannot be read); and the `through_seq`
        of a snapshot that cannot be read."""
        row = db.execute(
            "SELECT through_seq, notes, sections, passages, hashes FROM note_snapshot"
        ).fetchone()
        if row is None:
            return None, None
        through_seq, notes_blob, sections_blob, passages_blob, hashes_blob = row
        notes = _decoded_note_snapshot(notes_blob, sections_blob, passages_blob, hashes_blob)
        if notes is None:
            logger.warning(
                "passage index %s: the notes' snapshot is damaged; notes read from their rows, "
                "and the snapshot written again once the server has read the vault",
                self.path,
            )
            return None, int(through_seq)
        changed = [
            path
            for (path,) in db.execute(
                "SELECT DISTINCT path FROM note_changes WHERE seq > ?", (through_seq,)
            )
        ]
        for path in changed:
            notes.pop(path, None)
        notes.update(_notes_from_rows(db, changed))
        return notes, None

    def _drop_damaged_note_snapshot(self, through_seq: int) -> None:
        """Drop a snapshot that cannot be read (unless another process replaced it since),
        so the next `save_note_snapshot` writes one: with none, every note counts as
        outside it. Only a later process's time is at stake: a failure is logged."""
        try:
            with self._write() as db:
                db.execute("DELETE FROM note_snapshot WHERE through_seq = ?", (through_seq,))
        except sqlite3.Error as exc:
            logger.warning("passage index %s: damaged notes' snapshot kept (%s)", self.path, exc)

    def save_note_snapshot(self) -> int:
        """Write the notes' snapshot again when NOTE_SNAPSHOT_MIN_CHANGES, and
        SNAPSHOT_REWRITE_SHARE of the notes it holds, changed outside it; the notes
        written, or 0. A snapshot only saves time: a busy or full disk leaves the old one
        (or none), and a new process reads the notes changed since from their rows."""
        return self._save_when_due("notes' snapshot", _note_snapshot_due, self._write_note_snapshot)

    def _save_when_due(
        self,
        what: str,
        due: Callable[[sqlite3.Connection], bool],
        write: Callable[[sqlite3.Connection], int],
    ) -> int:
        """Write a snapshot (`what` names it in a log line) when `due` says so, on a
        connection of its own, outside this process's locks: reading and coding the rows
        takes 0.4 s (vectors) to 0.8 s (notes) at 10,000 notes, in which questions read
        on and writers write on (WAL). What `write` wrote, or 0."""
        if self.path == ":memory:":  # lives as long as this process: nothing to read faster
            return 0
        with self._reader() as db:
            if not due(db):
                return 0
        try:
            db = self._connect()
        except (sqlite3.Error, OSError) as exc:
            logger.warning("passage index %s: no %s written (%s)", self.path, what, exc)
            return 0
        try:
            return write(db)
        finally:
            db.close()

    def _write_note_snapshot(self, db: sqlite3.Connection) -> int:
        """Write the notes' snapshot on `db`, a connection no other thread uses; the notes
        written, or 0."""
        try:
            db.execute("BEGIN")
            try:
                through_seq = _last_note_change(db)
                notes = _notes_from_rows(db, None)
            finally:
                db.execute("COMMIT")
            blobs = _encoded_note_snapshot(notes.values())
            with self._write(db, locked=False):
                held = db.execute("SELECT through_seq FROM note_snapshot").fetchone()
                if held is not None and held[0] >= through_seq:
                    return 0  # another process wrote one as recent meanwhile
                db.execute(
                    "INSERT OR REPLACE INTO note_snapshot VALUES (1, ?, ?, ?, ?, ?, ?)",
                    (through_seq, len(notes), *blobs),
                )
                db.execute("DELETE FROM note_changes WHERE seq <= ?", (through_seq,))
            return len(notes)
        except sqlite3.Error as exc:
            logger.warning("passage index %s: no notes' snapshot written (%s)", self.path, exc)
            return 0

    def note_contents(self, paths: Collection[str]) -> dict[str, tuple[str, str]]:
        """The stored text and its hash (`text_hash`) of each note of `paths` that is
        stored. Read on the reader connection, so it never waits for this store's writes
        (a first build's batches)."""
        marks = ", ".join("?" * len(paths))
        with self._reader() as db:
            rows = db.execute(
                f"SELECT path, content, content_hash FROM notes WHERE path IN ({marks})",
                tuple(paths),
            ).fetchall()
        return {path: (content, content_hash) for path, content, content_hash in rows}

    def put_parsed(self, found: Iterable[tuple[str, str, Sequence[LinkSpan], str]]) -> None:
        """Keep the links and title of notes stored before the index kept them, found by a
        parse of (path, content hash, links, title): only where the stored note still has
        that text (another process may have stored a newer one, with its own). It only
        saves a later process a parse, so a busy or full disk is logged, never raised."""
        rows = [
            (json.dumps(spans), title, path, content_hash)
            for path, content_hash, spans, title in found
        ]
        try:
            with self._write() as db:
                db.executemany(
                    "UPDATE notes SET links = coalesce(links, ?), title = coalesce(title, ?) "
                    "WHERE path = ? AND content_hash = ?",
                    rows,
                )
        except sqlite3.Error as exc:
            logger.warning(
                "passage index %s: the links and titles of %d notes not kept (%s)",
                self.path,
                len(rows),
                exc,
            )

    def stored_stats(self) -> dict[str, tuple[int, int]]:
        """(mtime_ms, size) of every stored note."""
        with self._lock:
            rows = self._db.execute("SELECT path, mtime_ms, size FROM notes").fetchall()
        return {path: (mtime, size) for path, mtime, size in rows}

    # -- keywords ---------------------------------------------------------------------------

    def keyword_totals(self) -> tuple[int, int]:
        """(passages, index terms in all of them): BM25's document count and mean length.
        Counted again only after a write, by this process or another."""
        with self._question_reader() as db:
            key = (self._writes, int(db.execute("PRAGMA data_version").fetchone()[0]))
            if self._totals is None or self._totals[0] != key:
                count, total = db.execute(
                    "SELECT count(*), coalesce(sum(length), 0) FROM passages"
                ).fetchone()
                self._totals = (key, (int(count), int(total)))
            return self._totals[1]

    def term_postings(self, term: str) -> Postings:
        """Where an index term occurs. Every occurrence comes from SQLite in two strings,
        counted here: a row per passage (GROUP BY) took 161 ms for the 167,341 passages
        holding "ledger" at 50,000 notes, the strings 53 ms and the counting 27 more."""
        with self._question_reader() as db:
            passages, columns = db.execute(
                "SELECT group_concat(doc, ' '), group_concat(col = 'heading_terms', '') "
                "FROM passage_terms_instances WHERE term = ?",
                (term,),
            ).fetchone()
        if passages is None:
            empty = np.zeros(0, dtype=np.int64)
            return Postings(empty, np.zeros(0, dtype=np.bool_), empty)
        ids = np.fromstring(passages, dtype=np.int64, sep=" ")
        in_headings = np.frombuffer(columns.encode("ascii"), dtype=np.uint8) == ord("1")
        # Two entries a passage at most: its text (even key) and its headings (odd).
        keys, occurrences = np.unique(ids * 2 + in_headings, return_counts=True)
        return Postings(keys // 2, keys % 2 == 1, occurrences.astype(np.int64))

    def document_frequency(self, term: str) -> int:
        """Passages whose text holds the term."""
        with self._question_reader() as db:
            row = db.execute(
                "SELECT doc FROM passage_terms_columns WHERE term = ? AND col = 'terms'", (term,)
            ).fetchone()
        return int(row[0]) if row else 0

    def terms_between(self, low: str, high: str) -> list[str]:
        """Index terms of passage texts from `low` up to (not including) `high`."""
        with self._question_reader() as db:
            rows = db.execute(
                "SELECT term FROM passage_terms_columns "
                "WHERE term >= ? AND term < ? AND col = 'terms'",
                (low, high),
            ).fetchall()
        return [term for (term,) in rows]

    def labelled(self, term: str) -> list[str]:
        """Notes named by the term (title, aliases, tags or file name)."""
        with self._question_reader() as db:
            rows = db.execute(
                "SELECT DISTINCT n.path FROM note_labels_instances i "
                "JOIN notes n ON n.rowid = i.doc WHERE i.term = ?",
                (term,),
            ).fetchall()
        return [path for (path,) in rows]

    def notes_holding(self, words: Sequence[str]) -> set[str] | None:
        """The paths of the notes whose text holds every one of `words` (case folded, each
        anywhere, apart or together), by the notes' trigrams; None when that narrows
        nothing (no word of three characters or more, or a file without trigrams), so the
        caller reads every note."""
        # A NUL ends FTS5's query string early: such a word narrows nothing either.
        looked_up = [word for word in words if len(word) >= _TRIGRAM and "\x00" not in word]
        if not looked_up or not self.trigrams:
            return None
        query = " AND ".join('"' + word.replace('"', '""') + '"' for word in looked_up)
        with self._reader() as db:
            rows = db.execute(
                "SELECT n.path FROM note_trigrams t JOIN notes n ON n.rowid = t.rowid "
                "WHERE note_trigrams MATCH ?",
                (query,),
            ).fetchall()
        return {path for (path,) in rows}

    # -- vectors -----------------------------------------------------------------------------

    def unembedded(
        self, model: str, limit: int, after: int = 0, *, firsts_only: bool = False
    ) -> tuple[list[tuple[str, str]], int]:
        """(text hash, text) of up to `limit` distinct passage texts with no vector of
        `model` yet, stored after row `after` of the passage texts, in the order they were
        stored (so notes are done one after another, and a half-built index is complete for
        some notes rather than partial for all); and the last row read, where the next
        look-up starts. A build thus reads each text once: a look-up from the start every
        time made a build quadratic in the vault's size (131 of 161 CPU-seconds at 10,000
        notes, issue 38). A note stored again meanwhile may take rows behind the one
        given: the caller looks once more from 0 before it stops.

        With `firsts_only`, only each passage's first text (its first run of sentences,
        led by its headings): a build that embeds those first makes every passage
        searchable by meaning in the time of one text a passage."""
        first = (
            " AND t.rowid = (SELECT min(f.rowid) FROM passage_texts f "
            "WHERE f.passage_id = t.passage_id)"
            if firsts_only
            else ""
        )
        with self._read_on(self._build_reads) as db:
            rows = db.execute(
                "SELECT t.rowid, t.text_hash, t.text FROM passage_texts t "
                "WHERE t.rowid > ? AND NOT EXISTS (SELECT 1 FROM passage_vectors v "
                f"WHERE v.model = ? AND v.text_hash = t.text_hash){first} "
                "ORDER BY t.rowid LIMIT ?",
                (after, model, limit),
            ).fetchall()
        distinct: dict[str, str] = {}  # one text in several passages is embedded once
        for _, digest, text in rows:
            distinct.setdefault(digest, text)
        return list(distinct.items()), rows[-1][0] if rows else after

    def texts_of(self, hashes: Collection[str]) -> list[tuple[str, str]]:
        """(text hash, text) of those of the given passage texts the index holds."""
        wanted = list(hashes)
        found: list[tuple[str, str]] = []
        with self._question_reader() as db:
            for first in range(0, len(wanted), _IN_CLAUSE_MAX):
                part = wanted[first : first + _IN_CLAUSE_MAX]
                found += db.execute(
                    "SELECT text_hash, min(text) FROM passage_texts WHERE text_hash IN "
                    f"({', '.join('?' * len(part))}) GROUP BY text_hash",
                    part,
                ).fetchall()
        return found

    def count_unembedded(self, model: str) -> int:
        """Distinct passage texts with no vector of `model` yet."""
        with self._read_on(self._build_reads) as db:
            return int(
                db.execute(
                    "SELECT count(DISTINCT t.text_hash) FROM passage_texts t "
                    "LEFT JOIN passage_vectors v ON v.model = ? AND v.text_hash = t.text_hash "
                    "WHERE v.seq IS NULL",
                    (model,),
                ).fetchone()[0]
            )

    def put_vectors(self, model: str, hashes: Sequence[str], vectors: Matrix) -> None:
        codes, scales = quantized(np.asarray(vectors, dtype=np.float32))
        rows = [
            (model, digest, codes[i].tobytes(), float(scales[i])) for i, digest in enumerate(hashes)
        ]
        with self._write() as db:
            # Another process may have embedded the same text meanwhile: same model, same
            # text, same vector; the first one stays.
            db.executemany(
                "INSERT OR IGNORE INTO passage_vectors (model, text_hash, vector, scale) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )
            self._set_meta(db, "model", model)

    def prune_vectors(self) -> int:
        """Delete the vectors of texts no passage has any more (notes edited or deleted since
        they were embedded); how many. Without this the table grows with every edit."""
        with self._write() as db:
            cursor = db.execute(
                "DELETE FROM passage_vectors WHERE text_hash NOT IN "
                "(SELECT text_hash FROM passage_texts)"
            )
            if cursor.rowcount:  # the snapshots hold those rows: written again when due
                db.execute("DELETE FROM vector_snapshots")
                db.execute("DELETE FROM vector_shortlists")
            return cursor.rowcount

    def vector_count(self, model: str, after_seq: int = 0) -> int:
        """Vectors of `model` stored after `after_seq` (all of them by default)."""
        with self._reader() as db:
            return _vectors_after(db, model, after_seq)

    def vector_snapshot(self, model: str) -> VectorSnapshot | None:
        """The model's vectors as its snapshot holds them (`save_vector_snapshot`), with
        their shortlist; None without one."""
        with self._reader() as db:
            row = db.execute(
                "SELECT s.through_seq, s.hashes, s.codes, s.scales, l.mean, l.basis, l.codes, "
                "l.scales FROM vector_snapshots s LEFT JOIN vector_shortlists l "
                "ON l.model = s.model AND l.through_seq = s.through_seq WHERE s.model = ?",
                (model,),
            ).fetchone()
        if row is None:
            return None
        through_seq, hashes, codes, scales, *short = row
        digests = [sys.intern(digest) for digest in hashes.decode("utf-8").split("\n")]
        coded = _coded_rows(codes, scales)
        if coded is None or len(coded[1]) != len(digests):
            logger.warning("passage index %s: a vector snapshot of %s is damaged", self.path, model)
            return None
        code_array, scale_array = coded
        found = _snapshot_shortlist(code_array.shape[1], len(digests), *short)
        if found is None and short[0] is not None:
            logger.warning(
                "passage index %s: the shortlist of %s's vector snapshot is damaged; it is "
                "fitted again in the background",
                self.path,
                model,
            )
        return VectorSnapshot(int(through_seq), digests, code_array, scale_array, found)

    def _add_snapshot_shortlists(self, db: sqlite3.Connection) -> None:
        """Give each vector snapshot of SHORTLIST_FROM_ROWS rows or more its shortlist (an
        index written before schema 8). Only saves time: on a busy or full disk the
        process fits it, and the next snapshot written has it."""
        rows = db.execute(
            "SELECT model, through_seq, codes, scales FROM vector_snapshots "
            "WHERE length(scales) / 4 >= ?",
            (shortlist.SHORTLIST_FROM_ROWS,),
        ).fetchall()
        for model, through_seq, codes, scales in rows:
            coded = _coded_rows(codes, scales)
            if coded is None:
                continue  # damaged: `vector_snapshot` says so
            code_array, scale_array = coded
            try:
                with self._write(db, locked=False):
                    _put_snapshot_shortlist(db, model, through_seq, code_array, scale_array)
            except sqlite3.Error as exc:
                logger.warning(
                    "passage index %s: no shortlist stored for %s (%s)", self.path, model, exc
                )

    def save_vector_snapshot(self, model: str) -> int:
        """Write the model's snapshot again when SNAPSHOT_REWRITE_SHARE of its vectors are
        outside it (and at least SNAPSHOT_MIN_ROWS); the rows written, or 0."""
        return self._save_when_due(
            "vector snapshot",
            partial(_vector_snapshot_due, model=model),
            partial(self._write_snapshot, model=model),
        )

    def _write_snapshot(self, db: sqlite3.Connection, model: str) -> int:
        """Write the model's snapshot on `db`, a connection no other thread uses; how many
        rows. A snapshot only saves time: a busy or full disk leaves the old one (or none),
        and a new process reads the rows after it one by one."""
        try:
            with self._write(db, locked=False):
                return _write_vector_snapshot(db, model)
        except sqlite3.Error as exc:
            logger.warning("passage index %s: no vector snapshot written (%s)", self.path, exc)
            return 0

    def vectors_since(
        self, model: str, seq: int, limit: int
    ) -> tuple[int, list[str], Codes | None, Matrix]:
        """At most `limit` vectors of `model` stored after `seq`, oldest first: the last seq
        read, their text hashes, their codes and scales (`quantized`; codes None when there
        are none)."""
        with self._reader() as db:
            # Read in seq (rowid) order: through the (model, text_hash) index SQLite sorted
            # all 245 MB in a temporary b-tree first (2.0 s against 0.8 s at 160,000).
            rows = db.execute(
                "SELECT seq, text_hash, vector, scale FROM passage_vectors "
                "WHERE seq > ? AND +model = ? ORDER BY seq LIMIT ?",
                (seq, model, limit),
            ).fetchall()
        if not rows:
            return seq, [], None, np.zeros(0, dtype=np.float32)
        seqs, hashes, blobs, scales = zip(*rows, strict=True)
        digests = [sys.intern(digest) for digest in hashes]
        if None in scales:  # float32 rows a process of an older version wrote
            codes, coded_scales = quantized(
                np.stack(
                    [_row_floats(blob, scale) for blob, scale in zip(blobs, scales, strict=True)]
                )
            )
            return int(seqs[-1]), digests, codes, coded_scales
        # One buffer for the batch, not an array per row.
        codes = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(rows), -1)
        return int(seqs[-1]), digests, codes, np.array(scales, dtype=np.float32)

    # -- status ------------------------------------------------------------------------------

    def _set_meta(self, db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def stats(self) -> IndexStats:
        with self._lock:
            notes, updated = self._db.execute(
                "SELECT count(*), max(indexed_at) FROM notes"
            ).fetchone()
            passages = self._db.execute("SELECT count(*) FROM passages").fetchone()[0]
            model_row = self._db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()
            model = model_row[0] if model_row else None
            # A passage counts as embedded when every one of its texts has a vector.
            embedded = (
                passages
                - self._db.execute(
                    "SELECT count(DISTINCT t.passage_id) FROM passage_texts t "
                    "LEFT JOIN passage_vectors v ON v.model = ? AND v.text_hash = t.text_hash "
                    "WHERE v.seq IS NULL",
                    (model or "",),
                ).fetchone()[0]
            )
            searchable = self._db.execute(
                "SELECT count(DISTINCT t.passage_id) FROM passage_texts t "
                "JOIN passage_vectors v ON v.model = ? AND v.text_hash = t.text_hash",
                (model or "",),
            ).fetchone()[0]
        return IndexStats(
            self.path,
            notes,
            passages,
            embedded,
            searchable,
            model,
            self._bytes_on_disk(),
            updated,
        )


class _NewerSchema(Exception):
    def __init__(self, version: int) -> None:
        super().__init__(f"schema version {version} is newer than this program's {SCHEMA_VERSION}")


class _ReadConnection:
    """A connection of the index file for reads alone, opened when first wanted and shared
    by threads under its own lock."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    @contextmanager
    def connection(self) -> Generator[sqlite3.Connection]:
        with self._lock:
            if self._db is None:
                self._db = sqlite3.connect(
                    self._path, isolation_level=None, check_same_thread=False
                )
                self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            yield self._db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
