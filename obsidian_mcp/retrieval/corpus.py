# pyright: strict
"""The vault's notes, cut into passages and indexed, kept in step with the vault and in
the persistent index (`obsidian_mcp.index.store`).

Staleness is settled by modification time: a `sync` fetches every note's stat in one
request (a JsonLogic search through REST, a directory walk on disk), at most every
`refresh_seconds`, drops notes whose mtime or size changed or that disappeared, and reads
only what is new. A warm query therefore costs at most one stat request and no note reads.

In memory are the notes (stat, names, links) and their passages' places and embedded-text
hashes; the passages' terms stay in the index file, where keywords are scored (FTS5, see
`obsidian_mcp.index.store`), so a new process loads rows and builds no keyword index, and
so do the notes' texts, read when a call shows or scans a note.
"""

import logging
import math
import posixpath
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Iterable, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import anyio
import anyio.to_thread
import numpy as np

from obsidian_mcp.errors import NoteNotFound, NotesChanging, NotReadable, NotText, PathRefused
from obsidian_mcp.index.bulk import collector_paused, release_free_memory
from obsidian_mcp.index.store import (
    Ids,
    IndexStore,
    LinkSpan,
    NoteRow,
    PassageRow,
    StoredNote,
    StoredPassage,
    text_hash,
)
from obsidian_mcp.retrieval.keyword import Bm25Index, terms
from obsidian_mcp.sources.base import FileStat
from obsidian_mcp.text.markdown import ParsedNote, parse_note, plain_text
from obsidian_mcp.text.snippets import sentence_spans
from obsidian_mcp.vault import Vault

logger = logging.getLogger(__name__)

# (done, total, message): what `ctx.report_progress` takes.
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]

# A passage is about a paragraph: short paragraphs of one section are joined up to this
# size, long ones are cut into runs of whole sentences of at most this size. Big enough
# to hold an answer with its context, small enough that five of them fit a 1,000-token reply.
PASSAGE_CHARS = 480
# Most characters of one embedded text (a run of whole sentences of a passage). Measured
# on fixtures/questions.jsonl over fixtures/vault, paraphrase questions whose answer is among
# the top 3 passages by meaning: 4 of 11 with one vector per passage (480 characters),
# 9 of 11 with runs of 200 characters and the folder path in the prefix.
WINDOW_CHARS = 200
# Notes read at once on a cold build; enough to hide REST latency, few enough not to
# swamp Obsidian.
_READ_CONCURRENCY = 16
_PROGRESS_STEPS = 20
# How often a call waiting for another task's reading reports how far it has got.
_WAITING_PROGRESS_SECONDS = 0.5
# How long a read runs before its pace is believed (`_read_may_end_by`): the first notes
# of a folder come from the page cache or not, and a REST API warms its connections.
_PACE_SECONDS = 0.25
# The fastest any read is taken to go before its own pace is known: every note is cut on
# one thread (`Corpus._cutting`), 2.5 ms a note here (about 400 a second through the
# folder), so a machine five times as fast reads 2,000. A read of more notes than that
# rate gets through by a question's deadline is not waited for at all: a first question
# beside the first build of 10,000 notes waited 0.45-0.57 s for the read, of its 1.0-1.1
# s, a `_PACE_SECONDS` of it for the pace to tell (python -m bench.speed.first_day, traced).
_READ_NOTES_PER_SECOND_AT_MOST = 2000
# How often a bounded wait looks again while the task that holds the reading lock has not
# begun to read (`_take_reading`).
_READ_STARTING_SECONDS = 0.02
# Notes written to the index in one transaction on a cold build: one commit per note would
# cost more than the parsing, and a call's own write (a read-ahead, a passage embedded on
# demand) waits for the batch in hand. At 10,000 generated notes, alone, storing took the
# same 14-16 s in batches of 200, 50 or 25; beside a first build and its calls a batch of
# 200 took 0.9 s (3.9 s at most), of 25 0.16-0.2 s (in process, bench.speed.first_day's
# calls).
_STORE_BATCH = 25
# What a query term in a passage's headings, or in its note's name, is worth next to the
# same term in its text. Headings are precise (the section is about it); a note's name
# is shared by every passage of the note, so it only breaks ties between notes.
HEADING_WEIGHT = 0.5
NAME_WEIGHT = 0.5


# A passage of a note: `content[start:end]` under the heading path `section`; its id is
# the index's, and `text_hashes` name the texts embedded for it (see `embedding_texts`).
# The stored passage itself, not a copy: at 66,690 passages (the generated 10,000-note
# vault) a second object per passage was held beside the first while a new process loaded.
Chunk = StoredPassage


# Installs remembered for `Corpus.installed_since`: an edit's few between two questions;
# after a first build's read, far more, what is derived from the notes is made afresh.
INSTALLS_KEPT = 1024


# Parses kept, the most recently used. A parse holds about 2.6 times its note's text
# beside it: kept on every note a session touched, the parses grew a server at 10,000
# notes (22 MB of text) by 58 MB within 40 searches. A call touches a few dozen notes; a
# parse takes 0.5-1 ms.
PARSES_KEPT = 512


class _RecentParses:
    """The parses of the PARSES_KEPT notes used last, by record (a record replaced by an
    edit falls out in turn). Threads share it: notes are cut in worker threads."""

    def __init__(self) -> None:
        self._parses: OrderedDict[NoteRecord, ParsedNote] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, record: "NoteRecord") -> ParsedNote:
        parsed = self.held(record)
        if parsed is None:
            parsed = parse_note(record.path, record.content)
            self.keep(record, parsed)
        return parsed

    def held(self, record: "NoteRecord") -> ParsedNote | None:
        """The record's parse if it is kept (now the one used last), else None."""
        with self._lock:
            parsed = self._parses.get(record)
            if parsed is not None:
                self._parses.move_to_end(record)
            return parsed

    def keep(self, record: "NoteRecord", parsed: ParsedNote) -> None:
        with self._lock:
            self._parses[record] = parsed
            self._parses.move_to_end(record)
            while len(self._parses) > PARSES_KEPT:
                self._parses.popitem(last=False)


