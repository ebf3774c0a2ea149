"""A note's backlinks are looked for only among the links that may name its file
(`text.markdown.linked_file_names`), not by resolving every link of the vault: the law that
makes this safe, and that the backlinks found so are exactly those of resolving every link,
property-tested over vaults whose names collide in every way a resolver must tell apart."""

import posixpath

from hypothesis import given, settings
from hypothesis import strategies as st

from obsidian_mcp.retrieval.links import (
    LinkSite,
    backlinks_to,
    is_attachment_target,
    linking_notes,
)
from obsidian_mcp.text.markdown import LinkResolver, file_name, linked_file_names

# Few names and folders, in several cases, so that links often match more than one file.
_FOLDERS = st.sampled_from(["", "A", "a", "A/B", "a/b", "B", "C/A"])
_NAMES = st.sampled_from(
    ["Rook", "rook", "ROOK", "Tide", "x.md", "Map", "map.png", "a b", "Rook.MD", "B", ".hidden"]
)
_PATHS = st.builds(
    lambda folder, name, note: posixpath.join(folder, name) + (".md" if note else ""),
    _FOLDERS,
    _NAMES,
    st.booleans(),
)
_SEGMENTS = st.sampled_from(
    [
        *("Rook", "rook", "tide", "x", "x.md", "Map", "map.png", "a b"),
        *("A", "a", "B", "b", "..", ".", ""),
    ]
)
_TARGETS = st.builds(
    lambda lead, segments, tail, heading, backslash: (
        lead + ("\\" if backslash else "/").join(segments) + tail + heading
    ),
    st.sampled_from(["", "/", "./", "../", " "]),
    st.lists(_SEGMENTS, min_size=1, max_size=4),
    st.sampled_from(["", ".md", ".MD", "/", " "]),
    st.sampled_from(["", "#Heading", "#"]),
    st.booleans(),
)
_VAULTS = st.lists(_PATHS, min_size=1, max_size=12, unique=True)


@settings(max_examples=400, deadline=None)
@given(_VAULTS, st.data())
def test_a_link_resolves_only_to_a_file_whose_name_it_may_name(
    paths: list[str], data: st.DataObject
) -> None:
    resolver = LinkResolver(paths)
    source = data.draw(st.sampled_from(paths))
    for target in data.draw(st.lists(_TARGETS, min_size=1, max_size=8)):
        resolved = resolver.resolve(target, source)
        if resolved is not None and resolved != source:
            assert file_name(resolved) in linked_file_names(target, source), (target, source)


def test_a_link_to_its_own_folder_or_the_one_above_names_that_folder_s_note() -> None:
    """Too rare a draw for the property: "." and ".." resolve relative to the linking note's
    folder, to a note named as a folder ("A/B" -> "A/B.md")."""
    resolver = LinkResolver(["A/B.md", "A.md", "A/B/C/Rook.md", "A/B/Rook.md"])
    for target, source, resolved in (
        (".", "A/B/Rook.md", "A/B.md"),
        ("..", "A/B/C/Rook.md", "A/B.md"),
        ("../..", "A/B/C/Rook.md", "A.md"),
    ):
        assert resolver.resolve(target, source) == resolved
        assert file_name(resolved) in linked_file_names(target, source)


def _every_backlink(
    paths: list[str], links: dict[str, list[tuple[str, int, int]]], resolver: LinkResolver
) -> dict[str, list[LinkSite]]:
    """Every link resolved, in the notes' order: what the backlinks must equal."""
    found: dict[str, list[LinkSite]] = {path: [] for path in paths}
    for source, spans in links.items():
        for target, start, end in spans:
            resolved = resolver.resolve(target, source)
            if not is_attachment_target(target) and resolved is not None and resolved != source:
                found[resolved].append(LinkSite(source, start, end))
    return found


@settings(max_examples=300, deadline=None)
@given(_VAULTS, st.data())
def test_backlinks_found_by_name_are_those_of_resolving_every_link(
    paths: list[str], data: st.DataObject
) -> None:
    resolver = LinkResolver(paths)
    notes = [path for path in paths if path.endswith(".md")]
    links = {
        note: [
            (target, n * 10, n * 10 + 5)
            for n, target in enumerate(data.draw(st.lists(_TARGETS, max_size=5)))
        ]
        for note in notes
    }
    named = linking_notes(links.items())
    expected = _every_backlink(paths, links, resolver)
    for path in paths:
        assert backlinks_to(path, resolver, named, links.get) == expected[path], path
