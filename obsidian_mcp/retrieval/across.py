# pyright: strict
"""One answer from several vaults' answers to the same search, each vault's own order
kept: the results come in with their paths qualified (`lore:Characters/Mira.md`), so
every line of the merged answer says its vault. A single vault's answer passes unchanged.

A vault's scores are relative to its own best answer, so they cannot rank one vault's
passages against another's: each vault's answer is weighed by how near its best passages
are to the question in meaning (`answer_relevance`; every vault's index has vectors of the
same model), and the vaults' passages are merged by their weighed scores.

A semantic query over several vaults ranks in each (stages 1 to 3, `Retriever.
offered_passages`), weighs the vaults, and then cuts and packs in each vault only its share
of what one vault's query would cut (`offered_shares`, `answers_across`).
"""

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TypeVar, cast

import anyio.to_thread

from obsidian_mcp.index.embedder import Matrix
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.reading import SearchMap
from obsidian_mcp.retrieval.cutting import PassageHit
from obsidian_mcp.retrieval.packing import FileContext, SearchResult, by_score
from obsidian_mcp.retrieval.quick_context import QuickContext
from obsidian_mcp.retrieval.search import (
    OFFERED_PER_SHOWN,
    OfferedPassages,
    Retriever,
    packed_result,
)

T = TypeVar("T")

# A vault's answer is weighed by (its relevance / the best vault's) ** RELEVANCE_POWER, its
# relevance the nearest in meaning of its first RELEVANCE_PASSAGES passages. Both
# development vaults' questions asked of both vaults without naming one (first response,
# 206 questions; with the question's own vault named: 74%): taking the vaults in turn 59%
# (python -m bench.retrieval.several_vaults). Weighed by the shown passages embedded again, on the
# same answers: by the first passage, power 1: 68%, 2: 70%, 4: 69%; by the first three,
# power 1: 69%, 2: 72%, 4: 73%, 8: 72%. With their stored vectors, as here: 73% (the
# bench again).
RELEVANCE_PASSAGES = 3
RELEVANCE_POWER = 4.0


def _in_turn(lists: Sequence[Sequence[T]], most: int | None = None) -> list[T]:
    """Each list's first, then each list's second, and so on: every vault's best before any
    vault's second best. A vault's scores are relative to its own best answer, so they do
    not rank one vault's passages against another's."""
    merged: list[T] = []
    for position in range(max((len(items) for items in lists), default=0)):
        merged += [items[position] for items in lists if position < len(items)]
    return merged[:most]


def _most(lists: Sequence[Sequence[object]]) -> int:
    """As many as the longest list: what one vault's answer would hold."""
    return max((len(items) for items in lists), default=0)


def _joined(parts: Sequence[str]) -> str:
    """Sources as one label: "local-index" and "smart-search+local-index" give
    "local-index+smart-search"."""
    return "+".join(dict.fromkeys(part for label in parts for part in label.split("+") if part))


def shown_hits(result: SearchResult) -> list[PassageHit]:
    return [hit for group in result.groups for hit in group.passages]


async def answer_relevance(
    query: str, answers: Sequence[tuple[str, Retriever, Sequence[PassageHit]]]
) -> dict[str, float] | None:
    """Each vault's answer (its name, retriever and hits, paths unqualified): the highest
    cosine between the query and the stored vectors of its first RELEVANCE_PASSAGES hits'
    passages. None when a vault has no vectors to tell by (the local index is off, or
    not built that far): then no vault is weighed against another."""
    return await _relevance(
        query,
        [
            (
                name,
                retriever,
                [
                    digest
                    for hit in hits[:RELEVANCE_PASSAGES]
                    for digest in _passage_hashes(retriever, hit)
                ],
            )
            for name, retriever, hits in answers
        ],
    )


async def offered_relevance(
    offered: Sequence[tuple[str, Retriever, OfferedPassages]],
) -> dict[str, float] | None:
    """`answer_relevance` before cutting: by each vault's first RELEVANCE_PASSAGES offered
    passages (the passages its first hits are cut from) that are still held (a note read
    again since they were offered is left out, as `Retriever.answer` leaves it out)."""
    if not offered:
        return None
    return await _relevance(
        offered[0][2].query,
        [
            (
                name,
                retriever,
                [
                    digest
                    for chunk_id, _ in found.offered[:RELEVANCE_PASSAGES]
                    if retriever.corpus.holds(chunk_id)
                    for digest in retriever.corpus.chunk(chunk_id).text_hashes
                ],
            )
            for name, retriever, found in offered
        ],
    )