_recent_parses = _RecentParses()


class PassageGone(Exception):
    """A passage a call found is no longer held: its note was read again (an edit taken in
    by the background listing, or by another call) or deleted while the call ran. The
    index numbers a note's passages anew each time it is stored, so the call's ids name
    nothing now, or another passage."""

    def __init__(self, chunk_id: int) -> None:
        super().__init__(f"passage {chunk_id} is no longer held")
        self.chunk_id = chunk_id


# Runs of a call whose passages were read again under it (`run_again_while_gone`): each
# run lists and reads the edits first, so a second one finds them only when the vault is
# rewritten again within a call's time (80 ms to 1 s at 10,000 notes).
CALL_RUNS = 3

_Answer = TypeVar("_Answer")


async def run_again_while_gone(call: Callable[[], Awaitable[_Answer]]) -> _Answer:
    """`call`, run again while a passage it found is read again under it (`PassageGone`),
    at most CALL_RUNS times; then `NotesChanging`, which tells the agent to call again.
    Before, notes edited while the agent asked failed about 1 question in 12 with a
    KeyError (fixture vault, an edit every 10 ms, a listing every 40 ms; the test
    `test_questions_while_the_notes_they_rank_are_edited_never_fail`)."""
    for run in range(1, CALL_RUNS + 1):
        try:
            return await call()
        except PassageGone as gone:
            logger.info("a call's passages were read again under it (%s; run %d)", gone, run)
    raise NotesChanging(CALL_RUNS)


class NoteRecord:
    """A note as indexed: its stat, passages and the terms that name it. Its text is read
    from the index when something needs it (`content`), and it is parsed only when
    something needs more (a hit from it is rendered, its links are followed); only the
    last PARSES_KEPT parses are kept: a new process loads thousands of notes from the
    index and shows a few."""

    __slots__ = (
        "_parsed_unkept",
        "_text_of",
        "backlinks",
        "chunks",
        "content_hash",
        "label_terms",
        "stat",
        "stored_links",
        "stored_title",
    )

    def __init__(
        self,
        stat: FileStat,
        content_hash: str,
        text_of: "Callable[[NoteRecord], str]",
        chunks: tuple[Chunk, ...],
        backlinks: tuple[str, ...] | None,
        label_terms: tuple[str, ...],
        parsed: ParsedNote | None = None,
        links: tuple[LinkSpan, ...] | None = None,
        title: str | None = None,
        parsed_unkept: set[str] | None = None,
    ) -> None:
        self.stat = stat
        # The hash of its text as indexed (`store.text_hash`), and where the text is read.
        self.content_hash = content_hash
        self._text_of = text_of
        self.chunks = chunks
        # Obsidian's own backlinks (REST, plugin 4.0 on); None when the source has none.
        self.backlinks = backlinks
        self.label_terms = label_terms
        # Where it links and its title, as stored; None when the index did not keep them
        # (`links`, `title`).
        self.stored_links = links
        self.stored_title = title
        # Where its path goes when a parse finds what the index did not keep.
        self._parsed_unkept = parsed_unkept
        if parsed is not None:
            _recent_parses.keep(self, parsed)

    @property
    def path(self) -> str:
        return self.stat.path

    @property
    def content(self) -> str:
        """The note's text as indexed: its kept parse's, else read from the index (the
        newer text, once the index holds a newer version: `Corpus._stored_text`)."""
        parsed = _recent_parses.held(self)
        return self._text_of(self) if parsed is None else parsed.content

    @property
    def parsed(self) -> ParsedNote:
        return _recent_parses.of(self)

    @property
    def links(self) -> tuple[LinkSpan, ...]:
        """Where the note links (target, start, end): as stored, else from a parse."""
        if self.stored_links is None:
            self.stored_links = link_spans(self.parsed)
            self._found_by_parse()
        return self.stored_links

    @property
    def title(self) -> str:
        """The note's title (`ParsedNote.title`): as stored, else from a parse."""
        if self.stored_title is None:
            self.stored_title = self.parsed.title
            self._found_by_parse()
        return self.stored_title

    def _found_by_parse(self) -> None:
        if self._parsed_unkept is not None:
            self._parsed_unkept.add(self.path)

    def passage_terms(self) -> list[list[str]]:
        """Each passage's index terms, in the order of `chunks`: the text read once for all."""
        content = self.content
        return [_terms_in(content, chunk) for chunk in self.chunks]


def _terms_in(content: str, chunk: Chunk) -> list[str]:
    """The passage's index terms (as `cut_note` stores them), from its note's text."""
    return terms(plain_text(content[chunk.start : chunk.end]))


def _grown(lengths: Ids, chunk_id: int) -> Ids:
    """`lengths` with room for `chunk_id`, at least doubled (ids grow with each note read
    again), the new places -1."""
    grown = np.full(max(chunk_id + 1, 2 * len(lengths)), -1, dtype=np.int64)
    grown[: len(lengths)] = lengths
    return grown


def _ids(passages: int | tuple[int, ...]) -> tuple[int, ...]:
    """The passage ids `Corpus._by_text` holds for a text."""
    return (passages,) if isinstance(passages, int) else passages


