"""The memory files' index, in SQLite, kept current by reading only what was added.

`MemoryIndex` holds every live memory (merged from all the files by id, see `settle`), the
forgotten ids, which memory replaces which, their tags, and their words in an FTS5 table
for text queries. `LogReader` feeds it: per file it remembers how many bytes have been
consumed, a CRC of them, and the last line consumed (the anchor). A refresh that finds each
anchor still in place parses only the new bytes; a file that vanished (folded by its
writer) or was rewritten rebuilds the index from all files. Lines are unique (each carries a
fresh id and a timestamp), so an anchor that matches proves the prefix is unchanged to a
process that has read it; a process that finds an index built by another (or by an earlier
run) checks the CRC of each file's prefix once before it trusts it.

All of that state lives in the cache file (`cache.open_cache`), so a new process answers
from it at once. Every change happens in one transaction (`LogReader.writing`), so another
process sharing the cache never sees half a refresh.
"""

import hashlib
import heapq
import json
import logging
import math
import re
import sqlite3
import time
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from obsidian_mcp.errors import VaultError
from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.model import Memory, Record, Tombstone, decode
from obsidian_mcp.memory.timespec import occurred_moment
from obsidian_mcp.retrieval.fusion import reciprocal_rank_fusion

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
# Words too common to say anything about a memory; they would make every entry a match.
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    }
)
# A query word found in a tag counts more: a tag is a deliberate label. Order: (tags, text).
_FIELD_WEIGHTS = (3.0, 1.0)


def terms(text: str) -> set[str]:
    """The distinct words of `text` a query can match: lower-cased, common words dropped,
    plural and singular merged ("dragons" finds "dragon"); nothing fancier is needed for
    short memories."""
    return {
        w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] != "s" else w
        for w in set(_WORD.findall(text.casefold())) - _STOPWORDS
    }


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_COLUMNS = "id, ts, content, tags, context, type, source, scope, occurred, supersedes"
# The fusion of the rankings by words, by meaning and by the period a query names, chosen
# on the development set of issue 37: LoCoMo's conversations 26, 30, 41, 42 and 43 (756
# questions, `python -m bench.memory.locomo --data locomo10.zip`; any@5 / any@10 / MRR@10) with
# the 34 paraphrases of `python -m bench.memory.recall --meaning` (hit@1 / hit@5). Before:
# meaning at weight 2 over words, 55.2 / 63.6 / 0.404, 18 / 22; plain RRF of BM25 and the
# model 56.7 / 66.3 / 0.401. Words count fully once the best match holds WORDS_CONFIDENT
# of the query's words (by idf), in proportion below. Without the period's ranking: words
# always at full weight 58.5 / 66.3 / 0.432 but 15 / 24; weight = the share held (from
# 1.0) 56.1 / 65.7 / 0.415, 18 / 25; from 0.3, 58.3 / 66.1 / 0.432, 17 / 25. With it:
# from 0.5, 61.1 / 69.7 / 0.451 but 17 / 25; from 0.7, 61.2 / 69.8 / 0.444, 18 / 25; from
# 0.6, 61.2 / 69.7 / 0.451, 18 / 25.
WORDS_CONFIDENT = 0.6
# Meaning against words at full weight: 1.5 gave 59.7 / 68.4 / 0.433, 18 / 25 (2.0, as
# before, 55.2 / 65.1 / 0.406 without the period; WORDS_CONFIDENT 0.5 for both).
MEANING_WEIGHT = 1.0
# The period's ranking: none gave 57.9 / 66.0 / 0.428, 0.5 gave 59.9 / 68.4 / 0.447, 1.0
# gave 61.1 / 69.7 / 0.451 and 2.0 the same (WORDS_CONFIDENT 0.5; paraphrases unmoved).
PERIOD_WEIGHT = 1.0
# Memories of the period that take part without words or meaning (newest first): a
# conversation's session is at most 30 turns; 20 gave the same figures as 50.
PERIOD_DEPTH = 50
# A memory's id is shown by its shortest ending of at least this many characters that no
# other id ends with, as git shortens a commit's hash: an id's last five are its four random
# base-36 digits and the last of its milliseconds (`model.IdMaker`), 60 million endings. Of
# the 2,760 memories of LoCoMo's development conversations 2 need a sixth; of 100,000
# minted a second apart, 589 a sixth or seventh. Alone it took recall replies of 10 from
# 485 to 465 tokens (`python -m bench.memory.locomo`). The cache indexes the ids' last five
# characters (`cache._ADDED_INDEXES`).
SHORT_ID_CHARS = 5
# FTS5 columns, in the order of `_FIELD_WEIGHTS`.
_FIELDS = ("tags", "text")

Row = tuple[str, str, str, str, str, str | None, str | None, str | None, str | None, str]


