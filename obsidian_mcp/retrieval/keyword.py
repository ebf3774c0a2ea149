# pyright: strict
"""Terms and a BM25 index over passages, updated one note at a time.

The index is inverted (term -> passage -> count), so a query costs the postings of its own
terms, never a scan of the vault.
"""

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

# Variants share at least this many leading letters and differ by at most the slack.
_PREFIX = 5
_VARIANT_SLACK = 4
VARIANT_WEIGHT = 0.5
_WORD_RE = re.compile(r"\w+")
_COMBINING_RE = re.compile(r"[\u0300-\u036f]")
# Letters that do not decompose into a base letter plus accents.
_LETTERS = str.maketrans(
    {"æ": "ae", "œ": "oe", "ø": "o", "þ": "th", "ð": "d", "đ": "d", "ł": "l", "\u0131": "i"}
)
# Words too common to say anything about a passage; questions are full of them.
STOPWORDS = frozenset(
    (
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
        "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
        "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
        "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
        "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
        "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
        "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
        "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
        "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
        "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
        "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
        "yourselves", "s", "t", "d", "ll", "m", "re", "ve", "y", "don", "doesn", "didn", "isn",
        "wasn", "aren", "weren", "won", "wouldn", "shouldn", "couldn", "hasn", "haven", "hadn",
        "also", "ever", "every", "get", "got", "much", "many", "one", "tell", "say", "said",
        "know",
    )
)  # fmt: skip


def fold(text: str) -> str:
    """Lower case without accents, so 'Élodie' and 'elodie', 'Æsa' and 'aesa' meet."""
    folded = text.casefold()
    if folded.isascii():
        return folded
    folded = folded.translate(_LETTERS)
    return _COMBINING_RE.sub("", unicodedata.normalize("NFKD", folded))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: plurals and the commonest verb endings, nothing clever,
    so that 'fears', 'feared' and 'fearing' share a term with 'fear'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 6 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 5 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """The folded words of `text`, in order, stopwords included (for phrase checks)."""
    return _WORD_RE.findall(fold(text))


def terms(text: str) -> list[str]:
    """Index terms: folded, stemmed words without stopwords."""
    return [stem(word) for word in words(text) if word not in STOPWORDS]


class Bm25Index:
    """Okapi BM25 over integer document ids, with incremental add and remove."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self._k1 = k1
        self._b = b
        self._postings: dict[str, dict[int, int]] = {}
        # Terms by their first letters, to find a term's variants without a vocabulary scan.
        self._by_prefix: dict[str, set[str]] = {}
        self._lengths: dict[int, int] = {}
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc: int) -> bool:
        return doc in self._lengths

    def add(self, doc: int, doc_terms: Iterable[str]) -> None:
        if doc in self._lengths:
            raise ValueError(f"document {doc} is already indexed")
        counts = Counter(doc_terms)
        for term, count in counts.items():
            posting = self._postings.get(term)
            if posting is None:
                posting = self._postings[term] = {}
                self._by_prefix.setdefault(term[:_PREFIX], set()).add(term)
            posting[doc] = count
        length = sum(counts.values())
        self._lengths[doc] = length
        self._total_length += length

    def remove(self, doc: int, doc_terms: Iterable[str]) -> None:
        """Forget `doc`; `doc_terms` must be the terms it was added with."""
        for term in set(doc_terms):
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(doc, None)
                if not posting:
                    del self._postings[term]
                    self._by_prefix[term[:_PREFIX]].discard(term)
        self._total_length -= self._lengths.pop(doc, 0)

    def variants(self, term: str) -> list[str]:
        """Indexed terms that share all but the last few letters of `term` (at least
        _PREFIX): 'apprenticeship' finds 'apprentice', 'dishonest' finds 'dishonesty'.
        The stemmer is deliberately light; this catches what it leaves apart."""
        if len(term) < _PREFIX + 1:
            return []
        stem_part = term[: max(_PREFIX, len(term) - _VARIANT_SLACK)]
        return [
            other
            for other in self._by_prefix.get(term[:_PREFIX], ())
            if other != term
            and other.startswith(stem_part)
            and abs(len(other) - len(term)) <= _VARIANT_SLACK
        ]

    def expand(self, query_terms: Sequence[str]) -> list[tuple[str, float]]:
        """Query terms with weight 1, plus their variants at VARIANT_WEIGHT."""
        weighted: dict[str, float] = {}
        for term in query_terms:
            weighted[term] = weighted.get(term, 0.0) + 1.0
        for term in list(weighted):
            for other in self.variants(term):
                weighted.setdefault(other, VARIANT_WEIGHT)
        return list(weighted.items())

    def document_frequency(self, term: str) -> int:
        return len(self._postings.get(term, ()))

    def idf(self, term: str) -> float:
        count = len(self._lengths)
        frequency = self.document_frequency(term)
        return math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))

    def scores(self, weighted_terms: Sequence[tuple[str, float]]) -> dict[int, float]:
        """BM25 score of every document holding at least one of the weighted terms."""
        if not self._lengths:
            return {}
        average = self._total_length / len(self._lengths) or 1.0
        k1, b = self._k1, self._b
        lengths = self._lengths
        totals: dict[int, float] = {}
        for term, term_weight in weighted_terms:
            posting = self._postings.get(term)
            if not posting:
                continue
            weight = self.idf(term) * term_weight
            for doc, count in posting.items():
                norm = k1 * (1 - b + b * lengths[doc] / average)
                totals[doc] = totals.get(doc, 0.0) + weight * count * (k1 + 1) / (count + norm)
        return totals
