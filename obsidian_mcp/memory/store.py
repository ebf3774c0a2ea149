"""The memory store: remember, recall, forget, over JSON-lines files in the vault.

Every operation holds one lock per store, under which the index is brought up to date and
used; file I/O and SQLite run in worker threads or over HTTP while the lock is held, so the
index is never read while it changes. See `files` for why every writer has a file of its
own, `logfile` for how they are read, written and folded, `index` for the index's cache,
`meaning` for recall by meaning, and `view` for the Markdown page the user reads.
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
from obsidian_mcp.index.embedder import Embedder, Matrix, on_measured_scale
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.files import (
    MemoryFiles,
    SlotLocks,
    device_id,
    installation_folder,
    lock_folder,
)
from obsidian_mcp.memory.index import LogReader, MemoryIndex, Query, content_hash, terms
from obsidian_mcp.memory.logfile import Compaction, DiskAccess, MemoryLog, RestAccess
from obsidian_mcp.memory.meaning import (
    MEANING_FLOOR,
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
    normalize_ids,
    normalize_scope,
    normalize_tags,
    normalize_type,
    validate_memory,
)
from obsidian_mcp.memory.timespec import (
    describe_window,
    mentioned_period,
    resolve_occurred,
    window,
)
from obsidian_mcp.memory.view import render_view
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
# Memories without a cached vector that a remember embeds before it compares (about 1.1 s
# at the rate above); past that, it compares with those that have one.
_EMBED_BEFORE_COMPARING = 256
# Seconds without a change before the memory page is written again: a burst of remembers
# writes it once (at 100,000 memories a page is about 12 MB).
_VIEW_SETTLE_SECONDS = 3.0
# Vectors of forgotten memories kept before they are dropped (and at least a tenth of the
# live ones): without a bound, every memory ever remembered kept its vector (an agent that
# remembers and forgets 1,000 times grew by 2.4 MB of Python objects alone, tracemalloc).
_STALE_VECTORS_MIN = 200


def utc_now() -> datetime:
    return datetime.now(UTC)


# Cosine similarity from which an existing memory is reported on remember as close to the
# new one, and from which it is called nearly the same fact (the agent may supersede or
# forget). `python -m bench.memory.quality`, 20 dev pairs of a fact and its rewording
# against 20 of related but different facts: precision and recall 100% from 0.70 to 0.75
# (best F1), 0.80 misses one rewording; held-out (10 + 10) 100% / 100% at 0.75.
SIMILAR_FLOOR = 0.60
NEAR_DUPLICATE = 0.75
# Memories reported as close on remember.
_SIMILAR_SHOWN = 3
# Best meaning similarity below which a recall by query says nothing matched (the nearest
# may follow, labelled weak). `python -m bench.memory.quality`, dev: true paraphrases that
# name people by role score 0.2-0.45 while in-world questions about what was never stored
# score 0.36-0.66 (they share names), so no floor separates them; the highest floor that
# is wrong on at most 5% of answerable dev questions is 0.20 (0.40 was wrong on 70%). It
# catches queries about nothing in the store at all, not near misses.
NO_MATCH_FLOOR = 0.20


class UnknownMemoryId(InvalidArgument):
    """An id no memory has, forgotten or not."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"No memory has the id {memory_id!r}. Ids come from vault_remember and "
            "vault_recall; recall the memory first to get its id."
        )


def named_id(index: MemoryIndex, given: str, what: str) -> str | None:
    """The one id `given` names (whole, or by an ending as recall shows it), None for none;
    an ending several ids share is refused with each of them. `what` names the argument."""
    found = index.ids_named(given)
    if len(found) > 1:
        choices = "; ".join(_described(index, memory_id) for memory_id in sorted(found)[:5])
        raise InvalidArgument(
            f"{what} {given!r} is the end of {len(found)} memories' ids: {choices}. Give "
            "the whole id of the one you mean."
        )
    return found[0] if found else None


def _described(index: MemoryIndex, memory_id: str) -> str:
    record = index.latest(memory_id)
    if isinstance(record, Memory):
        content = " ".join(record.content.split())
        return f"{memory_id} ({content[:60]}{'…' if len(content) > 60 else ''})"
    return f"{memory_id} (forgotten)"