def content_hash(text: str) -> bytes:
    """What a memory's vector is cached under: its content, whatever its id or tags."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _key_hash(memory: Memory) -> bytes:
    content, tags = memory.dedup_key
    return content_hash(content + "\0" + "\x1f".join(sorted(tags)))


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


def _moment(micros: int) -> datetime:
    return _EPOCH + micros * _MICROSECOND


def happened(memory: Memory) -> datetime:
    """When it happened: `occurred` where it says, else when it was written."""
    moment = occurred_moment(memory.occurred) if memory.occurred else None
    return moment if moment is not None else memory.ts


def _memory(row: Row) -> Memory:
    memory_id, ts, content, tags, context, kind, source, scope, occurred, replaced = row
    return Memory(
        memory_id,
        datetime.fromisoformat(ts),
        content,
        tuple(json.loads(tags)),
        context,
        kind,
        source,
        scope,
        occurred,
        tuple(json.loads(replaced)),
    )


@dataclass(frozen=True, slots=True)
class Query:
    """What recall filters by; every part is optional."""

    tags: frozenset[str] = frozenset()
    all_tags: bool = False
    text: str = ""
    start: datetime | None = None
    end: datetime | None = None
    type: str | None = None
    # One scope's memories and the shared ones; None: every memory.
    scope: str | None = None
    include_superseded: bool = False

    @property
    def filtered(self) -> bool:
        """Whether it keeps only some memories (by tags, type, scope or time), text aside."""
        return bool(self.tags) or any(
            part is not None for part in (self.type, self.start, self.end, self.scope)
        )


@dataclass(frozen=True, slots=True)
class Selection:
    ranked: list[Memory]
    total: int
    newest: datetime | None
    oldest: datetime | None


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a run of the file's bytes holds, up to the last whole line."""

    records: list[Record]
    # Each record's line, newline-terminated, parallel to `records`; kept only on request.
    raw: list[bytes]
    consumed: int
    invalid_lines: int
    # The last non-empty line consumed and where it ends (relative to the run), if any.
    last_line: bytes
    last_end: int
    # Bytes after the last newline that do not parse: a write cut short (or in progress).
    torn_tail: bool


def parse(data: bytes, *, keep_raw: bool = False) -> Parsed:
    records: list[Record] = []
    raw: list[bytes] = []
    invalid = 0
    last_line, last_end = b"", 0
    torn = False
    position = 0
    end = len(data)
    while position < end:
        newline = data.find(b"\n", position)
        complete = newline >= 0
        stop = newline + 1 if complete else end
        line = data[position:stop]
        record = decode(line) if line.strip() else None
        if not complete and record is None:
            # A line still being written, or cut by a crash: leave it unconsumed. If it
            # is torn for good, the next append's newline closes it and it is counted.
            torn = bool(line.strip())
            break
        if record is not None:
            records.append(record)
            if keep_raw:
                raw.append(line.rstrip(b"\n") + b"\n")
        elif line.strip():
            invalid += 1
        if line.strip():
            last_line, last_end = line, stop
        position = stop
    return Parsed(records, raw, position, invalid, last_line, last_end, torn)


@dataclass(frozen=True, slots=True)
class Settled:
    """What a set of records holds, found without an index (for bulk loads and for
    folding files). The same rules as `MemoryIndex.apply`, in one pass over Python dicts:
    `tests/test_memory_store.py` checks that both give the same index."""

    # Live memories in the order first read, with the file each was first read from, and
    # whether each repeats an earlier one (same content, tags and scope).
    live: list[tuple[str, Memory]]
    repeats: list[bool]
    # Every tombstone, once per id, with its file.
    retired: list[tuple[str, Tombstone]]
    # Per file, the memory lines whose id is forgotten (folding drops them).
    dead: dict[str, int]
    # For forgotten ids, the file their memory line was first read from, and what that
    # memory replaced.
    memory_files: dict[str, str]
    retired_supersedes: dict[str, tuple[str, ...]]


def settle(records: Iterable[tuple[str, Record]]) -> Settled:
    """Records merged by id: a memory's first line counts (its id is minted once), and a
    tombstone retires its id whichever order the two were read in."""
    memories: dict[str, tuple[str, Memory]] = {}
    tombstones: dict[str, tuple[str, Tombstone]] = {}
    for file, record in records:
        if isinstance(record, Tombstone):
            tombstones.setdefault(record.id, (file, record))
        else:
            memories.setdefault(record.id, (file, record))
    live = [(file, m) for file, m in memories.values() if m.id not in tombstones]
    dead: dict[str, int] = {}
    memory_files: dict[str, str] = {}
    retired_supersedes: dict[str, tuple[str, ...]] = {}
    for file, memory in memories.values():
        if memory.id in tombstones:
            dead[file] = dead.get(file, 0) + 1
            memory_files[memory.id] = file
            retired_supersedes[memory.id] = memory.supersedes
    seen: set[tuple[str, frozenset[str]]] = set()
    repeats: list[bool] = []
    for _, memory in live:
        key = memory.dedup_key
        # One that replaces others was written knowing what is stored: a fact made current
        # again in the same words as an old one is no repeat of it.
        repeats.append(key in seen and not memory.supersedes)
        seen.add(key)
    return Settled(live, repeats, list(tombstones.values()), dead, memory_files, retired_supersedes)


