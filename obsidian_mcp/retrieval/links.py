# pyright: strict
"""The corpus's link resolver (`text.markdown.LinkResolver`, made again only when the
notes listed change) and its notes' backlinks, resolved when asked for."""

import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from obsidian_mcp.index.store import LinkSpan
from obsidian_mcp.retrieval.corpus import Corpus
from obsidian_mcp.text.markdown import LinkResolver, file_name, linked_file_names


def is_attachment_target(target: str) -> bool:
    """A link to a file other than a note (`map.png`, `tides.pdf`)."""
    name = posixpath.basename(target.partition("#")[0])
    extension = posixpath.splitext(name)[1].lower()
    return bool(extension) and extension != ".md" and " " not in extension


@dataclass(frozen=True, slots=True)
class LinkSite:
    """Where one note links to another: the linking note and the link's offsets."""

    source: str
    start: int
    end: int


def _names_linked(path: str, links: Sequence[LinkSpan]) -> dict[str, None]:
    """The file names the links of the note at `path` may resolve to, each once."""
    return dict.fromkeys(name for target, _, _ in links for name in linked_file_names(target, path))


def linking_notes(notes: Iterable[tuple[str, Sequence[LinkSpan]]]) -> dict[str, list[str]]:
    """File name (`file_name`) -> the notes, in the order given, with a link that may
    resolve to a file of that name (`linked_file_names`). No link is resolved here: that
    took 2.0-2.4 s for the 140,122 links of the generated 50,000-note vault, 0.3 s at
    10,000, before a note's backlinks could be shown, and again after every edit."""
    named: dict[str, list[str]] = {}
    for path, links in notes:
        for name in _names_linked(path, links):
            sources = named.get(name)
            if sources is None:
                named[name] = [path]
            else:
                sources.append(path)
    return named


def add_linking_notes(
    named: dict[str, list[str]], notes: Iterable[tuple[str, Sequence[LinkSpan]]]
) -> None:
    """Put these notes last under the names their links may resolve to (`linking_notes`),
    as the corpus orders a note read again. A name a note no longer links by keeps it: its
    links are resolved when its backlinks are asked for, and find nothing there. A first
    gather goes through `linking_notes`: the look for a note already listed would make it
    quadratic under a name thousands of notes link by."""
    for path, links in notes:
        for name in _names_linked(path, links):
            sources = named.setdefault(name, [])
            if path in sources:
                sources.remove(path)
            sources.append(path)


def backlinks_to(
    path: str,
    resolver: LinkResolver,
    named: dict[str, list[str]],
    links_of: Callable[[str], Sequence[LinkSpan] | None],
) -> list[LinkSite]:
    """The places that link to `path` (no attachment link, no link of a note to itself),
    among the notes `named` holds under its file name, whose links `links_of` gives."""
    sites: list[LinkSite] = []
    for source in named.get(file_name(path), ()):
        links = links_of(source) if source != path else None
        for target, start, end in links or ():
            if not is_attachment_target(target) and resolver.resolve(target, source) == path:
                sites.append(LinkSite(source, start, end))
    return sites


class LinkGraph:
    """The resolver of a corpus, made again only when its paths change, and which notes may
    link to which, gathered again only when the corpus changed."""

    def __init__(self) -> None:
        self._generation = -1
        self._resolver_generation = -1
        self._resolver = LinkResolver(())
        self._named: dict[str, list[str]] = {}

    def resolver_for(self, corpus: Corpus) -> LinkResolver:
        """The resolver of the corpus as it is: built from its paths alone, so a query that
        resolves one link does not pay for the backlinks of every note, and made again only
        when the paths change (55 ms at 10,000 notes, after every edit before)."""
        if corpus.paths_generation != self._resolver_generation:
            self._resolver = LinkResolver(corpus.paths)
            self._resolver_generation = corpus.paths_generation
        return self._resolver

    def backlinks(self, corpus: Corpus, path: str) -> list[LinkSite]:
        """Where the corpus's notes link to `path`, in the corpus's order of notes."""
        if corpus.generation != self._generation:
            # The notes read since the last look, else every note (the first look: no
            # install is that old): gathering them all took 0.56-0.77 s at 50,000 notes,
            # after every edit.
            changed = corpus.installed_since(self._generation)
            if changed is None:
                self._named = linking_notes(
                    (record.path, record.links) for record in corpus.records()
                )
            else:
                add_linking_notes(self._named, ((record.path, record.links) for record in changed))
            # Links the index did not keep (notes stored before it did) were found by a
            # parse here, once: they are kept.
            corpus.keep_parsed()
            self._generation = corpus.generation

        def links_of(source: str) -> Sequence[LinkSpan] | None:
            record = corpus.record(source)
            return None if record is None else record.links

        return backlinks_to(path, self.resolver_for(corpus), self._named, links_of)
