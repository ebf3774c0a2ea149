# pyright: strict
"""The retrieval service of one vault: ranked passages for a question, exact matches for
terms. One `Retriever` per `Vault`, kept across calls, holds the corpus cache."""

import posixpath
import re
from bisect import bisect_right
from collections.abc import Sequence
from weakref import WeakKeyDictionary

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.retrieval.corpus import Chunk, Corpus, NoteRecord, ProgressCallback
from obsidian_mcp.retrieval.exact import Needles, file_score, parse_needles
from obsidian_mcp.retrieval.fusion import reciprocal_rank_fusion
from obsidian_mcp.retrieval.keyword import stem, terms, words
from obsidian_mcp.retrieval.packing import (
    FileContext,
    PassageHit,
    SearchResult,
    group_by_file,
    pack,
)
from obsidian_mcp.retrieval.render import group_cost, passage_cost
from obsidian_mcp.retrieval.semantic import SemanticAnswer, SemanticHit, SemanticSources, Seed
from obsidian_mcp.retrieval.smart_env import SmartEnvCache
from obsidian_mcp.text.markdown import find_section, gist
from obsidian_mcp.text.snippets import snippets_for_matches
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.vault import Vault

# How deep each ranking goes into the fusion: deeper adds little but noise.
_KEYWORD_DEPTH = 50
_SEMANTIC_DEPTH = 20
# Keyword hits whose stored vectors form the feedback query (stored-vector source).
_SEED_COUNT = 5
# Weight of the semantic ranking against the keyword ranking in the fusion, per source:
# real query embeddings are trusted more than feedback built from keyword hits.
_SEMANTIC_WEIGHT = {"smart-search": 1.0, "custom-route": 1.0, "smart-env-prf": 0.5}
# Passages of one file ranked before other files get their turn.
_PASSAGES_PER_FILE = 2
# Tokens kept back for the response's first line and footer.
RESERVED_TOKENS = 90
_GIST_CHARS = 140
_CONTEXT_TAGS = 6

_LINE_BREAK_RE = re.compile(r"\n")

_retrievers: "WeakKeyDictionary[Vault, Retriever]" = WeakKeyDictionary()


def line_of(content: str, offset: int) -> int:
    """1-indexed line number of a character offset."""
    return content.count("\n", 0, offset) + 1


def lines_to_span(content: str, lines: tuple[int, int]) -> tuple[int, int]:
    """Character span of a 1-indexed inclusive line range."""
    starts = [0, *(m.end() for m in _LINE_BREAK_RE.finditer(content))]
    first = min(max(lines[0], 1), len(starts)) - 1
    last = max(lines[1], lines[0])
    return starts[first], starts[last] if last < len(starts) else len(content)


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
        section=section.path,
        start=start,
        end=end,
        text=content[start:end],
        score=score,
        cut_before=bool(content[section.body_start : start].strip()),
        cut_after=bool(content[end : section.end].strip()),
    )


def query_terms(query: str) -> list[str]:
    # A query of stopwords only ("who is she") still deserves an answer.
    return terms(query) or [stem(word) for word in words(query)]