async def _relevance(
    query: str, passages: Sequence[tuple[str, Retriever, Sequence[str]]]
) -> dict[str, float] | None:
    """Per vault (its name, retriever and the hashes of its first passages' texts): the
    highest cosine between the query and those texts' stored vectors; 0 for a vault with
    no passage. None when a vault has no vectors to tell by."""
    relevance: dict[str, float] = {}
    query_vector: Matrix | None = None
    for name, retriever, hashes in passages:
        # The query just run brought the vectors up to date: no second look at the index.
        vectors = retriever.candidates.vectors or await retriever.passage_vectors()
        if vectors is None or retriever.embedder is None:
            return None
        if not hashes:
            relevance[name] = 0.0
            continue
        if query_vector is None:  # one model for every vault: the query is embedded once
            embedder = retriever.embedder.get()  # loaded by passage_vectors
            query_vector = (
                await anyio.to_thread.run_sync(embedder.embed, [query], TextRole.QUERY)
            )[0]
        near = vectors.similarity(cast(Matrix, query_vector), hashes)
        if not near:
            return None
        relevance[name] = max(near.values())
    return relevance


def offered_shares(
    named: Sequence[tuple[str, OfferedPassages]],
    relevance: Mapping[str, float] | None,
    limit: int,
) -> list[int]:
    """How many of each vault's offered passages to cut and pack (a first part of each, in
    its own order): as many as it has among the OFFERED_PER_SHOWN x limit best of all, by
    score weighed as `merged_search` weighs them. What one vault's query cuts is then cut
    over every vault, not that times the vaults: the cutting was half a search's time, and
    a search over two vaults took 2.6 times the slower alone at p90 (issue 28 asks 2 at
    most; python -m bench.retrieval.several_vaults)."""
    weights = _weights([name for name, _ in named], relevance)
    scored = sorted(
        (
            (score * weight, vault)
            for vault, ((_, found), weight) in enumerate(zip(named, weights, strict=True))
            for score in found.relative_scores()
        ),
        key=lambda item: -item[0],
    )
    shares = [0] * len(named)
    for _, vault in scored[: limit * OFFERED_PER_SHOWN]:
        shares[vault] += 1
    return shares


async def answers_across(
    named: Sequence[tuple[str, Retriever, OfferedPassages]],
    *,
    limit: int,
    max_tokens: int | None,
    include_context: bool,
    concise: bool,
) -> tuple[list[SearchResult], dict[str, float] | None]:
    """Each vault's answer to one semantic query (its name, retriever and offered
    passages), and how relevant each is (`offered_relevance`, None for one vault): with
    several, each cuts only its share (`offered_shares`)."""
    relevance = await offered_relevance(named) if len(named) > 1 else None
    shares: list[int | None] = (
        [*offered_shares([(name, found) for name, _, found in named], relevance, limit)]
        if len(named) > 1
        else [None]
    )
    results = [
        retriever.answer(
            found,
            limit=limit,
            max_tokens=max_tokens,
            include_context=include_context,
            concise=concise,
            most_cut=share,
        )
        for (_, retriever, found), share in zip(named, shares, strict=True)
    ]
    return results, relevance


def _passage_hashes(retriever: Retriever, hit: PassageHit) -> list[str]:
    """The hashes of the texts embedded for the indexed passage a hit was cut from."""
    record = retriever.corpus.record(hit.path)
    if record is None:
        return []
    holding = [c for c in record.chunks if c.start <= hit.start < max(c.end, c.start + 1)]
    return [digest for chunk in holding[:1] for digest in chunk.text_hashes]


def _weights(names: Sequence[str], relevance: Mapping[str, float] | None) -> list[float]:
    if relevance is None:
        return [1.0] * len(names)
    best = max((relevance.get(name, 0.0) for name in names), default=0.0)
    if best <= 0:
        return [1.0] * len(names)
    return [(max(relevance.get(name, 0.0), 0.0) / best) ** RELEVANCE_POWER for name in names]


def _weighed(result: SearchResult, weight: float) -> list[PassageHit]:
    """A vault's shown passages, best first, with their scores times the vault's weight."""
    return by_score([replace(hit, score=hit.score * weight) for hit in shown_hits(result)])


