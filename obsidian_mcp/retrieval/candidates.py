# pyright: strict
"""Stage 1 of `vault_semantic_query`, candidates: one ranking of passages per source.

- keyword: BM25 over passages (`Corpus.scores`), within the folder;
- dense: passages nearest the query in meaning, from the local passage index;
- semantic: a semantic source's notes or blocks (`semantic.SemanticSources`), each mapped to
  the passage that stands for it, by meaning when the passages have vectors.

What comes out is plain data (`Candidates`); fusion (`fusion.fuse`) orders it.
"""

import logging
import math
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import anyio.to_thread

from obsidian_mcp.index.embedder import SHARE_MIN_TEXTS, Embedder, Matrix, embed_side_by_side
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.vectors import EmbedderSlot, EmbeddingBuilder, PassageVectors
from obsidian_mcp.retrieval.corpus import Chunk, Corpus, NoteRecord, ProgressCallback
from obsidian_mcp.retrieval.cutting import block_text_span, line_of, lines_to_span
from obsidian_mcp.retrieval.keyword import stem, terms, words
from obsidian_mcp.retrieval.semantic import (
    LocalQuery,
    Seed,
    SemanticAnswer,
    SemanticHit,
    SemanticSources,
)
from obsidian_mcp.retrieval.stages import Stages
from obsidian_mcp.text.markdown import find_section

logger = logging.getLogger(__name__)

# How deep the meaning rankings go: the fusion looks no further.
SEMANTIC_DEPTH = 20
DENSE_DEPTH = 20
# Keyword hits whose stored vectors form the feedback query (stored-vector source).
_SEED_COUNT = 5
# A semantic hit on a block (or note) with no more text than this is shown whole.
WHOLE_BLOCK_CHARS = 700
# Passages the background build embeds a second on the bench machine (2 cores): ledgerline's
# 1,122 passages took 22 s after the model loaded (`obsidian-mcp index`). A first query
# waits for the build only when what is left fits its wait at this rate.
PASSAGES_PER_SECOND = 50
# A query embeds the texts left itself, rather than start the background build, when no
# more than this many lack vectors and every note is read: an edit's few new passages.
# The model embeds 73-80 of the build's texts a second on 2 cores (python -m
# bench.speed.index, T_model), so 16 cost about 0.2 s. Through the build the question after
# an edit took 0.8-1.2 s at 10,000 notes: the builder's thread, finding its work among
# every text, held the interpreter while the query fetched, stored and ranked.
INLINE_TEXTS = 16
# Texts a waiting first query embeds at a time, between two looks at its progress (about
# 0.4 s on 2 cores at the model's 73-80 texts a second).
WAIT_BATCH = 32
# How often a waiting query looks at the build's progress.
_MEANING_POLL_SECONDS = 0.25
# While a first build reads the notes, a question's count of what has vectors is taken
# from the last count this recent, not made again: each count walked the texts of every
# note read, which the read's thread keeps from the event loop: 0.02-0.27 s of a question
# in the first minute at 10,000 notes (python -m bench.speed.first_day, traced). The
# count is only shown ("meaning index: N of M notes"), and it lags this much at most.
READING_PROGRESS_SECONDS = 5.0
# A question during a build embeds on demand (`with_embedded`) only as many passages as
# its last on-demand embeddings' pace says will be done by this many seconds after it was
# asked. In the first minute at 10,000 notes a question's other stages took up to 0.7 s
# (reading ahead its rare words' notes 0.25-0.48 s, counting progress up to 0.27 s, the
# answer after about 0.1 s) and embedding 30 passages 0.47-0.64 s, so 1 in 300 calls took
# over a second (python -m bench.speed.first_day, traced).
ON_DEMAND_ENDS_BY_SECONDS = 0.75
# Passages embedded on demand however late the question is: two shares of the model's
# side-by-side run (`embed_side_by_side`), so a question late for its own reasons (the
# first, waiting for the read) still ranks its best keyword finds by meaning.
ON_DEMAND_LEAST = 2 * SHARE_MIN_TEXTS
# The pace assumed before a question has embedded any: 30 windows took 0.36 s on 2 cores
# alone, 0.40 s beside a build's thread (python -m bench.speed.embedding --on-demand).
ON_DEMAND_FIRST_PACE = 75.0
# Vectors of texts no passage has any more are dropped once they are this share of the
# texts held. Each edit leaves its old texts' vectors behind: the 30-minute soak (an edit
# every 3 s) grew the server by 19 MB after its first build. Dropping costs one scan of the
# index file's text hashes and one copy of the matrix, so it waits for a tenth.
STALE_VECTORS_SHARE = 0.1


