# pyright: strict
"""The retrieval service of one vault: ranked passages for a question, exact matches for
terms. One `Retriever` per `Vault`, kept across calls, holds the corpus cache."""

import math
import posixpath
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.index.embedder import Embedder, Matrix
from obsidian_mcp.index.smart_env import SmartEnvCache
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.index.vectors import EmbedderSlot, EmbeddingBuilder, PassageVectors
from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.retrieval.corpus import (
    Chunk,
    Corpus,
    NoteRecord,
    ProgressCallback,
)
from obsidian_mcp.retrieval.exact import Needles, check_query_terms, file_score, parse_needles
from obsidian_mcp.retrieval.expansion import NoteNames, Vocabulary, build_vocabulary, expand
from obsidian_mcp.retrieval.fusion import reciprocal_rank_fusion
from obsidian_mcp.retrieval.keyword import stem, terms, words
from obsidian_mcp.retrieval.links import LinkGraph
from obsidian_mcp.retrieval.packing import (
    FileContext,
    PassageHit,
    SearchResult,
    display_section,
    diversify,
    group_by_file,
    next_best,
    pack,
)
from obsidian_mcp.retrieval.render import format_search, frame_tokens, group_cost, passage_cost
from obsidian_mcp.retrieval.semantic import (
    LocalQuery,
    Seed,
    SemanticAnswer,
    SemanticHit,
    SemanticSources,
)
from obsidian_mcp.retrieval.stages import Stages
from obsidian_mcp.text.markdown import find_section, gist, plain_text
from obsidian_mcp.text.snippets import sentence_spans, snippets_for_matches
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.vault import Vault

# How deep each ranking goes into the fusion: deeper adds little but noise.
_KEYWORD_DEPTH = 50
_SEMANTIC_DEPTH = 20
# The local index's ranking goes as deep as the semantic sources', and weighs as much as
# the keywords: a first step, measured on bench/questions.jsonl (issue 9 tunes it).
_DENSE_DEPTH = 20
_DENSE_WEIGHT = 1.0
_DENSE_SEATS = 3
# Keyword hits whose stored vectors form the feedback query (stored-vector source).
_SEED_COUNT = 5
# Weight of the semantic ranking against the keyword ranking in the fusion, per source:
# real query embeddings are trusted more than feedback built from keyword hits.
_SEMANTIC_WEIGHT = {
    "smart-search": 1.0,
    "custom-route": 1.0,
    "smart-env": 1.0,
    "smart-env-prf": 0.1,
}
# How many of each ranking's best passages are always shown first. A query embedding's
# top three hold the answer far more often than its next ones (measured on the bundled
# vault), so the semantic ranking gets one seat more.
_SEATS = 2
_SEMANTIC_SEATS = 3
# Most characters of one passage as shown: a paragraph or two.
FOCUS_CHARS = 560
# A semantic hit on a block (or note) with no more text than this is shown whole.
WHOLE_BLOCK_CHARS = 700
# Passages left out for the budget that the footer names.
_OVER_BUDGET_NAMED = 3
# Most passages of one note offered before every other note's (packing.diversify). On the
# dev split (`python -m bench.ablation`) 3 cost fewer hits than 2 (folder: 58% vs 57%
# first response, against 60% with no cap).
PER_NOTE_PASSAGES = 3
# Next-best passages listed after the shown ones (render.menu_line, ~30 tokens each).
MENU_ENTRIES = 2
_GIST_CHARS = 140
# Notes scanned between two chances to be cancelled: one exact scan of a note takes some
# microseconds, so 64 of them keep a cancelled search to well under a millisecond of work.
_NOTES_PER_CHECKPOINT = 64
_CONTEXT_TAGS = 6

_LINE_BREAK_RE = re.compile(r"\n")


def line_of(content: str, offset: int) -> int:
    """1-indexed line number of a character offset."""
    return content.count("\n", 0, offset) + 1


