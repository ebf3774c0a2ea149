# pyright: strict
"""Link resolution over the whole corpus at once, and the backlink map built from it.

`text.markdown.resolve_link` rebuilds its lookups on every call, which is right for one
link and far too slow for every link of a 10,000-note vault; this resolver builds them
once per corpus generation and follows the same rules.
"""

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from obsidian_mcp.retrieval.corpus import Corpus


def is_attachment_target(target: str) -> bool:
    """A link to a file other than a note (`map.png`, `tides.pdf`)."""
    name = posixpath.basename(target.partition("#")[0])
    extension = posixpath.splitext(name)[1].lower()
    return bool(extension) and extension != ".md" and " " not in extension


class LinkResolver:
    def __init__(self, paths: Iterable[str]) -> None:
        self._exact = set(paths)
        self._lower: dict[str, str] = {}
        self._by_name: dict[str, list[str]] = {}
        for path in sorted(self._exact):
            self._lower.setdefault(path.lower(), path)
            name = posixpath.basename(path).lower().removesuffix(".md")
            self._by_name.setdefault(name, []).append(path)

    def _lookup(self, candidate: str) -> str | None:
        for spelling in (candidate, candidate + ".md"):
            if spelling in self._exact:
                return spelling
        for spelling in (candidate, candidate + ".md"):
            found = self._lower.get(spelling.lower())
            if found is not None:
                return found
        return None

    def resolve(self, target: str, from_path: str) -> str | None:
        """The note a link target names, as Obsidian resolves it, or None."""
        name = target.partition("#")[0].strip().replace("\\", "/").lstrip("/")
        if not name:
            return from_path
        folder = posixpath.dirname(from_path)
        for candidate in (name, posixpath.normpath(posixpath.join(folder, name))):
            found = self._lookup(candidate)
            if found is not None:
                return found
        wanted = name.lower().removesuffix(".md")
        suffix = "/" + wanted
        candidates = [
            path
            for path in self._by_name.get(posixpath.basename(wanted), ())
            if path.lower().removesuffix(".md") == wanted
            or path.lower().removesuffix(".md").endswith(suffix)
        ]
        if not candidates:
            return None
        return min(
            candidates,
            key=lambda p: (posixpath.dirname(p) != folder, p.count("/"), len(p), p),
        )


@dataclass(frozen=True, slots=True)
class LinkSite:
    """Where one note links to another: the linking note and the link's offsets."""

    source: str
    start: int
    end: int


def backlink_map(
    resolver: LinkResolver, notes: Iterable[tuple[str, Sequence[tuple[str, int, int]]]]
) -> dict[str, list[LinkSite]]:
    """Target path -> the places that link to it, from (path, [(target, start, end)])."""
    backlinks: dict[str, list[LinkSite]] = {}
    for path, links in notes:
        for target, start, end in links:
            if is_attachment_target(target):
                continue
            resolved = resolver.resolve(target, path)
            if resolved is not None and resolved != path:
                backlinks.setdefault(resolved, []).append(LinkSite(path, start, end))
    return backlinks


class LinkGraph:
    """The resolver and backlink map of a corpus, rebuilt only when the corpus changed."""

    def __init__(self) -> None:
        self._generation = -1
        self._resolver_generation = -1
        self._resolver = LinkResolver(())
        self._backlinks: dict[str, list[LinkSite]] = {}

    def resolver_for(self, corpus: Corpus) -> LinkResolver:
        """The resolver of the corpus as it is: built from its paths alone, so a query that
        resolves one link does not pay for the backlinks of every note, and made again only
        when the paths change (55 ms at 10,000 notes, after every edit before)."""
        if corpus.paths_generation != self._resolver_generation:
            self._resolver = LinkResolver(corpus.paths)
            self._resolver_generation = corpus.paths_generation
        return self._resolver

    def refresh(self, corpus: Corpus) -> None:
        if corpus.generation == self._generation:
            return
        self.resolver_for(corpus)
        self._backlinks = backlink_map(
            self._resolver, ((record.path, record.links) for record in corpus.records())
        )
        # Links the index did not keep (notes stored before it did) were found by a parse
        # here, once: they are kept.
        corpus.keep_parsed()
        self._generation = corpus.generation

    @property
    def resolver(self) -> LinkResolver:
        return self._resolver

    def backlinks(self, path: str) -> list[LinkSite]:
        return self._backlinks.get(path, [])
