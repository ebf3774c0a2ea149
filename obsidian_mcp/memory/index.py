"""The memory file's index, in SQLite, kept current by reading only what was added.

`MemoryIndex` holds the last word for every id, the live memories, their tags, and their
words in an FTS5 table for text queries. `LogReader` feeds it: it remembers how many bytes
have been consumed, a CRC of them, and the last line consumed (the anchor). A refresh that
finds the anchor still in place parses only the new bytes; any other change means the file
was rewritten (compacted, or replaced by sync) and the index is rebuilt. Lines are unique
(each carries a fresh id and a timestamp), so an anchor that matches proves the prefix is
unchanged to a process that has read it; a process that finds an index built by another
(or by an earlier run) checks the CRC of the whole prefix once before it trusts it.

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
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.model import Memory, Record, Tombstone, decode
from obsidian_mcp.retrieval.fusion import reciprocal_rank_fusion

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")
# Words too common to say anything about a memory; they would make every entry a match.
_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "had", "has",
        "have", "he", "her", "his", "i", "in", "is", "it", "its", "of", "on", "or", "she", "so",
        "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "what", "when",
        "where", "which", "who", "will", "with", "you", "your",
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
_COLUMNS = "id, ts, content, tags, context, type, source"
# Weight of the ranking by meaning against the ranking by words (1.0) in their fusion.
# `python -m bench.memory_bench --meaning` (34 paraphrases over 1,000 memories): hit@1
# 44% at 1.0, 53% at 2.0 and at 4.0 (hit@5 65%, 65%, 68%); words alone find 0%, 3%.
MEANING_WEIGHT = 2.0
# FTS5 columns, in the order of `_FIELD_WEIGHTS`.
_FIELDS = ("tags", "text")

Row = tuple[str, str, str, str, str, str | None, str | None]


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


def _memory(row: Row) -> Memory:
    memory_id, ts, content, tags, context, kind, source = row
    return Memory(memory_id, datetime.fromisoformat(ts), content, tuple(json.loads(tags)),
                  context, kind, source)


@dataclass(frozen=True, slots=True)
class Query:
    """What recall filters by; every part is optional."""

    tags: frozenset[str] = frozenset()
    all_tags: bool = False
    text: str = ""
    start: datetime | None = None
    end: datetime | None = None
    type: str | None = None

    @property
    def filtered(self) -> bool:
        """Whether it keeps only some memories (by tags, type or time), text aside."""
        return bool(self.tags) or any(
            part is not None for part in (self.type, self.start, self.end)
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
    """Where a run of records leaves an empty index, found without it (for bulk loads and
    compaction). The same rules as `MemoryIndex.apply`, in one pass over Python dicts:
    `tests/test_memory_store.py` checks that both give the same index."""

    # Live memories in the order of their last record, and whether each repeats an
    # earlier one (same content and tags).
    live: list[Memory]
    repeats: list[bool]
    retired: list[Tombstone]
    # Lines that compaction would drop (bad lines aside).
    dead_lines: int


def settle(records: Iterable[Record]) -> Settled:
    latest: dict[str, Record] = {}
    applied = 0
    for record in records:
        previous = latest.get(record.id)
        if previous == record:
            continue  # the same line twice
        applied += 1
        if previous is not None:
            del latest[record.id]  # re-inserted last: a record's slot is its latest line's
        latest[record.id] = record
    live = [record for record in latest.values() if isinstance(record, Memory)]
    retired = [record for record in latest.values() if isinstance(record, Tombstone)]
    seen: set[tuple[str, frozenset[str]]] = set()
    repeats: list[bool] = []
    for memory in live:
        key = memory.dedup_key
        repeats.append(key in seen)
        seen.add(key)
    # Every record that is not a live memory is dead (superseded, or a tombstone), and so
    # is every live repeat.
    return Settled(live, repeats, retired, applied - len(live) + sum(repeats))


class MemoryIndex:
    """The tables of `cache._SCHEMA`; read and change it inside `LogReader.reading/writing`,
    which load and save the counters below."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._live = 0
        # Slots only grow (until a rebuild): the contentless word table keeps a retired
        # slot's words, which must never be taken for a later memory's.
        self.next_slot = 0
        # Lines that compaction would drop: tombstones, superseded entries, repeats, bad lines.
        self.dead_lines = 0

    # -- building --------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        previous = self.latest(record.id)
        if previous == record:
            return  # the same line read twice (our own append, then the refresh that sees it)
        if isinstance(previous, Memory):
            self._retire(previous)
            self.dead_lines += 1
        elif previous is not None and isinstance(record, Memory):
            self.db.execute("DELETE FROM retired WHERE id = ?", (record.id,))
        if isinstance(record, Tombstone):
            self.db.execute("INSERT OR REPLACE INTO retired VALUES (?, ?)",
                            (record.id, record.ts.isoformat()))
            self.dead_lines += 1
        else:
            self._add(record)

    def _add(self, memory: Memory) -> None:
        repeat = self.db.execute("SELECT 1 FROM memories WHERE key = ? LIMIT 1",
                                 (_key_hash(memory),))
        is_repeat = repeat.fetchone() is not None
        if is_repeat:
            self.dead_lines += 1
        self._insert([memory], [is_repeat])

    def _insert(self, memories: list[Memory], repeats: list[bool]) -> None:
        first = self.next_slot
        self.next_slot += len(memories)
        self._live += len(memories)
        slots = range(first, self.next_slot)
        self.db.executemany(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(slot, m.id, m.ts.isoformat(), _micros(m.ts), m.content, json.dumps(m.tags),
              m.context, m.type, m.source, _key_hash(m), int(repeat), content_hash(m.content))
             for slot, m, repeat in zip(slots, memories, repeats, strict=True)],
        )
        self.db.executemany(
            "INSERT OR IGNORE INTO memory_tags VALUES (?, ?)",
            [(tag, slot) for slot, m in zip(slots, memories, strict=True) for tag in m.tags],
        )
        self.db.executemany(
            "INSERT INTO words (rowid, tags, text) VALUES (?, ?, ?)",
            [(slot, " ".join(terms(" ".join(m.tags).replace("/", " "))),
              " ".join(terms(m.content + " " + m.context)))
             for slot, m in zip(slots, memories, strict=True)],
        )

    def load(self, records: Iterable[Record]) -> None:
        """Apply `records` to an empty index at once: what a rebuild does, about ten times
        faster than one `apply` at a time."""
        assert self.next_slot == 0 and self._live == 0, "load() needs an empty index"
        settled = settle(records)
        self.db.executemany("INSERT OR REPLACE INTO retired VALUES (?, ?)",
                            [(t.id, t.ts.isoformat()) for t in settled.retired])
        self._insert(settled.live, settled.repeats)
        self.dead_lines += settled.dead_lines

    @property
    def empty(self) -> bool:
        return self.next_slot == 0 and self.dead_lines == 0

    def _retire(self, memory: Memory) -> None:
        slot, key, repeat = self.db.execute(
            "SELECT slot, key, repeat FROM memories WHERE id = ?", (memory.id,)
        ).fetchone()
        self.db.execute("DELETE FROM memories WHERE slot = ?", (slot,))
        self.db.executemany("DELETE FROM memory_tags WHERE tag = ? AND slot = ?",
                            [(tag, slot) for tag in memory.tags])
        self._live -= 1
        same = self.db.execute(
            "SELECT slot FROM memories WHERE key = ? ORDER BY slot LIMIT 1", (key,)
        ).fetchone()
        if same is not None:
            self.dead_lines -= 1  # one repeat fewer; the retired line is counted by apply
            if not repeat:  # the next one takes over
                self.db.execute("UPDATE memories SET repeat = 0 WHERE slot = ?", same)

    def clear(self) -> None:
        for table in ("memories", "retired", "memory_tags"):
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("INSERT INTO words (words) VALUES ('delete-all')")
        self._live = self.next_slot = self.dead_lines = 0

    def counters(self) -> dict[str, int]:
        return {"live": self._live, "next_slot": self.next_slot, "dead_lines": self.dead_lines}

    def set_counters(self, values: Mapping[str, int]) -> None:
        self._live = values.get("live", 0)
        self.next_slot = values.get("next_slot", 0)
        self.dead_lines = values.get("dead_lines", 0)

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

    def find_same(self, content: str, tags: Iterable[str]) -> Memory | None:
        probe = Memory("", _EPOCH, content, tuple(tags), "")
        row = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE key = ? AND repeat = 0", (_key_hash(probe),)
        ).fetchone()
        return _memory(row) if row is not None else None

    def repeats_of(self, memory: Memory) -> list[str]:
        """Ids of live memories with the same content and tags, this one included."""
        rows = self.db.execute("SELECT id FROM memories WHERE key = ? ORDER BY slot",
                               (_key_hash(memory),))
        return [row[0] for row in rows]

    def tag_counts(self) -> list[tuple[str, int]]:
        """Known tags with their live memory counts, most used first."""
        rows = self.db.execute(
            "SELECT tag, COUNT(*) FROM memory_tags GROUP BY tag ORDER BY 2 DESC, 1"
        )
        return [(tag, count) for tag, count in rows]

    def primaries(self) -> Iterator[Memory]:
        """Live memories in file order, each repeat left out."""
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM memories WHERE repeat = 0 ORDER BY slot")
        return map(_memory, rows.fetchall())

    def recent(self, limit: int) -> list[Memory]:
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE repeat = 0 ORDER BY at DESC, id DESC "
            "LIMIT ?", (limit,),
        )
        return [_memory(row) for row in rows]

    def covered(self, below_slot: int) -> int:
        """Live memories (repeats aside) among the slots below `below_slot`."""
        row = self.db.execute("SELECT COUNT(*) FROM memories WHERE repeat = 0 AND slot < ?",
                              (below_slot,))
        return int(row.fetchone()[0])

    def contents(self, first_slot: int, end_slot: int) -> list[tuple[bytes, str]]:
        """(content hash, content) of the live memories in a range of slots, one per hash."""
        rows = self.db.execute(
            "SELECT meaning, MIN(content) FROM memories WHERE repeat = 0 AND slot >= ? "
            "AND slot < ? GROUP BY meaning", (first_slot, end_slot),
        )
        return [(meaning, content) for meaning, content in rows]

    # -- recall ----------------------------------------------------------------------------

    def _text_scores(self, text: str) -> dict[int, float]:
        """Slots holding any word of `text`, scored by the words' rarity (idf) and where
        each occurs (tags over content and context)."""
        scores: dict[int, float] = {}
        score_of = scores.get
        total = max(self._live, 1)
        for term in terms(text):
            fields = [
                [row[0] for row in self.db.execute(
                    "SELECT rowid FROM words WHERE words MATCH ?", (f'{{{name}}} : "{term}"',)
                )]
                for name in _FIELDS
            ]
            frequency = max(len(slots) for slots in fields)
            if not frequency:
                continue
            idf = math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))
            for weight, slots in zip(_FIELD_WEIGHTS, fields, strict=True):
                gain = idf * weight
                for slot in slots:
                    scores[slot] = score_of(slot, 0.0) + gain
        return scores

    @staticmethod
    def _filters(query: Query) -> tuple[str, list[object]]:
        clauses = ["repeat = 0"]
        params: list[object] = []
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
            f"SELECT slot, {_COLUMNS} FROM memories WHERE slot IN "
            "(SELECT value FROM json_each(?))", (json.dumps(slots),),
        )
        by_slot = {row[0]: _memory(row[1:]) for row in rows}
        return [by_slot[slot] for slot in slots]

    def select(
        self, query: Query, limit: int, similar: Mapping[bytes, float] | None = None
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
                "LIMIT ?", [*params, limit],
            )
            return Selection([_memory(row) for row in rows], total, _moment(newest),
                             _moment(oldest))
        scores = self._text_scores(query.text)
        nearby = self._slots_near(similar) if similar else {}
        candidates = scores.keys() | nearby.keys()
        rows = self.db.execute(
            f"SELECT slot, at FROM memories WHERE {where} AND slot IN "
            "(SELECT value FROM json_each(?))", [*params, json.dumps(sorted(candidates))],
        )
        pool: dict[int, int] = dict(rows.fetchall())
        if not pool:
            return Selection([], 0, None, None)
        if nearby:
            def by(values: Mapping[int, float]) -> list[int]:
                hits = [slot for slot in pool if slot in values]
                return sorted(hits, key=lambda slot: (values[slot], pool[slot], slot),
                              reverse=True)

            fused = reciprocal_rank_fusion([(by(scores), 1.0), (by(nearby), MEANING_WEIGHT)])
            best = heapq.nlargest(limit, pool, key=lambda slot: (fused[slot], pool[slot], slot))
        else:
            best = heapq.nlargest(limit, pool, key=lambda slot: (scores[slot], pool[slot], slot))
        return Selection(self._fetch(best), len(pool), _moment(max(pool.values())),
                         _moment(min(pool.values())))

    def meanings(self, query: Query) -> set[bytes]:
        """The content hashes of the memories `query`'s filters keep (its text aside)."""
        where, params = self._filters(query)
        return {row[0] for row in self.db.execute(
            f"SELECT meaning FROM memories WHERE {where}", params
        )}

    def _slots_near(self, similar: Mapping[bytes, float]) -> dict[int, float]:
        marks = ", ".join("?" * len(similar))
        rows = self.db.execute(
            f"SELECT slot, meaning FROM memories WHERE meaning IN ({marks})", list(similar)
        )
        return {slot: similar[meaning] for slot, meaning in rows}


