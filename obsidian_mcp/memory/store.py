"""The memory store: remember, recall, forget, over one JSON-lines file in the vault.

Every operation holds one lock per store, under which the index is brought up to date and
used; file I/O runs in worker threads or over HTTP while the lock is held, so the index is
never read while it changes. See `logfile` for how the file is shared between processes.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio

from obsidian_mcp.errors import InvalidArgument, VaultError
from obsidian_mcp.memory.index import LogReader, MemoryIndex, Query, terms
from obsidian_mcp.memory.logfile import Compaction, DiskLog, MemoryLog, RestLog
from obsidian_mcp.memory.model import (
    IdMaker,
    Memory,
    Record,
    Tombstone,
    format_ts,
    normalize_tags,
    normalize_type,
    validate_memory,
)
from obsidian_mcp.memory.timespec import describe_window, window
from obsidian_mcp.paths import is_hidden, normalize_vault_path
from obsidian_mcp.vault import Vault

logger = logging.getLogger(__name__)

MAX_RECALL_LIMIT = 100
# Known tags offered when a recall finds nothing.
_SUGGESTED_TAGS = 12


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Remembered:
    memory: Memory
    # False when the same content with the same tags was stored already: nothing written.
    created: bool


@dataclass(frozen=True, slots=True)
class Recall:
    memories: list[Memory]
    total: int
    newest: datetime | None
    oldest: datetime | None
    # The filters in words ("tagged gale", "matching 'storm'"), for the summary line.
    criteria: list[str]
    now: datetime
    store_size: int
    # Most used tags, filled only when nothing matched: what the agent could try instead.
    known_tags: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])


@dataclass(frozen=True, slots=True)
class MemoryStatus:
    path: str
    source: str
    memories: int
    tags: int
    bytes: int
    # Lines the next compaction drops: tombstones, retired and repeated entries, bad lines.
    dead_lines: int
    invalid_lines: int
    torn_tail: bool
    # Why the file is never compacted through this source (REST alone), or None.
    compaction_refused: str | None


def _criteria(tags: tuple[str, ...], all_tags: bool, text: str, kind: str | None) -> list[str]:
    parts: list[str] = []
    if tags:
        parts.append("tagged " + (" and " if all_tags else " or ").join(tags))
    if text:
        parts.append(f"matching {text!r}")
    if kind:
        parts.append(f"of type {kind}")
    return parts


class MemoryStore:
    def __init__(
        self,
        vault: Vault,
        path: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        max_staleness: float = 2.0,
        compact_min_dead: int = 200,
        ids: IdMaker | None = None,
    ) -> None:
        """`max_staleness`: seconds a REST-only store may answer from its index before it
        GETs the file again. `compact_min_dead`: compaction runs after a write once dead
        lines reach this many and outnumber the live memories."""
        self._clock = clock
        self._compact_min_dead = compact_min_dead
        self._ids = ids or IdMaker()
        self._lock = anyio.Lock()
        self._reader = LogReader()
        # A bad configured path must not stop the server: the memory tools report it.
        self._problem: VaultError | None = None
        self.path = path
        self._log: MemoryLog | None = None
        try:
            self.path = normalize_vault_path(path)
            if is_hidden(self.path):
                raise InvalidArgument(
                    f"The memory path {path!r} is hidden; Obsidian and sync ignore hidden "
                    "files. Set OBSIDIAN_MEMORY_PATH to a visible path such as "
                    "'obsidian-mcp/memory.jsonl'."
                )
            # With the folder known, the file is read and written on disk even while
            # Obsidian runs: only there can appends and compaction share a lock.
            if vault.disk is not None:
                self._log = DiskLog(vault.disk.root, self.path)
            else:
                self._log = RestLog(vault, self.path, max_staleness=max_staleness)
        except VaultError as exc:
            self._problem = exc

    def _file(self) -> MemoryLog:
        if self._log is None:
            assert self._problem is not None
            raise self._problem
        return self._log

    async def _index(self) -> MemoryIndex:
        """The index brought up to date; call with the lock held."""
        self._reader = await self._file().refresh(self._reader)
        return self._reader.index

    async def _write(self, build: Callable[[MemoryIndex], list[Record]]) -> list[Record]:
        """Append what `build` decides, then compact if the file is mostly dead; locked."""
        self._reader, records = await self._file().append(self._reader, build)
        index = self._reader.index
        mostly_dead = index.dead_lines >= max(self._compact_min_dead, index.live_count)
        if records and mostly_dead and self._file().compaction_refused() is None:
            await self._compact()
        return records

    async def _compact(self) -> Compaction:
        self._reader, report = await self._file().compact(self._reader)
        logger.info(
            "memory file compacted: %d memories kept, %d lines dropped, %d -> %d bytes",
            report.kept, report.dropped_lines, report.bytes_before, report.bytes_after,
        )
        return report

    # -- the three operations -----------------------------------------------------------------

    async def remember(
        self,
        content: str,
        tags: Iterable[str],
        context: str = "",
        *,
        type: str | None = None,
        source: str | None = None,
    ) -> Remembered:
        text, clean_tags, why, kind, clean_source = validate_memory(
            content, tags, context, type, source
        )

        def build(index: MemoryIndex) -> list[Record]:
            if index.find_same(text, clean_tags) is not None:
                return []
            now = self._clock()
            memory_id = self._ids.make(now)
            while memory_id in index:  # another process minted it in the same millisecond
                memory_id = self._ids.make(now)
            return [Memory(memory_id, now, text, clean_tags, why, kind, clean_source)]

        async with self._lock:
            written = await self._write(build)
            if written:
                memory = written[0]
                assert isinstance(memory, Memory)
                return Remembered(memory, created=True)
            same = self._reader.index.find_same(text, clean_tags)
            assert same is not None
            return Remembered(same, created=False)

    async def forget(self, memory_id: str) -> Memory:
        """Retire a memory (and any stored repeat of it); returns what was forgotten."""
        wanted = memory_id.strip().lower()
        forgotten: list[Memory] = []

        def build(index: MemoryIndex) -> list[Record]:
            record = index.latest(wanted)
            if record is None:
                raise InvalidArgument(
                    f"No memory has the id {memory_id!r}. Ids come from vault_remember and "
                    "vault_recall; recall the memory first to get its id."
                )
            if isinstance(record, Tombstone):
                raise InvalidArgument(
                    f"The memory {wanted!r} was already forgotten ({format_ts(record.ts)})."
                )
            forgotten.append(record)
            now = self._clock()
            return [Tombstone(repeat, now) for repeat in index.repeats_of(record)]

        async with self._lock:
            await self._write(build)
        return forgotten[0]

    async def recall(
        self,
        *,
        tags: Iterable[str] = (),
        all_tags: bool = False,
        query: str = "",
        time_range: str = "all",
        since: str | None = None,
        until: str | None = None,
        type: str | None = None,
        limit: int = 10,
    ) -> Recall:
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise InvalidArgument(f"limit={limit} is out of range; give 1 to {MAX_RECALL_LIMIT}.")
        clean_tags = normalize_tags(tags, required=False)
        kind = normalize_type(type)
        text = query.strip()
        if text and not terms(text):
            raise InvalidArgument(
                f"The query {query!r} has no words to match (only very common words); "
                "use distinctive words, or recall by tags."
            )
        now = self._clock()
        start, end = window(time_range, since, until, now)
        criteria = _criteria(clean_tags, all_tags, text, kind)
        criteria += describe_window(time_range, since, until)
        async with self._lock:
            index = await self._index()
            selection = index.select(
                Query(frozenset(clean_tags), all_tags, text, start, end, kind), limit
            )
            known = index.tag_counts()[:_SUGGESTED_TAGS] if not selection.total else []
            return Recall(
                memories=selection.ranked,
                total=selection.total,
                newest=selection.newest,
                oldest=selection.oldest,
                criteria=criteria,
                now=now,
                store_size=index.live_count,
                known_tags=known,
            )

    # -- housekeeping and overview --------------------------------------------------------------

    async def compact(self) -> Compaction:
        """Rewrite the file with only its live memories, atomically where the source allows."""
        async with self._lock:
            return await self._compact()

    async def overview(self, limit: int) -> tuple[list[Memory], list[tuple[str, int]]]:
        """The most recent memories and every known tag with its count."""
        async with self._lock:
            index = await self._index()
            return index.recent(limit), index.tag_counts()

    async def status(self) -> MemoryStatus:
        async with self._lock:
            index = await self._index()
            reader = self._reader
            return MemoryStatus(
                path=self.path,
                source=self._file().describe(),
                memories=index.live_count,
                tags=len(index.tag_counts()),
                bytes=reader.offset,
                dead_lines=index.dead_lines,
                invalid_lines=reader.invalid_lines,
                torn_tail=reader.torn_tail,
                compaction_refused=self._file().compaction_refused(),
            )

    def now(self) -> datetime:
        return self._clock()