class Retriever:
    """Keyword index, semantic sources and packing over one vault."""

    def __init__(self, vault: Vault, settings: Settings) -> None:
        self.vault = vault
        self.settings = settings
        self.corpus = Corpus(vault)
        env_dir = vault.smart_env_dir
        self.semantic = SemanticSources(
            vault.rest, settings.semantic_route, SmartEnvCache(env_dir) if env_dir else None
        )

    @classmethod
    def for_vault(cls, vault: Vault, settings: Settings) -> "Retriever":
        """The vault's retriever, created on first use and kept while the vault lives."""
        retriever = _retrievers.get(vault)
        if retriever is None:
            retriever = _retrievers[vault] = cls(vault, settings)
        return retriever

    # -- ranked search ---------------------------------------------------------------------

    def _best_chunk(
        self, record: NoteRecord, hit: SemanticHit, keyword: dict[int, float], taken: set[int]
    ) -> Chunk | None:
        """The passage of a semantic hit's note or block that best matches the query's
        words, among those no better-ranked hit has claimed; its first free passage when
        none matches. Semantic sources return whole notes or blocks (a note, then its
        sections, often all rank high), so this is where their hits become passages."""
        content = record.parsed.content
        start, end = 0, len(content)
        if hit.lines is not None:
            start, end = lines_to_span(content, hit.lines)
        elif hit.headings:
            section = find_section(record.parsed, " > ".join(hit.headings))
            if section is not None:
                start, end = section.start, section.subtree_end
        inside = [
            c for c in record.chunks if c.start < end and c.end > start and c.id not in taken
        ]
        if not inside:
            return None
        return max(inside, key=lambda c: (keyword.get(c.id, 0.0), -c.start))

    def _semantic_ranking(
        self, answer: SemanticAnswer, keyword: dict[int, float], prefix: str
    ) -> list[int]:
        ranking: list[int] = []
        taken: set[int] = set()
        for hit in answer.hits:
            record = self.corpus.record(hit.path)
            if record is None or not hit.path.startswith(prefix):
                continue
            chunk = self._best_chunk(record, hit, keyword, taken)
            if chunk is not None:
                ranking.append(chunk.id)
                taken.add(chunk.id)
        return ranking

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

    def _diversified(self, ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Best first, but a file's passages beyond its first few wait until every other
        file has had its turn: one long note must not crowd out the note that answers."""
        first: list[tuple[int, float]] = []
        later: list[tuple[int, float]] = []
        per_file: dict[str, int] = {}
        for item in ranked:
            path = self.corpus.chunk(item[0]).path
            per_file[path] = per_file.get(path, 0) + 1
            (first if per_file[path] <= _PASSAGES_PER_FILE else later).append(item)
        return first + later

    async def ranked_passages(
        self,
        query: str,
        *,
        folder: str,
        progress: ProgressCallback | None = None,
    ) -> tuple[SemanticAnswer, list[tuple[int, float]], int]:
        """Fused (chunk id, score) best first, the semantic answer used, and how many
        passages matched at all."""
        _, prefix = folder_prefix(folder)
        await self.corpus.sync(read_all=True, progress=progress)
        keyword = self.corpus.scores(query_terms(query))
        in_scope = {
            chunk_id: score
            for chunk_id, score in keyword.items()
            if self.corpus.chunk(chunk_id).path.startswith(prefix)
        }
        keyword_ranking = sorted(in_scope, key=lambda c: -in_scope[c])
        answer = await self.semantic.search(
            query,
            folder=prefix.rstrip("/"),
            limit=_SEMANTIC_DEPTH,
            seeds=self._seeds(keyword_ranking, in_scope),
        )
        semantic_ranking = self._semantic_ranking(answer, keyword, prefix)
        fused = reciprocal_rank_fusion(
            [
                (keyword_ranking[:_KEYWORD_DEPTH], 1.0),
                (semantic_ranking, _SEMANTIC_WEIGHT.get(answer.source, 0.0)),
            ]
        )
        ranked = self._diversified(sorted(fused.items(), key=lambda item: -item[1]))
        total = len(in_scope.keys() | set(semantic_ranking))
        return answer, ranked, total

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
        answer, ranked, total = await self.ranked_passages(query, folder=scope, progress=progress)
        top = ranked[0][1] if ranked else 1.0
        hits: list[PassageHit] = []
        for chunk_id, score in ranked[: limit * 4]:
            chunk = self.corpus.chunk(chunk_id)
            record = self.corpus.record(chunk.path)
            if record is not None:
                hits.append(passage_hit(record, chunk.start, chunk.end, round(score / top, 2)))
        return self._packed(
            "vault_semantic_query",
            query,
            scope,
            answer.source,
            answer.note,
            hits,
            limit=limit,
            budget=budget,
            include_context=include_context,
            total_passages=total,
            total_files=len({self.corpus.chunk(c).path for c, _ in ranked}),
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
    ) -> SearchResult:
        contexts: dict[str, FileContext] = {}
        for path in dict.fromkeys(hit.path for hit in hits):
            record = self.corpus.record(path)
            if record is not None:
                contexts[path] = file_context(record, with_gist=include_context)
        packing = pack(
            [hit for hit in hits if hit.path in contexts],
            limit=limit,
            budget=max(budget - RESERVED_TOKENS, 0),
            passage_cost=passage_cost,
            group_cost=lambda path: group_cost(contexts[path]),
        )
        groups = group_by_file(packing.chosen, contexts, matches)
        return SearchResult(
            tool=tool,
            query=query,
            folder=scope,
            source=source,
            source_note=note,
            groups=tuple(groups),
            limit=limit,
            max_tokens=budget,
            total_passages=max(total_passages, len(packing.chosen)),
            total_files=max(total_files, len(groups)),
            over_budget=packing.over_budget[:3],
        )

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
        for record in self.corpus.records():
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
            for snippet in snippets_for_matches(content, spans, snippet_length):
                hits.append(passage_hit(record, snippet.start, snippet.end, score))
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