def sentence_runs(content: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """`content[start:end]` as runs of whole sentences of at most `limit` characters (a
    single longer sentence stays whole)."""
    runs: list[tuple[int, int]] = []
    for sentence_start, sentence_end in sentence_spans(content[start:end]):
        absolute = (start + sentence_start, start + sentence_end)
        if runs and absolute[1] - runs[-1][0] <= limit:
            runs[-1] = (runs[-1][0], absolute[1])
        else:
            runs.append(absolute)
    return runs


def passage_spans(parsed: ParsedNote) -> list[tuple[int, int, int]]:
    """(section index, start, end) of each passage of the note, in order."""
    spans: list[tuple[int, int, int]] = []
    for paragraph in parsed.paragraphs:
        pieces = (
            sentence_runs(parsed.content, paragraph.start, paragraph.end, PASSAGE_CHARS)
            if paragraph.end - paragraph.start > PASSAGE_CHARS
            else [(paragraph.start, paragraph.end)]
        )
        for start, end in pieces:
            if (
                spans
                and spans[-1][0] == paragraph.section_index
                and end - spans[-1][1] <= PASSAGE_CHARS
            ):
                spans[-1] = (paragraph.section_index, spans[-1][1], end)
            else:
                spans.append((paragraph.section_index, start, end))
    return spans


def note_label_terms(parsed: ParsedNote) -> list[str]:
    """What names the note: title, aliases, tags and the file name."""
    name = posixpath.basename(parsed.path).removesuffix(".md")
    return terms(" ".join([parsed.title, name, *parsed.aliases, *parsed.tags]))


def embedding_texts(
    parsed: ParsedNote, section: tuple[str, ...], start: int, end: int
) -> tuple[str, ...]:
    """What the model embeds for a passage: its sentences in runs of at most WINDOW_CHARS,
    each led by where it sits (folders, title, headings). A passage's meaning score is its
    best run's: a question is usually answered by a sentence or two, and one vector for a
    whole passage blurs that sentence with its neighbours."""
    folders = tuple(parsed.path.split("/")[:-1])
    headings = section[1:] if section[:1] == (parsed.title,) else section
    where = " > ".join((*folders, parsed.title, *headings)) + "\n"
    runs = sentence_runs(parsed.content, start, end, WINDOW_CHARS)
    return tuple(where + plain_text(parsed.content[a:b]) for a, b in runs) or (where,)


def link_spans(parsed: ParsedNote) -> tuple[LinkSpan, ...]:
    """Where the note links: each link's target as written, start and end."""
    return tuple((link.target, link.start, link.end) for link in parsed.links)


def cut_note(
    stat: FileStat, content: str, backlinks: tuple[str, ...] | None
) -> tuple[NoteRow, ParsedNote]:
    """A note parsed and cut into passages, as the index stores it."""
    parsed = parse_note(stat.path, content)
    passages: list[PassageRow] = []
    for section_index, start, end in passage_spans(parsed):
        section = parsed.sections[section_index].path
        passages.append(
            PassageRow(
                section=section,
                start=start,
                end=end,
                # What a reader sees: link text, not block ids or link anchors.
                terms=tuple(terms(plain_text(content[start:end]))),
                heading_terms=tuple(set(terms(" ".join(section)))),
                texts=embedding_texts(parsed, section, start, end),
            )
        )
    row = NoteRow(
        path=stat.path,
        mtime_ms=stat.mtime_ms,
        size=stat.size,
        content=content,
        label_terms=tuple(set(note_label_terms(parsed))),
        backlinks=backlinks,
        passages=tuple(passages),
        links=link_spans(parsed),
        title=parsed.title,
    )
    return row, parsed


@dataclass(slots=True)
class _ReadUnderWay:
    """A read of the notes the index lacks: since when (`anyio.current_time()`), how many
    of how many are done."""

    began: float
    done: int
    total: int


class Corpus:
    """The vault's notes and BM25 over their passages, kept in the persistent index and
    refreshed by modification time.

    A new process loads what the index holds (no note is read or parsed), then lists the
    vault's stats and reads only the notes that changed. The listing is repeated at most
    every `refresh_seconds`: that is how stale a query may be about an edit made in
    Obsidian or on disk. Writes through this server (`Vault.writes` moves) are seen by the
    next query."""

    def __init__(self, vault: Vault, store: IndexStore, *, refresh_seconds: float) -> None:
        self._vault = vault
        self._store = store
        self._refresh_seconds = refresh_seconds
        self._notes: dict[str, NoteRecord] = {}
        self._chunks: dict[int, Chunk] = {}
        # Each held passage's length by id, -1 for an id not held: BM25 takes a term's
        # postings at once (`_lengths_of`), 167,341 passages for "ledger" at 50,000 notes.
        # Kept in step with `_chunks` (31 ms of a first load at 333,000 passages).
        self._lengths: Ids = np.full(0, -1, dtype=np.int64)
        # Passages by the hash of a text embedded for them: the passage's id, or a tuple of
        # ids for a text that recurs. Nearly every text has one passage: 160,000 one-element
        # sets took 35 MB more than tuples, and tuples (with records not slotted and their
        # label terms in frozensets) 6 MB more than bare ids (10,000 notes, in process).
        self._by_text: dict[str, int | tuple[int, ...]] = {}
        self._index = Bm25Index(store)
        self._stats: dict[str, FileStat] = {}
        # Notes that could not be read (not text, unreadable, refused), at the stat they had:
        # not tried again until it changes.
        self._skipped: dict[str, FileStat | None] = {}
        # Notes whose links or title a parse found, the index not having kept them
        # (`keep_parsed`); records add themselves.
        self._parsed_unkept: set[str] = set()
        # When the last listing began (monotonic), and how long it took. Its age counts from
        # its start: an edit made while it ran may not be in it, so it is listed again one
        # `refresh_seconds` after that start at the latest (counted from the end, a question
        # 2 s after an edit missed it in 2 of 5 rounds at 50,000 notes, in process).
        self._listed_at: float | None = None
        self._listing_took = 0.0
        # Bumped when the listing or the notes skipped change (`unread`'s count).
        self._listings_and_skips = 0
        self._unread: tuple[tuple[int, int], int] | None = None
        # When a call last asked for the notes (`sync`; monotonic): a session is under way.
        self.asked_at: float | None = None
        self._listed_writes = -1
        self._loaded = False
        # Held while listing or installing: short. Reading runs under its own lock, one
        # reader at a time, so calls can list and answer while a cold build reads.
        self._lock = anyio.Lock()
        self._reading = anyio.Lock()
        # Notes are parsed and cut in one worker thread: on the event loop, a cold build's
        # cutting (2.5 ms a note) ran between every two steps of a question, whose first
        # answer at 10,000 notes took 13 s instead of the 2 s it waits for unread notes.
        self._cutting = anyio.CapacityLimiter(1)
        # The read of notes the index lacks, while a task reads them: how far it has got,
        # for the calls that wait for it, and since when, for its pace.
        self._read_under_way: _ReadUnderWay | None = None
        # Set when the read-aheads under way (`read_unread_holding`) have ended; None while
        # none is. The first build's read starts no note meanwhile: beside it, the folder's
        # scan for a question's word took over 8 s at 10,000 notes (0.27 s alone), and the
        # first question of a new server gave up on it (python -m bench.speed.first_day).
        self._ahead_done: anyio.Event | None = None
        self._reading_ahead = 0
        # Bumped on every change, so derived caches (which notes link where, the claims of
        # replacement) know to gather again.
        self.generation = 0
        # The last INSTALLS_KEPT notes installed, as (generation after, path), and the
        # generation of the newest install no longer kept: what changed since a generation
        # (`installed_since`), so what is derived from every note need not be made again.
        self._installs: deque[tuple[int, str]] = deque()
        self._installs_dropped_through = 0
        # Bumped when the notes listed change (not their texts): what resolves a link.
        self.paths_generation = 0

    @property
    def store(self) -> IndexStore:
        return self._store

    @property
    def index(self) -> Bm25Index:
        return self._index

    @property
    def paths(self) -> list[str]:
        """Every note path the last sync saw."""
        return list(self._stats)

    @property
    def read_paths(self) -> frozenset[str]:
        """The paths of the notes read (and held) now."""
        return frozenset(self._notes)

    @property
    def listed(self) -> int:
        """How many notes the last sync saw."""
        return len(self._stats)

    @property
    def reading(self) -> bool:
        """Whether a task is reading notes the index lacks (a first build); not while one
        only holds the reading lock to find nothing missing."""
        return self._read_under_way is not None

    @property
    def unread(self) -> int:
        """Notes the last sync saw that are not read yet (a cold build under way)."""
        # Counted again only when the notes, the listing or the skipped ones change: a
        # question asks three times, and each count walked 10,000 stats (7 ms a question).
        key = (self.generation, self._listings_and_skips)
        if self._unread is None or self._unread[0] != key:
            self._unread = (key, len(self._missing()))
        return self._unread[1]

    @property
    def may_lack_notes(self) -> bool:
        """Whether notes may not be read yet: listed and unread, or written since the last
        listing while a first build reads (no listing is taken then, `sync`)."""
        return self.reading or self.unread > 0

    async def read_unread_holding(
        self, words: Sequence[str], most: int, named: re.Pattern[str] | None = None
    ) -> int | None:
        """While notes are not read yet (a first build): read now, side by side, the unread
        notes whose text holds the first of `words` that any unread note holds (the
        vault's own search: Obsidian's, or one scan of the folder for them all) or whose
        file name `named` matches, if they are at most `most`: how many were read; 0 when
        no unread note holds any of the words; None when none was read because a word's
        unread notes were too many. The first build's read then skips them, and starts no
        note while this runs."""
        async with self._ahead_of_the_build():
            return await self._read_ahead(words, most, named)

    async def read_if_unread(self, path: str) -> NoteRecord | None:
        """The note at `path`, read now if the last listing saw it and it is not read yet
        (a first build has not reached it; read as `read_unread_holding` reads); None if
        no listed note is at `path`, or it is gone."""
        if path in self._stats and self._is_unread(path):
            async with self._ahead_of_the_build():
                await self._read_now(repr(path), [path])
        return self._notes.get(path)

    @asynccontextmanager
    async def _ahead_of_the_build(self) -> AsyncGenerator[None]:
        """Notes read for a call: the first build's read starts no note meanwhile."""
        if self._ahead_done is None:
            self._ahead_done = anyio.Event()
        self._reading_ahead += 1
        try:
            yield
        finally:
            self._reading_ahead -= 1
            if not self._reading_ahead:
                self._ahead_done.set()
                self._ahead_done = None

    async def _read_ahead(
        self, words: Sequence[str], most: int, named: re.Pattern[str] | None
    ) -> int | None:
        # The notes read already are left out: the folder's scan of every note beside a
        # first build took 0.54 s a question at 10,000 notes. The others are searched
        # whether the last listing saw them or not: no listing is taken while the first
        # build reads, and a note written since is as much the vault's as any other.
        named_paths: set[str] = (
            set()
            if named is None
            else {path for path in self._stats if named.search(posixpath.basename(path))}
        )
        too_many = False
        async with aclosing(
            self._vault.search_each(
                words, leaving_out=self.read_paths, fresh_within=self._refresh_seconds
            )
        ) as searched:
            async for word, holding in searched:
                unread = sorted(path for path in holding | named_paths if self._is_unread(path))
                if len(unread) > most:
                    too_many = True
                elif unread:
                    return await self._read_now(f"the word {word!r}", unread)
        return None if too_many else 0

    async def _read_now(self, why: str, unread: list[str]) -> int:
        """Read and install `unread` now, side by side (for `why`, to log): how many were
        read."""
        read: list[tuple[NoteRow, ParsedNote, FileStat]] = []
        limiter = anyio.CapacityLimiter(_READ_CONCURRENCY)

        async def read_one(path: str) -> None:
            async with limiter:
                note = await self._read(path)
            if note is not None:
                read.append(note)

        try:
            async with anyio.create_task_group() as group:
                for path in unread:
                    group.start_soon(read_one, path)
        finally:
            # Notes read by a caller that stopped waiting are kept, as `_read_many` keeps them.
            with anyio.CancelScope(shield=True):
                if read:
                    await self._store_and_install(read)
        if read:
            logger.info("read %d notes for %s ahead of the first build", len(read), why)
        return len(read)

    def _missing(self) -> list[str]:
        return [path for path in self._stats if self._is_unread(path)]

    def _is_unread(self, path: str) -> bool:
        """Not read, nor skipped at the stat listed (None: a note no listing saw yet)."""
        return path not in self._notes and self._skipped.get(path, False) != self._stats.get(path)

    def records(self) -> Iterable[NoteRecord]:
        return self._notes.values()

    @property
    def parsed_unkept(self) -> bool:
        """Whether a parse found a note's links or title that the index did not keep."""
        return bool(self._parsed_unkept)

    def keep_parsed(self) -> None:
        """Store the links and titles a parse found that the index did not keep (notes
        stored before it did), so that no later process parses those notes for them."""
        paths, self._parsed_unkept = self._parsed_unkept, set()
        found = [
            (path, record.content_hash, record.links, record.title)
            for path in paths
            if (record := self._notes.get(path)) is not None
        ]
        if found:
            self._store.put_parsed(found)

    @property
    def note_count(self) -> int:
        return len(self._notes)

    @property
    def passage_count(self) -> int:
        return len(self._chunks)

    @property
    def text_hashes(self) -> Collection[str]:
        """The hash of every text embedded for a passage."""
        return self._by_text.keys()

    def installed_since(self, generation: int) -> list[NoteRecord] | None:
        """The notes installed after `generation`, as they are now (each once, in the order
        of their last install; those deleted since left out), or None when installs that
        far back are no longer kept."""
        if generation < self._installs_dropped_through:
            return None
        paths: dict[str, None] = {}
        for installed_at, path in reversed(self._installs):
            if installed_at <= generation:
                break
            paths.setdefault(path)
        records = (self._notes.get(path) for path in reversed(paths))
        return [record for record in records if record is not None]

    def chunk(self, chunk_id: int) -> Chunk:
        """The passage of this id; `PassageGone` when its note was read again or deleted
        since the id was found (a call ranking it is run again, `run_again_while_gone`)."""
        chunk = self._chunks.get(chunk_id)
        if chunk is None:
            raise PassageGone(chunk_id)
        return chunk

    def holds(self, chunk_id: int) -> bool:
        """Whether the passage of this id is held (its note not read again since)."""
        return chunk_id in self._chunks

    def chunks_terms(self, chunk_ids: Sequence[int]) -> list[list[str]]:
        """Each passage's index terms (as `cut_note` stores them), from its note's text:
        the texts read from the index at once (`contents`), not one read a passage."""
        chunks = [self.chunk(chunk_id) for chunk_id in chunk_ids]
        records = list({chunk.path: self._record_of(chunk) for chunk in chunks}.values())
        text_of = dict(zip((r.path for r in records), self.contents(records), strict=True))
        return [_terms_in(text_of[chunk.path], chunk) for chunk in chunks]

    def chunks_of_text(self, digest: str) -> set[int]:
        """The passages one of whose embedded texts has this hash (a text may recur)."""
        return set(_ids(self._by_text.get(digest, ())))

    def chunks_of_texts(self, digests: Iterable[str]) -> set[int]:
        """The passages one of whose embedded texts has any of these hashes."""
        by_text = self._by_text
        return {chunk_id for digest in digests for chunk_id in _ids(by_text.get(digest, ()))}

    def _record_of(self, chunk: Chunk) -> NoteRecord:
        record = self._notes.get(chunk.path)
        if record is None:
            raise PassageGone(chunk.id)
        return record

    def record(self, path: str) -> NoteRecord | None:
        """The note as of the last sync (None if it was not read or does not exist)."""
        return self._notes.get(path)

    def _forget(self, path: str) -> None:
        record = self._notes.pop(path)
        for chunk in record.chunks:
            for digest in chunk.text_hashes:
                same_text = tuple(c for c in _ids(self._by_text[digest]) if c != chunk.id)
                if not same_text:
                    del self._by_text[digest]
                else:
                    self._by_text[digest] = same_text[0] if len(same_text) == 1 else same_text
            del self._chunks[chunk.id]
            self._lengths[chunk.id] = -1
        self.generation += 1

    def _install(self, stored: StoredNote, stat: FileStat, parsed: ParsedNote | None) -> None:
        path = stored.path
        if path in self._notes:
            self._forget(path)
        for chunk in stored.passages:
            for digest in chunk.text_hashes:
                held = self._by_text.get(digest)
                self._by_text[digest] = chunk.id if held is None else (*_ids(held), chunk.id)
            self._chunks[chunk.id] = chunk
            if chunk.id >= len(self._lengths):
                self._lengths = _grown(self._lengths, chunk.id)
            self._lengths[chunk.id] = chunk.length
        self._notes[path] = NoteRecord(
            stat,
            stored.content_hash,
            self._stored_text,
            stored.passages,
            stored.backlinks,
            stored.label_terms,
            parsed,
            stored.links,
            stored.title,
            self._parsed_unkept,
        )
        self.generation += 1
        self._installs.append((self.generation, path))
        if len(self._installs) > INSTALLS_KEPT:
            self._installs_dropped_through = self._installs.popleft()[0]

    def _lengths_of(self, chunk_ids: Ids) -> Ids:
        """The passages' lengths, -1 for those not held."""
        lengths = self._lengths
        inside = chunk_ids < len(lengths)
        if inside.all():
            return lengths[chunk_ids]
        found = np.full(len(chunk_ids), -1, dtype=np.int64)
        found[inside] = lengths[chunk_ids[inside]]
        return found

    def paths_that_may_hold_any(self, words: Iterable[str]) -> set[str] | None:
        """The notes whose text may hold one of `words` (the index's trigrams, case
        folded); None when that narrows nothing (`IndexStore.notes_holding`)."""
        paths: set[str] = set()
        for word in words:
            holding = self._store.notes_holding([word])
            if holding is None:
                return None
            paths |= holding
        return paths

    def contents(self, records: Sequence[NoteRecord]) -> list[str]:
        """The records' texts (`NoteRecord.content`), read from the index at once: one by
        one, the 6,289 notes holding "harbour" at 10,000 notes took 40% longer to scan."""
        stored = self._store.note_contents([record.path for record in records])
        return [self._checked_text(record, stored.get(record.path)) for record in records]

    def _stored_text(self, record: NoteRecord) -> str:
        return self.contents((record,))[0]

    def _checked_text(self, record: NoteRecord, stored: tuple[str, str] | None) -> str:
        """The record's text as stored, `stored` being (text, hash) or None."""
        if stored is not None and stored[1] == record.content_hash:
            return stored[0]
        # The index holds a newer version, stored by another process (or by this one since
        # the caller took the record), or none: the note changed or went. The caller reads
        # the note as it is now (its passages may no longer fall on the text's sentences),
        # and the next call's listing takes in the newer version.
        logger.info("%s changed while a call used it; listing again", record.path)
        self._listed_at = None
        return "" if stored is None else stored[0]

    def scores(self, query_terms: list[str]) -> dict[int, float]:
        """Relevance of each passage: BM25 of its text, plus a bonus for query terms in its
        headings and in its note's name, title, aliases or tags.

        The bonus is kept apart from the text's own counts so that a note named after the
        query does not lift every one of its passages above the one that answers; a
        section or note matched by name alone still offers its first passage.
        """
        weighted = self._index.expand(query_terms)
        # The index file may hold passages this process has not taken in (another process
        # stored a newer note); they wait for the next sync. BM25 scores only passages
        # whose length is held (`_lengths_of`), so only this process's.
        scores, headings = self._index.matches(weighted, self._lengths_of)
        bonus = {c: HEADING_WEIGHT * value for c, value in headings.items() if c in self._chunks}
        for term, weight in weighted:
            value = weight * self._index.idf(term)
            named = [
                record.chunks
                for path in self._store.labelled(term)
                if (record := self._notes.get(path)) is not None and record.chunks
            ]
            for chunks in named:
                scores.setdefault(chunks[0].id, 0.0)
            for chunks in named:
                for chunk in chunks:
                    if chunk.id in scores:
                        bonus[chunk.id] = bonus.get(chunk.id, 0.0) + NAME_WEIGHT * value
        for chunk_id, extra in bonus.items():
            scores[chunk_id] = scores.get(chunk_id, 0.0) + extra
        return scores

    async def _read(self, path: str) -> tuple[NoteRow, ParsedNote, FileStat] | None:
        try:
            note = await self._vault.read_note(path)
        except (NoteNotFound, NotText, NotReadable, PathRefused):
            # Gone since the stat (the next sync settles it), or not a note to read.
            self._skipped[path] = self._stats.get(path)
            self._listings_and_skips += 1
            return None
        # The stat we compare against next time is the one the listing gave, so a note
        # changed between listing and reading is read again on the next sync.
        stat = self._stats.get(note.stat.path, note.stat)
        row, parsed = await anyio.to_thread.run_sync(
            cut_note, stat, note.content, note.backlinks, limiter=self._cutting
        )
        return row, parsed, stat

    async def _store_and_install(
        self, read: Sequence[tuple[NoteRow, ParsedNote, FileStat]]
    ) -> None:
        async with self._lock:
            # A note read twice at once (a question's read-ahead, and the build's read that
            # had started it) is stored once: stored again, its passages took new ids under
            # the question ranking the first ones, which then were no passage (KeyError in
            # the first-day benchmark through the stand-in). The same stat is not enough: a
            # note read again before a listing carries the listing's stat, not its own.
            read = [
                (row, parsed, stat)
                for row, parsed, stat in read
                if (held := self._notes.get(row.path)) is None
                or held.stat != stat
                or held.content_hash != text_hash(row.content)
            ]
            if not read:
                return
            rows = [row for row, _, _ in read]
            stored = await anyio.to_thread.run_sync(self._store.put_notes, rows)
            for row, parsed, stat in read:
                self._install(stored[row.path], stat, parsed)

    def _take_stored(self, stored: dict[str, StoredNote], stats: dict[str, FileStat]) -> None:
        """Install the stored notes whose stat is the vault's (another process, or an earlier
        run, read them already)."""
        for path, note in stored.items():
            stat = stats.get(path)
            if stat is not None and (note.mtime_ms, note.size) == (stat.mtime_ms, stat.size):
                self._install(note, stat, None)

    async def _list(self) -> None:
        """List the vault's stats, drop what changed or disappeared, take in what the index
        already holds at the new stats."""
        began = time.monotonic()
        self._listed_writes = self._vault.writes
        first_load: dict[str, StoredNote] | None = None
        if self._loaded:
            stats = await self._vault.note_stats()
        else:
            # The collector is off from the load to the install, and what both built is
            # frozen once after them.
            with collector_paused(frozen_after=True):
                stats, first_load, began = await self._stats_and_stored()
                self._take_stored(first_load, stats)
            self._loaded = True
        self._listed_at, self._listing_took = began, time.monotonic() - began
        if stats.keys() != self._stats.keys():
            self.paths_generation += 1
        self._stats = stats
        self._skipped = {path: stat for path, stat in self._skipped.items() if path in stats}
        self._listings_and_skips += 1
        if first_load is not None:
            gone = [path for path in first_load if path not in stats]
        else:
            stale = [p for p, r in self._notes.items() if stats.get(p) != r.stat]
            for path in stale:
                self._forget(path)
            gone = [path for path in stale if path not in stats]
            changed = [path for path in stale if path in stats]
            if changed:
                stored = await anyio.to_thread.run_sync(self._store.load_notes, changed)
                self._take_stored(stored, stats)
        if gone:
            await anyio.to_thread.run_sync(self._store.delete_notes, gone)
        # A listing frees a stat per note and, through the REST API, the response they came
        # in, and the pages glibc keeps for them add up over a session's listings. Handed
        # back after each: at 10,000 notes, after the benchmark's calls, 368-380 -> 350-355
        # MB through the folder and 380-389 -> 365-371 MB through the stand-in (python -m
        # bench.speed.index --prebuilt, three alternating rounds); a trim takes about 1 ms
        # (13 ms at most) in that server.
        release_free_memory()

    async def _stats_and_stored(self) -> tuple[dict[str, FileStat], dict[str, StoredNote], float]:
        """The vault's stats and every stored note, and when the listing began (monotonic).

        Through the folder, the notes are loaded first, then listed: side by side, the
        listing's 50,000 stats each waited for the interpreter the load held (3.1-3.7 s
        instead of 0.3-0.6 s at 50,000 notes, 0.46-0.53 against 0.06 s at 10,000), and a
        listing begun before a load longer than `refresh_seconds` was stale by its end, so
        the first question listed again (1.1-1.2 s at 50,000 notes). Through the REST API
        the listing waits on Obsidian, so the load runs beside it: a new process's first
        answer waited 0.08 s for the listing before the load began (10,000 notes; the load
        takes 0.3-0.4 s)."""
        if self._vault.rest is None:
            stored = await anyio.to_thread.run_sync(self._store.load_notes)
            began = time.monotonic()
            return await self._vault.note_stats(), stored, began
        began = time.monotonic()
        stored: dict[str, StoredNote] = {}
        stats: dict[str, FileStat] = {}
        # Raised as they came, once both ended: a task group would wrap them in a group,
        # and callers tell a vault's failure (`VaultError`) by its type.
        failures: list[Exception] = []

        async def load() -> None:
            nonlocal stored
            try:
                stored = await anyio.to_thread.run_sync(self._store.load_notes)
            except Exception as exc:
                failures.append(exc)

        async def list_stats() -> None:
            nonlocal stats
            try:
                stats = await self._vault.note_stats()
            except Exception as exc:
                failures.append(exc)

        async with anyio.create_task_group() as both:
            both.start_soon(load)
            both.start_soon(list_stats)
        if failures:
            raise failures[0]
        return stats, stored, began

    async def sync(
        self,
        *,
        read_all: bool,
        progress: ProgressCallback | None = None,
        wait_seconds: float = math.inf,
        by_a_call: bool = True,
    ) -> None:
        """Bring the cache up to date with the vault's stats (listed at most every
        `refresh_seconds`); with `read_all`, read every note not yet indexed (a cold build
        reports its progress through `progress`), or wait for the task reading them, for at
        most `wait_seconds`, and only while its pace so far says it ends by then: past that
        the call goes on with what is read (`unread` says how much is not) and the reading
        goes on in its own task, if one reads.

        While a first build reads, a listing due is skipped rather than queued behind the
        build's writes (at 50,000 notes later questions waited 7-11 s for them; at 10,000
        the listing itself took 0.2-0.5 s of each question of the first minute): what it
        would find is not final yet, the answer says how much is read, and the first call
        after the read lists. A write through this server is always listed.

        `by_a_call`: a session's call asks (`asked_at`), not the server's own warm-up or a
        build run from the command line."""
        if by_a_call:
            self.asked_at = time.monotonic()
        own_write = self._vault.writes != self._listed_writes
        if self._listed_at is not None and self.reading and not own_write:
            logger.debug("stat listing skipped: the first build is reading notes")
        elif self._listing_due():
            # Checked again under the lock: a listing that ends meanwhile is fresh. A call
            # whose last listing is fresh never waits for the background one under way
            # (`list_ahead`): at 50,000 notes a listing of the folder takes 1.3 s.
            async with self._lock:
                if self._listing_due():
                    await self._list()
        if read_all:
            with anyio.move_on_after(wait_seconds) as waiting:
                await self._read_missing(progress, waiting)

    def _listed_within(self, seconds: float) -> bool:
        """Whether the last listing of the vault's stats began less than `seconds` ago."""
        listed = self._listed_at
        return listed is not None and time.monotonic() - listed < seconds

    def seconds_to_next_listing(self, period: float) -> float:
        """How long until the last listing began `period` seconds ago (the whole period if
        none did), and at least as long as it took: listing ahead of the calls every
        `period` from start to start, the vault is listed at most half the time."""
        listed = self._listed_at
        if listed is None:
            return period
        return max(self._listing_took, listed + period - time.monotonic())

    def _listing_due(self) -> bool:
        """Whether the vault's stats must be listed before a call goes on: not listed
        within `refresh_seconds`, or written through this server since."""
        return (
            not self._listed_within(self._refresh_seconds)
            or self._vault.writes != self._listed_writes
        )

    async def list_ahead(self, older_than: float) -> None:
        """List the vault's stats now, ahead of the calls, and read what changed, unless a
        first build is reading (it takes in what a listing finds) or the last listing is
        younger than `older_than` seconds (a new server's warm-up just listed)."""
        if self.reading:
            return
        async with self._lock:
            if self._listed_within(older_than):
                return
            await self._list()
        await self._read_missing(None)

    async def _read_missing(
        self, progress: ProgressCallback | None, waiting: anyio.CancelScope | None = None
    ) -> None:
        waited = await self._take_reading(progress, waiting)
        try:
            # `unread` is counted once per listing or change: walking every stat here took
            # 0.6 ms of each question at 10,000 notes (0.03 ms so; 50 warm syncs, in process).
            missing = self._missing() if self.unread else []
            if missing:
                await self._read_many(missing, progress)
            elif waited:
                await self._report_read(progress)
        finally:
            self._reading.release()

    async def _take_reading(
        self, progress: ProgressCallback | None, waiting: anyio.CancelScope | None
    ) -> bool:
        """Hold the reading lock, and say whether another task held it first. While that
        task reads, report how far it has got every `_WAITING_PROGRESS_SECONDS`; take the
        lock the moment it lets go: sleeping out the interval kept a new process's first
        answer waiting up to 0.5 s after the notes were loaded (0.3 s of 1.8 s at 10,000
        notes). Waiters never take the lock only to let it go again: handed round among
        themselves it never looked free, and calls with no deadline waited for ever. A
        wait bounded by `waiting` ends (the scope is cancelled) once the read's pace says
        it ends after the bound, looked at every `_PACE_SECONDS`: a session's first
        question beside the first build of 10,000 notes waited out all of its 2 s, 2 of
        its 3.2 s (python -m bench.speed.first_day)."""
        if not self._reading.locked():
            await self._reading.acquire()
            return False
        while True:
            if waiting is not None and not self._read_may_end_by(waiting.deadline):
                waiting.cancel()
            # A bounded wait looks at the pace as soon as it can be told: soon again while
            # the task holding the lock has not begun its read (the first question beside
            # a new server's warm-up waited out one `_PACE_SECONDS` so), reporting nothing.
            if waiting is not None and self._read_under_way is None:
                interval = _READ_STARTING_SECONDS
            else:
                await self._report_read(progress)
                interval = _WAITING_PROGRESS_SECONDS if waiting is None else _PACE_SECONDS
            with anyio.move_on_after(interval):
                await self._reading.acquire()
                return True

    def _read_may_end_by(self, deadline: float) -> bool:
        """Whether the read under way may end by `deadline` (`anyio.current_time()`), at
        its pace so far if the notes under way ended now; until it has run
        `_PACE_SECONDS`, at `_READ_NOTES_PER_SECOND_AT_MOST`. A new process's first notes
        come slowly (beside the model's load): the first build of 10,000 notes had stored
        none after a second, and a question that waited for a first note waited that
        second."""
        read = self._read_under_way
        now = anyio.current_time()
        if read is None:
            return True
        at_best = read.done + _READ_CONCURRENCY
        if at_best >= read.total:
            return True
        if now - read.began < _PACE_SECONDS:
            return now + (read.total - at_best) / _READ_NOTES_PER_SECOND_AT_MOST <= deadline
        return now + (read.total - at_best) * (now - read.began) / at_best <= deadline

    async def _report_read(self, progress: ProgressCallback | None) -> None:
        if progress is not None:
            read = self._read_under_way
            done, total = (
                (read.done, read.total)
                if read is not None
                else (self.listed - self.unread, self.listed)
            )
            await progress(done, total, f"indexed {done} of {total} notes")

    async def _read_many(self, paths: list[str], progress: ProgressCallback | None) -> None:
        total = len(paths)
        step = max(1, total // _PROGRESS_STEPS)
        done = 0
        pending: list[tuple[NoteRow, ParsedNote, FileStat]] = []
        if progress is not None:
            await progress(0, total, f"indexing {total} notes")

        # One batch is stored at a time, and no note is started while a full batch waits
        # for its turn: reading never runs more than a batch ahead of storing, and a call's
        # own store (a read-ahead) waits for one batch at most.
        storing = anyio.Lock()
        taken = anyio.Event()  # set when what is pending is taken to be stored

        async def store_pending() -> None:
            nonlocal taken
            async with storing:  # cancelled while waiting: the notes stay pending
                batch = pending[:]
                pending.clear()
                taken.set()
                taken = anyio.Event()
                if batch:
                    await self._store_and_install(batch)

        async def read_one(path: str) -> None:
            nonlocal done
            while self._ahead_done is not None:  # a question's read-ahead goes first
                await self._ahead_done.wait()
            while len(pending) >= _STORE_BATCH:
                await taken.wait()
            # A search may have read it meanwhile (`read_unread_holding`).
            read = None if path in self._notes else await self._read(path)
            if read is not None:
                pending.append(read)
            done += 1
            under_way.done = done
            if len(pending) >= _STORE_BATCH or done == total:
                await store_pending()
            if progress is not None and (done % step == 0 or done == total):
                await progress(done, total, f"indexed {done} of {total} notes")

        # _READ_CONCURRENCY readers take the paths in turn: a task a note held the event
        # loop while 10,000 were started, 0.3 s of a new server's first question.
        paths_left = iter(paths)

        async def read_in_turn() -> None:
            for path in paths_left:
                await read_one(path)

        under_way = self._read_under_way = _ReadUnderWay(anyio.current_time(), 0, total)
        try:
            async with anyio.create_task_group() as group:
                for _ in range(min(_READ_CONCURRENCY, total)):
                    group.start_soon(read_in_turn)
        finally:
            self._read_under_way = None
            # Notes read by a call that stopped waiting are kept, not read again.
            with anyio.CancelScope(shield=True):
                if pending:
                    await self._store_and_install(pending)
        logger.info("indexed %d notes", total)

    async def note(self, path: str) -> NoteRecord | None:
        """One note, read now if the cache lacks it; None if it no longer exists."""
        return self._notes.get(path) or await self.reread(path)

    async def reread(self, path: str) -> NoteRecord | None:
        """The note read now, in place of what the cache holds (which another source showed
        to be older than the note); None if it no longer exists."""
        read = await self._read(path)
        if read is None:
            return None
        await self._store_and_install([read])
        return self._notes.get(read[0].path)