def lines_to_span(content: str, lines: tuple[int, int]) -> tuple[int, int]:
    """Character span of a 1-indexed inclusive line range."""
    starts = [0, *(m.end() for m in _LINE_BREAK_RE.finditer(content))]
    first = min(max(lines[0], 1), len(starts)) - 1
    last = max(lines[1], lines[0])
    return starts[first], starts[last] if last < len(starts) else len(content)


def block_text_span(content: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of a block's text: its heading line and surrounding blank space left out
    (the heading is shown as the passage's link). None when the block has no text."""
    if content.startswith("#", start):
        line_end = content.find("\n", start)
        start = end if line_end < 0 else line_end + 1
    text = content[start:end]
    stripped = text.strip()
    if not stripped:
        return None
    first = start + text.index(stripped[0])
    return first, first + len(stripped)


def folder_prefix(folder: str) -> tuple[str, str]:
    """The folder as a clean vault path, and as a path prefix ('' for the whole vault)."""
    scope = normalize_vault_path(folder, folder=True)
    return scope, scope + "/" if scope else ""


def file_context(record: NoteRecord, *, with_gist: bool = True) -> FileContext:
    parsed = record.parsed
    return FileContext(
        path=record.path,
        title=parsed.title,
        gist=gist(parsed, _GIST_CHARS) if with_gist else "",
        tags=parsed.tags[:_CONTEXT_TAGS] if with_gist else (),
        tokens=estimate_tokens(parsed.content),
    )


def passage_hit(record: NoteRecord, start: int, end: int, score: float) -> PassageHit:
    """`content[start:end]` as a hit, with its section and whether the section goes on."""
    sections = record.parsed.sections
    content = record.parsed.content
    index = bisect_right([s.start for s in sections], start) - 1
    if index < 0:
        return PassageHit(record.path, (), start, end, content[start:end], score, False, False)
    section = sections[index]
    return PassageHit(
        path=record.path,
        section=display_section(section.path, record.parsed.title),
        start=start,
        end=end,
        text=content[start:end],
        score=score,
        cut_before=bool(content[section.body_start : start].strip()),
        cut_after=bool(content[end : section.end].strip()),
    )


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


def focus_window(
    record: NoteRecord, chunk: Chunk, weighted: Sequence[tuple[str, float]]
) -> tuple[int, int]:
    """The span to show for a passage: from its sentence richest in query terms onward
    through whole sentences of its section, up to FOCUS_CHARS. Notes tell things in
    order, so what answers a question usually follows the words it shares with the
    question: the line after "Rook gave her the compass" is what she said."""
    content = record.parsed.content
    sections = record.parsed.sections
    index = bisect_right([s.start for s in sections], chunk.start) - 1
    section_end = sections[index].end if index >= 0 else len(content)
    limit = min(section_end, chunk.end + FOCUS_CHARS)
    sentences = [
        (chunk.start + start, chunk.start + end)
        for start, end in sentence_spans(content[chunk.start : limit])
    ]
    if not sentences:
        return chunk.start, chunk.end
    weights = dict(weighted)
    in_chunk = [i for i, (start, _) in enumerate(sentences) if start < chunk.end]
    # A passage starts on prose: a line of tags or a lone link names the topic without
    # saying anything about it.
    prose = [i for i in in_chunk if is_prose(content[slice(*sentences[i])])]
    best = max(
        prose or in_chunk,
        key=lambda i: (
            sum(weights.get(t, 0.0) for t in set(terms(plain_text(content[slice(*sentences[i])])))),
            -i,
        ),
    )
    # Start at the paragraph the best sentence belongs to: a line of dialogue often ends on
    # the word the question shares ("That's a promise") after the words that answer it.
    first = best
    while (
        first > 0
        and "\n" not in content[sentences[first - 1][1] : sentences[first][0]]
        and sentences[best][1] - sentences[first - 1][0] <= FOCUS_CHARS
    ):
        first -= 1
    last = best
    while last + 1 < len(sentences) and sentences[last + 1][1] - sentences[first][0] <= FOCUS_CHARS:
        last += 1
    return sentences[first][0], sentences[last][1]


_TAG_RE = re.compile(r"(?<!\w)#[^\s#]+")
_MIN_PROSE_WORDS = 4


_LINK_RE = re.compile(r"!?\[\[[^\]]*\]\]")


def is_prose(sentence: str) -> bool:
    """Whether a sentence says something of its own, beyond links and tags ("See [[A]]
    and [[B]].", "#session #secret")."""
    bare = _TAG_RE.sub(" ", _LINK_RE.sub(" ", sentence))
    return len(words(plain_text(bare))) >= _MIN_PROSE_WORDS


# How a long block's passages are scored when a semantic hit must stand for one of them.
PassagePicker = Callable[[NoteRecord, list[Chunk]], dict[int, float]]


def seated(fused: dict[int, float], seats: Sequence[Sequence[int]]) -> list[tuple[int, float]]:
    """Fused order, except that the best few of each ranking come first, taken in turn.

    Rank fusion lets many middling agreements outvote one ranking's clear winner (an
    exact name that only the keywords find, a paraphrase only the embedding finds); a
    reply of five passages should always carry each ranking's best."""
    first: list[int] = []
    for position in range(max((len(s) for s in seats), default=0)):
        for ranking in seats:
            if position < len(ranking) and ranking[position] not in first:
                first.append(ranking[position])
    front = set(first)
    rest = sorted((c for c in fused if c not in front), key=lambda c: -fused[c])
    return [(c, fused[c]) for c in [*first, *rest]]


@dataclass(frozen=True, slots=True)
class DenseRanking:
    """The local index's answer to one query: passages nearest in meaning, best first, the
    query's vector, and how far the index has got (empty when complete)."""

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

    @property
    def complete(self) -> bool:
        return self.embedded_passages == self.passages

    def line(self) -> str:
        return f"meaning index: {self.embedded_notes:,} of {self.notes:,} notes"


@dataclass(frozen=True, slots=True)
class RankedPassages:
    """Fused (chunk id, score) best first; the sources that took part and a note on them
    (as the response's first line names them); how many passages matched at all; the
    spans of passages that stand for a whole short block."""

    source: str
    note: str
    ranked: list[tuple[int, float]]
    total: int
    whole_blocks: dict[int, tuple[int, int]]

    @property
    def top_score(self) -> float:
        """What scores are shown relative to: the best fused score (seated passages come
        first, so it need not be the first one's)."""
        return max((score for _, score in self.ranked), default=1.0)


def source_label(answer: SemanticAnswer, dense: DenseRanking | None) -> tuple[str, str]:
    """The sources as the response names them: the local index beside (or instead of) the
    semantic source once it has vectors, and how far its build has got until it is done."""
    if dense is None:
        return answer.source, answer.note
    note = "; ".join(n for n in (answer.note, dense.progress) if n)
    if not dense.ranking:
        return answer.source, note
    if answer.source == "lexical-fallback":
        return "local-index", note
    return f"{answer.source}+local-index", note


def query_terms(query: str) -> list[str]:
    # A query of stopwords only ("who is she") still deserves an answer.
    return terms(query) or [stem(word) for word in words(query)]


class Retriever:
    """Keyword index, the local passage index, semantic sources and packing over one vault."""

    def __init__(
        self,
        vault: Vault,
        settings: Settings,
        store: IndexStore,
        embedder: EmbedderSlot | None,
        builder: EmbeddingBuilder | None,
    ) -> None:
        self.vault = vault
        self.settings = settings
        self.corpus = Corpus(vault, store, refresh_seconds=settings.index_refresh_seconds)
        # None: meaning from the local index is switched off (keywords and other sources).
        self.embedder = embedder
        self.builder = builder
        self._vectors: PassageVectors | None = None
        # The last progress count, by (corpus generation, vectors held): counting walks
        # every passage of the vault, and between changes every query would repeat it.
        self._progress: tuple[tuple[int, int], MeaningProgress] | None = None
        self.stages = Stages.without(settings.stages_off)
        self._vocabulary: tuple[int, Vocabulary] | None = None
        self.links = LinkGraph()
        env_dir = vault.smart_env_dir
        self.semantic = SemanticSources(
            vault.rest, settings.semantic_route, SmartEnvCache(env_dir) if env_dir else None
        )

    # -- the local passage index -----------------------------------------------------------

    def close(self) -> None:
        """Stop the background build after its batch in hand, and close the index."""
        if self.builder is not None:
            self.builder.stop()
        if self.embedder is not None:
            self.embedder.settle()
        self.corpus.store.close()

    async def passage_vectors(self) -> PassageVectors | None:
        """The stored passage vectors, brought up to date with the index file (this process's
        build and any other's); None when the local index is off."""
        if self.embedder is None:
            return None
        embedder = await anyio.to_thread.run_sync(self.embedder.get)
        if self._vectors is None:
            self._vectors = PassageVectors(embedder.model_id, embedder.dims)
        await anyio.to_thread.run_sync(self._vectors.refresh, self.corpus.store)
        return self._vectors

    async def build_index(self, progress: ProgressCallback | None = None) -> None:
        """Bring the whole index up to date now: read what changed, then embed every passage
        without a vector (what the background build would do, in the foreground)."""
        await self.corpus.sync(read_all=True, progress=progress)
        if self.builder is None or self.embedder is None:
            return
        embedder = await anyio.to_thread.run_sync(self.embedder.get)
        store = self.corpus.store
        total = await anyio.to_thread.run_sync(store.count_unembedded, embedder.model_id)
        done = 0

        def on_batch(count: int) -> None:
            nonlocal done
            done += count
            if progress is not None:
                report = progress  # narrowed for the closure below
                message = f"embedded {done:,} of {total:,} passages"

                async def notify() -> None:
                    await report(done, total, message)

                anyio.from_thread.run(notify)

        builder = self.builder
        await anyio.to_thread.run_sync(lambda: builder.run_until_done(on_batch))

    def index_status(self) -> dict[str, object]:
        """What `obsidian://status` says of the passage index."""
        stats = self.corpus.store.stats()
        updated = stats.last_updated
        status: dict[str, object] = {
            "path": stats.path,
            "notes": stats.notes,
            "passages": stats.passages,
            "embedded_passages": stats.embedded_passages,
            "model": stats.model,
            "bytes_on_disk": stats.bytes_on_disk,
            "last_updated": None
            if updated is None
            else datetime.fromtimestamp(updated, UTC).isoformat(timespec="seconds"),
            "meaning": "off (OBSIDIAN_INDEX_EMBEDDINGS=false)"
            if self.builder is None
            else "building"
            if self.builder.running
            else "idle",
        }
        if self.builder is not None and self.builder.failure:
            status["build_failure"] = self.builder.failure
        return status

    def meaning_progress(self, vectors: PassageVectors) -> MeaningProgress:
        # Vectors are only ever added, and the corpus bumps its generation on every change.
        key = (self.corpus.generation, len(vectors))
        if self._progress is not None and self._progress[0] == key:
            return self._progress[1]
        notes = embedded_notes = passages = embedded_passages = 0
        for record in self.corpus.records():
            done = sum(1 for chunk in record.chunks if all(d in vectors for d in chunk.text_hashes))
            notes += 1
            embedded_notes += done == len(record.chunks)
            passages += len(record.chunks)
            embedded_passages += done
        progress = MeaningProgress(embedded_notes, notes, embedded_passages, passages)
        self._progress = (key, progress)
        return progress

    async def _dense_ranking(self, query: str, prefix: str) -> DenseRanking | None:
        """Passages nearest the query in meaning, within the folder; starts the background
        build when passages lack vectors, and says how far it has got."""
        vectors = await self.passage_vectors()
        if vectors is None or self.embedder is None or self.builder is None:
            return None
        progress = self.meaning_progress(vectors)
        if not progress.complete:
            self.builder.start()
        embedder = self.embedder.get()  # loaded by passage_vectors
        query_vector = (await anyio.to_thread.run_sync(embedder.embed, [query]))[0]
        ranking: list[int] = []
        for digest, _ in vectors.ranked(query_vector):
            ranking.extend(
                chunk_id
                for chunk_id in sorted(self.corpus.chunks_of_text(digest))
                if self.corpus.chunk(chunk_id).path.startswith(prefix)
            )
            if len(ranking) >= _DENSE_DEPTH:
                break
        return DenseRanking(
            ranking[:_DENSE_DEPTH],
            query_vector,
            embedder,
            "" if progress.complete else progress.line(),
        )

    # -- ranked search ---------------------------------------------------------------------

    def weighted_terms(self, query: str) -> list[tuple[str, float]]:
        """The query's terms and their variants, each weighted by its rarity in the vault."""
        index = self.corpus.index
        return [(t, w * index.idf(t)) for t, w in index.expand(query_terms(query))]

    def vocabulary(self) -> Vocabulary:
        """The vault's names, aliases and tags (expansion.py), rebuilt when a note changed."""
        generation = self.corpus.generation
        if self._vocabulary is None or self._vocabulary[0] != generation:
            names = (
                NoteNames(r.path, r.parsed.title, r.parsed.aliases, r.parsed.tags)
                for r in self.corpus.records()
            )
            self._vocabulary = (generation, build_vocabulary(names))
        return self._vocabulary[1]

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
        vectors = self._vectors

        def pick(record: NoteRecord, inside: list[Chunk]) -> dict[int, float]:
            if dense is not None and vectors is not None:
                wanted = {d for c in inside for d in c.text_hashes}
                near = vectors.similarity(dense.query, wanted)
                if len(near) == len(wanted):
                    return {c.id: max(near[d] for d in c.text_hashes) for c in inside}
            scores = local_scores(
                [set(self.corpus.chunk_terms(c.id)) for c in record.chunks], weighted
            )
            return dict(zip((c.id for c in record.chunks), scores, strict=True))

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

    async def ranked_passages(
        self,
        query: str,
        *,
        folder: str,
        progress: ProgressCallback | None = None,
    ) -> RankedPassages:
        _, prefix = folder_prefix(folder)
        await self.corpus.sync(read_all=True, progress=progress)
        wanted = query_terms(query)
        keyword = self.corpus.scores(wanted)
        if self.stages.expansion:
            # BM25 adds up over terms: the names a role stands for join the query's terms.
            named = self.corpus.index.scores(expand(wanted, self.vocabulary()))
            for chunk_id, score in named.items():
                keyword[chunk_id] = keyword.get(chunk_id, 0.0) + score
        in_scope = {
            chunk_id: score
            for chunk_id, score in keyword.items()
            if self.corpus.chunk(chunk_id).path.startswith(prefix)
        }
        keyword_ranking = sorted(in_scope, key=lambda c: -in_scope[c])
        dense = await self._dense_ranking(query, prefix)
        # Smart Connections' stored vectors stand in for the local index until it has every
        # passage; then they only repeat it, coarser (same model, whole blocks): with them
        # the folder's dev questions scored 70-73% in the first response, without 74%
        # (python -m bench.retrieval_bench, folder+vectors against folder+meaning).
        complete = dense is not None and not dense.progress
        answer = await self.semantic.search(
            query,
            folder=prefix.rstrip("/"),
            limit=_SEMANTIC_DEPTH,
            seeds=self._seeds(keyword_ranking, in_scope),
            local=None if dense is None else LocalQuery(dense.embedder, dense.query),
            stored_vectors=not complete,
        )
        semantic_ranking, whole_blocks = self._semantic_ranking(
            answer, self._picker(wanted, dense), prefix
        )
        dense_ranking = dense.ranking if dense is not None else []
        fused = reciprocal_rank_fusion(
            [
                (keyword_ranking[:_KEYWORD_DEPTH], 1.0),
                (semantic_ranking, _SEMANTIC_WEIGHT.get(answer.source, 0.0)),
                (dense_ranking, _DENSE_WEIGHT),
            ]
        )
        seats = [keyword_ranking[:_SEATS]]
        if _SEMANTIC_WEIGHT.get(answer.source, 0.0) >= 1.0:
            seats.append(semantic_ranking[:_SEMANTIC_SEATS])
        seats.append(dense_ranking[:_DENSE_SEATS])
        ranked = seated(fused, seats)
        total = len(in_scope.keys() | set(semantic_ranking) | set(dense_ranking))
        source, note = source_label(answer, dense)
        return RankedPassages(source, note, ranked, total, whole_blocks)

    async def semantic_query(
        self,
        query: str,
        *,
        limit: int,
        folder: str = "",
        max_tokens: int | None = None,
        include_context: bool = True,
        progress: ProgressCallback | None = None,
    ) -> SearchResult:
        if not query.strip():
            raise InvalidArgument("query is empty; ask a question or give a few words.")
        scope, _ = folder_prefix(folder)
        budget = max_tokens or self.settings.max_tokens
        found = await self.ranked_passages(query, folder=scope, progress=progress)
        ranked, whole_blocks = found.ranked, found.whole_blocks
        top = found.top_score
        weighted = self.weighted_terms(query)
        hits: list[PassageHit] = []
        spans: dict[str, list[tuple[int, int]]] = {}
        for chunk_id, score in ranked[: limit * 4]:
            chunk = self.corpus.chunk(chunk_id)
            record = self.corpus.record(chunk.path)
            if record is None:
                continue
            start, end = whole_blocks.get(chunk_id) or (
                focus_window(record, chunk, weighted)
                if self.stages.cutting
                else (chunk.start, chunk.end)
            )
            taken = spans.setdefault(chunk.path, [])
            if any(start < other_end and end > other_start for other_start, other_end in taken):
                continue  # overlaps a better passage already shown
            taken.append((start, end))
            hits.append(passage_hit(record, start, end, round(score / top, 2)))
        if self.stages.note_cap:
            hits = diversify(hits, PER_NOTE_PASSAGES)
        return self._packed(
            "vault_semantic_query",
            query,
            scope,
            found.source,
            found.note,
            hits,
            limit=limit,
            budget=budget,
            include_context=include_context,
            total_passages=found.total,
            total_files=len({self.corpus.chunk(c).path for c, _ in ranked}),
            menu_entries=MENU_ENTRIES if self.stages.menu else 0,
        )

    def _packed(
        self,
        tool: str,
        query: str,
        scope: str,
        source: str,
        note: str,
        hits: Sequence[PassageHit],
        *,
        limit: int,
        budget: int,
        include_context: bool,
        total_passages: int,
        total_files: int,
        matches: dict[str, int] | None = None,
        menu_entries: int = 0,
    ) -> SearchResult:
        contexts: dict[str, FileContext] = {}
        for path in dict.fromkeys(hit.path for hit in hits):
            record = self.corpus.record(path)
            if record is not None:
                contexts[path] = file_context(record, with_gist=include_context)
        candidates = [hit for hit in hits if hit.path in contexts]

        def build(
            chosen: Sequence[PassageHit], over: Sequence[PassageHit], entries: int
        ) -> SearchResult:
            groups = group_by_file(chosen, contexts, matches)
            return SearchResult(
                tool=tool,
                query=query,
                folder=scope,
                source=source,
                source_note=note,
                groups=tuple(groups),
                limit=limit,
                max_tokens=budget,
                total_passages=max(total_passages, len(chosen)),
                total_files=max(total_files, len(groups)),
                over_budget=tuple(over[:_OVER_BUDGET_NAMED]),
                next_best=next_best(candidates, chosen, entries),
            )

        def fit(entries: int) -> SearchResult:
            # The first line and footer are paid for first, at their longest (three passages
            # named as left out, the menu with the best passage's line), so the passages
            # get what remains.
            frame = frame_tokens(build(candidates[:1], candidates, entries))
            packing = pack(
                candidates,
                limit=limit,
                budget=max(budget - frame, 0),
                passage_cost=passage_cost,
                group_cost=lambda path: group_cost(contexts[path]),
            )
            chosen = list(packing.chosen)
            result = build(chosen, packing.over_budget, entries)
            while chosen and estimate_tokens(format_search(result)) > budget:
                # Estimates of the frame can be off by a few tokens; the budget is a promise.
                chosen.pop()
                result = build(chosen, packing.over_budget, entries)
            return result

        result = fit(menu_entries)
        if menu_entries and candidates and not result.groups:
            # A budget too small for the menu and a passage keeps the passage.
            result = fit(0)
        return result

    # -- exact search ----------------------------------------------------------------------

    async def _exact_candidates(
        self, needles: Needles, prefix: str, progress: ProgressCallback | None
    ) -> dict[str, tuple[list[int], list[bool]]]:
        """Files holding every needle: per needle, content matches and whether the file's
        name or title holds it."""
        found: dict[str, tuple[list[int], list[bool]]] = {}
        if self.vault.rest is not None:
            # Obsidian searches its own index; only the notes shown are fetched here.
            await self.corpus.sync(read_all=False)
            longest = max(len(text) for text in needles.texts)
            phrases = [p for t, p in zip(needles.texts, needles.patterns, strict=True) if " " in t]
            for hit in await self.vault.search_text(needles.words, context_length=longest):
                if not hit.path.startswith(prefix):
                    continue
                contexts = [
                    hit.contexts.get(i, "")
                    for i, match in enumerate(hit.matches)
                    if match.source == "content"
                ]
                joined = " ".join(contexts)
                # Obsidian matches words anywhere in a note; a phrase needs its words
                # together, which the context around each match shows.
                if not all(p.search(joined) for p in phrases):
                    continue
                name = posixpath.basename(hit.path)
                found[hit.path] = (
                    [sum(1 for c in contexts if p.search(c)) for p in needles.patterns],
                    [bool(p.search(name)) for p in needles.patterns],
                )
            return found
        await self.corpus.sync(read_all=True, progress=progress)
        for scanned, record in enumerate(self.corpus.records()):
            if scanned % _NOTES_PER_CHECKPOINT == 0:
                # A cancelled request (the client gave up) stops here instead of scanning
                # the rest of the vault, and other requests get their turn meanwhile.
                await anyio.lowlevel.checkpoint()
            if not record.path.startswith(prefix):
                continue
            names = posixpath.basename(record.path) + " " + record.parsed.title
            content_counts = needles.counts(record.parsed.content)
            name_hits = [bool(p.search(names)) for p in needles.patterns]
            if all(c or n for c, n in zip(content_counts, name_hits, strict=True)):
                found[record.path] = (content_counts, name_hits)
        return found

    async def smart_search(
        self,
        query: str,
        *,
        limit: int,
        snippet_length: int,
        folder: str = "",
        max_tokens: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> SearchResult:
        needles = parse_needles(query)
        if not needles.texts:
            raise InvalidArgument('query is empty; give words or "quoted phrases" to find.')
        check_query_terms(needles.texts)
        scope, prefix = folder_prefix(folder)
        budget = max_tokens or self.settings.max_tokens
        found = await self._exact_candidates(needles, prefix, progress)
        ranked = sorted(found, key=lambda path: (-file_score(*found[path]), path))
        best = file_score(*found[ranked[0]]) if ranked else 1.0
        hits: list[PassageHit] = []
        matches = {path: sum(found[path][0]) for path in ranked}
        for path in ranked:
            if len(hits) >= limit * 2:
                break  # enough to fill the reply; the rest is only counted
            record = await self.corpus.note(path)
            if record is None:
                continue
            content = record.parsed.content
            spans = needles.spans(content)
            matches[path] = len(spans)
            score = round(file_score(*found[path]) / best, 2)
            hits.extend(
                passage_hit(record, snippet.start, snippet.end, score)
                for snippet in snippets_for_matches(content, spans, snippet_length)
            )
        return self._packed(
            "vault_smart_search",
            query,
            scope,
            "exact",
            "",
            hits,
            limit=limit,
            budget=budget,
            include_context=True,
            total_passages=sum(matches.values()),
            total_files=len(found),
            matches=matches,
        )