class MemoryIndex:
    """The tables of `cache._SCHEMA`; read and change it inside `LogReader.reading/writing`,
    which load and save the counters below."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._live = 0
        # Slots only grow (until a rebuild): the contentless word table keeps a retired
        # slot's words, which must never be taken for a later memory's.
        self.next_slot = 0

    # -- building --------------------------------------------------------------------------

    def apply(self, record: Record, file: str) -> None:
        """Merge one record read from `file`; reading it again changes nothing."""
        if isinstance(record, Tombstone):
            if self._retired(record.id):
                return
            live = self._live_memory(record.id)
            memory_file = self._retire(live) if live is not None else None
            self.db.execute(
                "INSERT INTO retired VALUES (?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.ts.isoformat(),
                    file,
                    memory_file,
                    json.dumps(live.supersedes if live is not None else []),
                ),
            )
        elif self._retired(record.id):
            # A forgotten memory's line, which folding drops: counted once per memory, in
            # the file it was first read from (as `settle` counts).
            first = self.db.execute(
                "UPDATE retired SET memory_file = ?, supersedes = ? WHERE id = ? AND "
                "memory_file IS NULL",
                (file, json.dumps(record.supersedes), record.id),
            )
            if first.rowcount:
                self._count(file, dead=1)
                self._pass_on(record.id, record.supersedes)
        elif self._live_memory(record.id) is None:
            self._insert([(file, record)], [self._is_repeat(record)])

    def _count(self, file: str, *, live: int = 0, dead: int = 0) -> None:
        self.db.execute(
            "INSERT INTO file_lines VALUES (?, ?, ?) ON CONFLICT (file) DO UPDATE SET "
            "live = live + excluded.live, dead = dead + excluded.dead",
            (file, live, dead),
        )

    def file_lines(self, file: str) -> tuple[int, int]:
        """(dead, live) memory lines of `file`: forgotten ones folding drops, and the rest."""
        row = self.db.execute("SELECT dead, live FROM file_lines WHERE file = ?", (file,))
        found = row.fetchone()
        return (int(found[0]), int(found[1])) if found is not None else (0, 0)

    def is_retired(self, memory_id: str) -> bool:
        """Whether this id was forgotten (for good)."""
        return self._retired(memory_id)

    def _retired(self, memory_id: str) -> bool:
        row = self.db.execute("SELECT 1 FROM retired WHERE id = ?", (memory_id,))
        return row.fetchone() is not None

    def _live_memory(self, memory_id: str) -> Memory | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        found = row.fetchone()
        return _memory(found) if found is not None else None

    def _is_repeat(self, memory: Memory) -> bool:
        """Whether it repeats an earlier memory (as `settle` decides)."""
        if memory.supersedes:
            return False
        repeat = self.db.execute(
            "SELECT 1 FROM memories INDEXED BY memories_by_key WHERE key = ? LIMIT 1",
            (_key_hash(memory),),
        )
        return repeat.fetchone() is not None

    def _insert(self, memories: list[tuple[str, Memory]], repeats: list[bool]) -> None:
        first = self.next_slot
        self.next_slot += len(memories)
        self._live += len(memories)
        slots = range(first, self.next_slot)
        self.db.executemany(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
            [
                (
                    slot,
                    m.id,
                    m.ts.isoformat(),
                    _micros(happened(m)),
                    m.content,
                    json.dumps(m.tags),
                    m.context,
                    m.type,
                    m.source,
                    m.scope,
                    m.occurred,
                    json.dumps(m.supersedes),
                    file,
                    _key_hash(m),
                    int(repeat),
                    content_hash(m.content),
                )
                for slot, (file, m), repeat in zip(slots, memories, repeats, strict=True)
            ],
        )
        self.db.executemany(
            "INSERT OR IGNORE INTO memory_tags VALUES (?, ?)",
            [(tag, slot) for slot, (_, m) in zip(slots, memories, strict=True) for tag in m.tags],
        )
        self.db.executemany(
            "INSERT INTO words (rowid, tags, text) VALUES (?, ?, ?)",
            [
                (
                    slot,
                    " ".join(terms(" ".join(m.tags).replace("/", " "))),
                    " ".join(terms(m.content + " " + m.context)),
                )
                for slot, (_, m) in zip(slots, memories, strict=True)
            ],
        )
        rows = [
            (old, m.id)
            for _, m in memories
            if m.supersedes
            for old in self._replaced_through(m.supersedes)
        ]
        self.db.executemany("INSERT OR IGNORE INTO supersessions VALUES (?, ?)", rows)
        replaced = {old for old, _ in rows}
        fresh = {m.id for _, m in memories}
        self._mark_superseded(replaced | fresh)
        per_file: dict[str, int] = {}
        for file, _ in memories:
            per_file[file] = per_file.get(file, 0) + 1
        for file, count in per_file.items():
            self._count(file, live=count)

    def _replaced_through(self, ids: Iterable[str]) -> set[str]:
        """`ids`, and through each forgotten one among them what it replaced: a fact that
        replaces a forgotten replacement (A, then B replacing A, then C replacing B, then B
        forgotten as wrong) still replaces what that one replaced."""
        found: set[str] = set()
        pending = list(ids)
        while pending:
            memory_id = pending.pop()
            if memory_id in found:
                continue
            found.add(memory_id)
            row = self.db.execute("SELECT supersedes FROM retired WHERE id = ?", (memory_id,))
            replaced = row.fetchone()
            if replaced is not None:
                pending += json.loads(replaced[0])
        return found

    def _pass_on(self, memory_id: str, replaced: Iterable[str]) -> None:
        """A forgotten memory's replacements now replace what it replaced."""
        olds = self._replaced_through(replaced)
        if not olds:
            return
        successors = [
            row[0]
            for row in self.db.execute("SELECT new FROM supersessions WHERE old = ?", (memory_id,))
        ]
        self.db.executemany(
            "INSERT OR IGNORE INTO supersessions VALUES (?, ?)",
            [(old, new) for old in olds for new in successors],
        )
        self._mark_superseded(olds)

    def _mark_superseded(self, ids: Iterable[str]) -> None:
        """Recompute `superseded` for these ids: set while a live memory replaces them."""
        self.db.execute(
            "UPDATE memories SET superseded = EXISTS (SELECT 1 FROM supersessions s "
            "WHERE s.old = memories.id) WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(ids)),),
        )

    def load(self, records: Iterable[tuple[str, Record]]) -> None:
        """Merge `records` (with the file each was read from) into an empty index at once:
        what a rebuild does, about ten times faster than one `apply` at a time."""
        assert self.next_slot == 0 and self._live == 0, "load() needs an empty index"
        settled = settle(records)
        self.db.executemany(
            "INSERT INTO retired VALUES (?, ?, ?, ?, ?)",
            [
                (
                    t.id,
                    t.ts.isoformat(),
                    file,
                    settled.memory_files.get(t.id),
                    json.dumps(settled.retired_supersedes.get(t.id, ())),
                )
                for file, t in settled.retired
            ],
        )
        self._insert(settled.live, settled.repeats)
        for file, count in settled.dead.items():
            self._count(file, dead=count)

    @property
    def empty(self) -> bool:
        if self.next_slot:
            return False
        return self.db.execute("SELECT 1 FROM retired LIMIT 1").fetchone() is None

    def _retire(self, memory: Memory) -> str:
        """Take a live memory out; the file its line was read from."""
        slot, key, repeat, file = self.db.execute(
            "SELECT slot, key, repeat, file FROM memories WHERE id = ?", (memory.id,)
        ).fetchone()
        self.db.execute("DELETE FROM memories WHERE slot = ?", (slot,))
        self._count(file, live=-1, dead=1)
        self.db.executemany(
            "DELETE FROM memory_tags WHERE tag = ? AND slot = ?",
            [(tag, slot) for tag in memory.tags],
        )
        self._live -= 1
        if memory.supersedes:
            # What it replaced is current again, unless another replaces it, or a memory
            # that replaced this one does (`_pass_on`).
            self.db.execute("DELETE FROM supersessions WHERE new = ?", (memory.id,))
            self._mark_superseded(memory.supersedes)
            self._pass_on(memory.id, memory.supersedes)
        same = self.db.execute(
            "SELECT slot FROM memories WHERE key = ? ORDER BY slot LIMIT 1", (key,)
        ).fetchone()
        if same is not None and not repeat:  # the next one takes over
            self.db.execute("UPDATE memories SET repeat = 0 WHERE slot = ?", same)
        return str(file)

    def clear(self) -> None:
        for table in ("memories", "retired", "memory_tags", "supersessions", "file_lines"):
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("INSERT INTO words (words) VALUES ('delete-all')")
        self._live = self.next_slot = 0

    def counters(self) -> dict[str, int]:
        return {"live": self._live, "next_slot": self.next_slot}

    def set_counters(self, values: Mapping[str, int]) -> None:
        self._live = values.get("live", 0)
        self.next_slot = values.get("next_slot", 0)

    # -- lookups ---------------------------------------------------------------------------

    @property
    def live_count(self) -> int:
        return self._live

    def latest(self, memory_id: str) -> Record | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        found = row.fetchone()
        if found is not None:
            return _memory(found)
        retired = self.db.execute("SELECT ts FROM retired WHERE id = ?", (memory_id,)).fetchone()
        return Tombstone(memory_id, datetime.fromisoformat(retired[0])) if retired else None

    def __contains__(self, memory_id: str) -> bool:
        return self.latest(memory_id) is not None

    def _ids_ending(self, ending: str) -> list[str]:
        """Every id, of a memory or a forgotten one, that ends with `ending` (at least
        SHORT_ID_CHARS long), found through the indexes of the ids' last characters."""
        tail = ending[-SHORT_ID_CHARS:]
        rows = self.db.execute(
            f"SELECT id FROM memories WHERE substr(id, -{SHORT_ID_CHARS}) = ? "
            f"UNION SELECT id FROM retired WHERE substr(id, -{SHORT_ID_CHARS}) = ?",
            (tail, tail),
        )
        return [memory_id for (memory_id,) in rows if memory_id.endswith(ending)]

    def ids_named(self, given: str) -> list[str]:
        """The ids `given` may stand for: itself, when an id is exactly that; else every id
        that ends with it, if it is at least SHORT_ID_CHARS long (as `short_ids` shows
        them). More than one: `given` is ambiguous."""
        if given in self:
            return [given]
        return self._ids_ending(given) if len(given) >= SHORT_ID_CHARS else []

    def short_ids(self, ids: Iterable[str]) -> dict[str, str]:
        """Each id as shown: its shortest ending of at least SHORT_ID_CHARS characters that
        no other id ends with (the whole id where none is shorter), which `ids_named`
        takes back to it while no later memory shares that ending."""
        shown: dict[str, str] = {}
        for memory_id in ids:
            if memory_id in shown:
                continue
            others = [o for o in self._ids_ending(memory_id[-SHORT_ID_CHARS:]) if o != memory_id]
            length = SHORT_ID_CHARS
            while length < len(memory_id) and any(o.endswith(memory_id[-length:]) for o in others):
                length += 1
            shown[memory_id] = memory_id[-length:]
        return shown

    def find_same(
        self, content: str, tags: Iterable[str], scope: str | None = None
    ) -> Memory | None:
        probe = Memory("", _EPOCH, content, tuple(tags), "", scope=scope)
        # A superseded memory is no match: the same words may be the current fact again.
        # INDEXED BY: without statistics SQLite scans `memories_by_time` for repeat = 0
        # (13.8 ms of a 15.6 ms remember at 100,000 memories, reviewed with EXPLAIN).
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories INDEXED BY memories_by_key WHERE key = ? "
            "AND repeat = 0 AND superseded = 0",
            (_key_hash(probe),),
        ).fetchone()
        return _memory(row) if row is not None else None

    def repeats_of(self, memory: Memory) -> list[str]:
        """Ids of live memories with the same content and tags, this one included."""
        rows = self.db.execute(
            "SELECT id FROM memories INDEXED BY memories_by_key WHERE key = ? ORDER BY slot",
            (_key_hash(memory),),
        )
        return [row[0] for row in rows]

    def tag_counts(self, scope: str | None = None) -> list[tuple[str, int]]:
        """Known tags with their live memory counts, most used first; within a scope, of
        its memories and the shared ones only."""
        if scope is None:
            rows = self.db.execute(
                "SELECT tag, COUNT(*) FROM memory_tags GROUP BY tag ORDER BY 2 DESC, 1"
            )
        else:
            rows = self.db.execute(
                "SELECT tag, COUNT(*) FROM memory_tags WHERE slot IN (SELECT slot FROM "
                "memories WHERE scope IS NULL OR scope = ?) GROUP BY tag ORDER BY 2 DESC, 1",
                (scope,),
            )
        return [(tag, count) for tag, count in rows]

    def count(self, query: Query) -> int:
        """Memories `query`'s filters keep (its text aside)."""
        where, params = self._filters(query)
        return int(
            self.db.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", params).fetchone()[0]
        )

    def scope_counts(self) -> list[tuple[str, int]]:
        """Scopes in use with their current memory counts, most used first."""
        rows = self.db.execute(
            "SELECT scope, COUNT(*) FROM memories INDEXED BY memories_by_scope WHERE "
            "scope IS NOT NULL AND repeat = 0 AND superseded = 0 GROUP BY scope "
            "ORDER BY 2 DESC, 1"
        )
        return [(scope, count) for scope, count in rows]

    def primaries(self, *, include_superseded: bool = True) -> Iterator[Memory]:
        """Live memories in the order read, each repeat left out."""
        current = "" if include_superseded else " AND superseded = 0"
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE repeat = 0{current} ORDER BY slot"
        )
        return map(_memory, rows.fetchall())

    def primary_counts(self) -> tuple[int, int]:
        """How many memories are current and how many superseded, repeats left out (what
        `primaries` gives)."""
        current, superseded = self.db.execute(
            "SELECT count(*) - coalesce(sum(superseded != 0), 0), "
            "coalesce(sum(superseded != 0), 0) FROM memories WHERE repeat = 0"
        ).fetchone()
        return int(current), int(superseded)

    def recent(self, limit: int) -> list[Memory]:
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE repeat = 0 AND superseded = 0 "
            "ORDER BY at DESC, id DESC LIMIT ?",
            (limit,),
        )
        return [_memory(row) for row in rows]

    def replacements(self, ids: Iterable[str]) -> dict[str, str]:
        """For superseded ids among these, the live memory that replaces each (the newest)."""
        rows = self.db.execute(
            "SELECT s.old, s.new FROM supersessions s JOIN memories m ON m.id = s.new "
            "WHERE s.old IN (SELECT value FROM json_each(?)) ORDER BY m.slot",
            (json.dumps(sorted(ids)),),
        )
        return dict(rows.fetchall())

    def covered(self, below_slot: int) -> int:
        """Live memories (repeats aside) among the slots below `below_slot`."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM memories WHERE repeat = 0 AND slot < ?", (below_slot,)
        )
        return int(row.fetchone()[0])

    def contents(self, first_slot: int, end_slot: int) -> list[tuple[bytes, str]]:
        """(content hash, content) of the live memories in a range of slots, one per hash."""
        rows = self.db.execute(
            "SELECT meaning, MIN(content) FROM memories WHERE repeat = 0 AND slot >= ? "
            "AND slot < ? GROUP BY meaning",
            (first_slot, end_slot),
        )
        return [(meaning, content) for meaning, content in rows]

    # -- recall ----------------------------------------------------------------------------

    def _text_scores(self, text: str) -> tuple[dict[int, float], float]:
        """Slots holding any word of `text`, scored by the words' rarity (idf) and where
        each occurs (tags over content and context); and what a memory holding every word
        in its content would score (the words' idf summed, a word no memory has counting
        as the rarest)."""
        scores: dict[int, float] = {}
        score_of = scores.get
        total = max(self._live, 1)
        whole = 0.0
        for term in terms(text):
            fields = [
                [
                    row[0]
                    for row in self.db.execute(
                        "SELECT rowid FROM words WHERE words MATCH ?", (f'{{{name}}} : "{term}"',)
                    )
                ]
                for name in _FIELDS
            ]
            frequency = max(len(slots) for slots in fields)
            idf = math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))
            whole += idf
            for weight, slots in zip(_FIELD_WEIGHTS, fields, strict=True):
                gain = idf * weight
                for slot in slots:
                    scores[slot] = score_of(slot, 0.0) + gain
        return scores, whole

    @staticmethod
    def _filters(query: Query, *, by_slots: bool = False) -> tuple[str, list[object]]:
        """The WHERE clause of `query`'s filters. `by_slots`: the caller names the slots
        (a text query's candidates), and tags name them too: the flags then must not use
        `memories_by_time`, which SQLite, without statistics, otherwise scans whole for
        `repeat = 0` (recall by tag 44 ms instead of 5 at 100,000 memories)."""
        flag = "+" if by_slots or query.tags else ""
        clauses = [f"{flag}repeat = 0"]
        params: list[object] = []
        if not query.include_superseded:
            clauses.append(f"{flag}superseded = 0")
        if query.scope is not None:
            clauses.append("(scope IS NULL OR scope = ?)")
            params.append(query.scope)
        if query.tags:
            marks = ", ".join("?" * len(query.tags))
            tagged = f"SELECT slot FROM memory_tags WHERE tag IN ({marks})"
            params += sorted(query.tags)
            if query.all_tags:
                tagged += " GROUP BY slot HAVING COUNT(*) = ?"
                params.append(len(query.tags))
            clauses.append(f"slot IN ({tagged})")
        if query.start is not None:
            clauses.append("at >= ?")
            params.append(_micros(query.start))
        if query.end is not None:
            clauses.append("at < ?")
            params.append(_micros(query.end))
        if query.type is not None:
            clauses.append("type = ?")
            params.append(query.type)
        return " AND ".join(clauses), params

    def _fetch(self, slots: list[int]) -> list[Memory]:
        rows = self.db.execute(
            f"SELECT slot, {_COLUMNS} FROM memories WHERE slot IN (SELECT value FROM json_each(?))",
            (json.dumps(slots),),
        )
        by_slot = {row[0]: _memory(row[1:]) for row in rows}
        return [by_slot[slot] for slot in slots]

    def select(
        self,
        query: Query,
        limit: int,
        similar: Mapping[bytes, float] | None = None,
        period: tuple[datetime, datetime] | None = None,
    ) -> Selection:
        """The memories matching `query`: the best `limit` (by score, then recency; by
        recency alone without text), and how many matched in all, over which span.
        `similar`: cosine similarity by content hash of the memories close in meaning to
        the query text; they match too, and their ranking is fused with the words'."""
        where, params = self._filters(query)
        if not query.text:
            total, newest, oldest = self.db.execute(
                f"SELECT COUNT(*), MAX(at), MIN(at) FROM memories WHERE {where}", params
            ).fetchone()
            if not total:
                return Selection([], 0, None, None)
            # Equal times (one clock tick) fall back to file order: the later line is newer.
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {where} ORDER BY at DESC, slot DESC "
                "LIMIT ?",
                [*params, limit],
            )
            return Selection(
                [_memory(row) for row in rows], total, _moment(newest), _moment(oldest)
            )
        scores, whole = self._text_scores(query.text)
        nearby = self._slots_near(similar) if similar else {}
        candidates = scores.keys() | nearby.keys()
        where, params = self._filters(query, by_slots=True)
        rows = self.db.execute(
            "SELECT slot, at FROM memories INDEXED BY memories_by_slot_filters "
            f"WHERE {where} AND slot IN (SELECT value FROM json_each(?))",
            [*params, json.dumps(sorted(candidates))],
        )
        pool: dict[int, int] = dict(rows.fetchall())
        if period is not None:
            pool.update(self._slots_within(query, period))
        if not pool:
            return Selection([], 0, None, None)

        if nearby or period is not None:
            fused = self._fuse(pool, scores, whole, nearby, period)
        else:  # words alone (no model, or nothing near): their order, without the fusion
            fused = scores
        score = fused.get
        best = heapq.nlargest(limit, pool, key=lambda slot: (score(slot, 0.0), pool[slot], slot))
        return Selection(
            self._fetch(best), len(pool), _moment(max(pool.values())), _moment(min(pool.values()))
        )

    @staticmethod
    def _fuse(
        pool: Mapping[int, int],
        scores: Mapping[int, float],
        whole: float,
        nearby: Mapping[int, float],
        period: tuple[datetime, datetime] | None,
    ) -> dict[int, float]:
        """One score per slot of `pool` (slot: when it happened) from the rankings by
        words (`scores`, of `whole` for all the query's words), by meaning (`nearby`) and
        by the `period` the query names."""

        def by(values: Mapping[int, float]) -> list[int]:
            hits = [slot for slot in pool if slot in values]
            return sorted(hits, key=lambda slot: (values[slot], pool[slot], slot), reverse=True)

        by_words = by(scores)
        # Words count as far as the best match holds the query's words: a question whose
        # rare words one memory holds is answered by words; one whose words no memory
        # holds together (a paraphrase) only brings memories that share a common word.
        found = scores[by_words[0]] / whole if by_words else 0.0
        rankings = [(by_words, min(found / WORDS_CONFIDENT, 1.0)), (by(nearby), MEANING_WEIGHT)]
        fused = reciprocal_rank_fusion(rankings)
        if period is None:
            return fused
        # When it happened is a third ranking: the memories of the period the question
        # names, best first by the other two; it lifts them, it hides none of the rest.
        start, end = _micros(period[0]), _micros(period[1])
        within = by({slot: fused.get(slot, 0.0) for slot in pool if start <= pool[slot] < end})
        return reciprocal_rank_fusion([*rankings, (within, PERIOD_WEIGHT)])

    def _slots_within(self, query: Query, period: tuple[datetime, datetime]) -> dict[int, int]:
        """The newest `PERIOD_DEPTH` slots `query`'s filters keep that happened within
        `period`, with when: they take part whatever their words or meaning."""
        where, params = self._filters(query)
        rows = self.db.execute(
            f"SELECT slot, at FROM memories WHERE {where} AND at >= ? AND at < ? "
            "ORDER BY at DESC LIMIT ?",
            [*params, _micros(period[0]), _micros(period[1]), PERIOD_DEPTH],
        )
        return dict(rows.fetchall())

    def newest(self, query: Query) -> datetime | None:
        """When the latest memory `query`'s filters keep happened (its text aside)."""
        where, params = self._filters(query)
        row = self.db.execute(f"SELECT MAX(at) FROM memories WHERE {where}", params).fetchone()
        return _moment(row[0]) if row[0] is not None else None

    def with_meanings(self, query: Query, hashes: Iterable[bytes]) -> list[Memory]:
        """The memories `query`'s filters keep whose content hash is among `hashes`."""
        wanted = list(hashes)
        if not wanted:
            return []
        where, params = self._filters(query)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {where} AND meaning IN "
            f"({', '.join('?' * len(wanted))})",
            [*params, *wanted],
        )
        return [_memory(row) for row in rows]

    def meanings(self, query: Query) -> set[bytes]:
        """The content hashes of the memories `query`'s filters keep (its text aside)."""
        where, params = self._filters(query)
        return {
            row[0] for row in self.db.execute(f"SELECT meaning FROM memories WHERE {where}", params)
        }

    def _slots_near(self, similar: Mapping[bytes, float]) -> dict[int, float]:
        marks = ", ".join("?" * len(similar))
        rows = self.db.execute(
            f"SELECT slot, meaning FROM memories WHERE meaning IN ({marks})", list(similar)
        )
        return {slot: similar[meaning] for slot, meaning in rows}


