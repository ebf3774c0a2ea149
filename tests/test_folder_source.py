"""The folder source on its own: hidden folders, binaries, bad UTF-8, appends, the tree."""

import re
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from obsidian_mcp.errors import IsAFolder, NoteNotFound, NotText
from obsidian_mcp.sources.base import (
    CASED_APART_FROM_ASCII,
    SearchWords,
    holds_every_word,
    lowered_to_look_at,
    search_words,
    text_hit,
)
from obsidian_mcp.sources.folder import FolderSource


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian" / "app.json").write_text("{}")
    (root / ".trash").mkdir()
    (root / ".trash" / "old.md").write_text("deleted words")
    (root / "Empty" / "Deeper").mkdir(parents=True)
    (root / "Only folders" / "Inner").mkdir(parents=True)
    (root / "Only folders" / "Inner" / "leaf.md").write_text("leaf words")
    (root / "note.md").write_text("alpha beta\nAlpha again")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "latin1.md").write_bytes("caf\xe9 ok".encode("latin-1"))
    return root


@pytest.mark.anyio
async def test_tree_skips_hidden_folders_and_shows_empty_ones(vault_dir: Path) -> None:
    tree = await FolderSource(vault_dir).list_tree()
    assert tree == [
        "Empty/",
        "Empty/Deeper/",
        "Only folders/",
        "Only folders/Inner/",
        "Only folders/Inner/leaf.md",
        "image.png",
        "latin1.md",
        "note.md",
    ]


@pytest.mark.anyio
async def test_binary_is_never_decoded_and_bad_utf8_is_tolerated(vault_dir: Path) -> None:
    source = FolderSource(vault_dir)
    with pytest.raises(NotText):
        await source.read_note("image.png")
    assert (await source.read_note("latin1.md")).content == "caf\ufffd ok"


@pytest.mark.anyio
async def test_missing_note_and_folder_are_told_apart(vault_dir: Path) -> None:
    source = FolderSource(vault_dir)
    with pytest.raises(NoteNotFound):
        await source.read_note("nope.md")
    with pytest.raises(IsAFolder):
        await source.read_note("Empty")


@pytest.mark.anyio
async def test_append_follows_the_plugins_newline_rule(vault_dir: Path) -> None:
    source = FolderSource(vault_dir)
    await source.append("note.md", "third line")
    await source.append("new/made.md", "first")
    await source.append("new/made.md", "second\n")
    await source.append("new/made.md", "third")
    assert (vault_dir / "note.md").read_text() == "alpha beta\nAlpha again\nthird line"
    assert (vault_dir / "new" / "made.md").read_text() == "first\nsecond\nthird"


@pytest.mark.anyio
async def test_search_needs_every_word_and_skips_hidden_notes(vault_dir: Path) -> None:
    source = FolderSource(vault_dir)
    hits = await source.search_text("ALPHA beta", 100)
    assert [hit.path for hit in hits] == ["note.md"]
    assert [(m.start, m.end) for m in hits[0].matches] == [(0, 5), (6, 10), (11, 16)]
    assert await source.search_text("deleted", 100) == []
    assert await source.search_text("alpha leaf", 100) == []


@pytest.mark.anyio
async def test_search_sees_edits_and_never_follows_a_link_out(
    vault_dir: Path, tmp_path: Path
) -> None:
    source = FolderSource(vault_dir)
    assert [hit.path for hit in await source.search_text("alpha", 100)] == ["note.md"]
    (vault_dir / "note.md").write_text("gamma only, now longer than before")
    assert await source.search_text("alpha", 100) == []
    assert [hit.path for hit in await source.search_text("gamma", 100)] == ["note.md"]
    outside = tmp_path / "outside.md"
    outside.write_text("secret words")
    (vault_dir / "link.md").symlink_to(outside)
    assert await source.search_text("secret", 100) == []


