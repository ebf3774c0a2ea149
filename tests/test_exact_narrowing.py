"""`vault_smart_search` looks only at the notes the index's trigrams say may hold its words
(issue 38). The law: narrowing changes nothing found. For any query, the files matched and
each needle's counts are the same with the trigrams as by reading every note, including
case, phrases broken over lines, words under three characters, names and titles, and text
that is not ASCII."""

import sqlite3
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from obsidian_mcp.index.store import SCHEMA_VERSION, IndexStore
from obsidian_mcp.retrieval.exact import parse_needles
from obsidian_mcp.retrieval.search import Retriever
from tests.conftest import drop_note_snapshots, drop_vector_shortlists
from tests.test_index import retriever_on

NOTES = {
    "Harbour/Grey Wharf.md": (
        "# Grey Wharf\n\nPembel Sulwynros hid the key under the ninth mill of Greyhook,\n"
        "by the sign of the gull. The wharf smells of tar and rope.\n"
    ),
    "Harbour/Lighthouse.md": (
        "---\ntitle: The Lamp of Osk\naliases: [lamp]\n---\n\nAda keeps the LAMP lit; "
        'the keeper\'s log says "never dark".\n\n## Log\n\n- 3 May: fog, lamp on at 4.\n'
    ),
    "People/Ada Quill.md": (
        "# [[Ada Quill|Ada]] and **the** spanner\n\nAda carries a brass spanner.\n"
    ),
    "People/Bram.md": "Bram owes Ada ten marks.\nHe is in Osk, or so the gulls say.\n",
    "Journal/2026-11-02.md": "Café at the quay: crème brûlée, Straße, ΑΘΗΝΑ, naïve ideas.\n",
    "Journal/ox.md": "An ox and an ax by the sea. Up, up and away.\n",
    "Recipes/Tar & rope.md": "Nothing here but the name.\n",
    "Spells/Fire.md": "IGNIS — the fire word; ignis fatuus, the fool's fire.\n",
}
WORDS = sorted({w for text in NOTES.values() for w in text.replace("\n", " ").split(" ") if w})


def _write_vault(root: Path) -> Path:
    for path, text in NOTES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, "utf-8")
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The vault and a folder whose index has read it (keywords only: no model needed)."""
    root = tmp_path_factory.mktemp("narrowing")
    vault = _write_vault(root / "vault")

    async def read() -> None:
        retriever, _ = retriever_on(vault, root, index_embeddings=False)
        await retriever.corpus.sync(read_all=True)
        assert retriever.corpus.store.trigrams
        retriever.close()

    anyio.run(read)
    return vault, root


async def _found(retriever: Retriever, query: str, trigrams: bool) -> object:
    retriever.corpus.store.trigrams = trigrams
    await retriever.corpus.sync(read_all=True)
    return await retriever._exact_candidates(  # pyright: ignore[reportPrivateUsage]
        parse_needles(query), ""
    )


def _same_either_way(built: tuple[Path, Path], query: str) -> None:
    vault, root = built

    async def both() -> None:
        retriever, _ = retriever_on(vault, root, index_embeddings=False)
        try:
            narrowed = await _found(retriever, query, trigrams=True)
            read_all = await _found(retriever, query, trigrams=False)
        finally:
            retriever.close()
        assert narrowed == read_all, query

    anyio.run(both)


@pytest.mark.parametrize(
    "query",
    [
        "Pembel",
        "pembel SULWYNROS",
        '"hid the key under"',
        '"Greyhook, by the sign"',  # a phrase broken over a line
        "lamp",  # in the text and the frontmatter title
        '"Lamp of Osk"',  # the title alone
        "spanner Quill",  # Quill: in the name and the heading's link
        '"Tar & rope"',  # in the name alone
        "ox",  # under three characters: narrows nothing
        "ox sea",
        "brûlée",
        "CRÈME BRÛLÉE",
        "STRASSE",  # not a match either way: ß is not ss
        "straße",
        "αθηνα",
        "NAÏVE",
        "ignis",
        'the "fool\'s fire"',
        "nowhere-to-be-found",
        "4",
    ],
)
def test_narrowing_finds_what_reading_every_note_finds(
    built: tuple[Path, Path], query: str
) -> None:
    _same_either_way(built, query)


def _needle(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(WORDS))
    start = draw(st.integers(0, max(0, len(word) - 1)))
    piece = word[start : start + draw(st.integers(1, 8))]
    cased = "".join(c.upper() if draw(st.booleans()) else c.lower() for c in piece)
    return cased.replace('"', "")


@st.composite
def queries(draw: st.DrawFn) -> str:
    needles = [_needle(draw) for _ in range(draw(st.integers(1, 3)))]
    if draw(st.booleans()):  # a phrase of two words that follow each other in a note
        text = draw(st.sampled_from(list(NOTES.values())))
        words = text.split()
        at = draw(st.integers(0, len(words) - 2))
        needles.append('"' + " ".join(words[at : at + 2]).replace('"', "") + '"')
    return " ".join(n for n in needles if n.strip('" '))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=queries())
def test_narrowing_law_on_drawn_queries(built: tuple[Path, Path], query: str) -> None:
    assume(query.strip())  # every drawn piece may have been a quote alone
    _same_either_way(built, query)


@pytest.mark.parametrize("version", [3, SCHEMA_VERSION])
def test_an_index_made_before_trigrams_gains_them_on_opening(tmp_path: Path, version: int) -> None:
    """A user's version-3 index file, or one an SQLite without the trigram tokenizer brought
    to version 4, gains the trigrams in place when opened: made from the notes it holds,
    without reading a note again."""
    vault = _write_vault(tmp_path / "vault")

    async def read() -> Path:
        retriever, _ = retriever_on(vault, tmp_path, index_embeddings=False)
        await retriever.corpus.sync(read_all=True)
        path = Path(retriever.corpus.store.path)
        retriever.close()
        return path

    file = anyio.run(read)
    with sqlite3.connect(file) as db:
        db.execute("DROP TRIGGER notes_trigrams_indexed")
        db.execute("DROP TRIGGER notes_trigrams_unindexed")
        db.execute("DROP TABLE note_trigrams")
        db.execute("ALTER TABLE notes DROP COLUMN links")  # schema 5's
        db.execute("DROP INDEX passages_by_length")
        if version < SCHEMA_VERSION:  # schema 6's
            db.execute("DROP TABLE vector_snapshots")
            db.execute("ALTER TABLE notes DROP COLUMN title")
            drop_note_snapshots(db)  # schema 7's
            drop_vector_shortlists(db)  # schema 8's
        db.execute(f"PRAGMA user_version = {version}")
    store = IndexStore(file)
    assert store.trigrams and store.notes_holding(["sulwynros"]) == {"Harbour/Grey Wharf.md"}
    assert store.notes_holding(["ox"]) is None  # no trigram in two characters
    assert store.notes_holding(["\x00key"]) is None and store.notes_holding(['a"b']) == set()
    store.close()
    with sqlite3.connect(file) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