_READER_STATE = ("offset", "anchor", "anchor_end", "crc", "invalid_lines", "torn_tail",
                 "generation")


class LogReader:
    """Where the index stands in the file, and what the file held that was not a record."""

    def __init__(self, index: MemoryIndex | None = None) -> None:
        self.index = index if index is not None else MemoryIndex(open_cache(None))
        # Bytes consumed, and their CRC; the last non-empty line consumed ends at `anchor_end`.
        self.offset = 0
        self.crc = 0
        self.anchor = b""
        self.anchor_end = 0
        self.invalid_lines = 0
        # Bytes after the last newline that do not parse: a write cut short (or in progress).
        self.torn_tail = False
        # Rebuilds of the index since the cache was made.
        self.generation = 0
        # Whether this process has checked the cache against the file (then the anchor is
        # enough; see the module docstring).
        self._verified = False
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
        saved: dict[str, object] = dict(self.index.db.execute("SELECT key, value FROM state"))
        counts = {key: int(value) for key, value in saved.items() if isinstance(value, int)}
        self.index.set_counters(counts)
        self.offset = counts.get("offset", 0)
        self.crc = counts.get("crc", 0)
        self.anchor_end = counts.get("anchor_end", 0)
        self.invalid_lines = counts.get("invalid_lines", 0)
        self.torn_tail = bool(counts.get("torn_tail", 0))
        self.generation = counts.get("generation", 0)
        anchor = saved.get("anchor", b"")
        self.anchor = anchor if isinstance(anchor, bytes) else b""

    def _save(self) -> None:
        values: dict[str, object] = {name: getattr(self, name) for name in _READER_STATE}
        values["torn_tail"] = int(self.torn_tail)
        values.update(self.index.counters())
        self.index.db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?)", values.items())

    # -- following the file ----------------------------------------------------------------

    @property
    def anchor_start(self) -> int:
        return self.anchor_end - len(self.anchor)

    def _mismatch(self, size: int, read: Callable[[int, int], bytes]) -> str | None:
        """Why the index cannot be extended over a file of `size` bytes, or None."""
        if size < self.offset:
            return "the file is shorter than what the index holds"
        if read(self.anchor_start, len(self.anchor)) != self.anchor:
            return "the file was rewritten"
        if not self._verified and zlib.crc32(read(0, self.offset)) != self.crc:
            return "the file's start changed since the cache was built"
        return None

    def follow(self, size: int, read: Callable[[int, int], bytes]) -> None:
        """Bring the index to the end of a file of `size` bytes, read by `read(start,
        length)`: extended over what was added, or rebuilt if the file changed otherwise.
        Call inside `writing()`."""
        problem = self._mismatch(size, read)
        if problem is not None:
            if self.offset:
                logger.info("memory index: %s; rebuilding it from the file", problem)
            self.reset()
        self.consume(read(self.offset, size - self.offset))
        self._verified = True

    def reset(self) -> None:
        """Empty the index, to read the file again from its start; inside `writing()`."""
        self.index.clear()
        self.offset = self.crc = self.anchor_end = self.invalid_lines = 0
        self.anchor = b""
        self.torn_tail = False
        self.generation += 1

    def consume(self, data: bytes) -> list[Record]:
        """Parse `data`, the file's bytes from `offset` on; returns the records read."""
        parsed = parse(data)
        if self.index.empty and not self.offset:
            self.index.load(parsed.records)
        else:
            for record in parsed.records:
                self.index.apply(record)
        self.invalid_lines += parsed.invalid_lines
        self.index.dead_lines += parsed.invalid_lines
        if parsed.last_line:
            self.anchor, self.anchor_end = parsed.last_line, self.offset + parsed.last_end
        self.torn_tail = parsed.torn_tail
        self.crc = zlib.crc32(data[: parsed.consumed], self.crc)
        self.offset += parsed.consumed
        return parsed.records