@dataclass(slots=True)
class FileState:
    """Where the index stands in one memory file."""

    # Bytes consumed, and their CRC; the last non-empty line consumed ends at `anchor_end`.
    offset: int = 0
    crc: int = 0
    anchor: bytes = b""
    anchor_end: int = 0
    invalid_lines: int = 0
    # Bytes after the last newline that do not parse: a write cut short (or in progress).
    torn_tail: bool = False
    # The file's inode on disk when last read (None through REST).
    inode: int | None = None

    @property
    def anchor_start(self) -> int:
        return self.anchor_end - len(self.anchor)

    def dumps(self) -> str:
        return json.dumps(
            [
                self.offset,
                self.crc,
                self.anchor.hex(),
                self.anchor_end,
                self.invalid_lines,
                int(self.torn_tail),
                self.inode,
            ]
        )

    @classmethod
    def loads(cls, text: str) -> "FileState":
        offset, crc, anchor, anchor_end, invalid, torn, inode = json.loads(text)
        return cls(offset, crc, bytes.fromhex(anchor), anchor_end, invalid, bool(torn), inode)


@dataclass(frozen=True, slots=True)
class FileView:
    """One memory file as a refresh finds it: its size, how to read a range of it, and on
    disk its inode (a file replaced by a rename, as sync tools write, has a new one)."""

    size: int
    read: Callable[[int, int], bytes]
    inode: int | None = None