@pytest.mark.anyio
async def test_a_search_leaving_some_notes_out_searches_only_the_others(tmp_path: Path) -> None:
    """The first build's read-ahead wants only the notes not read yet: the folder scans
    those alone (0.54 -> 0.30 s a question beside a first build at 10,000 notes)."""
    (tmp_path / "a.md").write_text("alpha here\n")
    (tmp_path / "b.md").write_text("alpha there\n")
    source = FolderSource(tmp_path)
    found = await source.search_text("alpha", 0, leaving_out={"a.md"})
    assert [hit.path for hit in found] == ["b.md"]
    assert sorted(hit.path for hit in await source.search_text("alpha", 0)) == ["a.md", "b.md"]


@pytest.mark.anyio
async def test_a_search_for_each_word_finds_what_a_search_for_it_alone_finds(
    tmp_path: Path,
) -> None:
    """The law of `search_each` (the first build's read-ahead, one scan for a question's
    rare words) and `texts_holding` (an exact search of the notes a first build has not
    read): for each word, the very notes `search_text` finds for it alone, whatever the
    case or script of text and words, leaving out the same notes; with their texts."""
    texts = [
        "Quennell Ashgrove keeps the LIGHT.",
        "D\u0131ST\u0130LLED water, Ma\u017fter Kettle, 5 \u212aelvin.",
        "Stra\u00dfe and caf\u00e9 \u00c6\u00d8\u00c5 light.",
        "light of the harbour, a kettle",
        "",
    ]
    for number, text in enumerate(texts):
        (tmp_path / f"n{number}.md").write_text(text)
    source = FolderSource(tmp_path)
    words = [
        "light", "LIGHT", "kettle", "distilled", "master", "kelvin", "quennell",
        "caf\u00e9", "stra\u00dfe", "\u00e6\u00f8\u00e5", "zzqx", "ligh", "e",
    ]  # fmt: skip
    for leaving_out in (frozenset[str](), frozenset({"n0.md", "n3.md"})):
        found = await source.search_each(words, leaving_out)
        for word, paths in zip(words, found, strict=True):
            alone = await source.search_text(word, 0, leaving_out)
            assert paths == {hit.path for hit in alone}, word
            held = await source.texts_holding(word, leaving_out)
            assert sorted(held) == [(p, (tmp_path / p).read_text()) for p in sorted(paths)], word
    assert (await source.search_each(["light", "kettle"]))[0] == {"n0.md", "n2.md", "n3.md"}


@pytest.mark.anyio
async def test_a_search_for_each_word_searches_a_fresh_scan_again_until_a_write(
    tmp_path: Path,
) -> None:
    """At 50,000 notes a scan for a first build's read-ahead is 0.45 s, most of it the walk
    and a stat a note. A scan begun under `fresh_within` seconds ago is searched again,
    unless a write went through this source since or it left out a note searched now; a
    change behind the source's back is seen once the scan is older, as a listing sees it."""
    (tmp_path / "a.md").write_text("alpha\n")
    (tmp_path / "b.md").write_text("beta\n")
    source = FolderSource(tmp_path)
    assert await source.search_each(["gamma"], (), fresh_within=60) == [set()]
    (tmp_path / "b.md").write_text("beta gamma\n")  # behind the source's back
    assert await source.search_each(["gamma"], (), fresh_within=60) == [set()]
    assert await source.search_each(["gamma"], (), fresh_within=0) == [{"b.md"}]
    (tmp_path / "c.md").write_text("gamma\n")
    # More left out than by the last scan: that scan, less the notes left out now.
    assert await source.search_each(["gamma", "beta"], {"a.md"}, fresh_within=60) == [
        {"b.md"},
        {"b.md"},
    ]
    # Fewer left out than by the last scan: a new scan.
    assert await source.search_each(["gamma"], {"a.md"}, fresh_within=0) == [{"b.md", "c.md"}]
    (tmp_path / "a.md").write_text("alpha gamma\n")
    assert await source.search_each(["gamma"], (), fresh_within=60) == [{"a.md", "b.md", "c.md"}]
    (tmp_path / "a.md").write_text("alpha\n")
    assert await source.search_each(["gamma"], (), fresh_within=60) == [{"a.md", "b.md", "c.md"}]
    await source.write("c.md", "delta\n")  # through the source: a new scan
    assert await source.search_each(["gamma"], (), fresh_within=60) == [{"b.md"}]


