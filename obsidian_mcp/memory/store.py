"""The memory store: remember, recall, forget, over one JSON-lines file in the vault.

Every operation holds one lock per store, under which the index is brought up to date and
used; file I/O and SQLite run in worker threads or over HTTP while the lock is held, so the
index is never read while it changes. See `logfile` for how the file is shared between
processes, `index` for the index's cache, and `meaning` for recall by meaning.
"""

import logging
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import numpy as np

from obsidian_mcp.errors import InvalidArgument, VaultError
from obsidian_mcp.index.embedder import Embedder, Matrix
from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.index import LogReader, MemoryIndex, Query, content_hash, terms
from obsidian_mcp.memory.logfile import Compaction, DiskLog, MemoryLog, RestLog
from obsidian_mcp.memory.meaning import (
    MemoryVectors,
    cached_vectors,
    drop_stale_vectors,
    save_vectors,
)
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

T = TypeVar("T")

MAX_RECALL_LIMIT = 100
# Known tags offered when a recall finds nothing.
_SUGGESTED_TAGS = 12
# Memories embedded per background step: about 0.15 s of one core for short memories
# (4.4 ms each in batches, measured on the 2-core test machine), so a recall that needs the
# model for its query waits at most that long.
_EMBED_BATCH = 32
# Index slots whose cached vectors are loaded per step: about 20 ms under the store's lock.
_SLOTS_PER_STEP = 2000
# Vectors of forgotten memories kept before they are dropped (and at least a tenth of the
# live ones): without a bound, every memory ever remembered kept its vector (an agent that
# remembers and forgets 1,000 times grew by 2.4 MB of Python objects alone, tracemalloc).
_STALE_VECTORS_MIN = 200


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
    # How far meaning took part in a recall by query, when not fully ("by words only: ...").
    meaning_note: str | None = None


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
    # Where the index is kept between processes (None: in memory only).
    cache: str | None
    # The embedding model and how many memory vectors it has, or why there is none.
    meaning: str


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
        cache: Path | None = None,
        embedder: Callable[[], Embedder] | None = None,
    ) -> None:
        """`max_staleness`: seconds a REST-only store may answer from its index before it
        GETs the file again. `compact_min_dead`: compaction runs after a write once dead
        lines reach this many and outnumber the live memories. `cache`: the SQLite file
        that keeps the index between processes (None: in memory). `embedder`: loads the
        model for recall by meaning (None: by words only)."""
        self._clock = clock
        self._compact_min_dead = compact_min_dead
        self._ids = ids or IdMaker()
        self._lock = anyio.Lock()
        self._cache = cache
        self._reader = LogReader(MemoryIndex(self._open_cache(cache)))
        self._vectors = MemoryVectors(embedder)
        self._more_to_embed = anyio.Event()
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

    def _open_cache(self, cache: Path | None) -> sqlite3.Connection:
        try:
            return open_cache(cache)
        except (OSError, sqlite3.Error) as exc:
            # The cache only saves time: without it every process reads the file again.
            logger.warning("memory cache %s cannot be used (%s); keeping the index in memory",
                           cache, exc)
            self._cache = None
            return open_cache(None)

    def _file(self) -> MemoryLog:
        if self._log is None:
            assert self._problem is not None
            raise self._problem
        return self._log

    async def _query(self, question: Callable[[MemoryIndex], T]) -> T:
        """Bring the index up to date, then answer `question` from one consistent view of
        it, in a worker thread; call with the lock held."""
        self._reader = await self._file().refresh(self._reader)
        reader = self._reader

        def ask() -> T:
            with reader.reading():
                return question(reader.index)

        answer = await anyio.to_thread.run_sync(ask)
        self._notice_unembedded()
        return answer

    def _notice_unembedded(self) -> None:
        behind = (self._vectors.generation != self._reader.generation
                  or self._vectors.through_slot < self._reader.index.next_slot)
        if behind:
            self._more_to_embed.set()

    async def _write(self, build: Callable[[MemoryIndex], list[Record]]) -> list[Record]:
        """Append what `build` decides, then compact if the file is mostly dead; locked."""
        self._reader, records = await self._file().append(self._reader, build)
        index = self._reader.index
        mostly_dead = index.dead_lines >= max(self._compact_min_dead, index.live_count)
        if records and mostly_dead and self._file().compaction_refused() is None:
            await self._compact()
        self._notice_unembedded()
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
        stored: list[Memory] = []

        def build(index: MemoryIndex) -> list[Record]:
            same = index.find_same(text, clean_tags)
            if same is not None:
                stored.append(same)
                return []
            now = self._clock()
            memory_id = self._ids.make(now)
            while memory_id in index:  # another process minted it in the same millisecond
                memory_id = self._ids.make(now)
            memory = Memory(memory_id, now, text, clean_tags, why, kind, clean_source)
            stored.append(memory)
            return [memory]

        async with self._lock:
            written = await self._write(build)
        if written:
            await self._embed_remembered(stored[0])
        return Remembered(stored[0], created=bool(written))

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
        wanted = Query(frozenset(clean_tags), all_tags, text, start, end, kind)
        # The query's vector needs no lock: the model is loaded once and never changes.
        query_vector = (
            await self._vectors.embed([text])
            if text and self._vectors.embedder is not None else None
        )

        def question(index: MemoryIndex) -> Recall:
            similar = None
            if query_vector is not None:
                among = index.meanings(wanted) if wanted.filtered else None
                similar = self._vectors.nearest(query_vector, among)
            selection = index.select(wanted, limit, similar)
            return Recall(
                memories=selection.ranked,
                total=selection.total,
                newest=selection.newest,
                oldest=selection.oldest,
                criteria=criteria,
                now=now,
                store_size=index.live_count,
                known_tags=index.tag_counts()[:_SUGGESTED_TAGS] if not selection.total else [],
                meaning_note=self._meaning_note(index) if text else None,
            )

        async with self._lock:
            return await self._query(question)

    # -- meaning ------------------------------------------------------------------------------

    def _meaning_note(self, index: MemoryIndex) -> str | None:
        """Why a recall by query ranked by words alone, or on how many memories meaning
        took part; None when it covered them all. Inside `reading()`."""
        if self._vectors.embedder is None:
            if self._vectors.problem is not None:
                return f"ranked by words only: {self._vectors.problem}"
            return "ranked by words only for now: the meaning model is loading"
        total = index.covered(index.next_slot)
        current = self._vectors.generation == self._reader.generation
        covered = index.covered(self._vectors.through_slot) if current else 0
        if covered < total:
            return f"meaning covers {covered:,} of {total:,} memories so far; the rest by words"
        return None

    async def keep_meaning_current(self) -> None:
        """Run for the server's life: once memory is first used, load the model, then embed
        the memories that have no vector yet (a large file's in the background, others' as
        they appear). Waiting for that first use keeps the model's loading off the first
        answer, and off servers whose memory is never used."""
        while True:
            await self._more_to_embed.wait()
            self._more_to_embed = anyio.Event()
            try:
                await self.catch_up_meaning()
            except Exception:  # recall goes on by words; the next change tries again
                logger.exception("memory vectors could not be brought up to date")

    async def catch_up_meaning(self) -> None:
        """Load the model, then give every memory of the file its vector: from the cache
        where it has one, from the model otherwise, a step at a time so that recall goes on
        meanwhile (by words where vectors are still missing)."""
        embedder = await self._vectors.load()
        if embedder is None or self._log is None:
            return
        model = embedder.model_id
        while True:
            async with self._lock:
                step = await self._query(lambda index: self._vector_step(index, model))
            if step is None:
                return
            generation, end, missing = step
            for first in range(0, len(missing), _EMBED_BATCH):
                part = missing[first : first + _EMBED_BATCH]
                vectors = await self._vectors.embed([text for _, text in part])
                async with self._lock:
                    await self._keep_vectors(model, [hash_ for hash_, _ in part], vectors)
            async with self._lock:
                if self._vectors.generation == generation:
                    self._vectors.through_slot = max(self._vectors.through_slot, end)

    def _vector_step(
        self, index: MemoryIndex, model: str
    ) -> tuple[int, int, list[tuple[bytes, str]]] | None:
        """The next slots to cover: cached vectors loaded; (generation, end, contents that
        still need the model), or None when every slot is covered. Inside `reading()`."""
        vectors = self._vectors
        if vectors.generation != self._reader.generation:  # rebuilt: its slots are new
            vectors.generation, vectors.through_slot = self._reader.generation, 0
        start = vectors.through_slot
        if start >= index.next_slot:
            return None
        end = min(start + _SLOTS_PER_STEP, index.next_slot)
        contents = [(h, text) for h, text in index.contents(start, end) if h not in vectors]
        found = cached_vectors(index.db, model, [h for h, _ in contents])
        if found:
            vectors.add(list(found), np.stack(list(found.values())))
        missing = [(h, text) for h, text in contents if h not in found]
        if not missing:
            vectors.through_slot = end
        return vectors.generation, end, missing

    async def _keep_vectors(self, model: str, hashes: list[bytes], vectors: Matrix) -> None:
        """Store vectors in the cache and the matrix; locked."""
        reader = self._reader

        def keep() -> None:
            with reader.writing():
                save_vectors(reader.index.db, model, hashes, vectors)
                self._vectors.add(hashes, vectors)
                # Forgotten memories leave their vectors behind, in the cache and in the
                # matrix; once they are a tenth of those held, they go.
                held, live = len(self._vectors), reader.index.live_count
                if held > live + max(_STALE_VECTORS_MIN, live // 10):
                    self._vectors.keep_only(drop_stale_vectors(reader.index.db))

        await anyio.to_thread.run_sync(keep)

    async def _embed_remembered(self, memory: Memory) -> None:
        """A new memory's vector, made now so the next recall finds it by meaning."""
        embedder = self._vectors.embedder
        if embedder is None:
            return  # the background catch-up embeds it once the model is there
        vectors = await self._vectors.embed([memory.content])
        async with self._lock:
            await self._keep_vectors(embedder.model_id, [content_hash(memory.content)], vectors)

    # -- housekeeping and overview --------------------------------------------------------------

    async def compact(self) -> Compaction:
        """Rewrite the file with only its live memories, atomically where the source allows."""
        async with self._lock:
            return await self._compact()

    async def overview(self, limit: int) -> tuple[list[Memory], list[tuple[str, int]]]:
        """The most recent memories and every known tag with its count."""
        async with self._lock:
            return await self._query(lambda index: (index.recent(limit), index.tag_counts()))

    async def status(self) -> MemoryStatus:
        def question(index: MemoryIndex) -> MemoryStatus:
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
                cache=str(self._cache) if self._cache is not None else None,
                meaning=self._vectors.describe(),
            )

        async with self._lock:
            return await self._query(question)

    def now(self) -> datetime:
        return self._clock()
