# pyright: strict
"""Vocabulary expansion: a question that names someone by role or alias ("the cartographer",
"little wick", "the companion") also searches for the name the notes use ("Élodie Brûlé",
"Kettle", "Mira").

The vault says who is who itself: a note's frontmatter `aliases` are other names for what
its title names, and the notes sharing a tag are often named after one thing ("Mira's
Lantern", "Mira's voice" and "Mira Vessant" all carry `character/companion`). Two plain
steps: `build_vocabulary` turns the notes' names and tags into phrases and the terms they
stand for; `expand` finds those phrases in a query's terms.
"""

import posixpath
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from obsidian_mcp.retrieval.keyword import terms

# What a term the query did not say, but named by role or alias, weighs in the keyword
# ranking next to the query's own terms (1.0): half, so that a wrong guess never outweighs
# a word of the question. Only 0.5 was measured (`python -m bench.ablation`, dev split).
EXPANSION_WEIGHT = 0.5
# A term names what a tag stands for when at least this share of the tagged notes (and at
# least two of them) carry it in a name: Mira's five `character/companion` notes all do.
_TAG_NAME_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class NoteNames:
    """What a note is called: its title, file name and frontmatter aliases, and its tags."""

    path: str
    title: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    # A phrase, as index terms, and the terms of the names it stands for.
    stands_for: dict[tuple[str, ...], frozenset[str]]

    @property
    def longest(self) -> int:
        return max((len(phrase) for phrase in self.stands_for), default=0)


def _phrase(text: str) -> tuple[str, ...]:
    return tuple(terms(text))


def _names(note: NoteNames) -> tuple[set[str], list[tuple[str, ...]]]:
    """The terms of the note's own name (title and file name), and its aliases as phrases."""
    own = set(_phrase(note.title)) | set(_phrase(posixpath.basename(note.path).removesuffix(".md")))
    return own, [phrase for alias in note.aliases if (phrase := _phrase(alias))]


def build_vocabulary(notes: Iterable[NoteNames]) -> Vocabulary:
    """Aliases stand for their note's own name; a tag's last segment stands for the name
    terms most of its notes share. An alias made of the name's own words ("Mira" for "Mira
    Vessant") adds nothing and is left out."""
    stands_for: dict[tuple[str, ...], set[str]] = {}
    tagged: dict[tuple[str, ...], list[set[str]]] = {}
    for note in notes:
        own, aliases = _names(note)
        for alias in aliases:
            if not set(alias) <= own:
                stands_for.setdefault(alias, set()).update(own - set(alias))
        every_name = own.union(*aliases)
        for tag in note.tags:
            phrase = _phrase(tag.rsplit("/", 1)[-1])
            if phrase:
                tagged.setdefault(phrase, []).append(every_name)
    for phrase, named in tagged.items():
        counts = Counter(term for name_terms in named for term in name_terms)
        shared = {
            term
            for term, count in counts.items()
            if count >= 2
            and count >= _TAG_NAME_SHARE * len(named)
            and term not in phrase
            # Dated notes (daily notes, sessions) share their year, which names nothing.
            and not term.isdigit()
        }
        if shared:
            stands_for.setdefault(phrase, set()).update(shared)
    return Vocabulary({phrase: frozenset(named) for phrase, named in stands_for.items() if named})


def expand(query_terms: Sequence[str], vocabulary: Vocabulary) -> list[tuple[str, float]]:
    """Terms of the names that the query's phrases stand for, at EXPANSION_WEIGHT, leaving
    out terms the query has already."""
    said = set(query_terms)
    added: dict[str, float] = {}
    for start in range(len(query_terms)):
        for end in range(start + 1, min(start + vocabulary.longest, len(query_terms)) + 1):
            for term in vocabulary.stands_for.get(tuple(query_terms[start:end]), ()):
                if term not in said:
                    added[term] = EXPANSION_WEIGHT
    return sorted(added.items())
