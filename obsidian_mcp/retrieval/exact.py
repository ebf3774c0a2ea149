# pyright: strict
"""Exact terms and quoted phrases, matched case-insensitively as Obsidian's simple search
does (every term must occur), with a file ranking where names and titles count double."""

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.limits import MAX_QUERY_WORDS

_NEEDLE_RE = re.compile(r'"([^"]+)"|(\S+)')


@dataclass(frozen=True, slots=True)
class Needles:
    """The terms and phrases of a query, each with its compiled pattern."""

    texts: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]

    @property
    def words(self) -> str:
        """The query as plain words, for a search backend that knows no phrases."""
        return " ".join(self.texts)

    def counts(self, text: str) -> list[int]:
        return [len(pattern.findall(text)) for pattern in self.patterns]

    def spans(self, text: str) -> list[tuple[int, int]]:
        return sorted(m.span() for pattern in self.patterns for m in pattern.finditer(text))


def parse_needles(query: str) -> Needles:
    """`"exact phrase" word` -> the phrase and the word; unbalanced quotes are dropped."""
    texts: list[str] = []
    for match in _NEEDLE_RE.finditer(query):
        text = " ".join((match.group(1) or match.group(2)).replace('"', " ").split())
        if text and text.casefold() not in (t.casefold() for t in texts):
            texts.append(text)
    patterns = tuple(
        re.compile(r"\s+".join(re.escape(word) for word in text.split()), re.IGNORECASE)
        for text in texts
    )
    return Needles(tuple(texts), patterns)


def file_score(content_counts: Sequence[int], name_hits: Sequence[bool]) -> float:
    """Diminishing returns per term, so one term repeated fifty times does not outrank a
    file with every term; a term in the file's name or title counts double."""
    return sum(
        math.log2(1 + count) + (2.0 if named else 0.0)
        for count, named in zip(content_counts, name_hits, strict=True)
    )


def check_query_terms(terms: Sequence[str]) -> None:
    """Refuse a search with more distinct terms than one search may cost."""
    if len(terms) > MAX_QUERY_WORDS:
        raise InvalidArgument(
            f"query has {len(terms):,} distinct words or phrases; a search takes at most "
            f"{MAX_QUERY_WORDS}. Keep the few most telling ones."
        )
