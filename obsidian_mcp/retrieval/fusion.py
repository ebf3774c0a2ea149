# pyright: strict
"""Stage 2 of `vault_semantic_query`, fusion: the sources' rankings as one, by reciprocal
rank fusion, with each ranking's best few, and a passage the keywords and the local index
both rank high (`agreed`), seated first (`seated`)."""

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from obsidian_mcp.retrieval.candidates import Candidates, DenseRanking
from obsidian_mcp.retrieval.semantic import SemanticAnswer
from obsidian_mcp.retrieval.strength import MatchStrength

K = TypeVar("K", bound=Hashable)

# The constant from Cormack et al. (2009); it keeps one list's top hit from drowning the
# agreement of several lists further down.
RRF_K = 60
# Weight of each semantic source's ranking against the keywords' (1.0): real query
# embeddings are trusted as much, feedback built from keyword hits far less.
SEMANTIC_WEIGHT = {
    "smart-search": 1.0,
    "custom-route": 1.0,
    "smart-env": 1.0,
    "smart-env-prf": 0.1,
}
# How deep the keyword ranking goes into the fusion: deeper adds little but noise.
KEYWORD_DEPTH = 50
# The local index's ranking weighs as much as the keywords'.
DENSE_WEIGHT = 1.0
# How many of each ranking's best passages are always shown first. A query embedding's
# top three hold the answer far more often than its next ones (measured on the bundled
# vault), so meaning gets more seats. First response on the dev questions of both
# development vaults together (python -m bench.retrieval.tune; issue 20): 2 dense seats 73.0%, 3
# seats 75.2%, 4 seats 76.6% (ledgerline +2 questions, fixtures unchanged), 5 seats 75.9%
# (fixtures -1); with 4, one keyword seat 73.0% (fixtures -4, ledgerline -1), three 72.3%
# (-3 on each).
KEYWORD_SEATS = 2
SEMANTIC_SEATS = 3
DENSE_SEATS = 4
# Passages in the first AGREEMENT_DEPTH of both the keywords' and the local index's
# rankings are seated (at most AGREEMENT_SEATS) right after each ranking's best: the seats
# above let two rankings' own picks crowd out the passage both rank highly, the agreement
# rank fusion exists for. python -m bench.retrieval.quality, first response: dev 76% -> 77%,
# common-term 95% -> 100%, alias 47% -> 53%, no slice lower, held-out unchanged (76%).
# One seat changed nothing; a depth of 10 took paraphrase from 64% to 54%.
AGREEMENT_DEPTH = 5
AGREEMENT_SEATS = 2


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[Sequence[K], float]], k: int = RRF_K
) -> dict[K, float]:
    """Fused score per item: the sum over (ranking, weight) of weight / (k + rank), rank
    counted from 1. An item repeated within a ranking counts at its best rank."""
    fused: dict[K, float] = {}
    for ranking, weight in rankings:
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused


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
class RankedPassages:
    """Fused (chunk id, score) best first; the sources that took part and a note on them
    (as the response's first line names them); how many passages matched at all; the
    spans of passages that stand for a whole short block."""

    source: str
    note: str
    ranked: list[tuple[int, float]]
    total: int
    whole_blocks: dict[int, tuple[int, int]]
    # How good the best match is on an absolute scale (`strength`); set by the retriever.
    strength: MatchStrength | None = None

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


def agreed(candidates: Candidates, fused: dict[int, float]) -> list[int]:
    """Passages in the first AGREEMENT_DEPTH of both the keyword and the dense ranking, by
    fused score."""
    near = set(candidates.dense_ranking[:AGREEMENT_DEPTH])
    both = [c for c in candidates.keyword[:AGREEMENT_DEPTH] if c in near]
    return sorted(both, key=lambda c: -fused[c])


def fuse(candidates: Candidates, *, seats: bool) -> RankedPassages:
    """The candidates in one order, best first; with `seats`, each ranking's best few come
    first (`seated`), else the fused order alone."""
    answer = candidates.answer
    semantic_weight = SEMANTIC_WEIGHT.get(answer.source, 0.0)
    fused = reciprocal_rank_fusion(
        [
            (candidates.keyword[:KEYWORD_DEPTH], 1.0),
            (candidates.semantic, semantic_weight),
            (candidates.dense_ranking, DENSE_WEIGHT),
        ]
    )
    seated_rankings = [candidates.keyword[:KEYWORD_SEATS]]
    if semantic_weight >= 1.0:
        seated_rankings.append(candidates.semantic[:SEMANTIC_SEATS])
    seated_rankings.append(agreed(candidates, fused)[:AGREEMENT_SEATS])
    seated_rankings.append(candidates.dense_ranking[:DENSE_SEATS])
    ranked = seated(fused, seated_rankings if seats else [])
    source, note = source_label(answer, candidates.dense)
    return RankedPassages(source, note, ranked, candidates.total, candidates.whole_blocks)
