# pyright: strict
"""Terms, and BM25 over passages whose terms are indexed in SQLite (FTS5).

The index is inverted (term -> passage -> count), so a query costs the postings of its own
terms, never a scan of the vault; a new process builds nothing at start-up.
"""

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np
import numpy.typing as npt

from obsidian_mcp.index.store import Ids, Postings

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


class TermIndex(Protocol):
    """Where the passages' index terms are kept (`IndexStore`, in SQLite FTS5)."""

    def keyword_totals(self) -> tuple[int, int]: ...

    def term_postings(self, term: str) -> Postings: ...

    def document_frequency(self, term: str) -> int: ...

    def terms_between(self, low: str, high: str) -> list[str]: ...


class Bm25Index:
    """Okapi BM25 over passages by id, their terms looked up in a `TermIndex` per query
    term; the caller holds each passage's length (its terms)."""

    def __init__(self, source: TermIndex, k1: float = 1.2, b: float = 0.75) -> None:
        self._source = source
        self._k1 = k1
        self._b = b

    def variants(self, term: str) -> list[str]:
        """Indexed terms that share all but the last few letters of `term` (at least
        _PREFIX): 'apprenticeship' finds 'apprentice', 'dishonest' finds 'dishonesty'.
        The stemmer is deliberately light; this catches what it leaves apart."""
        if len(term) < _PREFIX + 1:
            return []
        stem_part = term[: max(_PREFIX, len(term) - _VARIANT_SLACK)]
        # Every string that starts with stem_part sorts from it up to this one.
        after = stem_part[:-1] + chr(ord(stem_part[-1]) + 1)
        return [
            other
            for other in self._source.terms_between(stem_part, after)
            if other != term and abs(len(other) - len(term)) <= _VARIANT_SLACK
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
        return self._source.document_frequency(term)

    def idf(self, term: str) -> float:
        count, _ = self._source.keyword_totals()
        frequency = self.document_frequency(term)
        return math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))

    def matches(
        self, weighted_terms: Sequence[tuple[str, float]], lengths_of: Callable[[Ids], Ids]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """BM25 score of every passage whose text holds at least one of the weighted terms
        and whose length `lengths_of` knows (-1 for the others: not the caller's, stored by
        another process since), in the order they first appear (term by term, then by id),
        and for every passage whose headings hold some, the sum of their weight x idf.

        Each term's postings are scored as arrays, in the order and with the operations of
        one passage at a time, so the scores are the same to the last bit. At 50,000 notes
        "ledger" (167,341 passages) took 224-336 ms a passage at a time, reading included,
        and 94-118 ms so (`IndexStore.term_postings`)."""
        count, total = self._source.keyword_totals()
        if not count:
            return {}, {}
        average = total / count or 1.0
        k1, b = self._k1, self._b
        scored: list[Ids] = []
        parts: list[npt.NDArray[np.float64]] = []
        headings: dict[int, float] = {}
        for term, term_weight in weighted_terms:
            postings = self._source.term_postings(term)
            in_text = ~postings.in_headings
            frequency = int(np.count_nonzero(in_text))
            weight = term_weight * math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))
            for passage in postings.passages[postings.in_headings].tolist():
                headings[passage] = headings.get(passage, 0.0) + weight
            passages, occurrences = postings.passages[in_text], postings.occurrences[in_text]
            lengths = lengths_of(passages)
            held = lengths >= 0
            passages, occurrences, lengths = passages[held], occurrences[held], lengths[held]
            norm = k1 * (1 - b + b * lengths / average)
            scored.append(passages)
            parts.append(weight * occurrences * (k1 + 1) / (occurrences + norm))
        if not scored:
            return {}, headings
        # Summed term by term, as one passage's running total would be; listed in the order
        # each passage first scored (ties keep that order when ranked).
        passages, first, where = np.unique(
            np.concatenate(scored), return_index=True, return_inverse=True
        )
        sums = np.zeros(len(passages), dtype=np.float64)
        np.add.at(sums, where, np.concatenate(parts))
        order = np.argsort(first, kind="stable")
        return dict(zip(passages[order].tolist(), sums[order].tolist(), strict=True)), headings

    def scores(
        self, weighted_terms: Sequence[tuple[str, float]], lengths_of: Callable[[Ids], Ids]
    ) -> dict[int, float]:
        """BM25 score of every passage holding at least one of the weighted terms."""
        return self.matches(weighted_terms, lengths_of)[0]