@dataclass(frozen=True, slots=True)
class Similar:
    memory: Memory
    score: float


@dataclass(frozen=True, slots=True)
class Remembered:
    memory: Memory
    # False when the same content with the same tags was stored already: nothing written.
    created: bool
    # The closest current memories, best first (by meaning; empty without the model).
    similar: list[Similar] = field(default_factory=list[Similar])
    # Memories this one replaced.
    superseded: list[Memory] = field(default_factory=list[Memory])
    # Every id above by its shortest unique ending (`MemoryIndex.short_ids`).
    short_ids: dict[str, str] = field(default_factory=dict[str, str])
    # Whether `similar`'s scores are on the cosine scale NEAR_DUPLICATE was measured on
    # (the bundled model's). Another model's may put unrelated memories above it (a 4-bit
    # multilingual-e5-small scores unrelated texts 0.69), and "nearly the same" asks the
    # agent to forget the new memory: with another model nothing is called that, and the
    # closest are still listed with their scores.
    scores_measured: bool = True

    @property
    def near_duplicate(self) -> Memory | None:
        best = self.similar[0] if self.similar and self.scores_measured else None
        return best.memory if best is not None and best.score >= NEAR_DUPLICATE else None


@dataclass(frozen=True, slots=True)
class Recall:
    memories: list[Memory]
    total: int
    newest: datetime | None
    oldest: datetime | None
    # The filters in words ("tagged gale"), for the summary line; not the query, which the
    # agent wrote (`ranked` says there was one).
    criteria: list[str]
    now: datetime
    store_size: int
    # Most used tags, filled only when nothing matched: what the agent could try instead.
    known_tags: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    # How far meaning took part in a recall by query, when not fully ("by words only: ...").
    meaning_note: str | None = None
    # A recall by query found nothing relevant: `memories` are then the nearest, weak.
    no_match: bool = False
    # The best cosine similarity of the query among the memories the filters keep.
    best_score: float | None = None
    # For superseded memories shown (include_superseded), the id that replaced each.
    replaced_by: dict[str, str] = field(default_factory=dict[str, str])
    # Scopes in use, when the recall named none: what `scope` can be.
    scopes: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    # What the recall was filtered by, which its entries need not repeat.
    scope: str | None = None
    tags: tuple[str, ...] = ()
    # The recall ranked by a query (best first), not by time.
    ranked: bool = False
    # Each id shown (the memories', what replaced them, what they replace) by its shortest
    # unique ending (`MemoryIndex.short_ids`).
    short_ids: dict[str, str] = field(default_factory=dict[str, str])


@dataclass(frozen=True, slots=True)
class MemoryStatus:
    # The writers' folder the memories live in ('obsidian-mcp/memory/'), and the single
    # file of earlier versions, still read when it is there.
    folder: str
    legacy_file: str
    source: str
    # Current memories, what `obsidian-mcp memory list` shows; and the replaced ones.
    memories: int
    superseded: int
    tags: int
    bytes: int
    # Memory files read (writers' files, the legacy file, conflict copies).
    files: int
    # This process's file, once it has written.
    own_file: str | None
    # Lines of this process's file that its next compaction drops.
    dead_lines: int
    invalid_lines: int
    torn_tail: bool
    # Where the index is kept between processes (None: in memory only).
    cache: str | None
    # The embedding model and how many memory vectors it has, or why there is none.
    meaning: str


def _criteria(
    tags: tuple[str, ...], all_tags: bool, kind: str | None, scope: str | None
) -> list[str]:
    parts: list[str] = []
    if scope:
        parts.append(f"known to {scope} (or shared)")
    if tags:
        parts.append("tagged " + (" and " if all_tags else " or ").join(tags))
    if kind:
        parts.append(f"of type {kind}")
    return parts


