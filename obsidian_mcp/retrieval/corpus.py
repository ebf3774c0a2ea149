# pyright: strict
"""The vault's notes, parsed, cut into passages and indexed, kept in step with the vault.

Staleness is settled by modification time: every `sync` fetches every note's stat in one
request (a JsonLogic search through REST, a directory walk on disk), drops notes whose
mtime or size changed or that disappeared, and reads only what is new. A warm query
therefore costs one stat request and no note reads; a note edited in Obsidian is re-read
on the first query after its mtime moves.
"""

import logging
import posixpath
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import anyio

from obsidian_mcp.errors import NoteNotFound, NotReadable, NotText, PathRefused
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
# Notes read at once on a cold build; enough to hide REST latency, few enough not to
# swamp Obsidian.
_READ_CONCURRENCY = 16
_PROGRESS_STEPS = 20
# What a query term in a passage's headings, or in its note's name, is worth next to the
# same term in its text. Headings are precise (the section is about it); a note's name
# is shared by every passage of the note, so it only breaks ties between notes.
HEADING_WEIGHT = 0.5
NAME_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage of a note: `content[start:end]` under the heading path `section`."""

    id: int
    path: str
    section: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class NoteRecord:
    stat: FileStat
    parsed: ParsedNote
    chunks: tuple[Chunk, ...]
    # Obsidian's own backlinks (REST, plugin 4.0 on); None when the source has none.
    backlinks: tuple[str, ...] | None
    label_terms: frozenset[str]

    @property
    def path(self) -> str:
        return self.parsed.path

    def text(self, start: int, end: int) -> str:
        return self.parsed.content[start:end]


def _sentence_runs(content: str, start: int, end: int) -> list[tuple[int, int]]:
    """`content[start:end]` as runs of whole sentences of at most PASSAGE_CHARS (a single
    longer sentence stays whole)."""
    runs: list[tuple[int, int]] = []
    for sentence_start, sentence_end in sentence_spans(content[start:end]):
        absolute = (start + sentence_start, start + sentence_end)
        if runs and absolute[1] - runs[-1][0] <= PASSAGE_CHARS:
            runs[-1] = (runs[-1][0], absolute[1])
        else:
            runs.append(absolute)
    return runs


def passage_spans(parsed: ParsedNote) -> list[tuple[int, int, int]]:
    """(section index, start, end) of each passage of the note, in order."""
    spans: list[tuple[int, int, int]] = []
    for paragraph in parsed.paragraphs:
        pieces = (
            _sentence_runs(parsed.content, paragraph.start, paragraph.end)
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


class Corpus:
    """Parsed notes and a BM25 index over their passages, refreshed by modification time."""

    def __init__(self, vault: Vault) -> None:
        self._vault = vault
        self._notes: dict[str, NoteRecord] = {}
        self._chunks: dict[int, Chunk] = {}
        self._chunk_terms: dict[int, list[str]] = {}
        self._heading_terms: dict[int, frozenset[str]] = {}
        self._heading_postings: dict[str, set[int]] = {}
        self._label_postings: dict[str, set[str]] = {}
        self._index = Bm25Index()
        self._stats: dict[str, FileStat] = {}
        self._next_id = 0
        self._lock = anyio.Lock()
        # Bumped on every change, so derived caches (the backlink map) know to rebuild.
        self.generation = 0

    @property
    def index(self) -> Bm25Index:
        return self._index

    @property
    def paths(self) -> list[str]:
        """Every note path the last sync saw."""
        return list(self._stats)

    def records(self) -> Iterable[NoteRecord]:
        return self._notes.values()

    def chunk(self, chunk_id: int) -> Chunk:
        return self._chunks[chunk_id]

    def chunk_terms(self, chunk_id: int) -> list[str]:
        return self._chunk_terms[chunk_id]

    def record(self, path: str) -> NoteRecord | None:
        """The note as of the last sync (None if it was not read or does not exist)."""
        return self._notes.get(path)

    def _forget(self, path: str) -> None:
        record = self._notes.pop(path)
        for term in record.label_terms:
            paths = self._label_postings[term]
            paths.discard(path)
            if not paths:
                del self._label_postings[term]
        for chunk in record.chunks:
            self._index.remove(chunk.id, self._chunk_terms.pop(chunk.id))
            for term in self._heading_terms.pop(chunk.id):
                chunk_ids = self._heading_postings[term]
                chunk_ids.discard(chunk.id)
                if not chunk_ids:
                    del self._heading_postings[term]
            del self._chunks[chunk.id]
        self.generation += 1

    def _add(self, stat: FileStat, content: str, backlinks: tuple[str, ...] | None) -> None:
        path = stat.path
        if path in self._notes:
            self._forget(path)
        parsed = parse_note(path, content)
        label = frozenset(note_label_terms(parsed))
        for term in label:
            self._label_postings.setdefault(term, set()).add(path)
        chunks: list[Chunk] = []
        for section_index, start, end in passage_spans(parsed):
            section = parsed.sections[section_index]
            chunk = Chunk(self._next_id, path, section.path, start, end)
            self._next_id += 1
            # What a reader sees: link text, not block ids or link anchors.
            chunk_terms = terms(plain_text(content[start:end]))
            self._index.add(chunk.id, chunk_terms)
            self._chunk_terms[chunk.id] = chunk_terms
            heading_terms = frozenset(terms(" ".join(section.path)))
            self._heading_terms[chunk.id] = heading_terms
            for term in heading_terms:
                self._heading_postings.setdefault(term, set()).add(chunk.id)
            self._chunks[chunk.id] = chunk
            chunks.append(chunk)
        self._notes[path] = NoteRecord(stat, parsed, tuple(chunks), backlinks, label)
        self.generation += 1

    def scores(self, query_terms: list[str]) -> dict[int, float]:
        """Relevance of each passage: BM25 of its text, plus a bonus for query terms in its
        headings and in its note's name, title, aliases or tags.

        The bonus is kept apart from the text's own counts so that a note named after the
        query does not lift every one of its passages above the one that answers; a
        section or note matched by name alone still offers its first passage.
        """
        weighted = self._index.expand(query_terms)
        scores = self._index.scores(weighted)
        bonus: dict[int, float] = {}
        for term, weight in weighted:
            value = weight * self._index.idf(term)
            first_chunks = (
                chunks[0].id
                for path in self._label_postings.get(term, ())
                if (chunks := self._notes[path].chunks)
            )
            for chunk_id in first_chunks:
                scores.setdefault(chunk_id, 0.0)
            for chunk_id in self._heading_postings.get(term, ()):
                bonus[chunk_id] = bonus.get(chunk_id, 0.0) + HEADING_WEIGHT * value
            for path in self._label_postings.get(term, ()):
                for chunk in self._notes[path].chunks:
                    if chunk.id in scores:
                        bonus[chunk.id] = bonus.get(chunk.id, 0.0) + NAME_WEIGHT * value
        for chunk_id, extra in bonus.items():
            scores[chunk_id] = scores.get(chunk_id, 0.0) + extra
        return scores

    async def _read(self, path: str) -> None:
        try:
            note = await self._vault.read_note(path)
        except (NoteNotFound, NotText, NotReadable, PathRefused):
            return  # gone or unreadable since the stat; the next sync settles it
        # The stat we compare against next time is the one the listing gave, so a note
        # changed between listing and reading is read again on the next sync.
        self._add(self._stats.get(path, note.stat), note.content, note.backlinks)

    async def sync(self, *, read_all: bool, progress: ProgressCallback | None = None) -> None:
        """Bring the cache up to date with the vault's stats; with `read_all`, read every
        note not yet cached (a cold build reports its progress through `progress`)."""
        async with self._lock:
            stats = await self._vault.note_stats()
            self._stats = stats
            for path in [p for p, r in self._notes.items() if stats.get(p) != r.stat]:
                self._forget(path)
            if not read_all:
                return
            missing = [path for path in stats if path not in self._notes]
            if not missing:
                return
            await self._read_many(missing, progress)

    async def _read_many(self, paths: list[str], progress: ProgressCallback | None) -> None:
        total = len(paths)
        step = max(1, total // _PROGRESS_STEPS)
        done = 0
        limiter = anyio.CapacityLimiter(_READ_CONCURRENCY)
        if progress is not None:
            await progress(0, total, f"indexing {total} notes")

        async def read_one(path: str) -> None:
            nonlocal done
            async with limiter:
                await self._read(path)
            done += 1
            if progress is not None and (done % step == 0 or done == total):
                await progress(done, total, f"indexed {done} of {total} notes")

        async with anyio.create_task_group() as group:
            for path in paths:
                group.start_soon(read_one, path)
        logger.info("indexed %d notes", total)

    async def note(self, path: str) -> NoteRecord | None:
        """One note, read now if the cache lacks it; None if it no longer exists."""
        record = self._notes.get(path)
        if record is None:
            async with self._lock:
                await self._read(path)
                record = self._notes.get(path)
        return record