def test_the_characters_cased_apart_from_ascii_are_all_known() -> None:
    """The quick look before a search's patterns lower-cases the text; the patterns match
    case-insensitively. They agree for an ASCII word unless the text holds a character the
    patterns take for an ASCII one that lower() does not turn into it: over every code
    point, only these."""
    any_ascii = re.compile(r"[\x00-\x7f]", re.IGNORECASE)
    odd = {
        c
        for c in map(chr, range(sys.maxunicode + 1))
        if any_ascii.fullmatch(c) and not (len(c.lower()) == 1 and c.lower().isascii())
    }
    assert odd == set(CASED_APART_FROM_ASCII)  # what the quick look sends to the patterns


def _by_patterns_alone(content: str, words: SearchWords) -> list[tuple[int, int]] | None:
    found = [[m.span() for m in p.finditer(content)] for p in words.patterns]
    return sorted(span for spans in found for span in spans) if all(found) else None


_LETTERS = "aAbBiIkKsSzZ \n\u0130\u0131\u017f\u212a\u00e9\u00c9\u00df"


@given(
    content=st.text(alphabet=_LETTERS, max_size=40),
    query=st.text(alphabet="abikszABIKSZ \u00e9\u0131\u017f", min_size=1, max_size=8),
)
@example(content="D\u0131ST\u0130LLED", query="distilled")  # a Turkish i either way
@example(content="Ma\u017fter", query="master")  # a long s
@example(content="AA", query="AA A")  # matches of two words at one start
def test_the_quick_look_never_turns_away_a_note_the_patterns_match(
    content: str, query: str
) -> None:
    """The law of `text_hit`'s quick look: the same hits, with the same matches, as the
    case-insensitive patterns alone, whatever the case or script of text and words."""
    words = search_words(query)
    if not words.words:
        return
    hit = text_hit("n.md", content, words)
    spans = None if hit is None else sorted((m.start, m.end) for m in hit.matches)
    assert spans == _by_patterns_alone(content, words)
    # The scan for several words looks at a note's lower-cased text once for them all.
    held = holds_every_word(content, lowered_to_look_at(content), words)
    assert held == (spans is not None)


@pytest.mark.anyio
async def test_a_note_read_leaves_the_scans_cache(tmp_path: Path) -> None:
    """A scan keeps the notes' texts for the next (the first build's read-ahead); a note
    read is left out of later scans, so its text leaves: the cache of a first build at
    50,000 notes held every text, 111 MB, for the rest of the session. A recent scan
    searched again reads a note read since from the file."""
    body = "lantern " * 6_000  # 48 KB a note
    for number in range(100):
        (tmp_path / f"n{number}.md").write_text(f"{body}\nnote {number}\n")
    source = FolderSource(tmp_path)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert len((await source.search_each(["lantern"], fresh_within=60))[0]) == 100
        assert tracemalloc.get_traced_memory()[0] - before > 4_000_000  # the texts, kept
        for number in range(100):
            assert (await source.read_note(f"n{number}.md")).content.endswith(f"note {number}\n")
        assert tracemalloc.get_traced_memory()[0] - before < 1_000_000
        # The scan of a moment ago, searched again: each note read again from its file.
        (tmp_path / "n7.md").write_text("a kettle\n")
        found = await source.search_each(["lantern", "kettle"], fresh_within=60)
    finally:
        tracemalloc.stop()
    assert len(found[0]) == 99 and found[1] == {"n7.md"}