def merged_search(
    named: Sequence[tuple[str, SearchResult]],
    relevance: Mapping[str, float] | None = None,
    *,
    concise: bool = False,
) -> SearchResult:
    """The vaults' answers (by vault name) as one, within the limit and budget each was
    asked for: their passages' scores weighed by each vault's `relevance`
    (`answer_relevance`; the most relevant vault's keep theirs, so its best reads 1.00),
    packed again by weighed score (`search.packed_result`). The best passage's vault says
    how strong the match is."""
    results = [result for _, result in named]
    if len(results) == 1:
        return results[0]
    weights = _weights([name for name, _ in named], relevance)
    weighed = [_weighed(result, weight) for result, weight in zip(results, weights, strict=True)]
    # A stable sort: of equal weighed scores, the vault named first goes first.
    hits = by_score([hit for hits in weighed for hit in hits])
    groups = [group for result in results for group in result.groups]
    contexts: dict[str, FileContext] = {group.context.path: group.context for group in groups}
    matches = {group.context.path: group.matches for group in groups if group.matches is not None}
    leading = max(
        (i for i in range(len(results)) if weighed[i]),
        key=lambda i: weighed[i][0].score,
        default=0,
    )
    frame = replace(
        results[leading],
        # Every vault searched one folder: the continuation searches it in every vault.
        folder=results[leading].folder.partition(":")[2],
        source=_joined([result.source for result in results]),
        source_note="; ".join(f"{name}: {r.source_note}" for name, r in named if r.source_note),
        total_passages=sum(result.total_passages for result in results),
        total_files=sum(result.total_files for result in results),
    )
    merged = packed_result(frame, hits, contexts, matches or None, concise=concise)
    # Passages the packing left out, then those each vault left out, as many as one names.
    left_out = [merged.over_budget, *(result.over_budget for result in results)]
    return replace(merged, over_budget=tuple(_in_turn(left_out, _most(left_out))))


def merged_map(maps: Sequence[SearchMap]) -> SearchMap:
    """Where the words are in every vault: the rows of all, most matches first."""
    if len(maps) == 1:
        return maps[0]
    rows = sorted(
        (row for found in maps for row in found.rows), key=lambda row: (-row.matches, row.path)
    )
    return replace(
        maps[0],
        total_files=sum(found.total_files for found in maps),
        total_matches=sum(found.total_matches for found in maps),
        rows=tuple(rows),
    )


def merged_quick_context(
    named: Sequence[tuple[str, QuickContext]], relevance: Mapping[str, float] | None = None
) -> QuickContext:
    """A topic's overview across vaults: main notes, entities and key passages in turn,
    the most relevant vault's first (`answer_relevance`), themes counted over all (the
    budget cut, `render_topics.within_budget`, comes after)."""
    if len(named) == 1:
        return named[0][1]
    weights = _weights([name for name, _ in named], relevance)
    ranked = sorted(range(len(named)), key=lambda i: -weights[i])
    contexts = [named[i][1] for i in ranked]
    themes: dict[str, int] = {}
    for context in contexts:
        for tag, count in context.themes:
            themes[tag] = themes.get(tag, 0) + count
    order = [weights[i] for i in ranked]
    main_files = [context.main_files for context in contexts]
    entities = [context.entities for context in contexts]
    weighed = [
        [replace(hit, score=hit.score * weight) for hit in context.previews]
        for context, weight in zip(contexts, order, strict=True)
    ]
    # As for the notes: none below the most relevant vault's own weakest preview.
    floor = min((hit.score for hit in weighed[0]), default=0.0)
    previews = by_score([hit for hits in weighed for hit in hits if hit.score >= floor])
    ranked_themes = sorted(themes.items(), key=lambda item: (-item[1], item[0]))
    return replace(
        contexts[0],
        source=_joined([context.source for context in contexts]),
        passages_found=sum(context.passages_found for context in contexts),
        files_found=sum(context.files_found for context in contexts),
        main_files=tuple(_by_weight(main_files, order)),
        entities=tuple(_by_weight(entities, order)),
        themes=tuple(ranked_themes[: _most([context.themes for context in contexts])]),
        previews=tuple(previews[: _most([context.previews for context in contexts])]),
    )


def _by_weight(lists: Sequence[Sequence[T]], weights: Sequence[float]) -> list[T]:
    """The vaults' ranked items as one list, as many as one vault's answer holds: an item
    counts its vault's weight over its rank (1, 1/2, 1/3...), so a vault that hardly
    answers the topic (weight near 0, `answer_relevance`) adds nothing before the
    relevant vault's own items run out; vaults of equal weight take turns (issue 35:
    a topic one vault holds filled half the main notes with the other's)."""
    scored = [
        (-weight / (rank + 1), rank, index, item)
        for index, (items, weight) in enumerate(zip(lists, weights, strict=True))
        for rank, item in enumerate(items)
    ]
    # No item counts less than the most relevant vault's own last one: a vault that barely
    # answers does not fill the places the vault that answers left empty.
    best = max(range(len(lists)), key=lambda i: weights[i])
    floor = weights[best] / max(len(lists[best]), 1)
    scored = [entry for entry in scored if -entry[0] >= floor]
    scored.sort(key=lambda entry: entry[:3])
    return [item for *_, item in scored][: _most(lists)]