def query_terms(query: str) -> list[str]:
    # A query of stopwords only ("who is she") still deserves an answer.
    return terms(query) or [stem(word) for word in words(query)]


def local_scores(
    chunk_terms: Sequence[set[str]], weighted: Sequence[tuple[str, float]]
) -> list[float]:
    """How well each passage of one note matches the query, weighing each term by how rare
    it is *within the note*: in a session log every passage names the main characters,
    and the one passage with the query's unusual word is the one that answers."""
    count = len(chunk_terms)
    weights: dict[str, float] = {}
    for term, weight in weighted:
        frequency = sum(1 for terms_of in chunk_terms if term in terms_of)
        if frequency:
            weights[term] = weight * math.log(1 + count / frequency)
    return [sum(weights.get(term, 0.0) for term in terms_of) for terms_of in chunk_terms]


def note_passage_scores(
    corpus: Corpus, record: NoteRecord, weighted: Sequence[tuple[str, float]]
) -> dict[int, float]:
    """Each passage of a note by `local_scores`: the query's words, weighed by their
    rarity in the note."""
    scores = local_scores([set(terms_of) for terms_of in record.passage_terms()], weighted)
    return dict(zip((c.id for c in record.chunks), scores, strict=True))


# How a long block's passages are scored when a semantic hit must stand for one of them.
PassagePicker = Callable[[NoteRecord, list[Chunk]], dict[int, float]]


@dataclass(frozen=True, slots=True)
class DenseRanking:
    """The local index's answer to one query: passages nearest in meaning, best first, the
    query's vector (and the model that made it), and how far the index has got (empty when
    complete)."""

    ranking: list[int]
    query: Matrix
    embedder: Embedder
    progress: str


@dataclass(frozen=True, slots=True)
class MeaningProgress:
    embedded_notes: int
    notes: int
    embedded_passages: int
    passages: int
    texts_left: AbstractSet[str]  # of the notes read: their texts without a vector

    @property
    def complete(self) -> bool:
        return self.embedded_passages == self.passages

    def line(self) -> str:
        return f"meaning index: {self.embedded_notes:,} of {self.notes:,} notes"


class OnDemandPace:
    """How many texts a second the last on-demand embeddings went, wall time from reading
    their texts to taking in their vectors: each new one weighs half, as the build's read
    and the machine's load come and go. Before the first, ON_DEMAND_FIRST_PACE."""

    def __init__(self) -> None:
        self._texts_per_second = ON_DEMAND_FIRST_PACE

    def took(self, texts: int, seconds: float) -> None:
        rate = texts / max(seconds, 1e-3)
        self._texts_per_second = (self._texts_per_second + rate) / 2

    def texts_within(self, seconds: float) -> int:
        return max(0, math.floor(self._texts_per_second * seconds))


@dataclass(frozen=True, slots=True)
class Candidates:
    """Each source's ranking of passages (ids, best first, within the folder), and what the
    later stages need from the sources: the semantic source's answer, the local index's
    query vector and progress, the spans of passages that stand for a whole short block."""

    keyword: list[int]  # every passage holding a query term
    dense: DenseRanking | None
    semantic: list[int]
    answer: SemanticAnswer
    whole_blocks: dict[int, tuple[int, int]]

    @property
    def dense_ranking(self) -> list[int]:
        return self.dense.ranking if self.dense is not None else []

    @property
    def total(self) -> int:
        """Passages that any source found."""
        return len({*self.keyword, *self.semantic, *self.dense_ranking})


