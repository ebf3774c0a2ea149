# pyright: strict
"""How good the best match of `vault_semantic_query` is, on a scale that means the same for
every question: shown scores are relative to the best passage (it always reads 1.00), so a
question nothing in the vault is about would otherwise be answered as a perfect match.

By meaning, where the local passage index has every passage: the cosine similarity of the
question to the passage nearest it in the whole folder. By words otherwise (the index still
building, or meaning switched off): the share of the question's word weight (each word
weighed by its rarity in the vault) that the best keyword passage holds. Below the floor of
its measure the match is weak, and the reply says so in words and in JSON.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from obsidian_mcp.index.vectors import PassageVectors
from obsidian_mcp.retrieval.candidates import Candidates
from obsidian_mcp.retrieval.corpus import Corpus

# Floors of each measure below which the best match is weak: the highest that labels none
# of the answerable dev questions of both development vaults (python -m bench.retrieval.weak_match,
# which also asks fixtures/off_vault_questions.jsonl). By meaning, 0.30: answerable 0 of 137
# dev and 0 of 69 held-out; off-vault fixtures 11/15 dev, 10/15 held-out, ledgerline 9/15,
# 11/15. The lowest answerable question scores 0.32 (a paraphrase naming people by role);
# 0.35 labels 4 answerable dev questions, off-vault then 73-87%. By words the two do not
# separate (a paraphrase shares as few words as an off-vault question): 0.10 labels no
# answerable question and only the off-vault ones that share almost no word (fixtures
# 3/15, 1/15; ledgerline 2/15, 2/15); 0.15 labels an answerable one.
MEANING_FLOOR = 0.30
WORDS_FLOOR = 0.10
# Keyword passages looked at for the share of the question's words.
_WORDS_DEPTH = 5

Measure = Literal["meaning", "words"]


@dataclass(frozen=True, slots=True)
class MatchStrength:
    measure: Measure
    # Cosine similarity (meaning) or share of the question's word weight (words), 0 to 1.
    value: float

    @property
    def weak(self) -> bool:
        floor = MEANING_FLOOR if self.measure == "meaning" else WORDS_FLOOR
        return self.value < floor


def by_meaning(
    corpus: Corpus, candidates: Candidates, vectors: PassageVectors | None
) -> MatchStrength | None:
    """The question's similarity to its nearest passage, when the local index has every
    passage (an incomplete index may not hold the nearest yet)."""
    dense = candidates.dense
    if dense is None or dense.progress or vectors is None:
        return None
    if not dense.ranking:
        return MatchStrength("meaning", 0.0)
    digests = corpus.chunk(dense.ranking[0]).text_hashes
    near = vectors.similarity(dense.query, digests)
    return MatchStrength("meaning", max(near.values(), default=0.0))


def by_words(
    corpus: Corpus, keyword: Sequence[int], weighted: Sequence[tuple[str, float]]
) -> MatchStrength:
    """The largest share of the question's word weight one of the best keyword passages
    holds (`weighted`: the question's own terms, each weighed by its rarity)."""
    total = sum(weight for _, weight in weighted)
    if total <= 0:
        return MatchStrength("words", 0.0)
    best = 0.0
    for terms_of in corpus.chunks_terms(keyword[:_WORDS_DEPTH]):
        held = set(terms_of)
        best = max(best, sum(weight for term, weight in weighted if term in held) / total)
    return MatchStrength("words", best)


def match_strength(
    corpus: Corpus,
    candidates: Candidates,
    vectors: PassageVectors | None,
    weighted: Sequence[tuple[str, float]],
) -> MatchStrength:
    return by_meaning(corpus, candidates, vectors) or by_words(corpus, candidates.keyword, weighted)
