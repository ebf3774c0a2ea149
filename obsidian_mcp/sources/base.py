"""The interface both sources implement: Obsidian's Local REST API, and the vault folder.

Paths given to a source are already normalised by `obsidian_mcp.paths.normalize_vault_path`;
each source still refuses what only it can check (symlinks, for the folder).
"""

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True, slots=True)
class FileStat:
    path: str
    mtime_ms: int
    size: int


@dataclass(frozen=True, slots=True)
class NoteData:
    """A note's text, with what Obsidian knows of it when the source is the REST API."""

    path: str
    content: str
    stat: FileStat
    # Obsidian's metadata cache, when the source has one (REST); None from the folder.
    backlinks: tuple[str, ...] | None = None
    # True when the source has a link index that is not ready yet (REST 6.x at start-up):
    # backlinks are then unknown, not absent.
    link_index_pending: bool = False


@dataclass(frozen=True, slots=True)
class FileBytes:
    """A file's bytes as stored (an attachment: a PDF, an image)."""

    path: str
    data: bytes
    stat: FileStat


@dataclass(frozen=True, slots=True)
class TextMatch:
    start: int
    end: int
    source: Literal["content", "filename"] = "content"


@dataclass(frozen=True, slots=True)
class TextSearchHit:
    """One file's matches for a simple (all words must occur) text search.

    Offsets are into the whole file content, frontmatter included, as the source gives
    them: the plugin counts UTF-16 code units (JavaScript string indices), which differ from
    Python's indices after any character outside the Basic Multilingual Plane (an emoji).
    Nothing here slices text by them; use `contexts`, or search the text you hold.
    """

    path: str
    matches: tuple[TextMatch, ...]
    # Context windows as the source returned them, keyed by match index; the folder source
    # has the content at hand and leaves this empty.
    contexts: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class SearchWords:
    """A simple search's words (split on spaces; case aside), as Obsidian's simple search
    takes them: lower-cased, and as patterns that match them in any case."""

    words: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    # Whether every word is ASCII, so that a look at a note's lower-cased text can rule
    # the note out (`may_hold_every_word`): asked once a search, not once a note.
    ascii: bool


def search_words(query: str) -> SearchWords:
    words = tuple(query.lower().split())
    return SearchWords(
        words,
        tuple(re.compile(re.escape(w), re.IGNORECASE) for w in words),
        all(word.isascii() for word in words),
    )


# The characters a case-insensitive pattern of an ASCII character matches that str.lower()
# does not turn into it (dotted and dotless i, long s), found over every code point
# (tests/test_folder_source.py checks it again).
CASED_APART_FROM_ASCII = ("\u0130", "\u0131", "\u017f")


def lowered_to_look_at(content: str) -> str | None:
    """`content` lower-cased, for `may_hold_every_word` to look at; None when a look
    cannot rule out an ASCII word: the text holds a character a case-insensitive pattern
    matches to an ASCII letter that lower() does not turn into it."""
    if not content.isascii() and any(odd in content for odd in CASED_APART_FROM_ASCII):
        return None
    return content.lower()


def may_hold_every_word(lowered: str | None, search: SearchWords) -> bool:
    """False only when the text cannot hold every word, case aside: a look at its
    lower-cased text (`lowered_to_look_at`) before the patterns. Over the 10,000 notes of
    `python -m bench.shared.generate_vault` (22 MB), beside a first build, the patterns took
    0.22-0.28 s a search, lower-casing and looking 0.01-0.03 s."""
    if lowered is None or not search.ascii:
        return True
    # A loop, not all() over a generator: this runs for every note a scan reads, and the
    # generator was an eighth of a scan of 50,000 notes.
    for word in search.words:  # noqa: SIM110
        if word not in lowered:
            return False
    return True


def holds_every_word(content: str, lowered: str | None, search: SearchWords) -> bool:
    """Whether the text holds every word, case aside, as `text_hit` finds it; `lowered`
    is the text's `lowered_to_look_at`, taken once for several searches."""
    return may_hold_every_word(lowered, search) and all(
        pattern.search(content) for pattern in search.patterns
    )


def text_hit(path: str, content: str, search: SearchWords) -> TextSearchHit | None:
    """The note's matches when its text holds every word, else None: the folder's scan and
    the index's search of what it holds give the same hits."""
    lowered = lowered_to_look_at(content) if search.ascii else None
    if not may_hold_every_word(lowered, search):
        return None
    found = [
        [TextMatch(m.start(), m.end()) for m in pattern.finditer(content)]
        for pattern in search.patterns
    ]
    if not all(found):
        return None
    return TextSearchHit(
        path, tuple(sorted((m for group in found for m in group), key=lambda m: m.start)), {}
    )


class Source(Protocol):
    """One place the vault can be read from and written to."""

    @property
    def kind(self) -> Literal["rest", "folder"]: ...

    def describe(self) -> str:
        """One line for the status resource and `doctor`: what, where, which version."""
        ...

    async def list_tree(self) -> list[str]:
        """Every non-hidden file path, plus `folder/` for each folder the source can see."""
        ...

    async def note_stats(self) -> dict[str, FileStat]:
        """Every markdown note's stat, in as few requests as the source allows."""
        ...

    async def stat(self, path: str) -> FileStat | None:
        """The file's stat, None when no such file; raises IsAFolder for a folder."""
        ...

    async def read_note(self, path: str) -> NoteData:
        """The note as text; raises NoteNotFound, IsAFolder or NotText."""
        ...

    async def read_bytes(self, path: str) -> FileBytes:
        """Any file's bytes as stored; raises NoteNotFound or IsAFolder."""
        ...

    async def write(self, path: str, content: str) -> None:
        """Create or replace the whole file, creating parent folders."""
        ...

    async def append(self, path: str, content: str) -> None:
        """Append `content`, creating the file; a newline is added first when the file
        does not end with one (the plugin's rule, followed by both sources)."""
        ...

    async def read_exact(self, path: str) -> NoteData:
        """The note for an edit: refused (NotUtf8) where its bytes would be lost."""
        ...

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        """Write the whole note only if it holds `expected` (None: only if it does not
        exist), else raise NoteChanged with what it holds."""
        ...

    async def remove_if(self, path: str, expected: str) -> None:
        """Remove the note only if it holds `expected`, else raise NoteChanged."""
        ...

    async def search_text(
        self, query: str, context_length: int, leaving_out: Collection[str] = ()
    ) -> list[TextSearchHit]:
        """Notes where every word of `query` occurs (case-insensitive), every occurrence.
        `leaving_out`: notes the caller does not want (it has read them); a source may leave
        them out (the folder reads only the others) or search them all (Obsidian's own
        search). Every other note is searched, listed by the caller or not."""
        ...