def _to_millis(moment: datetime) -> datetime:
    """Times are stored to the millisecond: the record kept in the index is then the one
    read back from the file."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


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
        config_dir: Path | None = None,
        device: str | None = None,
    ) -> None:
        """`max_staleness`: seconds a REST-only store may answer from its index before it
        GETs the files again. `compact_min_dead`: compaction runs after a write once dead
        lines of this process's file reach this many and outnumber its live lines.
        `cache`: the SQLite file that keeps the index between processes (None: in memory).
        `embedder`: loads the model for recall by meaning (None: by words only).
        `config_dir`: where this installation keeps its device id and writer locks (None:
        the temporary folder); `device` overrides the id."""
        self._clock = clock
        self._compact_min_dead = compact_min_dead
        self._ids = ids or IdMaker()
        self._lock = anyio.Lock()
        self._cache = cache
        self._reader = LogReader(MemoryIndex(self._open_cache(cache)))
        self._vectors = MemoryVectors(embedder)
        self._more_to_embed = anyio.Event()
        self._view_due = anyio.Event()
        # A change this server made that the page does not show yet.
        self._view_owed = False
        # A bad configured path must not stop the server: the memory tools report it.
        self._problem: VaultError | None = None
        self.path = path
        self.files = MemoryFiles(path)
        self._log: MemoryLog | None = None
        try:
            self.path = normalize_vault_path(path)
            if is_hidden(self.path):
                raise InvalidArgument(
                    f"The memory path {path!r} is hidden; Obsidian and sync ignore hidden "
                    "files. Set OBSIDIAN_MEMORY_PATH to a visible path such as "
                    "'obsidian-mcp/memory.jsonl'."
                )
            self.files = MemoryFiles(self.path)
            # With the folder known, the files are read and written on disk even while
            # Obsidian runs: cheaper, and a refresh reads only what was added.
            access: DiskAccess | RestAccess
            if vault.disk is not None:
                access = DiskAccess(vault.disk.root)
            else:
                assert vault.rest is not None
                access = RestAccess(vault.rest)
            installation = installation_folder(config_dir)
            self._log = MemoryLog(
                access,
                self.files,
                device_id(installation, device),
                SlotLocks(lock_folder(installation, self.path)),
                max_staleness=max_staleness if vault.disk is None else 0.0,
            )
        except VaultError as exc:
            self._problem = exc

    def _open_cache(self, cache: Path | None) -> sqlite3.Connection:
        try:
            return open_cache(cache)
        except (OSError, sqlite3.Error) as exc:
            # The cache only saves time: without it every process reads the file again.
            logger.warning(
                "memory cache %s cannot be used (%s); keeping the index in memory", cache, exc
            )
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
        behind = (
            self._vectors.generation != self._reader.generation
            or self._vectors.through_slot < self._reader.index.next_slot
        )
        if behind:
            self._more_to_embed.set()

    async def _write(self, build: Callable[[MemoryIndex], list[Record]]) -> list[Record]:
        """Append what `build` decides to this process's file, then fold if that file is
        mostly dead or the device left idle files; locked."""
        log = self._file()
        first_write = log.own is None
        self._reader, records = await log.append(self._reader, build)
        if records:
            if await self._mostly_dead(log):
                await self._compact()
            elif first_write and await log.foldable():
                # Files left by this device's ended processes: appended to this process's
                # own file, which is not rewritten.
                await self._compact(rewrite_own=False)
            self._view_owed = True
            self._view_due.set()
        self._notice_unembedded()
        return records

    async def _mostly_dead(self, log: MemoryLog) -> bool:
        reader = self._reader

        def dead() -> tuple[int, int]:
            with reader.reading():
                return log.dead_lines(reader)

        dropped, kept = await anyio.to_thread.run_sync(dead)
        return dropped >= max(self._compact_min_dead, kept)

    async def _compact(self, *, rewrite_own: bool = True) -> Compaction:
        self._reader, report = await self._file().compact(self._reader, rewrite_own=rewrite_own)
        logger.info(
            "memory files compacted: %d folded, %d lines kept, %d dropped, %d -> %d bytes",
            report.files_folded,
            report.kept,
            report.dropped_lines,
            report.bytes_before,
            report.bytes_after,
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
        supersedes: Iterable[str] = (),
        scope: str | None = None,
        occurred: str | None = None,
    ) -> Remembered:
        text, clean_tags, why, kind, clean_source = validate_memory(
            content, tags, context, type, source
        )
        clean_scope = normalize_scope(scope)
        replaced_ids = normalize_ids(supersedes, "supersedes")
        when = resolve_occurred(occurred, self._clock()) if occurred and occurred.strip() else None
        # The new memory's vector: what finds the memories nearly the same.
        embedder = await self._vectors.load() if self._vectors.available else None
        vector = (
            await self._vectors.embed([text], TextRole.DOCUMENT) if embedder is not None else None
        )
        if embedder is not None:
            # A new process holds no vectors of the stored memories until its background
            # catch-up has run: its first remember would be compared with nothing.
            await self.catch_up_meaning(embed_at_most=_EMBED_BEFORE_COMPARING)
        stored: list[Memory] = []
        replaced: list[Memory] = []
        similar: list[Similar] = []
        short_ids: dict[str, str] = {}

        def build(index: MemoryIndex) -> list[Record]:
            same = index.find_same(text, clean_tags, clean_scope)
            if same is not None and not replaced_ids:
                stored.append(same)
                short_ids.update(index.short_ids([same.id]))
                return []
            replaced.extend(self._replaced(index, replaced_ids, clean_scope))
            whole_ids = tuple(old.id for old in replaced)
            if vector is not None:
                similar.extend(self._similar(index, vector, clean_scope, whole_ids))
            now = _to_millis(self._clock())
            memory_id = self._ids.make(now)
            while memory_id in index:  # another process minted it in the same millisecond
                memory_id = self._ids.make(now)
            memory = Memory(
                memory_id,
                now,
                text,
                clean_tags,
                why,
                kind,
                clean_source,
                clean_scope,
                when,
                whole_ids,
            )
            stored.append(memory)
            # In the same look at the index: the new id's shortest unique ending among the
            # others is the same once it is written.
            short_ids.update(
                index.short_ids([memory_id, *whole_ids, *(close.memory.id for close in similar)])
            )
            return [memory]

        async with self._lock:
            written = await self._write(build)
        if written and vector is not None and embedder is not None:
            async with self._lock:
                await self._keep_vectors(embedder.vector_space, [content_hash(text)], vector)
        return Remembered(
            stored[0],
            created=bool(written),
            similar=similar,
            superseded=replaced,
            short_ids=short_ids,
            scores_measured=embedder is None or on_measured_scale(embedder),
        )

    @staticmethod
    def _replaced(index: MemoryIndex, ids: tuple[str, ...], scope: str | None) -> list[Memory]:
        """The memories `ids` name, checked: each must be stored, not forgotten, and visible
        in this scope."""
        found: list[Memory] = []
        for given in ids:
            memory_id = named_id(index, given, "supersedes names")
            record = index.latest(memory_id) if memory_id is not None else None
            if record is None:
                raise InvalidArgument(
                    f"supersedes names {given!r}, which no memory has. Ids come from "
                    "vault_remember and vault_recall; recall the outdated memory to get its id."
                )
            if isinstance(record, Tombstone):
                raise InvalidArgument(
                    f"supersedes names {given!r}, which was forgotten; leave it out."
                )
            if record.scope != scope:
                where = f"scope {record.scope!r}" if record.scope else "no scope (shared)"
                raise InvalidArgument(
                    f"supersedes names {given!r}, a memory of {where}: a fact is replaced "
                    f"within its scope, so that no one else loses it. Remember the new fact "
                    f"with scope={record.scope!r}"
                    + (" (or leave scope out)" if not record.scope else "")
                    + " to replace it."
                )
            found.append(record)
        return found

    def _similar(
        self, index: MemoryIndex, vector: Matrix, scope: str | None, skip: tuple[str, ...]
    ) -> list[Similar]:
        """The current memories closest in meaning to a new one, above SIMILAR_FLOOR."""
        wanted = Query(scope=scope)
        among = index.meanings(wanted) if wanted.filtered else None
        nearest = self._vectors.nearest(vector, among, floor=SIMILAR_FLOOR)
        found = [
            Similar(m, nearest[content_hash(m.content)])
            for m in index.with_meanings(wanted, nearest)
            if m.id not in skip
        ]
        found.sort(key=lambda close: close.score, reverse=True)
        return found[:_SIMILAR_SHOWN]

    async def forget(self, memory_id: str) -> Record:
        """Retire a memory (and any stored repeat of it); returns what was forgotten, or
        the tombstone of a memory forgotten before (forgetting is idempotent: nothing is
        written then)."""
        wanted = memory_id.strip().lower()
        forgotten: list[Record] = []

        def build(index: MemoryIndex) -> list[Record]:
            whole_id = named_id(index, wanted, "The id")
            record = index.latest(whole_id) if whole_id is not None else None
            if record is None:
                raise UnknownMemoryId(memory_id)
            forgotten.append(record)
            if isinstance(record, Tombstone):
                return []
            now = _to_millis(self._clock())
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
        scope: str | None = None,
        include_superseded: bool = False,
    ) -> Recall:
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise InvalidArgument(f"limit={limit} is out of range; give 1 to {MAX_RECALL_LIMIT}.")
        clean_tags = normalize_tags(tags, required=False)
        kind = normalize_type(type)
        clean_scope = normalize_scope(scope)
        text = query.strip()
        if text and not terms(text):
            raise InvalidArgument(
                f"The query {query!r} has no words to match (only very common words); "
                "use distinctive words, or recall by tags."
            )
        now = self._clock()
        start, end = window(time_range, since, until, now)
        criteria = _criteria(clean_tags, all_tags, kind, clean_scope)
        criteria += describe_window(time_range, since, until)
        wanted = Query(
            frozenset(clean_tags), all_tags, text, start, end, kind, clean_scope, include_superseded
        )
        # The query's vector needs no lock: the model is loaded once and never changes.
        query_vector = (
            await self._vectors.embed([text], TextRole.QUERY)
            if text and self._vectors.embedder is not None
            else None
        )

        def question(index: MemoryIndex) -> Recall:
            similar = None
            best: float | None = None
            if query_vector is not None:
                among = index.meanings(wanted) if wanted.filtered else None
                similar = self._vectors.nearest(query_vector, among, floor=0.0)
                best = max(similar.values(), default=None)
                similar = {h: score for h, score in similar.items() if score >= MEANING_FLOOR}
            # Relative dates ("two weeks ago") count from the latest memory in view: what
            # a conversation's memories call "now", and within an explicit range its end.
            # Looked up only for a query that names a time at all.
            period = mentioned_period(text, now) if text else None
            if period is not None:
                period = mentioned_period(text, index.newest(wanted) or now)
            selection = index.select(wanted, limit, similar, period)
            shown = selection.ranked
            replaced = index.replacements(m.id for m in shown) if include_superseded else {}
            named = [m.id for m in shown] + list(replaced.values())
            named += [old for m in shown for old in m.supersedes]
            # Meaning says nothing here is about the query (words alone cannot say it).
            no_match = best is not None and best < NO_MATCH_FLOOR
            return Recall(
                memories=shown,
                total=selection.total,
                newest=selection.newest,
                oldest=selection.oldest,
                criteria=criteria,
                now=now,
                # Said only when nothing matched: a count of every memory is a scan.
                store_size=(
                    index.live_count
                    if clean_scope is None or selection.total
                    else index.count(Query(scope=clean_scope))
                ),
                known_tags=(
                    index.tag_counts(clean_scope)[:_SUGGESTED_TAGS]
                    if not selection.total or no_match
                    else []
                ),
                meaning_note=self._meaning_note(index) if text else None,
                no_match=no_match,
                best_score=best,
                replaced_by=replaced,
                scopes=index.scope_counts() if clean_scope is None else [],
                scope=clean_scope,
                tags=clean_tags,
                ranked=bool(text),
                short_ids=index.short_ids(named),
            )

        async with self._lock:
            return await self._query(question)

    async def scopes(self) -> list[tuple[str, int]]:
        """Scopes in use, with their current memory counts."""
        async with self._lock:
            return await self._query(lambda index: index.scope_counts())

    async def export(self, *, include_superseded: bool = False) -> list[Memory]:
        """Every current memory (and the superseded ones on request), in the order read."""
        async with self._lock:
            return await self._query(
                lambda index: list(index.primaries(include_superseded=include_superseded))
            )

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

    async def catch_up_meaning(self, embed_at_most: int | None = None) -> None:
        """Load the model, then give every memory of the file its vector: from the cache
        where it has one, from the model otherwise, a step at a time so that recall goes on
        meanwhile (by words where vectors are still missing). With `embed_at_most`, stop
        before a step that would embed more than that many in all (the background
        catch-up does the rest)."""
        embedder = await self._vectors.load()
        if embedder is None or self._log is None:
            return
        model = embedder.vector_space
        embedded = 0
        while True:
            async with self._lock:
                step = await self._query(lambda index: self._vector_step(index, model))
            if step is None:
                return
            generation, end, missing = step
            embedded += len(missing)
            if embed_at_most is not None and embedded > embed_at_most:
                return
            for first in range(0, len(missing), _EMBED_BATCH):
                part = missing[first : first + _EMBED_BATCH]
                vectors = await self._vectors.embed([text for _, text in part], TextRole.DOCUMENT)
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

    # -- housekeeping and overview --------------------------------------------------------------

    async def compact(self) -> Compaction:
        """Fold this device's idle files and this process's own into one new file."""
        async with self._lock:
            return await self._compact()

    async def knows_id(self, given: str) -> bool:
        """Whether `given` names a memory's id, forgotten or not (whole, or by an ending)."""
        async with self._lock:
            return await self._query(lambda index: bool(index.ids_named(given)))

    async def short_ids(self, ids: Iterable[str]) -> dict[str, str]:
        """Each id by its shortest unique ending, as replies show it (`named_id` takes it
        back)."""
        wanted = list(ids)
        async with self._lock:
            return await self._query(lambda index: index.short_ids(wanted))

    async def overview(self, limit: int) -> tuple[list[Memory], list[tuple[str, int]]]:
        """The most recent memories and every known tag with its count."""
        async with self._lock:
            return await self._query(lambda index: (index.recent(limit), index.tag_counts()))

    async def status(self) -> MemoryStatus:
        log = self._file()

        def question(index: MemoryIndex) -> MemoryStatus:
            reader = self._reader
            current, superseded = index.primary_counts()
            return MemoryStatus(
                folder=self.files.folder + "/",
                legacy_file=self.path,
                source=log.describe(),
                memories=current,
                superseded=superseded,
                tags=len(index.tag_counts()),
                bytes=reader.offset,
                files=len(reader.files),
                own_file=log.own,
                dead_lines=log.dead_lines(reader)[0],
                invalid_lines=reader.invalid_lines,
                torn_tail=reader.torn_tail,
                cache=str(self._cache) if self._cache is not None else None,
                meaning=self._vectors.describe(),
            )

        async with self._lock:
            return await self._query(question)

    # -- the user's page ---------------------------------------------------------------------

    async def write_view(self) -> str:
        """Write the Markdown page of current memories now; its vault path."""
        self._view_owed = False
        memories = await self.export()
        # A 100,000-memory page takes about half a second to render: off the event loop.
        text = await anyio.to_thread.run_sync(render_view, memories, self._clock())
        await self._file().write_text(self.files.view, text)
        return self.files.view

    async def keep_view_current(self, settle_seconds: float = _VIEW_SETTLE_SECONDS) -> None:
        """Run for the server's life: after this server changes the memories, write the
        page again once the changes have paused for `settle_seconds`."""
        while True:
            await self._view_due.wait()
            while True:  # a burst of remembers writes the page once, after it
                self._view_due = anyio.Event()
                with anyio.move_on_after(settle_seconds):
                    await self._view_due.wait()
                    continue
                break
            try:
                await self.write_view()
            except (VaultError, OSError) as exc:
                logger.warning("the memory page %s was not written: %s", self.files.view, exc)

    async def flush_view(self) -> None:
        """Write the page now if a change is still waiting for it (at exit)."""
        if self._view_owed:
            try:
                await self.write_view()
            except (VaultError, OSError) as exc:
                logger.warning("the memory page %s was not written: %s", self.files.view, exc)

    def close(self) -> None:
        """Let go of this process's writer slot."""
        if self._log is not None:
            self._log.close()

    def now(self) -> datetime:
        return self._clock()