def bytes_view(data: bytes) -> FileView:
    return FileView(len(data), lambda start, length: data[start : start + length])


class ListingStale(VaultError):
    """The memory files changed between their listing and their reading; list again."""


# A memory file shorter than what the index read of it for this long was rewritten (see
# `LogReader`); the plugin's truncate-then-write lasts milliseconds.
SHORT_REWRITE_SECONDS = 10.0


class LogReader:
    """Where the index stands in every memory file, and what they held that was not a
    record. The files are merged as `settle` says; a file that grew is read from where it
    was left, and any other change (a file removed by the compaction of its writer, or
    rewritten) rebuilds the index from all of them."""

    def __init__(
        self, index: MemoryIndex | None = None, *, rewrite_after: float = SHORT_REWRITE_SECONDS
    ) -> None:
        self.index = index if index is not None else MemoryIndex(open_cache(None))
        self.files: dict[str, FileState] = {}
        # Files found shorter than what the index read of them, and since when (monotonic):
        # the plugin writes a file by truncating it first, so a read in between sees it
        # short for a moment; one short for `rewrite_after` seconds was rewritten.
        self._short_since: dict[str, float] = {}
        self._rewrite_after = rewrite_after
        # Rebuilds of the index since the cache was made.
        self.generation = 0
        # Files this process has checked against the cache (then the anchor is enough; see
        # the module docstring).
        self._verified: set[str] = set()
        self._depth = 0

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self, begin: str) -> Generator[None]:
        if self._depth:  # nested: part of the enclosing transaction
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        db = self.index.db
        db.execute(begin)
        self._depth = 1
        try:
            self._load()
            yield
            if begin != "BEGIN":
                self._save()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._load()
            raise
        finally:
            self._depth = 0

    def writing(self) -> AbstractContextManager[None]:
        """One write transaction (the cache's single writer), counters loaded and saved."""
        return self._transaction("BEGIN IMMEDIATE")

    def reading(self) -> AbstractContextManager[None]:
        """One consistent view of the index, counters loaded."""
        return self._transaction("BEGIN")

    def _load(self) -> None:
        db = self.index.db
        saved: dict[str, object] = dict(db.execute("SELECT key, value FROM state"))
        counts = {key: int(value) for key, value in saved.items() if isinstance(value, int)}
        self.index.set_counters(counts)
        self.generation = counts.get("generation", 0)
        self.files = {
            name: FileState.loads(text)
            for name, text in db.execute("SELECT name, state FROM files")
        }

    def _save(self) -> None:
        db = self.index.db
        values: dict[str, object] = {"generation": self.generation, **self.index.counters()}
        db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?)", values.items())
        db.execute("DELETE FROM files")
        db.executemany(
            "INSERT INTO files VALUES (?, ?)",
            [(name, state.dumps()) for name, state in self.files.items()],
        )

    # -- what the files held -----------------------------------------------------------------

    @property
    def offset(self) -> int:
        """Bytes read from all the files."""
        return sum(state.offset for state in self.files.values())

    @property
    def invalid_lines(self) -> int:
        return sum(state.invalid_lines for state in self.files.values())

    @property
    def torn_tail(self) -> bool:
        return any(state.torn_tail for state in self.files.values())

    # -- following the files ----------------------------------------------------------------

    def _mismatch(self, views: Mapping[str, FileView]) -> str | None:
        """Why the index cannot be extended over these files, or None."""
        for name in self.files:
            if name not in views:
                return f"{name} was removed (folded into another file by its writer)"
        for name, view in views.items():
            state = self.files.get(name)
            if state is None:
                continue
            if view.size < state.offset:
                if view.inode is not None and state.inode is not None and view.inode != state.inode:
                    return f"{name} was replaced by a shorter file"
                since = self._short_since.get(name)
                if since is not None and time.monotonic() - since >= self._rewrite_after:
                    return f"{name} was rewritten shorter"
                continue
            if view.read(state.anchor_start, len(state.anchor)) != state.anchor:
                return f"{name} was rewritten"
            if name not in self._verified and zlib.crc32(view.read(0, state.offset)) != state.crc:
                return f"{name}'s start changed since the cache was built"
        return None

    def follow(
        self,
        views: Mapping[str, FileView],
        appeared: Callable[[], Iterable[str]] = lambda: (),
    ) -> None:
        """Bring the index to the end of every file in `views` (all the memory files there
        are): extended over what was added, or rebuilt if a file changed otherwise.

        Before a rebuild, `appeared` lists the files again and gives those the listing
        behind `views` lacked. A fold writes its new file before it removes the ones it
        folded, so once a file is found gone the new one is listed; if it is, another
        process's fold overtook the listing: that raises ListingStale, to be listed again,
        rather than rebuilding the index (shared by the installation's processes) without
        the folded memories. Inside `writing()`."""
        problem = self._mismatch(views)
        if problem is not None:
            if self.files:
                overtaken = sorted(appeared())
                if overtaken:
                    raise ListingStale(f"{overtaken[0]} appeared after the files were listed")
                logger.info("memory index: %s; rebuilding it from the files", problem)
            self.reset()
        self.extend(views)

    def extend(self, views: Mapping[str, FileView]) -> None:
        """Read what was added to these files (others untouched); inside `writing()`."""
        read: list[tuple[str, Record]] = []
        for name in sorted(views):
            view = views[name]
            state = self.files.setdefault(name, FileState())
            if view.size < state.offset:
                self._short_since.setdefault(name, time.monotonic())  # read it next time
                continue
            self._short_since.pop(name, None)
            state.inode = view.inode
            read += [(name, record) for record in self._consume(state, view)]
            self._verified.add(name)
        if self.index.empty:
            self.index.load(read)
        else:
            for name, record in read:
                self.index.apply(record, name)

    def _consume(self, state: FileState, view: FileView) -> list[Record]:
        data = view.read(state.offset, view.size - state.offset)
        parsed = parse(data)
        state.invalid_lines += parsed.invalid_lines
        if parsed.last_line:
            state.anchor, state.anchor_end = parsed.last_line, state.offset + parsed.last_end
        state.torn_tail = parsed.torn_tail
        state.crc = zlib.crc32(data[: parsed.consumed], state.crc)
        state.offset += parsed.consumed
        return parsed.records

    def adopt(self, name: str, data: bytes) -> None:
        """Take `data`, whole lines of records this index holds already (a file this process
        folded), as read from file `name`, without parsing it; inside `writing()`."""
        assert not data or data.endswith(b"\n"), "a folded file holds whole lines"
        last_start = data.rfind(b"\n", 0, len(data) - 1) + 1
        self.files[name] = FileState(
            offset=len(data),
            crc=zlib.crc32(data),
            anchor=data[last_start:],
            anchor_end=len(data),
        )
        self._verified.add(name)

    def fold(self, names: Iterable[str], into: str) -> None:
        """Forget files this process folded into `into` itself (their records are there
        already, and in the index); inside `writing()`."""
        folded = sorted(set(names) - {into})
        for name in folded:
            self.files.pop(name, None)
            self._verified.discard(name)
        db = self.index.db
        for table in ("memories", "retired"):
            db.execute(
                f"UPDATE {table} SET file = ? WHERE file IN (SELECT value FROM json_each(?))",
                (into, json.dumps(folded)),
            )
        # The new file holds every live line of the folded ones, and none dead.
        every = json.dumps([*folded, into])
        db.execute(
            "INSERT INTO file_lines SELECT ?, COALESCE(SUM(live), 0), 0 FROM file_lines "
            "WHERE file IN (SELECT value FROM json_each(?)) ON CONFLICT (file) DO UPDATE SET "
            "live = excluded.live, dead = 0",
            (into, every),
        )
        db.execute(
            "DELETE FROM file_lines WHERE file IN (SELECT value FROM json_each(?))",
            (json.dumps(folded),),
        )

    @property
    def waiting(self) -> bool:
        """Whether a file was found short: read again at the next refresh."""
        return bool(self._short_since)

    def reset(self) -> None:
        """Empty the index, to read the files again from their start; inside `writing()`."""
        self.index.clear()
        self.files = {}
        self._short_since = {}
        self._verified = set()
        self.generation += 1