class CandidateSources:
    """The sources of candidates over one vault: the corpus (keywords), the local passage
    index (meaning) and the semantic sources."""

    def __init__(
        self,
        corpus: Corpus,
        semantic: SemanticSources,
        embedder: EmbedderSlot | None,
        builder: EmbeddingBuilder | None,
    ) -> None:
        self.corpus = corpus
        self.semantic = semantic
        # None: meaning from the local index is switched off (keywords and other sources).
        self.embedder = embedder
        self.builder = builder
        self.vectors: PassageVectors | None = None
        # The last progress count, by (corpus generation, notes listed, vectors held), and
        # when it was made (monotonic): counting walks every passage of the vault, and
        # between changes every query would repeat it.
        self._progress: tuple[tuple[int, int, int], MeaningProgress, float] | None = None
        # Texts a second of the last on-demand embeddings (`with_embedded`), storing included.
        self._on_demand_pace = OnDemandPace()

    async def passage_vectors(self) -> PassageVectors | None:
        """The stored passage vectors, brought up to date with the index file (this process's
        build and any other's); None when the local index is off."""
        if self.embedder is None:
            return None
        embedder = await anyio.to_thread.run_sync(self.embedder.get)
        if self.vectors is None:
            self.vectors = PassageVectors(embedder.vector_space, embedder.dims)
        await anyio.to_thread.run_sync(self.vectors.refresh, self.corpus.store)
        return self.vectors

    def meaning_progress(self, vectors: PassageVectors) -> MeaningProgress:
        # Vectors are only ever added (those pruned belong to no passage), and the corpus
        # bumps its generation on every change.
        key = (self.corpus.generation, self.corpus.listed, len(vectors))
        last = self._progress
        if last is not None and (
            last[0] == key
            or (
                self.corpus.unread
                and not last[1].complete
                and time.monotonic() - last[2] < READING_PROGRESS_SECONDS
            )
        ):
            return last[1]
        # The texts without a vector: of those lacking last time when the notes are the same
        # (a build's progress, an edit's texts embedded), else of every text, in one pass;
        # the passages that hold them from the corpus's map of texts. Checking each
        # passage's texts was 70 ms of a new process's first answer at 10,000 notes, and
        # 30 ms of every question after an edit.
        if last is not None and last[0][:2] == key[:2]:
            lacking = vectors.lacking(last[1].texts_left)
        elif (
            last is not None and (installed := self.corpus.installed_since(last[0][0])) is not None
        ):
            # Notes changed since: those lacking last time that a passage still has, and the
            # texts of the notes installed since. Over every text, this was 146-160 ms of the
            # question after an edit at 50,000 notes (in process, on a copy of the index
            # python -m bench.speed.index --prebuilt serves).
            live = self.corpus.text_hashes
            still_lacking = {digest for digest in last[1].texts_left if digest in live}
            new = {d for record in installed for chunk in record.chunks for d in chunk.text_hashes}
            lacking = vectors.lacking(still_lacking | new)
        else:
            lacking = vectors.lacking(self.corpus.text_hashes)
        undone = self.corpus.chunks_of_texts(lacking)
        undone_notes = len({self.corpus.chunk(chunk_id).path for chunk_id in undone})
        notes, passages = self.corpus.note_count, self.corpus.passage_count
        # Notes not read yet count too (a passage each, until they are cut): the index is not
        # complete before they are read.
        unread = self.corpus.unread
        progress = MeaningProgress(
            notes - undone_notes,
            notes + unread,
            passages - len(undone),
            passages + unread,
            lacking,
        )
        self._progress = (key, progress, time.monotonic())
        return progress

    async def _drop_stale_vectors(self, vectors: PassageVectors) -> None:
        """Drop the vectors of texts no passage has any more, from the index file and from
        memory, once they are STALE_VECTORS_SHARE of those held: each edit leaves its old
        texts' vectors behind."""
        live = self.corpus.text_hashes
        rows_seen = len(vectors)
        if rows_seen <= len(live) * (1 + STALE_VECTORS_SHARE):
            return
        snapshot = frozenset(live)
        pruned = await anyio.to_thread.run_sync(self.corpus.store.prune_vectors)
        dropped = await anyio.to_thread.run_sync(vectors.keep_only, snapshot, rows_seen)
        logger.info("dropped %d stale passage vectors (%d from the index file)", dropped, pruned)

    async def _wait_for_meaning(
        self,
        vectors: PassageVectors,
        progress: MeaningProgress,
        wait: float,
        report: ProgressCallback | None,
    ) -> MeaningProgress:
        """Complete the meaning index while what is left fits in `wait` seconds at
        PASSAGES_PER_SECOND (a new process's first query); the progress at the end.

        While the background build runs (a first build reads the notes), it is waited for.
        Else the texts left are known, and embedded here, WAIT_BATCH at a time, each
        passage's first text first: the build would first look for them among every stored
        text, 2.1 s at 50,000 notes (12 s with the index file not cached), and the first
        question after a restart with one new 45-paragraph note waited 3-14 s in all."""
        if wait <= 0 or self.builder is None:
            return progress
        if self._left_to_embed(progress) > wait * PASSAGES_PER_SECOND:
            return progress
        deadline = anyio.current_time() + wait
        tried: set[str] = set()  # each text once: one whose text is gone is not tried again
        while not progress.complete and anyio.current_time() < deadline:
            if self.builder.running:
                await anyio.sleep(_MEANING_POLL_SECONDS)
                await anyio.to_thread.run_sync(vectors.refresh, self.corpus.store)
            else:
                batch = self._first_texts_first(progress.texts_left - tried)[:WAIT_BATCH]
                if not batch:
                    break
                tried.update(batch)
                if not await self._embed_now(vectors, batch):
                    break  # it answers from what is ready; the build embeds the rest
            progress = self.meaning_progress(vectors)
            if report is not None:
                await report(
                    progress.embedded_passages,
                    progress.passages,
                    f"meaning index: {progress.embedded_passages:,} of "
                    f"{progress.passages:,} passages (first question only)",
                )
        return progress

    def _left_to_embed(self, progress: MeaningProgress) -> float:
        """The passages left to embed in the whole vault: those of the notes read, and
        while a first build reads, the notes not read yet at as many passages a note
        (none read: not known). Counted over the notes read alone, a 1,000-note vault's
        first question took what was left for a few dozen passages, and waited out its
        30 s while the read went on (python -m bench speed)."""
        left = float(progress.passages - progress.embedded_passages)
        unread = self.corpus.unread
        if unread:
            read = self.corpus.listed - unread
            left += unread * progress.passages / read if read else math.inf
        return left

    def _first_texts_first(self, digests: AbstractSet[str]) -> list[str]:
        """These texts, each passage's first text before the others (a passage is found
        by meaning once one of its texts has a vector)."""
        chunks = (self.corpus.chunk(c) for c in self.corpus.chunks_of_texts(digests))
        firsts = {chunk.text_hashes[0] for chunk in chunks} & digests
        return [*firsts, *(digests - firsts)]

    async def _embed_now(self, vectors: PassageVectors, digests: Collection[str]) -> bool:
        """Embed these texts that lack vectors now, ahead of the background build, and store
        them (the build then skips them); whether they are stored. The index file may be
        busy past its timeout (another process's long write) or its disk full: the call
        answers from what is ready, and the build embeds them later."""
        lacking = vectors.lacking(digests)
        if not lacking or self.embedder is None:
            return True
        store = self.corpus.store
        texts = await anyio.to_thread.run_sync(store.texts_of, lacking)
        embedder = self.embedder.get()
        embedded = await embed_side_by_side(
            embedder, [text for _, text in texts], TextRole.DOCUMENT
        )
        try:
            await anyio.to_thread.run_sync(
                store.put_vectors, embedder.vector_space, [d for d, _ in texts], embedded
            )
        except sqlite3.Error as exc:
            logger.warning("passage texts embedded for a question were not stored: %s", exc)
            return False
        await anyio.to_thread.run_sync(vectors.refresh, store)
        return True

    async def _embed_a_few_left(self, vectors: PassageVectors) -> MeaningProgress:
        """Embed the texts left now when they are no more than INLINE_TEXTS (an edit's);
        the progress after."""
        progress = self.meaning_progress(vectors)
        if (
            not progress.complete
            and len(progress.texts_left) <= INLINE_TEXTS
            and not self.corpus.unread
        ):
            await self._embed_now(vectors, progress.texts_left)
            progress = self.meaning_progress(vectors)
        return progress

    async def embed_a_few_left(self) -> None:
        """`_embed_a_few_left`, when the local index is on; then the vectors' snapshot is
        written again if enough were stored outside it (an edit's few at a time). Not while
        the builder runs: it writes one when it ends, and each rewrite during a first build
        would hold the index's writers up for up to a second (159,646 vectors)."""
        if self.corpus.unread:
            # A first build's read: its texts are the builder's, and counting them on the
            # event loop took 65 ms (130 at p90) of every look, 1.6 s apart (10,000 notes).
            return
        vectors = await self.passage_vectors()
        if vectors is not None:
            await self._embed_a_few_left(vectors)
            if self.builder is None or not self.builder.running:
                await anyio.to_thread.run_sync(
                    self.corpus.store.save_vector_snapshot, vectors.model
                )

    async def dense_ranking(
        self,
        query: str,
        prefix: str,
        *,
        wait: float = 0.0,
        report: ProgressCallback | None = None,
    ) -> DenseRanking | None:
        """Passages nearest the query in meaning, within the folder; starts the background
        build when passages lack vectors (and waits for it when what is left fits in
        `wait` seconds), and says how far it has got."""
        vectors = await self.passage_vectors()
        if vectors is None or self.embedder is None or self.builder is None:
            return None
        progress = await self._embed_a_few_left(vectors)
        if not progress.complete:
            if self.corpus.unread:  # a first build: the builder embeds the notes as read
                self.builder.start()
            progress = await self._wait_for_meaning(vectors, progress, wait, report)
            if not progress.complete:
                self.builder.start()
        if progress.complete:
            await self._drop_stale_vectors(vectors)
        embedder = self.embedder.get()  # loaded by passage_vectors
        query_vector = (await anyio.to_thread.run_sync(embedder.embed, [query], TextRole.QUERY))[0]
        return DenseRanking(
            self._nearest(vectors, query_vector, prefix),
            query_vector,
            embedder,
            "" if progress.complete else progress.line(),
        )

    async def with_embedded(
        self,
        dense: DenseRanking,
        prefix: str,
        chunk_ids: Sequence[int],
        *,
        until: float | None = None,
    ) -> DenseRanking:
        """The dense ranking again, after the first texts of these passages (best first)
        that lacked vectors are embedded now (`_embed_now`); the query keeps the vector it
        had. A passage is found by meaning once any of its texts has a vector, as the
        build's first pass has it: all the texts of 30 passages (2.4 a passage) took 1.3 s
        of a question beside a first build's reading, the first ones 0.5 s. With `until`
        (anyio's clock), only the best that the last ones' pace says are done by then, and
        at least ON_DEMAND_LEAST."""
        vectors = self.vectors
        if vectors is None:
            return dense
        firsts = [self.corpus.chunk(c).text_hashes[0] for c in chunk_ids]
        lacking = vectors.lacking(firsts)
        wanted = [digest for digest in dict.fromkeys(firsts) if digest in lacking]
        if until is not None:
            fit = self._on_demand_pace.texts_within(until - anyio.current_time())
            wanted = wanted[: max(fit, ON_DEMAND_LEAST)]
        began = anyio.current_time()
        if wanted and await self._embed_now(vectors, wanted):
            self._on_demand_pace.took(len(wanted), anyio.current_time() - began)
        # The progress stays the one the ranking had: a note counts once all its texts have
        # vectors, which first texts seldom complete, and counting again beside a first
        # build's read (its notes changed since) took 65 ms, 130 at p90 (10,000 notes).
        return DenseRanking(
            self._nearest(vectors, dense.query, prefix), dense.query, dense.embedder, dense.progress
        )

    def _nearest(self, vectors: PassageVectors, query_vector: Matrix, prefix: str) -> list[int]:
        """The DENSE_DEPTH passages within the folder nearest a query vector, best first."""
        ranking: list[int] = []
        for digest, _ in vectors.ranked(query_vector):
            ranking.extend(
                chunk_id
                for chunk_id in sorted(self.corpus.chunks_of_text(digest))
                if self.corpus.chunk(chunk_id).path.startswith(prefix)
            )
            if len(ranking) >= DENSE_DEPTH:
                break
        return ranking[:DENSE_DEPTH]

    def _best_chunk(
        self,
        record: NoteRecord,
        hit: SemanticHit,
        pick: PassagePicker,
        taken: set[int],
    ) -> tuple[Chunk, tuple[int, int] | None] | None:
        """The passage a semantic hit stands for, among those no better-ranked hit has
        claimed, and the span to show when that is the whole block.

        Semantic sources rank whole notes or blocks. A short block is shown whole: the
        source judged all of it relevant. In a long block the passage nearest the query in
        meaning stands for it (by its words while the local index lacks its vectors)."""
        content = record.parsed.content
        start, end = record.parsed.body_start, len(content)
        if hit.lines is not None:
            start, end = lines_to_span(content, hit.lines)
        elif hit.headings:
            section = find_section(record.parsed, " > ".join(hit.headings))
            if section is not None:
                start, end = section.start, section.subtree_end
        inside = [c for c in record.chunks if c.start < end and c.end > start and c.id not in taken]
        if not inside:
            return None
        block = block_text_span(content, start, end)
        if block is not None and block[1] - block[0] <= WHOLE_BLOCK_CHARS:
            return inside[0], block
        scores = pick(record, inside)
        return max(inside, key=lambda c: (scores[c.id], -c.start)), None

    def _picker(self, query: list[str], dense: DenseRanking | None) -> PassagePicker:
        """How a long block's passage is chosen: by meaning when every passage in question
        has a vector, else by the query's words, weighed by their rarity in the note."""
        weighted = self.corpus.index.expand(query)
        vectors = self.vectors

        def pick(record: NoteRecord, inside: list[Chunk]) -> dict[int, float]:
            if dense is not None and vectors is not None:
                wanted = {d for c in inside for d in c.text_hashes}
                near = vectors.similarity(dense.query, wanted)
                if len(near) == len(wanted):
                    return {c.id: max(near[d] for d in c.text_hashes) for c in inside}
            return note_passage_scores(self.corpus, record, weighted)

        return pick

    def _semantic_ranking(
        self, answer: SemanticAnswer, pick: PassagePicker, prefix: str
    ) -> tuple[list[int], dict[int, tuple[int, int]]]:
        """Passages in the semantic order, and the spans of those shown as whole blocks."""
        ranking: list[int] = []
        whole_blocks: dict[int, tuple[int, int]] = {}
        taken: set[int] = set()
        for hit in answer.hits:
            record = self.corpus.record(hit.path)
            if record is None or not hit.path.startswith(prefix):
                continue
            best = self._best_chunk(record, hit, pick, taken)
            if best is None:
                continue
            chunk, block = best
            ranking.append(chunk.id)
            if block is not None:
                whole_blocks[chunk.id] = block
                taken.update(c.id for c in record.chunks if c.start < block[1] and c.end > block[0])
            taken.add(chunk.id)
        return ranking, whole_blocks

    def _seeds(self, ranking: Sequence[int], keyword: dict[int, float]) -> list[Seed]:
        seeds: list[Seed] = []
        top = keyword[ranking[0]] if ranking else 1.0
        for chunk_id in ranking[:_SEED_COUNT]:
            chunk = self.corpus.chunk(chunk_id)
            record = self.corpus.record(chunk.path)
            if record is not None:
                line = line_of(record.parsed.content, chunk.start)
                seeds.append(Seed(chunk.path, line, keyword[chunk_id] / top))
        return seeds

    async def gather(
        self,
        query: str,
        prefix: str,
        stages: Stages,
        *,
        read_wait: float = 0.0,
        meaning_wait: float = 0.0,
        on_demand: int = 0,
        asked_at: float | None = None,
        report: ProgressCallback | None = None,
    ) -> Candidates:
        """Every source's ranking for the query, within the folder `prefix` ('' or 'a/b/');
        a source whose stage is off gives none (the ablation). Smart Connections' files,
        while a first build still reads them, are waited for at most `read_wait` seconds;
        the meaning index for `meaning_wait` when what is left fits (`_wait_for_meaning`);
        while it is incomplete and no semantic source answered, the best `on_demand`
        keyword passages are embedded now; given when the question was asked (`asked_at`,
        anyio's clock), as many as are done ON_DEMAND_ENDS_BY_SECONDS after it
        (`with_embedded`)."""
        wanted = query_terms(query)
        keyword = self.corpus.scores(wanted) if stages.keyword else {}
        if prefix:  # the whole vault needs no look at each passage's path (6 ms a question)
            keyword = {
                chunk_id: score
                for chunk_id, score in keyword.items()
                if self.corpus.chunk(chunk_id).path.startswith(prefix)
            }
        keyword_ranking = sorted(keyword, key=lambda c: -keyword[c])
        dense = (
            await self.dense_ranking(query, prefix, wait=meaning_wait, report=report)
            if stages.dense
            else None
        )
        if not stages.semantic or (dense is not None and not dense.progress):
            # The local index has every passage: the semantic sources are not asked. With
            # them (Smart Connections' blocks, same model, coarser) the dev questions scored
            # 69% in the first response through /search/smart and 70-73% through stored
            # vectors; without them 73% and 74% (python -m bench.retrieval.ablation, "no semantic";
            # python -m bench.retrieval.quality).
            answer = SemanticAnswer("lexical-fallback", ())
        else:
            answer = await self.semantic.search(
                query,
                folder=prefix.rstrip("/"),
                limit=SEMANTIC_DEPTH,
                seeds=self._seeds(keyword_ranking, keyword),
                local=None if dense is None else LocalQuery(dense.embedder, dense.query),
                read_wait=read_wait,
            )
        if dense is not None and dense.progress and on_demand and not answer.hits:
            # Nothing ranks the words' finds by meaning while the local index builds (no
            # semantic source gave any): they are embedded now, and ranked again. A cold
            # ledgerline's first minute: 49% -> 69% (70% built) at 30 passages, 64% at 15,
            # 62% at 10 (python -m bench.retrieval.quality); about half a second a question.
            until = None if asked_at is None else asked_at + ON_DEMAND_ENDS_BY_SECONDS
            dense = await self.with_embedded(
                dense, prefix, keyword_ranking[:on_demand], until=until
            )
        semantic_ranking, whole_blocks = self._semantic_ranking(
            answer, self._picker(wanted, dense), prefix
        )
        return Candidates(keyword_ranking, dense, semantic_ranking, answer, whole_blocks)
