"""The persistent passage index: storage, restarts, freshness, the background build, and
meaning in the ranking. Real SQLite files, the real embedding model (loaded once per test
session by `load_embedder`), real vault folders and the stand-in Local REST API."""

import contextvars
import gc
import logging
import os
import random
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import ObsidianUnreachable
from obsidian_mcp.index import store as store_module
from obsidian_mcp.index.bulk import collector_paused, freeze_first_loads
from obsidian_mcp.index.embedder import Matrix, OnnxEmbedder, cores_available
from obsidian_mcp.index.location import index_path, vault_identity
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.smart_env import SmartEnvCache, StoredVectors
from obsidian_mcp.index.store import (
    SCHEMA_VERSION,
    IndexStore,
    NoteRow,
    PassageRow,
    StoredNote,
)
from obsidian_mcp.index.vectors import (
    BUILD_BATCH,
    BUILD_NICENESS,
    EmbedderSlot,
    EmbeddingBuilder,
)
from obsidian_mcp.opening import model_loader, open_retriever
from obsidian_mcp.retrieval import candidates as candidates_module
from obsidian_mcp.retrieval import corpus as corpus_module
from obsidian_mcp.retrieval import links as links_module
from obsidian_mcp.retrieval import search as search_module
from obsidian_mcp.retrieval.candidates import (
    INLINE_TEXTS,
    ON_DEMAND_FIRST_PACE,
    ON_DEMAND_LEAST,
    CandidateSources,
    OnDemandPace,
    query_terms,
)
from obsidian_mcp.retrieval.corpus import ProgressCallback
from obsidian_mcp.retrieval.links import LinkGraph
from obsidian_mcp.retrieval.packing import SearchResult
from obsidian_mcp.retrieval.related import find_related
from obsidian_mcp.retrieval.search import ACTIVE_SECONDS, Retriever
from obsidian_mcp.retrieval.semantic import SemanticSources
from obsidian_mcp.sources.base import FileStat, NoteData, TextSearchHit
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.text.markdown import parse_note
from obsidian_mcp.vault import Vault
from tests.conftest import (
    count_parses,
    drop_note_snapshots,
    drop_vector_shortlists,
    folder_settings,
    rest_settings,
)
from tests.fixture_vault import REPO_ROOT, copy_fixture_vault
from tests.standin.process import StandinProcess

FERRY = (
    "# The Ferry\n\n## Rules\n\n"
    "Old Tomas refuses to carry anyone across the river once the sun has set. "
    "He says the current changes its mind in the dark.\n"
)
LIBRARY = (
    "# The Library\n\n## Catalogue\n\n"
    "The archive keeps its ledgers in oak cabinets, sorted by the year of their binding.\n"
)
GARDEN = (
    "# The Garden\n\n## Beds\n\n"
    "Tomatoes grow against the south wall, where the bricks hold the afternoon heat.\n"
)
# Shares no content word with FERRY: only meaning leads there.
PARAPHRASE = "Which boatman won't take passengers over the water at night?"


class CountingFolder(FolderSource):
    """The vault folder, counting the notes read from it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    async def read_note(self, path: str) -> NoteData:
        self.reads.append(path)
        return await super().read_note(path)


class HeldReads:
    """A folder's note reads, held until `gate` is set: those `held(path)` says, when the
    read is asked for (every one by default). `waiting` names the reads held now."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        folder: FolderSource,
        held: Callable[[str], bool] = lambda path: True,
    ) -> None:
        self.gate = anyio.Event()
        self.waiting: set[str] = set()
        read = folder.read_note

        async def read_note(path: str) -> NoteData:
            if held(path):
                self.waiting.add(path)
                await self.gate.wait()
                self.waiting.discard(path)
            return await read(path)

        monkeypatch.setattr(folder, "read_note", read_note)


async def asked_beside_the_warm_up(
    retriever: Retriever, *, after: float = 0.05
) -> tuple[SearchResult, float]:
    """A new server's first question, `after` seconds into its warm-up (which is stopped
    after it), and how long it took."""
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(after)
        started = anyio.current_time()
        found = await retriever.semantic_query("harbour ledger", limit=3)
        waited = anyio.current_time() - started
        background.cancel_scope.cancel()
    return found, waited


async def until_read(retriever: Retriever, notes: int) -> None:
    """Until the first build has read (and stored) `notes` notes."""
    with anyio.fail_after(30):
        while retriever.corpus.listed - retriever.corpus.unread < notes:
            await anyio.sleep(0.02)


def counted_scans(monkeypatch: pytest.MonkeyPatch, folder: FolderSource) -> list[list[str]]:
    """The folder's searches from now on, each as the words asked: `search_each`'s words,
    `search_text`'s query."""
    scans: list[list[str]] = []
    search_each, search_text = folder.search_each, folder.search_text

    async def counted_each(
        words: Sequence[str], leaving_out: Collection[str] = (), fresh_within: float = 0.0
    ) -> list[set[str]]:
        scans.append(list(words))
        return await search_each(words, leaving_out, fresh_within)

    async def counted_text(
        query: str, context_length: int, leaving_out: Collection[str] = ()
    ) -> list[TextSearchHit]:
        scans.append([query])
        return await search_text(query, context_length, leaving_out)

    monkeypatch.setattr(folder, "search_each", counted_each)
    monkeypatch.setattr(folder, "search_text", counted_text)
    return scans


def small_vault(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (("Ferry.md", FERRY), ("Library.md", LIBRARY), ("Garden.md", GARDEN)):
        (root / name).write_text(text, encoding="utf-8")
    return root


def retriever_on(
    root: Path, tmp_path: Path, **overrides: object
) -> tuple[Retriever, CountingFolder]:
    settings = folder_settings(root, tmp_path, index_dir=tmp_path / "index", **overrides)
    folder = CountingFolder(root)
    return open_retriever(Vault(None, folder), settings, model_loader(settings)), folder


def first_line(result_text: str) -> str:
    return result_text.splitlines()[0]


def first_group(result_text: str) -> str:
    return next(line for line in result_text.splitlines() if line.startswith("## "))


async def answer(retriever: Retriever, query: str) -> str:
    from obsidian_mcp.retrieval.render import format_search

    return format_search(await retriever.semantic_query(query, limit=3))


def bump_mtime(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000))


# -- the file ------------------------------------------------------------------------------


def test_index_lives_in_the_cache_dir_keyed_by_the_vault(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    settings = Settings.model_validate({"vault_path": vault, "config_dir": tmp_path})
    path = index_path(settings)
    assert path.is_relative_to(Path(os.environ["XDG_CACHE_HOME"]))
    assert not path.is_relative_to(vault)
    other = Settings.model_validate({"vault_path": tmp_path / "other", "config_dir": tmp_path})
    assert index_path(other) != path
    rest = Settings.model_validate({"api_key": "k", "port": 27124, "config_dir": tmp_path})
    assert vault_identity(rest)[0] == "rest:127.0.0.1:27124"


def test_store_keeps_notes_and_reports_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    IndexStore(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.anyio
async def test_truncated_or_newer_index_is_rebuilt_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    vault = small_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path)
    await retriever.build_index()
    file = Path(retriever.corpus.store.path)
    retriever.close()
    for suffix in ("-wal", "-shm"):
        Path(str(file) + suffix).unlink(missing_ok=True)
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 3])  # a crash or a full disk mid-copy

    with caplog.at_level(logging.WARNING):
        retriever, _ = retriever_on(vault, tmp_path)
    assert "rebuilding it" in caplog.text
    text = await answer(retriever, "tomatoes south wall")
    assert "Garden.md" in text
    retriever.close()

    with sqlite3.connect(file) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        IndexStore(file).close()
    assert "newer than this program" in caplog.text


# -- restarts and incremental updates ------------------------------------------------------


@pytest.mark.anyio
async def test_a_new_process_answers_from_the_index_without_reading_notes(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    first, folder = retriever_on(vault, tmp_path)
    await first.build_index()
    assert sorted(folder.reads) == ["Ferry.md", "Garden.md", "Library.md"]
    first.close()

    again, folder = retriever_on(vault, tmp_path)
    text = await answer(again, PARAPHRASE)
    assert folder.reads == []
    assert "local passage index" in first_line(text)
    assert first_group(text).startswith("## Ferry.md")
    again.close()


def downgrade_to_version_1(file: Path) -> None:
    """Take an index file back to schema 1: no FTS5 tables, no passage lengths, vectors
    stored as float32."""
    with sqlite3.connect(file) as db:
        for seq, blob, scale in db.execute("SELECT seq, vector, scale FROM passage_vectors"):
            floats = np.frombuffer(blob, dtype=np.int8).astype(np.float32) * np.float32(scale)
            db.execute(
                "UPDATE passage_vectors SET vector = ? WHERE seq = ?", (floats.tobytes(), seq)
            )
        db.execute("ALTER TABLE passage_vectors DROP COLUMN scale")
        for trigger in (
            "passages_indexed",
            "passages_unindexed",
            "notes_indexed",
            "notes_unindexed",
            "notes_trigrams_indexed",
            "notes_trigrams_unindexed",
        ):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE note_trigrams")
        for table in ("passage_terms_instances", "passage_terms_columns", "passage_terms"):
            db.execute(f"DROP TABLE {table}")
        for table in ("note_labels_instances", "note_labels"):
            db.execute(f"DROP TABLE {table}")
        db.execute("DROP INDEX passages_by_length")
        db.execute("ALTER TABLE passages DROP COLUMN length")
        db.execute("ALTER TABLE notes DROP COLUMN links")
        db.execute("DROP TABLE vector_snapshots")
        db.execute("ALTER TABLE notes DROP COLUMN title")
        drop_note_snapshots(db)
        drop_vector_shortlists(db)
        db.execute("PRAGMA user_version = 1")


def linked_vault(root: Path) -> Path:
    """Ten notes, each linking the next and the hub."""
    root.mkdir(parents=True)
    (root / "Hub.md").write_text("# Hub\n\nThe harbour's notes meet here.\n")
    for n in range(10):
        (root / f"Note {n}.md").write_text(
            f"# Note {n}\n\nSee [[Note {(n + 1) % 10}]] and [[Hub|the hub]] for the tides.\n"
        )
    return root


@pytest.mark.anyio
async def test_the_backlinks_of_a_built_index_need_no_parse_and_an_older_index_parses_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: a new process's first vault_quick_context at 10,000 notes took 6 s, every
    note parsed for its links. The index keeps each note's links (schema 5): a new process
    finds its backlinks from them. An index stored before parses each note once, keeps
    its links, and the next process parses none."""
    vault = linked_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path, index_embeddings=False)
    await first.corpus.sync(read_all=True)
    expected = {path: first.links.backlinks(first.corpus, path) for path in first.corpus.paths}
    file = Path(first.corpus.store.path)
    first.close()
    assert len(expected["Hub.md"]) == 10

    parses = count_parses(monkeypatch)

    async def backlinks_of_a_new_process() -> dict[str, Any]:
        retriever, folder = retriever_on(vault, tmp_path, index_embeddings=False)
        await retriever.corpus.sync(read_all=True)
        found = {
            path: retriever.links.backlinks(retriever.corpus, path)
            for path in retriever.corpus.paths
        }
        assert folder.reads == []  # from the index, not the vault
        retriever.close()
        return found

    assert await backlinks_of_a_new_process() == expected and parses == []
    with sqlite3.connect(file) as db:  # an index stored before it kept links
        db.execute("UPDATE notes SET links = NULL")
    assert await backlinks_of_a_new_process() == expected and len(parses) == 11
    assert await backlinks_of_a_new_process() == expected and len(parses) == 11


def titled_vault(root: Path) -> Path:
    """Notes whose titles come from each of the parse's sources (frontmatter, a first H1
    whose markup the title drops, the file name), and one holding both words apart."""
    root.mkdir(parents=True)
    (root / "Front.md").write_text("---\ntitle: The Brass Lantern\n---\n# Other\n\nA lamp.\n")
    (root / "Heading.md").write_text("# The **Copper** Lantern\n\nIt is lit at dusk.\n")
    (root / "Copper lantern notes.md").write_text("Nothing to see but a lantern.\n")
    (root / "Shelf.md").write_text("# Shelf\n\nA copper pot, and a lantern beside it.\n")
    return root


@pytest.mark.anyio
async def test_an_exact_search_weighs_titles_without_parsing_and_an_older_index_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Law: a note's title as the index keeps it is its parse's title, in the process that
    read the note, in a new one, and in an index stored before titles were kept. An exact
    search on a built index parses no note only to weigh its title (at 10,000 notes
    "harbour" parsed 6,289 notes, 4.8 s); on an older index it parses each once and keeps
    the titles, so the next process parses none."""
    vault = titled_vault(tmp_path / "vault")
    query = '"copper lantern"'  # in Heading.md's title and one file name, never in a text

    async def search(retriever: Retriever) -> int:
        """How many files match: by name or title alone, they show no snippet."""
        found = await retriever.smart_search(query, limit=10, snippet_length=80)
        assert not found.groups
        return found.total_files

    first, _ = retriever_on(vault, tmp_path, index_embeddings=False)
    await first.corpus.sync(read_all=True)
    expected = {r.path: parse_note(r.path, r.content).title for r in first.corpus.records()}
    assert expected["Front.md"] == "The Brass Lantern" and expected["Heading.md"] == (
        "The Copper Lantern"
    )
    assert {r.path: r.title for r in first.corpus.records()} == expected
    assert await search(first) == 2  # Heading.md by its title, a file by its name
    file = Path(first.corpus.store.path)
    first.close()

    parses = count_parses(monkeypatch)

    async def a_new_process(*, titles: bool = False) -> int | dict[str, str]:
        """A new process's search, or the titles it holds for every note."""
        retriever, folder = retriever_on(vault, tmp_path, index_embeddings=False)
        await retriever.corpus.sync(read_all=True)
        if titles:
            found: int | dict[str, str] = {r.path: r.title for r in retriever.corpus.records()}
        else:
            found = await search(retriever)
        assert folder.reads == []
        retriever.close()
        return found

    matching = {"Heading.md", "Copper lantern notes.md"}
    assert await a_new_process() == 2
    assert set(parses) <= matching  # Shelf.md's text searched, its title stored: no parse
    assert await a_new_process(titles=True) == expected
    with sqlite3.connect(file) as db:  # an index stored before it kept titles
        db.execute("UPDATE notes SET title = NULL")
    parses.clear()
    assert await a_new_process() == 2
    searched = set(parses)
    assert "Shelf.md" in searched and "Front.md" not in searched  # no "copper" in Front.md
    with sqlite3.connect(file) as db:
        kept = {path: title for path, title in db.execute("SELECT path, title FROM notes") if title}
    assert kept == {path: expected[path] for path in searched}  # each parsed note's kept
    parses.clear()
    assert await a_new_process() == 2 and set(parses) <= matching
    assert await a_new_process(titles=True) == expected  # Front.md's from a parse


@pytest.mark.anyio
async def test_links_found_by_a_parse_are_kept_only_where_the_note_is_unchanged(
    tmp_path: Path,
) -> None:
    """Several processes share an index: links a process found in the note it holds are
    not written over a newer version another process stored meanwhile."""
    vault = linked_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path, index_embeddings=False)
    await first.corpus.sync(read_all=True)
    file = Path(first.corpus.store.path)
    first.close()
    with sqlite3.connect(file) as db:  # an index stored before it kept links
        db.execute("UPDATE notes SET links = NULL")
    retriever, _ = retriever_on(vault, tmp_path, index_embeddings=False)
    await retriever.corpus.sync(read_all=True)
    with sqlite3.connect(file) as db:
        # Another process stored a newer Hub.md (its hash no longer this process's).
        db.execute("UPDATE notes SET content_hash = 'newer' WHERE path = 'Hub.md'")
    retriever.links.backlinks(retriever.corpus, "Hub.md")  # parses every note for its links
    retriever.close()
    with sqlite3.connect(file) as db:
        unkept = [path for (path,) in db.execute("SELECT path FROM notes WHERE links IS NULL")]
    assert unkept == ["Hub.md"]


@pytest.mark.anyio
async def test_backlinks_after_notes_change_are_those_gathered_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first look, the notes' links are gathered again only for the notes read
    since (0.56-0.77 s for all of them at 50,000 notes): after edits, a deletion, a new
    note and one written back, every note's backlinks are those of a graph made afresh."""
    vault = linked_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path, index_embeddings=False, index_refresh_seconds=0)
    corpus, graph = retriever.corpus, retriever.links
    await corpus.sync(read_all=True)
    assert len(graph.backlinks(corpus, "Hub.md")) == 10
    gathered_all = 0
    every_note = links_module.linking_notes

    def counted(notes: Any) -> dict[str, list[str]]:
        nonlocal gathered_all
        gathered_all += 1
        return every_note(notes)

    monkeypatch.setattr(links_module, "linking_notes", counted)
    steps = [
        ("Note 3.md", "# Note 3\n\nNow see [[Note 7]] only, and [[Note 7#Tides]].\n"),
        ("Note 5.md", None),
        ("Note 11.md", "# Note 11\n\n[[Hub]], [[note 5]] and [[Archive/Note 5|five]].\n"),
        ("Note 5.md", "# Note 5\n\nBack again: [[Note 11]] and [[Hub]].\n"),
        ("Hub.md", "# Hub\n\nStart at [[Note 1]] or [[Note 11.md]].\n"),
    ]
    for name, text in steps:
        if text is None:
            (vault / name).unlink()
        else:
            (vault / name).write_text(text, encoding="utf-8")
            bump_mtime(vault / name)
        await corpus.sync(read_all=True)
        afresh = LinkGraph()
        for path in corpus.paths:
            assert graph.backlinks(corpus, path) == afresh.backlinks(corpus, path), (name, path)
    assert gathered_all == len(steps)  # the fresh graphs, one each: none by `graph`
    retriever.close()


@pytest.mark.anyio
async def test_a_note_s_text_is_read_from_the_index_and_a_newer_version_is_taken_in(
    tmp_path: Path,
) -> None:
    """A process keeps no note's text: a note loaded from the index reads it when shown,
    the same as when it was cut. Once another process has stored a newer version, the
    older record reads the newer text, and the next call lists again at once (however
    long `index_refresh_seconds`) and takes in the newer note without reading it."""
    vault = linked_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path, index_embeddings=False)
    await first.corpus.sync(read_all=True)
    first.close()
    retriever, folder = retriever_on(
        vault, tmp_path, index_embeddings=False, index_refresh_seconds=600
    )
    corpus = retriever.corpus
    await corpus.sync(read_all=True)
    assert folder.reads == []
    hub = corpus.record("Hub.md")
    assert hub is not None and hub.content == (vault / "Hub.md").read_text()
    assert [hit.path for hit in await retriever.text_hits("harbour")] == ["Hub.md"]

    newer = "# Hub\n\nThe harbour's notes meet here, and the ferry's too.\n"
    (vault / "Hub.md").write_text(newer)
    other, _ = retriever_on(vault, tmp_path, index_embeddings=False)
    await other.corpus.sync(read_all=True)  # another process stores the newer version
    other.close()
    assert corpus.contents([hub]) == [newer] and hub.content == newer
    await corpus.sync(read_all=True)
    taken = corpus.record("Hub.md")
    assert taken is not None and taken is not hub and taken.content == newer
    assert folder.reads == []  # taken from the index, not read again
    assert [hit.path for hit in await retriever.text_hits("ferry's")] == ["Hub.md"]
    retriever.close()


@pytest.mark.anyio
async def test_a_version_1_index_upgrades_in_place_and_keeps_its_vectors(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path)
    await first.build_index()
    file = Path(first.corpus.store.path)
    built = first.corpus.store.stats()
    first.close()
    downgrade_to_version_1(file)

    again, folder = retriever_on(vault, tmp_path)
    store = again.corpus.store
    assert store.path == str(file)  # upgraded, not set aside and rebuilt
    stats = store.stats()
    assert (stats.notes, stats.passages) == (built.notes, built.passages)
    assert stats.embedded_passages == built.embedded_passages > 0
    assert store.count_unembedded(built.model or "") == 0
    assert store.keyword_totals()[0] == built.passages
    assert "Garden.md" in first_group(await answer(again, "tomatoes south wall"))
    assert first_group(await answer(again, PARAPHRASE)).startswith("## Ferry.md")
    assert folder.reads == []
    again.close()
    with sqlite3.connect(file) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        # Every vector coded: its dimensions in bytes, with a scale.
        coded = db.execute(
            "SELECT count(*) FROM passage_vectors WHERE scale IS NOT NULL AND length(vector) = 384"
        ).fetchone()[0]
        assert coded == db.execute("SELECT count(*) FROM passage_vectors").fetchone()[0] > 0


@pytest.mark.anyio
async def test_a_build_leaves_a_snapshot_of_its_vectors_and_an_older_index_gains_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new process reads a built index's vectors from one row (`save_vector_snapshot`):
    the build writes it when it ends, and an index built before gains it on opening."""
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_ROWS", 1)  # the vault is small
    vault = small_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path)
    await first.build_index()
    store = first.corpus.store
    model = store.stats().model or ""
    file = Path(store.path)
    with sqlite3.connect(file) as db:
        stored = sorted(digest for (digest,) in db.execute("SELECT text_hash FROM passage_vectors"))
    snapshot = store.vector_snapshot(model)
    assert snapshot is not None and sorted(snapshot.hashes) == stored
    first.close()
    with sqlite3.connect(file) as db:
        db.execute("DROP TABLE vector_snapshots")
        db.execute("ALTER TABLE notes DROP COLUMN title")
        drop_note_snapshots(db)
        drop_vector_shortlists(db)
        db.execute("PRAGMA user_version = 5")
    again, folder = retriever_on(vault, tmp_path)
    snapshot = again.corpus.store.vector_snapshot(model)
    assert snapshot is not None and sorted(snapshot.hashes) == stored
    assert first_group(await answer(again, PARAPHRASE)).startswith("## Ferry.md")
    assert folder.reads == []
    again.close()


@pytest.mark.anyio
async def test_a_new_process_makes_its_notes_from_their_snapshot_and_an_older_index_gains_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loads_from_rows: list[list[str] | None]
) -> None:
    """Issue 38: a new process made its notes from a row per text, passage and note, 0.64-
    0.8 s of its 1.9-2.2 s to a first answer at 10,000 notes. A build's read leaves a
    snapshot of them (schema 7), which a new process loads; an index without one gains it
    when the server has read the vault."""
    monkeypatch.setattr(store_module, "NOTE_SNAPSHOT_MIN_CHANGES", 1)  # the vault is small
    vault = small_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path)
    await first.build_index()
    file = Path(first.corpus.store.path)
    first.close()
    with sqlite3.connect(file) as db:
        assert db.execute("SELECT held FROM note_snapshot").fetchone()[0] == 3

    loads_from_rows.clear()
    again, folder = retriever_on(vault, tmp_path)
    assert first_group(await answer(again, PARAPHRASE)).startswith("## Ferry.md")
    assert folder.reads == [] and None not in loads_from_rows
    again.close()

    with sqlite3.connect(file) as db:
        db.execute("DELETE FROM note_snapshot")  # as an index built before schema 7
    older, folder = retriever_on(vault, tmp_path)
    async with anyio.create_task_group() as background:
        background.start_soon(older.warm_up)
    older.close()
    assert folder.reads == []
    with sqlite3.connect(file) as db:
        assert db.execute("SELECT held FROM note_snapshot").fetchone()[0] == 3


class UnreachableOnce(FolderSource):
    """A vault whose first listing fails as an Obsidian that is not running yet does."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failed = False

    async def note_stats(self) -> dict[str, FileStat]:
        if not self.failed:
            self.failed = True
            raise ObsidianUnreachable("https://127.0.0.1:27124", "connection refused")
        return await super().note_stats()


@pytest.mark.anyio
async def test_a_first_listing_that_fails_beside_the_load_fails_as_itself_and_the_next_loads(
    tmp_path: Path,
) -> None:
    """A new process lists the vault while it loads the index: the listing's failure reaches
    the call as the vault's error (what the tools turn into advice), not wrapped in a group,
    and the next call lists and loads again."""
    vault = small_vault(tmp_path / "vault")
    first, _ = retriever_on(vault, tmp_path)
    await first.build_index()
    first.close()
    settings = folder_settings(vault, tmp_path, index_dir=tmp_path / "index")
    source = UnreachableOnce(vault)
    again = open_retriever(Vault(None, source), settings, model_loader(settings))
    with pytest.raises(ObsidianUnreachable):
        await answer(again, PARAPHRASE)
    assert first_group(await answer(again, PARAPHRASE)).startswith("## Ferry.md")
    again.close()


@pytest.mark.anyio
async def test_only_changed_notes_are_reread_and_only_new_texts_embedded(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    retriever, folder = retriever_on(vault, tmp_path)
    await retriever.build_index()
    store = retriever.corpus.store
    embedded = store.stats().embedded_passages
    folder.reads.clear()

    (vault / "Garden.md").write_text(GARDEN + "\n## Pond\n\nCarp circle under the lilies.\n")
    bump_mtime(vault / "Garden.md")
    await retriever.build_index()
    assert folder.reads == ["Garden.md"]
    model = store.stats().model or ""
    assert store.count_unembedded(model) == 0
    # The unchanged passage kept its vector; only the new one was embedded.
    assert store.stats().embedded_passages == embedded + 1
    text = await answer(retriever, "fish swimming beneath water plants")
    assert "Carp circle" in text
    retriever.close()


@pytest.mark.anyio
@pytest.mark.parametrize("added", [1, INLINE_TEXTS + 1])
async def test_a_question_after_an_edit_embeds_its_few_texts_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, added: int
) -> None:
    """An edit's few new texts are embedded by the question that finds them, which then
    ranks by meaning from a complete index; the background build starts only for more
    than INLINE_TEXTS (its thread held the interpreter through 0.8-1.2 s of a question at
    10,000 notes)."""
    vault = small_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path, index_on_demand_passages=0)
    await retriever.build_index()
    assert retriever.builder is not None
    starts: list[bool] = []
    monkeypatch.setattr(retriever.builder, "start", lambda: starts.append(True))
    rooms = "".join(
        f"\n## Room {n}\n\nShelf {n} of the west room holds maps of coastal parishes.\n"
        for n in range(added - 1)
    )
    (vault / "Library.md").write_text(
        LIBRARY + "\nA walnut tree shades the reading room.\n" + rooms, encoding="utf-8"
    )
    await retriever.corpus.reread("Library.md")
    sources = retriever.candidates
    vectors = await sources.passage_vectors()
    assert vectors is not None
    left = sources.meaning_progress(vectors).texts_left
    assert len(left) == added  # one text a passage here: each is a single window

    text = await answer(retriever, "a big nut tree casting shade where people read")
    if added <= INLINE_TEXTS:
        assert starts == []
        assert "walnut tree shades" in text
        assert "meaning index:" not in text  # ranked from a complete index
        assert not vectors.lacking(left)
    else:
        assert starts == [True]
        assert "meaning index:" in text
    retriever.close()


@pytest.mark.anyio
async def test_the_meaning_progress_counted_from_the_last_is_the_progress_counted_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The progress after more vectors arrive is counted from the texts that lacked them
    last time; that count equals one over every text, at each step of a build."""
    retriever, _ = retriever_on(ledger_vault(tmp_path / "vault", paragraphs=3), tmp_path)
    assert retriever.builder is not None
    monkeypatch.setattr(retriever.builder, "start", lambda: None)
    await retriever.corpus.sync(read_all=True)
    sources = retriever.candidates
    vectors = await sources.passage_vectors()
    assert vectors is not None
    every = sorted(retriever.corpus.text_hashes)
    steps = [every[:0], every[:7], every[:40], every]
    for done in steps:
        await sources._embed_now(vectors, done)
        counted_on = sources.meaning_progress(vectors)
        afresh = CandidateSources(retriever.corpus, sources.semantic, sources.embedder, None)
        assert afresh.meaning_progress(vectors) == counted_on
    assert counted_on.complete and not counted_on.texts_left
    retriever.close()


@pytest.mark.anyio
@pytest.mark.parametrize("installs_kept", [2, corpus_module.INSTALLS_KEPT])
async def test_the_meaning_progress_after_notes_change_is_the_progress_counted_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installs_kept: int
) -> None:
    """After notes are edited, added or deleted, the progress is counted from the texts
    that lacked vectors last time and those of the notes installed since (all of them again
    when more changed than the corpus remembers, 2 here): at each step it equals one
    counted over every text."""
    monkeypatch.setattr(corpus_module, "INSTALLS_KEPT", installs_kept)
    vault = ledger_vault(tmp_path / "vault", paragraphs=2)
    retriever, _ = retriever_on(vault, tmp_path, index_refresh_seconds=0)
    assert retriever.builder is not None
    monkeypatch.setattr(retriever.builder, "start", lambda: None)
    corpus = retriever.corpus
    await corpus.sync(read_all=True)
    sources = retriever.candidates
    vectors = await sources.passage_vectors()
    assert vectors is not None
    every = sorted(corpus.text_hashes)
    await sources._embed_now(vectors, every[: len(every) // 2])
    sources.meaning_progress(vectors)

    edits = 0

    async def edit(*names: str) -> None:
        nonlocal edits
        for name in names:
            edits += 1
            (vault / name).write_text(f"# {name}\n\nTide table {edits} of {name} changed.\n")
        await corpus.sync(read_all=True)

    async def delete(name: str) -> None:
        (vault / name).unlink()
        await corpus.sync(read_all=True)

    async def embed_half() -> None:
        await sources._embed_now(vectors, sorted(vectors.lacking(corpus.text_hashes))[::2])

    steps = [
        partial(edit, "Note 1.md"),
        partial(edit, "Note 2.md", "Note 3.md", "Note 4.md"),  # more than 2 installs
        partial(delete, "Note 5.md"),
        partial(edit, "New note.md"),
        embed_half,
        partial(edit, "Note 1.md"),
        partial(delete, "Note 2.md"),
    ]
    for step in steps:
        await step()
        counted_on = sources.meaning_progress(vectors)
        afresh = CandidateSources(corpus, sources.semantic, sources.embedder, None)
        assert afresh.meaning_progress(vectors) == counted_on, step
    assert not counted_on.complete
    retriever.close()


@pytest.mark.anyio
async def test_similar_notes_come_from_the_local_index_once_the_note_is_embedded(
    tmp_path: Path,
) -> None:
    """vault_find_related's similar notes: nearest the note's meaning when the local index
    holds its vectors (a paraphrase sharing no word is found), by its words before."""
    vault = small_vault(tmp_path / "vault")
    (vault / "Boatman.md").write_text(
        "# Boatman\n\nThe oarsman will not row travellers over the water after dark.\n",
        encoding="utf-8",
    )
    retriever, _ = retriever_on(vault, tmp_path)
    await retriever.corpus.sync(read_all=True)
    by_words = await find_related(retriever, "Ferry.md", limit=3)
    assert by_words.similar_source.startswith("keywords")  # no vector yet: the build waits

    await retriever.build_index()
    by_meaning = await find_related(retriever, "Ferry.md", limit=3)
    assert by_meaning.similar_source.startswith("meaning (the local passage index")
    assert by_meaning.similar[0].path == "Boatman.md"
    assert "Ferry.md" not in {n.path for n in by_meaning.similar}
    assert all(n.why for n in by_meaning.similar)
    retriever.close()


@pytest.mark.anyio
async def test_a_folder_vaults_simple_search_from_the_index_finds_what_a_scan_finds(
    tmp_path: Path,
) -> None:
    """vault_search_map on a folder vault searches the notes the index's trigrams name, in
    memory; for any words it finds the same notes and matches as reading every file (the
    words drawn from the vault's own text, cut short, cased otherwise, and words under
    three characters that no trigram narrows), also after a note changes."""
    vault = copy_fixture_vault(tmp_path / "vault")
    retriever, folder = retriever_on(
        vault, tmp_path, index_embeddings=False, index_refresh_seconds=0
    )
    await retriever.corpus.sync(read_all=True)
    text = " ".join(record.parsed.content for record in retriever.corpus.records())
    words = sorted(set(re.findall(r"[^\s]+", text)))
    draw = random.Random(38)

    def query() -> str:
        picked = draw.sample(words, draw.randint(1, 3))
        cut = [w[: draw.randint(1, len(w))] if draw.random() < 0.3 else w for w in picked]
        return " ".join(w.upper() if draw.random() < 0.2 else w for w in cut)

    def found(hits: Sequence[TextSearchHit]) -> dict[str, tuple[tuple[int, int], ...]]:
        return {h.path: tuple((m.start, m.end) for m in h.matches) for h in hits}

    queries = [query() for _ in range(60)] + ["a", "of the", "Mira lantern", "ÆØÅ", "zzqx"]
    for words_asked in queries:
        expected = found(await folder.search_text(words_asked, context_length=0))
        assert found(await retriever.text_hits(words_asked)) == expected, words_asked
    (vault / "Characters" / "Kettle.md").write_text("Quillwort grows by the kettle.\n")
    bump_mtime(vault / "Characters" / "Kettle.md")
    hits = found(await retriever.text_hits("quillwort"))
    assert hits == found(await folder.search_text("quillwort", context_length=0))
    assert list(hits) == ["Characters/Kettle.md"]
    retriever.close()


class ListingFolder(CountingFolder):
    """The vault folder, counting its stat listings too."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.listings = 0

    async def note_stats(self) -> dict[str, FileStat]:
        self.listings += 1
        return await super().note_stats()


@pytest.mark.anyio
async def test_a_new_process_lists_the_folder_after_its_load_so_the_first_question_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load longer than OBSIDIAN_INDEX_REFRESH_SECONDS (3 s at 50,000 notes): listed
    beside it, the listing was stale when the load ended and the first question listed
    again; listed after it, the listing is fresh. Its age still counts from its start."""
    vault = small_vault(tmp_path / "vault")
    built, _ = retriever_on(vault, tmp_path)
    await built.corpus.sync(read_all=True)
    built.close()
    slow_load = IndexStore.load_notes

    def load_notes(store: IndexStore, paths: Iterable[str] | None = None) -> dict[str, StoredNote]:
        notes = slow_load(store, paths)
        if paths is None:  # the first load of a new process
            time.sleep(1.5)
        return notes

    monkeypatch.setattr(IndexStore, "load_notes", load_notes)
    settings = folder_settings(
        vault, tmp_path, index_dir=tmp_path / "index", index_refresh_seconds=1.0
    )
    folder = ListingFolder(vault)
    retriever = open_retriever(Vault(None, folder), settings, model_loader(settings))
    await retriever.corpus.sync(read_all=True, by_a_call=False)  # the warm-up
    assert folder.listings == 1 and retriever.corpus.note_count == 3
    assert "## Ferry.md" in await answer(retriever, PARAPHRASE)
    assert folder.listings == 1
    await anyio.sleep(1.0)
    await answer(retriever, PARAPHRASE)
    assert folder.listings == 2
    retriever.close()


@pytest.mark.anyio
async def test_while_a_session_asks_an_edit_is_taken_in_before_the_next_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server lists the vault in the background while calls come, reads a note edited
    outside it and embeds its new text before the next question, and writes the vectors'
    snapshot again, and the notes' snapshot; before any call, and once calls stop, it lists
    nothing."""
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_ROWS", 1)  # the vault is small
    monkeypatch.setattr(store_module, "NOTE_SNAPSHOT_MIN_CHANGES", 1)
    vault = small_vault(tmp_path / "vault")
    settings = folder_settings(
        vault, tmp_path, index_dir=tmp_path / "index", index_refresh_seconds=0.3
    )
    folder = ListingFolder(vault)
    retriever = open_retriever(Vault(None, folder), settings, model_loader(settings))
    await retriever.build_index()  # a build is not a session's call
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.keep_current)
        before = folder.listings
        await anyio.sleep(1.0)
        assert folder.listings == before  # no call yet: nothing listed

        await answer(retriever, "tomatoes south wall")  # a session asks
        (vault / "Library.md").write_text(LIBRARY + "\nA walnut tree shades the reading room.\n")
        bump_mtime(vault / "Library.md")
        await anyio.sleep(1.0)
        record = retriever.corpus.record("Library.md")
        assert record is not None and "walnut" in record.parsed.content
        store = retriever.corpus.store
        model = store.stats().model or ""
        assert store.count_unembedded(model) == 0
        with sqlite3.connect(store.path) as db:
            stored = {digest for (digest,) in db.execute("SELECT text_hash FROM passage_vectors")}
        snapshot = store.vector_snapshot(model)
        assert snapshot is not None and set(snapshot.hashes) == stored  # the edit's text in it
        with sqlite3.connect(store.path) as db:  # the edit is in the notes' snapshot too
            assert db.execute("SELECT count(*) FROM note_changes").fetchone()[0] == 0
        assert IndexStore(store.path).load_notes()["Library.md"].content_hash == (
            record.content_hash
        )
        text = await answer(retriever, "a big nut tree casting shade where people read")
        assert "walnut tree shades" in text

        asked = retriever.corpus.asked_at
        assert asked is not None
        retriever.corpus.asked_at = asked - ACTIVE_SECONDS - 1  # the session has ended
        listed = folder.listings
        await anyio.sleep(1.0)
        assert folder.listings == listed
        background.cancel_scope.cancel()
    retriever.close()


@pytest.mark.anyio
async def test_an_edit_on_disk_is_used_once_the_refresh_interval_has_passed(
    tmp_path: Path,
) -> None:
    vault = small_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path, index_refresh_seconds=0.5)
    await retriever.build_index()
    assert "walnut tree shades" not in await answer(retriever, "walnut tree library")

    (vault / "Library.md").write_text(LIBRARY + "\nA walnut tree shades the reading room.\n")
    bump_mtime(vault / "Library.md")
    await anyio.sleep(0.6)  # the stated staleness bound, not a timing assertion
    assert "walnut tree shades" in await answer(retriever, "walnut tree library")
    retriever.close()


@pytest.mark.anyio
async def test_stats_are_listed_once_per_interval_but_own_writes_are_seen_at_once(
    tmp_path: Path,
) -> None:
    vault = small_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path, index_refresh_seconds=600)
    await retriever.build_index()
    (vault / "Garden.md").write_text(GARDEN + "\nA quince tree leans over the gate.\n")
    bump_mtime(vault / "Garden.md")
    # Within the interval the vault is not listed again: the edit waits for the next listing.
    assert "quince tree leans" not in await answer(retriever, "quince tree gate")

    await retriever.vault.append("Library.md", "\nThe reading lamps burn whale oil.\n")
    text = await answer(retriever, "quince tree gate whale oil lamps")
    assert "quince tree leans" in text and "whale oil" in text
    retriever.close()


@pytest.mark.anyio
async def test_a_rest_put_is_used_by_the_next_query(
    standin: StandinProcess, tmp_path: Path
) -> None:
    settings = rest_settings(standin, tmp_path, index_dir=tmp_path / "index")
    async with Client(_server(settings), raise_exceptions=True) as client:
        before = await _query(client, "pelican lighthouse keeper")
        assert "feeds a pelican" not in before
        async with standin.async_client() as http:
            response = await http.put(
                "/vault/Places/Pelican Light.md",
                content="# Pelican Light\n\nThe lighthouse keeper feeds a pelican at dawn.\n",
                headers={"Content-Type": "text/markdown"},
            )
            assert response.status_code == 204
        try:
            after = await _query(client, "pelican lighthouse keeper")
            assert "feeds a pelican at dawn" in after
        finally:
            async with standin.async_client() as http:
                await http.delete("/vault/Places/Pelican Light.md")


@pytest.mark.anyio
async def test_an_exact_search_shows_a_note_obsidian_found_changed_within_the_interval(
    tmp_path: Path,
) -> None:
    """Obsidian's own search is live; the cached text may be up to the refresh interval old.
    When Obsidian finds the terms in a note whose cached text lacks them, the note is read
    again (the soak saw the search miss 112 of 1,200 edits made a moment before)."""
    vault = small_vault(tmp_path / "vault")
    async with StandinProcess(vault, plugin_version="5.1.0") as process:
        settings = rest_settings(
            process,
            tmp_path / "config",
            vault_path=vault,
            index_dir=tmp_path / "index",
            index_refresh_seconds=600,
        )
        async with Client(_server(settings), raise_exceptions=True) as client:
            before = await client.call_tool("vault_smart_search", {"query": "Tomas"})
            assert "Ferry.md" in "\n".join(
                b.text for b in before.content if isinstance(b, TextContent)
            )
            (vault / "Ferry.md").write_text(FERRY + "\nTomas now carries a brass lantern.\n")
            after = await client.call_tool("vault_smart_search", {"query": "brass lantern"})
            text = "\n".join(b.text for b in after.content if isinstance(b, TextContent))
            assert "Ferry.md" in text and "brass lantern" in text


def _server(settings: Settings):
    from obsidian_mcp.server import build_server

    return build_server(settings)


async def _query(client: Client, query: str) -> str:
    result = await client.call_tool("vault_semantic_query", {"query": query})
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.mark.anyio
async def test_a_note_that_is_not_text_is_read_again_only_once_it_changes(
    tmp_path: Path,
) -> None:
    vault = small_vault(tmp_path / "vault")
    blob = vault / "Blob.md"
    blob.write_bytes(b"\x00\x01\x02 not text \xff" * 40)
    retriever, folder = retriever_on(vault, tmp_path, index_embeddings=False)
    for _ in range(3):
        await answer(retriever, "ferry river")
    assert folder.reads.count("Blob.md") == 1
    assert retriever.corpus.unread == 0  # skipped, not "being read"
    blob.write_text("# Blob\n\nNow a note about the ferry.\n")
    bump_mtime(blob)
    assert "Blob.md" in await answer(retriever, "ferry river")
    assert folder.reads.count("Blob.md") == 2
    retriever.close()


@pytest.mark.anyio
async def test_vectors_of_texts_edited_away_are_dropped_from_the_file_and_memory(
    tmp_path: Path,
) -> None:
    """Each edit leaves its old texts' vectors behind; they are dropped once they are a
    tenth of those held, so an index edited all day does not grow all day."""
    vault = small_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path)
    ferry = vault / "Ferry.md"
    for edit in range(12):
        ferry.write_text(FERRY + f"\nOn trip {edit} the ferry carried {edit} crates of salt.\n")
        bump_mtime(ferry)
        await retriever.build_index()
        await answer(retriever, "crates of salt")
    vectors = await retriever.passage_vectors()
    assert vectors is not None
    live = len(retriever.corpus.text_hashes)
    stored = sqlite3.connect(retriever.corpus.store.path).execute(
        "SELECT count(*) FROM passage_vectors"
    )
    assert len(vectors) <= live + max(1, live // 10) + 1  # 12 edits would leave 12+ behind
    assert stored.fetchone()[0] <= live + max(1, live // 10) + 1
    assert "Ferry.md" in first_group(await answer(retriever, "crates of salt on trip 11"))
    retriever.close()


# -- the background build ------------------------------------------------------------------


def ledger_vault(root: Path, paragraphs: int = 1) -> Path:
    """40 notes about the harbour ledger, of `paragraphs` paragraphs each."""
    root.mkdir(parents=True)
    for n in range(40):
        body = "\n\n".join(
            f"Paragraph {p} of note {n} talks about lanterns, tides and the harbour "
            f"ledger number {n * 10 + p}, in several plain sentences."
            for p in range(paragraphs)
        )
        (root / f"Note {n}.md").write_text(f"# Note {n}\n\n{body}\n")
    return root


@pytest.mark.anyio
async def test_a_query_during_the_first_build_answers_and_says_how_far_it_got(
    tmp_path: Path,
) -> None:
    # No wait for the meaning index (the tests' default): what a vault too big to wait
    # for gets.
    retriever, _ = retriever_on(ledger_vault(tmp_path / "vault", paragraphs=4), tmp_path)
    text = await answer(retriever, "harbour ledger number 123")
    assert "Note 12.md" in text
    progress = first_line(text)
    assert "meaning index:" in progress and "of 40 notes" in progress
    assert "meaning index: 40 of 40" not in progress
    assert retriever.builder is not None and retriever.builder.running
    retriever.close()  # stops after the batch in hand; what it embedded is kept
    assert IndexStore(retriever.corpus.store.path).stats().notes == 40


@pytest.mark.anyio
async def test_a_small_vaults_first_query_waits_for_its_meaning_index(tmp_path: Path) -> None:
    """What is left to embed fits in the wait: the first answer already ranks by meaning
    from the whole index, and the next ones never wait."""
    # The wait is a bound, not a deadline: a busy machine takes longer to embed the 160
    # passages, and the answer still comes from the whole index.
    retriever, _ = retriever_on(
        ledger_vault(tmp_path / "vault", paragraphs=4), tmp_path, index_meaning_wait_seconds=600
    )
    first = first_line(await answer(retriever, "harbour ledger number 123"))
    assert not re.search(r"meaning index: [\d,]+ of", first), first  # no progress: complete
    assert "semantic: the server's local passage index" in first
    assert retriever.builder is not None and not retriever.builder.running
    retriever.close()


@pytest.mark.anyio
async def test_a_first_question_waits_for_meaning_only_when_the_whole_vault_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is left to embed counts the notes a first build has not read yet, at as many
    passages as those read: counted over the notes read alone, a 1,000-note vault's first
    question waited out its 30 s while the read went on (python -m bench speed). Here the
    first 25 of 80 notes are read (a batch), four passages each: their 100 passages fit
    the wait's 150, the vault's 320 do not. The model is slowed down (1 s a batch), so a
    wait for the notes read would be a long one."""
    monkeypatch.setattr(candidates_module, "PASSAGES_PER_SECOND", 1)
    embed = OnnxEmbedder.embed

    def slow_embed(self: OnnxEmbedder, texts: Sequence[str], role: TextRole) -> Matrix:
        time.sleep(1.0)  # in the builder's thread
        return embed(self, texts, role)

    monkeypatch.setattr(OnnxEmbedder, "embed", slow_embed)
    vault = ledger_vault(tmp_path / "vault", paragraphs=4)
    for n in range(40, 80):
        paragraphs = (f"Paragraph {p} of extra note {n}, on tides and lanterns." for p in range(4))
        (vault / f"Extra {n}.md").write_text(f"# Extra {n}\n\n" + "\n\n".join(paragraphs))
    retriever, folder = retriever_on(
        vault,
        tmp_path,
        index_meaning_wait_seconds=150,
        index_read_wait_seconds=0,
        index_on_demand_passages=0,
    )
    held = HeldReads(monkeypatch, folder, lambda path: len(folder.reads) >= 25)
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await until_read(retriever, 25)
        with anyio.fail_after(30):
            started = anyio.current_time()
            found = await retriever.semantic_query("harbour ledger", limit=3)
            waited = anyio.current_time() - started
        held.gate.set()
        background.cancel_scope.cancel()
    assert "notes read: 25 of 80" in found.source_note, found.source_note
    assert waited < 5, waited  # no wait for the meaning index
    retriever.close()


@pytest.mark.anyio
async def test_a_vault_with_too_much_left_does_not_wait(tmp_path: Path) -> None:
    """More left to embed than the wait allows (here: a wait of 0.1 s, 5 passages' worth):
    the first answer comes at once, from what is ready."""
    retriever, _ = retriever_on(
        ledger_vault(tmp_path / "vault", paragraphs=4), tmp_path, index_meaning_wait_seconds=0.1
    )
    first = first_line(await answer(retriever, "harbour ledger number 123"))
    assert "meaning index:" in first, first
    retriever.close()


@pytest.mark.anyio
async def test_after_a_restart_the_first_query_embeds_the_texts_left_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note written while no server ran, with more new texts than a question embeds in
    passing: the next process's first question knows which texts lack vectors and embeds
    them itself, instead of starting the build, whose look-up reads every stored text
    first (2.1 s at 50,000 notes, 12 s with the file not cached)."""
    vault = ledger_vault(tmp_path / "vault", paragraphs=4)
    built, _ = retriever_on(vault, tmp_path)
    await built.build_index()
    built.close()
    entries = (
        f"Entry {n}: the brass lantern numbered {n} hangs by the quay, where the ferry "
        f"crew trims its wick at dusk before the tide turns."
        for n in range(60)
    )
    (vault / "Scratch.md").write_text("# Scratch\n\n" + "\n\n".join(entries) + "\n")
    look_ups: list[object] = []
    unembedded = IndexStore.unembedded

    def counted(
        store: IndexStore, model: str, limit: int, after: int = 0, *, firsts_only: bool = False
    ) -> tuple[list[tuple[str, str]], int]:
        look_ups.append(model)
        return unembedded(store, model, limit, after, firsts_only=firsts_only)

    monkeypatch.setattr(IndexStore, "unembedded", counted)
    again, _ = retriever_on(vault, tmp_path, index_meaning_wait_seconds=600)
    await again.corpus.sync(read_all=True, by_a_call=False)  # as the warm-up does
    vectors = await again.candidates.passage_vectors()
    assert vectors is not None
    # More than a question embeds in passing (`INLINE_TEXTS`).
    assert len(again.candidates.meaning_progress(vectors).texts_left) > INLINE_TEXTS
    text = await answer(again, "which lantern hangs by the quay")
    assert "Scratch.md" in text
    assert not re.search(r"meaning index: [\d,]+ of", first_line(text))  # complete
    assert look_ups == []
    assert again.builder is not None and not again.builder.running
    again.close()


@pytest.mark.anyio
async def test_a_first_query_whose_texts_left_cannot_be_read_stops_waiting_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts a passage names but the index file no longer holds (another process stored
    the note again meanwhile) are tried once, not until the wait runs out; the build is
    left to find what is left."""
    vault = ledger_vault(tmp_path / "vault", paragraphs=4)
    monkeypatch.setattr(IndexStore, "texts_of", lambda store, hashes: [])
    retriever, _ = retriever_on(vault, tmp_path, index_meaning_wait_seconds=600)
    await retriever.corpus.sync(read_all=True, by_a_call=False)
    with anyio.fail_after(60):
        text = await answer(retriever, "harbour ledger number 123")
    assert "meaning index:" in first_line(text)
    # The build was started for the rest: it runs, or it has embedded every text.
    assert retriever.builder is not None
    model = retriever.corpus.store.stats().model or ""
    assert retriever.builder.running or retriever.corpus.store.count_unembedded(model) == 0
    retriever.close()


@pytest.mark.anyio
async def test_a_first_query_whose_texts_cannot_be_stored_answers_from_what_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The index file is busy past its timeout (another process's long write) or the disk
    is full: the first question stops waiting and answers from what is ready (its
    passages found by meaning too, on demand, fail to store the same way)."""
    vault = ledger_vault(tmp_path / "vault", paragraphs=4)

    def busy(store: IndexStore, model: str, hashes: Sequence[str], vectors: Matrix) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(IndexStore, "put_vectors", busy)
    retriever, _ = retriever_on(vault, tmp_path, index_meaning_wait_seconds=600)
    await retriever.corpus.sync(read_all=True, by_a_call=False)
    with anyio.fail_after(60):
        text = await answer(retriever, "harbour ledger number 123")
    assert "Note 12.md" in text and "meaning index:" in first_line(text)
    assert "not stored: database is locked" in caplog.text
    retriever.close()


@pytest.mark.anyio
@pytest.mark.parametrize("on_demand", [30, 0])
async def test_a_query_before_the_build_reaches_its_notes_embeds_its_keyword_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_demand: int
) -> None:
    """A vault too big to wait for: the build has not got to the notes a question's words
    find (here it never starts), so the question embeds its best keyword passages' first
    texts itself and ranks them by meaning too; with on-demand embedding off it has
    keywords alone. (A question with time enough for all of them: a slow machine's model
    load must not make it a late one.)"""
    monkeypatch.setattr(candidates_module, "ON_DEMAND_ENDS_BY_SECONDS", 600.0)
    retriever, _ = retriever_on(
        ledger_vault(tmp_path / "vault", paragraphs=4),
        tmp_path,
        index_on_demand_passages=on_demand,
    )
    assert retriever.builder is not None
    monkeypatch.setattr(retriever.builder, "start", lambda: None)
    text = await answer(retriever, "harbour ledger number 123")
    assert "Note 12.md" in first_group(text)
    vectors = await retriever.passage_vectors()
    assert vectors is not None
    if on_demand:
        assert "semantic: the server's local passage index" in first_line(text)
        corpus = retriever.corpus
        scores = corpus.scores(query_terms("harbour ledger number 123"))
        best = sorted(scores, key=lambda c: -scores[c])[:on_demand]
        wanted = {corpus.chunk(c).text_hashes[0] for c in best}
        assert len(vectors) == len(wanted) and not vectors.lacking(wanted)
        assert any(len(corpus.chunk(c).text_hashes) > 1 for c in best)  # the rest wait
        assert len(wanted) < len(corpus.text_hashes)  # those, not the whole vault
    else:
        assert "local passage index" not in first_line(text)
        assert len(vectors) == 0
    retriever.close()


@pytest.mark.anyio
async def test_a_question_already_late_embeds_only_its_best_few_keyword_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question whose other stages took its time (the first, waiting for the read)
    embeds on demand only the first texts of its ON_DEMAND_LEAST best keyword passages
    that lack vectors, the best first, not all `index_on_demand_passages` of them."""
    monkeypatch.setattr(candidates_module, "ON_DEMAND_ENDS_BY_SECONDS", 0.0)
    retriever, _ = retriever_on(ledger_vault(tmp_path / "vault", paragraphs=4), tmp_path)
    assert retriever.builder is not None
    monkeypatch.setattr(retriever.builder, "start", lambda: None)
    corpus = retriever.corpus
    await corpus.sync(read_all=True)
    query = "harbour ledger number 123"
    scores = corpus.scores(query_terms(query))
    best = sorted(scores, key=lambda c: -scores[c])[:30]
    firsts = list(dict.fromkeys(corpus.chunk(c).text_hashes[0] for c in best))
    assert len(firsts) > ON_DEMAND_LEAST
    text = await answer(retriever, query)
    assert "Note 12.md" in first_group(text)
    vectors = await retriever.passage_vectors()
    assert vectors is not None
    assert len(vectors) == ON_DEMAND_LEAST
    assert not vectors.lacking(firsts[:ON_DEMAND_LEAST])
    retriever.close()


def test_the_on_demand_pace_follows_the_last_embeddings() -> None:
    """The pace a question's on-demand share is cut to: the assumed one at first, then
    each embedding timed weighs half."""
    pace = OnDemandPace()
    assert pace.texts_within(0.4) == int(ON_DEMAND_FIRST_PACE * 0.4)
    pace.took(10, 1.0)  # a slow one: 10 a second
    assert pace.texts_within(1.0) == int((ON_DEMAND_FIRST_PACE + 10) / 2)
    pace.took(10, 1.0)
    assert pace.texts_within(1.0) == int(((ON_DEMAND_FIRST_PACE + 10) / 2 + 10) / 2)
    assert pace.texts_within(-1.0) == 0  # past its time


@pytest.mark.anyio
async def test_while_the_read_goes_on_the_meaning_progress_is_counted_at_most_so_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a first build reads, a question's progress is the last count when that is
    younger than READING_PROGRESS_SECONDS (counting walked every read note's texts on the
    event loop); counted again once older, and as soon as the read has ended."""
    retriever, folder = retriever_on(ledger_vault(tmp_path / "vault"), tmp_path)
    assert retriever.builder is not None
    monkeypatch.setattr(retriever.builder, "start", lambda: None)
    # Note 3 and 30-39 wait; a batch of the rest is in.
    held = HeldReads(monkeypatch, folder, lambda path: path.startswith("Note 3"))
    corpus, sources = retriever.corpus, retriever.candidates
    vectors = await sources.passage_vectors()
    assert vectors is not None
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        with anyio.fail_after(30):
            while corpus.note_count < corpus_module._STORE_BATCH:
                await anyio.sleep(0.01)
        assert corpus.unread
        counted = sources.meaning_progress(vectors)
        await sources._embed_now(vectors, sorted(corpus.text_hashes)[:3])
        assert sources.meaning_progress(vectors) is counted  # younger than the period
        monkeypatch.setattr(candidates_module, "READING_PROGRESS_SECONDS", 0.0)
        assert sources.meaning_progress(vectors).embedded_passages == 3
        monkeypatch.setattr(candidates_module, "READING_PROGRESS_SECONDS", 600.0)
        held.gate.set()
        with anyio.fail_after(30):
            while corpus.unread:
                await anyio.sleep(0.01)
        background.cancel_scope.cancel()
    after = sources.meaning_progress(vectors)
    assert (after.notes, after.embedded_passages) == (40, 3)
    retriever.close()


@pytest.mark.anyio
async def test_with_smart_connections_vectors_nothing_is_embedded_on_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the local index builds, Smart Connections' stored vectors (the same model)
    rank by meaning already: a question embeds nothing of its own."""
    vault = copy_fixture_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path, index_read_wait_seconds=60)
    assert retriever.builder is not None
    monkeypatch.setattr(retriever.builder, "start", lambda: None)
    text = await answer(retriever, "What did Mira promise Rook at the top of Greyhook?")
    assert "stored Smart Connections vectors" in first_line(text)
    vectors = await retriever.passage_vectors()
    assert vectors is not None and len(vectors) == 0
    retriever.close()


class SlowFolder(CountingFolder):
    """The vault folder, as slow to read as a big vault over REST."""

    async def read_note(self, path: str) -> NoteData:
        await anyio.sleep(0.5)
        return await super().read_note(path)


def slow_retriever(tmp_path: Path, read_wait: float) -> tuple[Retriever, SlowFolder]:
    """A retriever without the model over `ledger_vault`, read 16 notes at a time, 0.5 s
    each (1.5 s for all 40); a question waits `read_wait` seconds for unread notes."""
    vault = ledger_vault(tmp_path / "vault")
    settings = folder_settings(
        vault, tmp_path, index_dir=tmp_path / "index", index_read_wait_seconds=read_wait
    )
    folder = SlowFolder(vault)
    return open_retriever(Vault(None, folder), settings, None), folder


@pytest.mark.anyio
async def test_a_question_waiting_for_the_read_goes_on_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question that waits for the server's own reading goes on when the reading ends,
    not at its next progress report (here a minute away): it once slept out 0.5 s, a
    third of a new process's first answer at 10,000 notes."""
    monkeypatch.setattr("obsidian_mcp.retrieval.corpus._WAITING_PROGRESS_SECONDS", 60.0)
    retriever, _ = slow_retriever(tmp_path, read_wait=600)
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        with anyio.fail_after(30):  # the read takes 1.5 s
            found = await retriever.semantic_query("harbour ledger", limit=3)
    assert "notes read" not in found.source_note
    retriever.close()


@pytest.mark.anyio
async def test_a_first_question_waits_for_the_read_only_while_its_pace_says_it_ends_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's first question waits `index_read_wait_seconds` for the first build's
    read only while the read's pace says it ends by then: beside the first build of 10,000
    notes it waited out all 2 s, for nothing. Here 4 notes at a time, 0.5 s each: 5 s for
    40 notes, against a wait of 3 s, which the pace tells once the first notes are read."""
    monkeypatch.setattr("obsidian_mcp.retrieval.corpus._READ_CONCURRENCY", 4)
    retriever, _ = slow_retriever(tmp_path, read_wait=3.0)
    found, waited = await asked_beside_the_warm_up(retriever, after=0.6)  # 4 notes are read
    assert "notes read: " in found.source_note
    assert waited < 2.0, waited  # not the 3 s wait
    retriever.close()


@pytest.mark.anyio
async def test_a_first_question_does_not_wait_for_a_read_whose_first_notes_are_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No note read yet is a pace too: at best the notes under way end now, and the 36
    others at that pace end after the wait. A new process's first notes come slowly (the
    model loads beside them): the first build of 10,000 notes had none after a second."""
    monkeypatch.setattr("obsidian_mcp.retrieval.corpus._READ_CONCURRENCY", 4)
    retriever, folder = slow_retriever(tmp_path, read_wait=2.0)
    HeldReads(monkeypatch, folder)
    found, waited = await asked_beside_the_warm_up(retriever)
    assert "notes read: 0 of 40" in found.source_note, found.source_note
    assert waited < 1.5, waited  # not the 2 s wait
    retriever.close()


@pytest.mark.anyio
async def test_a_first_question_does_not_wait_for_a_read_too_big_for_its_wait_at_any_pace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a read's own pace is known, it is taken to go at most
    `_READ_NOTES_PER_SECOND_AT_MOST`: a read longer than the wait at that rate is not
    waited for at all (10 a second here: 40 notes take over the 2 s). Without it the
    question waits out the read (here its pace is believed only after a minute). The
    warm-up holds the read's lock a while before its read begins (as a new server's did
    when its first question came): the question looks again once the read has begun, not
    after `_PACE_SECONDS`."""
    monkeypatch.setattr(corpus_module, "_PACE_SECONDS", 60.0)
    monkeypatch.setattr(corpus_module, "_READ_NOTES_PER_SECOND_AT_MOST", 10)
    retriever, _ = slow_retriever(tmp_path, read_wait=2.0)
    read_many = retriever.corpus._read_many

    async def begun_late(paths: list[str], progress: ProgressCallback | None) -> None:
        await anyio.sleep(0.3)
        await read_many(paths, progress)

    monkeypatch.setattr(retriever.corpus, "_read_many", begun_late)
    found, waited = await asked_beside_the_warm_up(retriever)
    assert "notes read: 0 of 40" in found.source_note, found.source_note
    assert waited < 1.0, waited  # not the 1.8 s to the read's end
    retriever.close()


@pytest.mark.anyio
async def test_a_first_build_reads_with_a_few_tasks_not_one_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first build's read runs `_READ_CONCURRENCY` readers that take the notes in turn:
    a task a note held the event loop while they were started (0.3 s at 10,000 notes, of a
    new server's first question). Here every note's read waits: 40 notes, 16 readers."""
    retriever, folder = retriever_on(ledger_vault(tmp_path / "vault"), tmp_path)
    held = HeldReads(monkeypatch, folder)
    corpus = retriever.corpus
    tasks_before = len(anyio.get_running_tasks())
    async with anyio.create_task_group() as background:
        background.start_soon(partial(corpus.sync, read_all=True))
        with anyio.fail_after(30):
            while len(held.waiting) < corpus_module._READ_CONCURRENCY:
                await anyio.sleep(0.01)
        await anyio.sleep(0.05)  # any further task would have started by now
        tasks_reading = len(anyio.get_running_tasks()) - tasks_before
        assert len(held.waiting) == corpus_module._READ_CONCURRENCY
        held.gate.set()
    # The readers and the task that started them; a task a note would be 40 and more.
    assert tasks_reading <= corpus_module._READ_CONCURRENCY + 1, tasks_reading
    assert corpus.note_count == 40 and not corpus.unread
    retriever.close()


@pytest.mark.anyio
async def test_a_note_read_twice_at_once_is_stored_once_and_keeps_its_passages(
    tmp_path: Path,
) -> None:
    """A question's read-ahead and the first build's read may read one note at once: the
    second store of the same file is none, so the passages a question ranks stay the
    note's (stored again they took new ids, and the question crashed on the old ones)."""
    retriever, _ = retriever_on(ledger_vault(tmp_path / "vault"), tmp_path, index_embeddings=False)
    corpus = retriever.corpus
    await corpus.sync(read_all=False)
    reads = [await corpus._read("Note 3.md") for _ in range(2)]  # pyright: ignore[reportPrivateUsage]
    first, again = [read for read in reads if read is not None]
    await corpus._store_and_install([first])  # pyright: ignore[reportPrivateUsage]
    record = corpus.record("Note 3.md")
    assert record is not None
    ids = [chunk.id for chunk in record.chunks]
    await corpus._store_and_install([again])  # pyright: ignore[reportPrivateUsage]
    assert corpus.record("Note 3.md") is record
    assert [corpus.chunk(chunk_id).path for chunk_id in ids] == ["Note 3.md"] * len(ids)
    retriever.close()


@pytest.mark.anyio
async def test_calls_that_wait_for_the_whole_read_all_go_on_when_it_ends(tmp_path: Path) -> None:
    """Several calls waiting with no deadline (exact search, topic overview, related
    notes) while the server reads: each goes on once the reading ends. Waiters that took
    the reading lock only to let it go again handed it round in a circle, so it never
    looked free: under HTTP load the server hung (test_http, 2 runs in 3)."""
    retriever, _ = slow_retriever(tmp_path, read_wait=600)
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        with anyio.fail_after(30):  # the read takes 1.5 s
            async with anyio.create_task_group() as waiting:
                for _ in range(3):
                    waiting.start_soon(partial(retriever.corpus.sync, read_all=True))
    assert retriever.corpus.unread == 0
    retriever.close()


class GatedStore(IndexStore):
    """The index file, taking a batch of notes only once the test opens `gate`: as slow as
    it likes, like beside the first build of a big vault (at 50,000 notes questions queued
    7-11 s behind such writes)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()
        self.writing = threading.Event()

    def put_notes(self, notes: Sequence[NoteRow]) -> dict[str, StoredNote]:
        self.writing.set()
        self.gate.wait()
        return super().put_notes(notes)


def gated_retriever(
    tmp_path: Path, folder_type: type[CountingFolder], **overrides: object
) -> tuple[Retriever, CountingFolder, GatedStore]:
    """A retriever without the model over `ledger_vault` (40 notes), read through
    `folder_type`, storing through a `GatedStore`."""
    vault = ledger_vault(tmp_path / "vault")
    settings = folder_settings(vault, tmp_path, index_dir=tmp_path / "index", **overrides)
    folder = folder_type(vault)
    store = GatedStore(index_path(settings))
    return Retriever(Vault(None, folder), settings, store, None, None), folder, store


@pytest.mark.anyio
async def test_a_question_during_the_first_build_does_not_queue_behind_its_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("obsidian_mcp.retrieval.corpus._STORE_BATCH", 4)  # 10 writes of 1 s
    retriever, folder, store = gated_retriever(
        tmp_path,
        SlowFolder,
        index_read_wait_seconds=0.2,
        index_refresh_seconds=0.1,  # every question lists the vault's stats
    )
    try:
        async with anyio.create_task_group() as background:
            background.start_soon(retriever.warm_up)
            await anyio.sleep(0.05)
            await retriever.semantic_query("harbour ledger", limit=3)  # waits its 0.2 s
            await anyio.to_thread.run_sync(store.writing.wait)  # the build stores a batch
            assert retriever.corpus.reading
            # The write does not end until the gate opens: a question queued behind it
            # would never answer (the bound only keeps a failure from hanging the suite).
            with anyio.fail_after(60):
                during = await retriever.semantic_query("harbour ledger", limit=3)
            assert during.source_note.startswith("notes read: ")
            store.gate.set()
    finally:
        store.gate.set()
    after = await retriever.semantic_query("harbour ledger", limit=3)
    assert "notes read" not in after.source_note
    assert sorted(folder.reads) == sorted(f"Note {n}.md" for n in range(40))
    retriever.close()


@pytest.mark.anyio
async def test_the_first_build_reads_at_most_a_batch_ahead_of_what_it_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a batch of notes is being stored, the read fills the next batch and then
    starts no note: batches queued behind the index's lock kept a question's own store (a
    read-ahead) waiting up to 18 s at 10,000 notes (python -m bench.speed.first_day)."""
    monkeypatch.setattr("obsidian_mcp.retrieval.corpus._STORE_BATCH", 4)
    retriever, folder, store = gated_retriever(tmp_path, CountingFolder)
    try:
        async with anyio.create_task_group() as background:
            background.start_soon(retriever.warm_up)
            await anyio.to_thread.run_sync(store.writing.wait)  # the first batch, held
            await anyio.sleep(0.5)  # reading 40 notes takes a few ms: all, if it ran on
            read_while_held = len(folder.reads)
            store.gate.set()
    finally:
        store.gate.set()
    # The batch being stored, the one waiting its turn, and the reads under way then.
    assert read_while_held <= 4 + 4 + 16 < 40
    assert sorted(folder.reads) == sorted(f"Note {n}.md" for n in range(40))
    assert retriever.corpus.unread == 0
    retriever.close()


def test_a_question_s_reads_of_the_index_do_not_wait_for_a_write(tmp_path: Path) -> None:
    """Keyword postings, counts and passage texts are read on a connection of their own
    (WAL), not behind the lock a write transaction holds: each read of a question beside a
    first build waited for a batch of notes being stored."""
    store = IndexStore(tmp_path / "index.sqlite")
    passage = PassageRow(("Ferry",), 0, 9, ("ferry",), (), ("t",))
    row = NoteRow("Ferry.md", 1, 9, "the ferry", ("ferry",), None, (passage,), (), "Ferry")
    digest = store.put_notes([row])["Ferry.md"].passages[0].text_hashes[0]
    holding, release = threading.Event(), threading.Event()

    def write_held() -> None:
        with store._write():  # pyright: ignore[reportPrivateUsage]
            holding.set()
            release.wait()

    writer = threading.Thread(target=write_held)
    writer.start()
    holding.wait()
    reads = {
        "totals": store.keyword_totals,
        "postings": lambda: store.term_postings("ferry"),
        "frequency": lambda: store.document_frequency("ferry"),
        "terms": lambda: store.terms_between("f", "g"),
        "labelled": lambda: store.labelled("ferry"),
        "texts": lambda: store.texts_of([digest]),
    }
    answers: dict[str, object] = {}
    reader = threading.Thread(target=lambda: answers.update((k, f()) for k, f in reads.items()))
    reader.start()
    reader.join(timeout=10)  # the write is held until the reads have answered
    release.set()
    writer.join()
    assert answers.keys() == reads.keys()
    assert answers["totals"] == (1, 1) and answers["texts"] == [(digest, "t")]
    store.close()


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
def test_the_background_build_runs_below_the_calls_priority(tmp_path: Path) -> None:
    """The build's thread yields the CPU to the server's other threads: a question's own
    embedding beside it took twice as long on two cores (python -m bench.speed.first_day)."""
    seen: list[int] = []

    def load() -> OnnxEmbedder:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        raise RuntimeError("no model wanted here")

    builder = EmbeddingBuilder(IndexStore(tmp_path / "index.sqlite"), EmbedderSlot(load))
    builder.start()
    builder.stop()
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen == [min(19, own + BUILD_NICENESS)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own


class GatedListing(CountingFolder):
    """The vault folder, whose stat listings, once their stats are taken, wait for `gate`
    while it is closed: a listing of a large vault (1.3 s at 50,000 notes)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate: anyio.Event | None = None
        self.listings = 0

    async def note_stats(self) -> dict[str, FileStat]:
        self.listings += 1
        stats = await super().note_stats()
        if self.gate is not None:
            await self.gate.wait()
        return stats


@pytest.mark.anyio
async def test_a_call_never_waits_for_a_background_listing_while_the_last_is_fresh(
    tmp_path: Path,
) -> None:
    """The server lists ahead of the calls (`list_ahead`); a call whose last listing is
    younger than `index_refresh_seconds` goes on without waiting for it: at 50,000 notes
    a new server's first answer waited 1.3 s for the listing behind its warm-up's."""
    vault = small_vault(tmp_path / "vault")
    settings = folder_settings(
        vault, tmp_path, index_dir=tmp_path / "index", index_refresh_seconds=60.0
    )
    folder = GatedListing(vault)
    retriever = open_retriever(Vault(None, folder), settings, None)
    corpus = retriever.corpus
    try:
        await corpus.sync(read_all=True)
        assert folder.listings == 1
        # The warm-up has just listed: the background listing does not list again.
        await corpus.list_ahead(older_than=1.0)
        assert folder.listings == 1
        folder.gate = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(partial(corpus.list_ahead, older_than=0.0))
            while folder.listings < 2:
                await anyio.sleep(0.01)
            with anyio.fail_after(5):  # the listing under way waits for the gate
                await corpus.sync(read_all=False)
                assert "Garden.md" in await answer(retriever, "tomatoes south wall")
            folder.gate.set()
        assert folder.listings == 2
    finally:
        retriever.close()


@pytest.mark.anyio
async def test_an_edit_made_while_a_listing_ran_is_seen_once_older_than_the_bound(
    tmp_path: Path,
) -> None:
    """A listing shows the vault as it was when it began: its age counts from then, so an
    edit made while it ran is seen by a call `index_refresh_seconds` after the edit."""
    vault = small_vault(tmp_path / "vault")
    refresh = 0.5
    settings = folder_settings(
        vault, tmp_path, index_dir=tmp_path / "index", index_refresh_seconds=refresh
    )
    folder = GatedListing(vault)
    retriever = open_retriever(Vault(None, folder), settings, None)
    try:
        await retriever.corpus.sync(read_all=True)
        folder.gate = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(partial(retriever.corpus.list_ahead, older_than=0.0))
            while folder.listings < 2:  # its stats are taken
                await anyio.sleep(0.01)
            garden = vault / "Garden.md"
            garden.write_text("The courgettes climb the trellis by the shed.\n")
            bump_mtime(garden)
            await anyio.sleep(refresh * 1.2)
            folder.gate.set()
        assert "Garden.md" in await answer(retriever, "courgettes trellis shed")
        assert folder.listings >= 3  # listed again for the answer
    finally:
        retriever.close()


@pytest.mark.anyio
async def test_the_background_listing_is_timed_from_the_last_start_and_lists_half_the_time(
    tmp_path: Path,
) -> None:
    """Listing ahead every period from start to start keeps a call from finding a listing
    due; one longer than the period waits its own length before the next."""
    vault = small_vault(tmp_path / "vault")
    folder = GatedListing(vault)
    retriever = open_retriever(Vault(None, folder), folder_settings(vault, tmp_path), None)
    corpus = retriever.corpus
    try:
        assert corpus.seconds_to_next_listing(1.0) == 1.0  # nothing listed yet
        before = time.monotonic()
        await corpus.sync(read_all=True)
        # The listing began after `before`: the period less the time since, at least.
        assert 1.0 - (time.monotonic() - before) <= corpus.seconds_to_next_listing(1.0) <= 1.0
        folder.gate = anyio.Event()
        began = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(partial(corpus.list_ahead, older_than=0.0))
            await anyio.sleep(0.4)  # the listing takes 0.4 s at least
            folder.gate.set()
        took_at_most = time.monotonic() - began
        # Longer than a 0.5 s period less its age: the wait is its own length.
        assert 0.4 <= corpus.seconds_to_next_listing(0.5) <= took_at_most
        # A 2 s period: the rest of it from the listing's start, which is longer.
        rest = corpus.seconds_to_next_listing(2.0)
        assert 2.0 - (time.monotonic() - began) <= rest <= 2.0 - 0.4
    finally:
        retriever.close()


def _stored_vectors(retriever: Retriever) -> dict[str, bytes]:
    with sqlite3.connect(retriever.corpus.store.path) as db:
        return dict(db.execute("SELECT text_hash, vector FROM passage_vectors"))


@pytest.mark.anyio
async def test_a_foreground_build_side_by_side_stores_what_one_thread_does(
    tmp_path: Path,
) -> None:
    """`obsidian-mcp index` embeds batches side by side on every core (`build_index`):
    every text once, the very vectors one batch after another stores, and its progress
    counts each text."""
    vault = tmp_path / "vault"
    vault.mkdir()
    rng = random.Random(38)
    words = [
        "ferry",
        "lantern",
        "harbour",
        "ledger",
        "tide",
        "rope",
        "gull",
        "keeper",
        "lamp",
        "salt",
        "wind",
        "quay",
    ]
    for n in range(12):
        paragraphs = [" ".join(rng.choices(words, k=40)) + "." for _ in range(5)]
        (vault / f"Note {n}.md").write_text(f"# Note {n}\n\n" + "\n\n".join(paragraphs))
    one, _ = retriever_on(vault, tmp_path / "one")
    side_by_side, _ = retriever_on(vault, tmp_path / "side")
    reported: list[int] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        if message is not None and "passage windows" in message:  # not the notes read
            reported.append(int(done))

    try:
        await one.corpus.sync(read_all=True)
        assert one.builder is not None
        texts = one.builder.run_until_done(side_by_side=1)
        threads: set[str] = set()
        store = side_by_side.corpus.store
        put = store.put_vectors

        def put_noting_thread(model: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
            threads.add(threading.current_thread().name)
            put(model, hashes, vectors)

        store.put_vectors = put_noting_thread  # type: ignore[method-assign]
        await side_by_side.build_index(progress)
        if cores_available() > 1:
            assert len(threads) > 1, threads
        assert texts > 8 * BUILD_BATCH  # several batches each way
        assert _stored_vectors(side_by_side) == _stored_vectors(one)
        assert len(_stored_vectors(one)) == texts
        assert reported == sorted(reported) and reported[-1] == texts
        # Every text has its vector: nothing is left to embed.
        assert side_by_side.builder is not None
        assert side_by_side.builder.run_until_done(side_by_side=2) == 0
    finally:
        one.close()
        side_by_side.close()


class GatedSmartEnv(SmartEnvCache):
    """Smart Connections' files, read only once the test opens `gate`: as slow as beside a
    first build of a big vault (reading them and checking their model took 14 s at 10,000
    notes), or slower."""

    def __init__(self, env_dir: Path) -> None:
        super().__init__(env_dir)
        self.gate = threading.Event()

    def _refresh(self) -> StoredVectors | None:
        self.gate.wait()  # in the cache's own thread
        return super()._refresh()


@pytest.mark.anyio
async def test_a_first_question_waits_for_no_smart_connections_file_once_it_gave_up_on_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Smart Connections' files are waited for in what is left of a first question's wait,
    but not once the notes' read was given up on: a vault too big to read in the wait is
    too big for those files too (beside a first build of 10,000 notes the question waited
    out its 2 s for them, python -m bench.speed.scale)."""
    monkeypatch.setattr("obsidian_mcp.retrieval.corpus._READ_CONCURRENCY", 4)
    retriever, folder = slow_retriever(tmp_path, read_wait=2.0)
    (tmp_path / "vault" / ".smart-env").mkdir()
    smart_env = GatedSmartEnv(tmp_path / "vault" / ".smart-env")
    retriever.candidates.semantic = SemanticSources(None, None, smart_env)
    HeldReads(monkeypatch, folder)
    try:
        found, waited = await asked_beside_the_warm_up(retriever)
    finally:
        smart_env.gate.set()
    assert "notes read: 0 of 40" in found.source_note, found.source_note
    assert "Smart Connections' vectors are being read" in found.source_note
    assert waited < 1.5, waited  # not the rest of the 2 s wait
    retriever.close()


@pytest.mark.anyio
async def test_a_question_does_not_wait_for_smart_connections_files_past_its_read_wait(
    vault_copy: Path, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    retriever, _ = retriever_on(vault_copy, tmp_path, index_read_wait_seconds=0.5)
    smart_env = GatedSmartEnv(vault_copy / ".smart-env")
    retriever.candidates.semantic = SemanticSources(None, None, smart_env)
    try:
        # The files are not read until the gate opens: a question that waited for them
        # past its read_wait would never answer (the bound only keeps a failure from
        # hanging the suite).
        with anyio.fail_after(60):
            early = await retriever.semantic_query("What is Kettle's real name?", limit=3)
    finally:
        smart_env.gate.set()
    assert "Smart Connections' vectors are being read" in early.source_note
    assert not early.source.startswith("smart-env")
    await smart_env.until_loaded()  # read in their own thread
    await smart_env.made_by(embedder)  # and their model known
    await retriever.corpus.sync(read_all=True)  # and the notes all read
    later = await retriever.semantic_query("What is Kettle's real name?", limit=3)
    assert later.source.startswith("smart-env")  # by meaning once the model is known
    assert "being read" not in later.source_note
    retriever.close()


@pytest.mark.anyio
async def test_a_question_while_notes_are_read_answers_from_those_read_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever, folder = slow_retriever(tmp_path, read_wait=0.5)
    reported: list[tuple[float, float | None]] = []
    # How long each question let itself wait for the reading (the background read passes
    # no bound): what "does not wait again" means, whatever the machine's speed.
    waits: list[float] = []
    sync = retriever.corpus.sync

    async def recorded_sync(**kwargs: Any) -> None:
        if "wait_seconds" in kwargs:
            waits.append(kwargs["wait_seconds"])
        await sync(**kwargs)

    monkeypatch.setattr(retriever.corpus, "sync", recorded_sync)
    # The notes past the first 16 are read once both questions are answered, however
    # slow or fast the machine.
    held = HeldReads(monkeypatch, folder, lambda path: len(folder.reads) >= 16)

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reported.append((done, total))

    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        early = await retriever.semantic_query("harbour ledger", limit=3, progress=progress)
        assert early.source_note.startswith("notes read: ")
        assert "of 40, the rest is being read" in early.source_note
        assert reported and all(total == 40 for _, total in reported)
        again = await retriever.semantic_query("harbour ledger", limit=3)
        assert again.source_note.startswith("notes read: ")
        assert waits == [0.5, 0.0]  # the next question does not wait again
        held.gate.set()
    late = await retriever.semantic_query("harbour ledger", limit=3)
    assert "notes read" not in late.source_note
    assert sorted(folder.reads) == sorted(f"Note {n}.md" for n in range(40))  # each once
    retriever.close()


ASKING = contextvars.ContextVar("asking", default=False)


@pytest.mark.anyio
async def test_a_question_during_the_first_read_reads_first_the_notes_with_its_rare_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, the first day: a question naming someone found in one unread note gets
    that note while the first build is still reading, by the vault's own search for its
    rarest words; a word every note holds reads nothing ahead. The build's read reaches
    the note only after the answer (held back here)."""
    retriever, folder = slow_retriever(tmp_path, read_wait=0.0)
    keeper = "Keeper.md"
    (tmp_path / "vault" / keeper).write_text(
        "# Keeper\n\nQuennell Ashgrove keeps the eastern light and its ledger.\n"
    )
    # The first build's read, held back past the answer.
    held = HeldReads(
        monkeypatch,
        folder,
        lambda path: not ASKING.get() and (path == keeper or len(folder.reads) >= 16),
    )
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        ASKING.set(True)
        common = await retriever.semantic_query("harbour ledger lanterns", limit=3)
        assert folder.reads.count(keeper) == 0  # every note holds those words
        found = await retriever.semantic_query("Where does Quennell Ashgrove keep?", limit=3)
        ASKING.set(False)
        assert "of 41, the rest is being read" in found.source_note
        assert found.groups and found.groups[0].context.path == keeper
        assert "notes read" in common.source_note
        held.gate.set()
    # The rest once each; the build's read of the keeper's note was under way already.
    assert sorted(set(folder.reads)) == sorted([keeper, *(f"Note {n}.md" for n in range(40))])
    assert len(folder.reads) <= 42
    retriever.close()


@pytest.mark.anyio
async def test_a_question_during_the_first_read_scans_the_folder_once_for_its_rare_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 at 50,000 notes: a question whose rarest word no unread note holds
    scanned the folder again for the next (two scans of 0.5-0.6 s a question, python -m
    bench.speed.first_day --notes 50000). One scan now finds both words' notes, and the
    notes of the first word any unread note holds are read ahead."""
    retriever, folder = slow_retriever(tmp_path, read_wait=0.0)
    keeper = "Keeper.md"
    (tmp_path / "vault" / keeper).write_text("# Keeper\n\nQuennell Ashgrove keeps the light.\n")
    held = HeldReads(
        monkeypatch,
        folder,
        lambda path: not ASKING.get() and (path == keeper or len(folder.reads) >= 16),
    )
    scans = counted_scans(monkeypatch, folder)
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        ASKING.set(True)
        found = await retriever.semantic_query("Where does Zzqx Quennell keep?", limit=3)
        ASKING.set(False)
        assert scans == [["Zzqx", "Quennell"]]  # no note holds the rarer; one scan
        assert folder.reads.count(keeper) == 1
        assert found.groups and found.groups[0].context.path == keeper
        held.gate.set()
    retriever.close()


@pytest.mark.anyio
async def test_a_question_searches_no_unread_note_for_words_the_notes_read_hold_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 at 50,000 notes: a topic's common words cost each question a search of
    every unread note (2.3-3 s beside the build, `vault_quick_context` 7 s a call), which
    found too many to read any. A word the notes read already hold in `_READ_FIRST_MOST`
    passages is not searched for; a rare one still is, and its note read ahead."""
    retriever, folder = slow_retriever(tmp_path, read_wait=0.0)
    keeper = "Keeper.md"
    (tmp_path / "vault" / keeper).write_text("# Keeper\n\nQuennell Ashgrove keeps the light.\n")
    held = HeldReads(
        monkeypatch,
        folder,
        lambda path: not ASKING.get() and (path == keeper or len(folder.reads) >= 25),
    )
    scans = counted_scans(monkeypatch, folder)
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await until_read(retriever, 25)
        ASKING.set(True)
        await retriever.semantic_query("harbour ledger lanterns", limit=3)
        assert scans == []  # in all 25 notes read: no search
        found = await retriever.semantic_query("Quennell and the ledger", limit=3)
        ASKING.set(False)
        assert scans == [["Quennell"]]  # the common word is not searched for either
        assert found.groups and found.groups[0].context.path == keeper
        held.gate.set()
        background.cancel_scope.cancel()
    retriever.close()


@pytest.mark.anyio
async def test_related_notes_during_the_first_read_answer_from_the_notes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, any tool during the first build: `vault_find_related`'s first call waited
    for the whole read (33 s at 10,000 notes, python -m bench.speed.scale). It reads the
    note asked about now, answers from the notes read and says so; once the read is done
    it finds what the unread notes held (here a backlink)."""
    retriever, folder = slow_retriever(tmp_path, read_wait=0.0)
    keeper, tower = "Keeper.md", "Tower.md"
    (tmp_path / "vault" / keeper).write_text("# Keeper\n\nQuennell keeps the light.\n")
    (tmp_path / "vault" / tower).write_text("# Tower\n\nThe [[Keeper]] climbs at dusk.\n")
    held = HeldReads(
        monkeypatch,
        folder,
        lambda path: not ASKING.get() and (path in (keeper, tower) or len(folder.reads) >= 16),
    )
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        ASKING.set(True)
        with anyio.fail_after(10):  # the read is held until the answer
            early = await find_related(retriever, "Keeper", limit=5)
        ASKING.set(False)
        assert early.path == keeper and folder.reads.count(keeper) == 1
        assert early.backlinks == ()  # the tower is not read yet
        assert "of 42, the rest is being read; backlinks and similar notes come from the " in (
            early.links_note
        )
        held.gate.set()
        await retriever.corpus.sync(read_all=True)
        done = await find_related(retriever, "Keeper", limit=5)
        assert [n.path for n in done.backlinks] == [tower]
        assert done.links_note == ""
        background.cancel_scope.cancel()
    retriever.close()


@pytest.mark.anyio
async def test_an_exact_search_during_the_first_read_finds_what_it_finds_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, any tool during the first build: an exact search whose words more unread
    notes hold than are read at once waited for the whole read (44 s for "harbour" at
    10,000 notes). The unread notes' files are searched as they are, in one scan: the
    same notes, counts and snippets as once every note is read, the build's read held
    back meanwhile."""
    monkeypatch.setattr(search_module, "_READ_AHEAD_FOR_EXACT", 2)
    retriever, folder = slow_retriever(tmp_path, read_wait=0.0)
    (tmp_path / "vault" / "Tides.md").write_text("# Tides\n\nThe HARBOUR Ledger, twice: harbour.\n")
    held = HeldReads(monkeypatch, folder, lambda path: not ASKING.get() and len(folder.reads) >= 16)
    queries = ["harbour", '"harbour ledger"', "tides lanterns", "ledger number 120", "twice"]

    async def found(query: str) -> tuple[object, ...]:
        exact = await retriever.smart_search(query, limit=5, snippet_length=60)
        hits = await retriever.text_hits(query)
        return (
            exact.total_files,
            exact.total_passages,
            [(g.context.path, g.matches, [p.text for p in g.passages]) for g in exact.groups],
            sorted((hit.path, len(hit.matches)) for hit in hits),
        )

    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        ASKING.set(True)
        with anyio.fail_after(10):  # the read is held until every search has answered
            during = [await found(query) for query in queries]
        assert held.waiting and retriever.corpus.unread > 0
        ASKING.set(False)
        held.gate.set()
        await retriever.corpus.sync(read_all=True)
        after = [await found(query) for query in queries]
        assert during == after
        assert [d[0] for d in after] == [41, 41, 40, 1, 1]
        background.cancel_scope.cancel()
    retriever.close()


@pytest.mark.anyio
async def test_the_first_read_starts_no_note_while_a_question_reads_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: beside the first build's read, the folder's scan for a question's rare
    word took over 8 s at 10,000 notes (0.27 s alone), and a new server's first question
    gave up on it. The build's read now starts no note until the read-ahead is done."""
    retriever, folder = slow_retriever(tmp_path, read_wait=0.0)
    started: list[str] = []
    read = folder.read_note

    async def recorded_read(path: str) -> NoteData:
        started.append(path)
        return await read(path)

    searching, release = anyio.Event(), anyio.Event()
    search = folder.search_each

    async def held_search(
        words: Sequence[str], leaving_out: Collection[str] = (), fresh_within: float = 0.0
    ) -> list[set[str]]:
        searching.set()
        await release.wait()
        return await search(words, leaving_out, fresh_within)

    monkeypatch.setattr(folder, "read_note", recorded_read)
    monkeypatch.setattr(folder, "search_each", held_search)
    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)  # the first 16 reads are under way (0.5 s each)
        background.start_soon(retriever.corpus.read_unread_holding, ["quennell"], 20)
        await searching.wait()
        before = len(started)
        await anyio.sleep(1.2)  # two more rounds of 16 would have started meanwhile
        assert len(started) == before
        release.set()
    assert sorted(started) == sorted(f"Note {n}.md" for n in range(40))  # each once
    retriever.close()


@pytest.mark.anyio
async def test_an_exact_search_during_the_first_read_reads_what_may_match_and_misses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vault_smart_search` during a first build waited for the whole read (30 s at 10,000
    notes): it now reads at once the unread notes that hold its longest word or name it,
    and finds every match, as after the read. It does not wait `index_read_wait_seconds`
    for the read first (2.5 s of every exact search in a first build's first minute)."""
    retriever, folder = slow_retriever(tmp_path, read_wait=600)
    (tmp_path / "vault" / "Keeper.md").write_text("# Keeper\n\nQuennell Ashgrove keeps it.\n")
    (tmp_path / "vault" / "Quennell's Lamp.md").write_text("# Lamp\n\nAn oil lamp.\n")
    # The first build's read, held back past the answers.
    held = HeldReads(monkeypatch, folder, lambda path: not ASKING.get())

    async def files(query: str) -> tuple[set[str], int]:
        """The files shown, and how many matched (a match by name alone shows no snippet)."""
        found = await retriever.smart_search(query, limit=10, snippet_length=80)
        return {group.context.path for group in found.groups}, found.total_files

    async with anyio.create_task_group() as background:
        background.start_soon(retriever.warm_up)
        await anyio.sleep(0.05)
        ASKING.set(True)
        with anyio.fail_after(10):  # not the whole read: it is held back until the end
            early = [await files(q) for q in ("quennell", '"Ashgrove keeps"', "lantern harbour")]
            # Written after the listing, while the first build reads (no listing is taken
            # then): the vault's own search names it, and it is read with the others.
            (tmp_path / "vault" / "Late.md").write_text("# Late\n\nZephyrine came late.\n")
            assert await files("zephyrine") == ({"Late.md"}, 1)
        ASKING.set(False)
        held.gate.set()
    late = [await files(q) for q in ("quennell", '"Ashgrove keeps"', "lantern harbour")]
    assert early == late
    assert late[0] == ({"Keeper.md"}, 2) and late[1] == ({"Keeper.md"}, 1)  # the lamp: by name
    assert late[2][1] == 40  # every generated note holds both words
    retriever.close()


@pytest.mark.anyio
async def test_notes_read_by_a_question_that_stopped_waiting_are_kept(tmp_path: Path) -> None:
    retriever, _ = slow_retriever(tmp_path, read_wait=0.7)
    # No background reader: the question reads for 0.7 s (16 notes at a time, 0.5 s each;
    # fewer on a busy machine, never all 40: at least 1.5 s of sleeps).
    await retriever.semantic_query("harbour ledger", limit=3)
    stored = IndexStore(retriever.corpus.store.path).stats().notes
    assert 0 < stored < 40
    assert retriever.corpus.unread == 40 - stored
    retriever.close()


def test_two_processes_share_the_index_while_one_builds(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    for n in range(30):
        (vault / f"Log {n}.md").write_text(
            f"# Log {n}\n\nThe watch on day {n} saw gulls over the breakwater and a "
            f"cargo of salt unloaded at pier {n % 7}.\n"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    env |= {"OBSIDIAN_CONFIG_DIR": str(tmp_path), "OBSIDIAN_INDEX_DIR": str(tmp_path / "ix")}
    builder = subprocess.Popen(
        [sys.executable, "-m", "obsidian_mcp", "index", "--vault", str(vault)],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    async def serve_meanwhile() -> list[str]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "obsidian_mcp", "serve", "--vault", str(vault)],
            env=env,
            cwd=str(REPO_ROOT),
        )
        answers: list[str] = []
        async with Client(params) as client:
            while builder.poll() is None or len(answers) < 2:
                result = await client.call_tool(
                    "vault_semantic_query", {"query": "salt unloaded at pier 3"}
                )
                assert not result.is_error
                answers.append(
                    "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                )
                await anyio.sleep(0.2)
        return answers

    answers = anyio.run(serve_meanwhile)
    out, err = builder.communicate(timeout=300)
    assert builder.returncode == 0, err
    assert "30 notes" in out
    assert all("pier 3" in text for text in answers)
    index = next((tmp_path / "ix").glob("*.sqlite3"))
    with sqlite3.connect(index) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM notes").fetchone()[0] == 30
    stats = IndexStore(index).stats()
    assert stats.embedded_passages == stats.passages


# -- status --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_status_names_the_index(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    retriever, _ = retriever_on(vault, tmp_path)
    await retriever.build_index()
    status = retriever.index_status()
    assert status["notes"] == 3 and status["passages"] == 3
    assert status["embedded_passages"] == 3 and status["model"] == "all-MiniLM-L6-v2"
    assert str(status["path"]).startswith(str(tmp_path / "index"))
    assert int(str(status["bytes_on_disk"])) > 0 and status["last_updated"]
    retriever.close()


def test_an_index_that_cannot_be_written_lives_in_memory_for_the_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with caplog.at_level(logging.WARNING):
        store = IndexStore(blocker / "index" / "vault.sqlite3")
    try:
        assert store.path == ":memory:"
        assert "keeping it in memory for this session" in caplog.text
        assert store.stats().notes == 0  # and it works
    finally:
        store.close()
    assert blocker.read_text() == "a file where the cache folder should be"


def test_the_cycle_collector_is_off_during_loads_and_on_after_the_last() -> None:
    """Loads overlap in several threads: the collector stays off until the last one ends,
    and is left as it was found."""
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # a program that keeps the collector off finds it off after a load
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_only_a_load_that_asks_freezes_what_it_built_in_a_serving_process() -> None:
    """A server process's first load of its notes is frozen out of later full collections;
    a query's small load is not (freezing it would keep its cyclic garbage for ever), and
    a process that is not a server (this one, a library user) freezes nothing."""

    def frozen(row: object) -> bool:  # tracked, yet in no generation the collector walks
        return gc.is_tracked(row) and id(row) not in {id(o) for o in gc.get_objects()}

    with collector_paused(frozen_after=True):
        not_serving = ["passage"]
    assert not frozen(not_serving)
    freeze_first_loads()
    try:
        with collector_paused():
            small = ["row"]
        assert not frozen(small)
        with collector_paused(frozen_after=True):
            loaded = ["passage"]
        assert frozen(loaded)
        gc.collect()
        assert frozen(loaded)  # a full collection leaves it where it is
    finally:
        freeze_first_loads(False)
        gc.unfreeze()  # the rest of the test process as it was


class _Zeros:
    """A model stand-in for counting what the builder looks up (what it finds is not
    what these tests measure, so no vector need mean anything)."""

    model_id = vector_space = "zeros"

    def embed(self, texts: Sequence[str], role: TextRole) -> np.ndarray[Any, Any]:
        return np.zeros((len(texts), 8), dtype=np.float32)

    def get(self) -> "_Zeros":
        return self


def _stored_texts(store: IndexStore, notes: int, first: int = 0, word: str = "text") -> None:
    """Notes of seven passages holding one to three texts each, as a vault's notes do."""
    rows = [
        NoteRow(
            f"n{i}.md",
            0,
            100,
            "",
            (),
            None,
            tuple(
                PassageRow((f"h{j}",), j * 100, j * 100 + 90, ("w",), ("h",), texts)
                for j in range(7)
                for texts in [tuple(f"note {i} passage {j} {word} {k}" for k in range(1 + j % 3))]
            ),
            (),
            f"n{i}",
        )
        for i in range(first, first + notes)
    ]
    store.put_notes(rows)


def _look_up_steps(store: IndexStore, notes: int) -> tuple[int, int]:
    """(SQLite steps the builder's look-ups took, texts they returned) building the index
    of `notes` notes: the look-ups' work alone."""
    _stored_texts(store, notes)
    steps = 0
    returned: list[str] = []

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    look_up = store.unembedded

    def counted(
        model: str, limit: int, after: int = 0, *, firsts_only: bool = False
    ) -> tuple[list[tuple[str, str]], int]:
        # The look-ups read on a connection of their own (`_build_reads`).
        with store._build_reads.connection() as db:  # pyright: ignore[reportPrivateUsage]
            db.set_progress_handler(count, 100)
        try:
            pending, last = look_up(model, limit, after, firsts_only=firsts_only)
        finally:
            with store._build_reads.connection() as db:  # pyright: ignore[reportPrivateUsage]
                db.set_progress_handler(None, 100)
        returned.extend(digest for digest, _ in pending)
        return pending, last

    store.unembedded = counted  # type: ignore[method-assign]
    EmbeddingBuilder(store, _Zeros()).run_until_done()  # type: ignore[arg-type]
    assert len(returned) == len(set(returned))  # each text once
    return steps, len(returned)


def test_the_builder_reads_each_text_once_so_a_build_grows_linearly(tmp_path: Path) -> None:
    """Issue 38: each look-up of what is left to embed scanned every text, so a build's
    look-ups grew with the square of the vault (131 of 161 CPU-seconds at 10,000 notes).
    Four times the notes now take about four times the look-up work."""
    small, small_texts = _look_up_steps(IndexStore(tmp_path / "small.sqlite"), 300)
    large, large_texts = _look_up_steps(IndexStore(tmp_path / "large.sqlite"), 1200)
    assert large_texts == 4 * small_texts == 4 * 300 * 13
    assert large < 6 * small, (small, large)  # quadratic: about 16 times


def test_texts_stored_behind_the_look_up_are_embedded_in_the_same_build(tmp_path: Path) -> None:
    """A note stored again while the build runs may take rows behind where the builder's
    look-up has reached (SQLite reuses the highest row ids freed): one more look-up from
    the start finds them before the build stops."""
    store = IndexStore(tmp_path / "index.sqlite")
    _stored_texts(store, 40)
    look_up = store.unembedded
    stored_again: list[int] = []

    def storing_behind(
        model: str, limit: int, after: int = 0, *, firsts_only: bool = False
    ) -> tuple[list[tuple[str, str]], int]:
        pending, last = look_up(model, limit, after, firsts_only=firsts_only)
        if not pending and after and not stored_again and not firsts_only:
            _stored_texts(store, 1, first=39, word="changed")  # the last note, edited
            stored_again.append(after)
        return pending, last

    store.unembedded = storing_behind  # type: ignore[method-assign]
    EmbeddingBuilder(store, _Zeros()).run_until_done()  # type: ignore[arg-type]
    assert stored_again and store.count_unembedded("zeros") == 0
    behind = store._db.execute(  # pyright: ignore[reportPrivateUsage]
        "SELECT count(*) FROM passage_texts WHERE text LIKE '%changed%' AND rowid <= ?",
        stored_again,
    ).fetchone()[0]
    assert behind > 0  # the case this test is about did happen


def test_the_builds_look_up_holds_up_no_question_storing_its_texts(tmp_path: Path) -> None:
    """The build's look-up for what is left reads every passage text (2.1 s at 50,000
    notes) on a connection of its own: under the store's lock, a question embedding its
    keyword candidates meanwhile waited for it to store them (2.6-6.7 s against 1.1-1.2 s;
    in process). Here the store's writes are held while both look-ups run."""
    store = IndexStore(tmp_path / "index.sqlite")
    _stored_texts(store, 3)
    writing, done = threading.Event(), threading.Event()

    def hold_the_writes() -> None:
        with store._lock:  # pyright: ignore[reportPrivateUsage]
            writing.set()
            done.wait(10)

    holder = threading.Thread(target=hold_the_writes)
    holder.start()
    try:
        assert writing.wait(5)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(store.unembedded, "zeros", 1000).result(timeout=5)[0]
            assert pool.submit(store.count_unembedded, "zeros").result(timeout=5) == len(pending)
    finally:
        done.set()
        holder.join()
    store.close()


def test_every_passage_is_searchable_by_meaning_before_any_is_sharpened(tmp_path: Path) -> None:
    """Issue 38: a passage is found by meaning once one of its texts has a vector, so the
    build embeds every passage's first text before any passage's second or third: half-way
    through a first build the whole vault answers by meaning, not half of it."""
    store = IndexStore(tmp_path / "index.sqlite")
    _stored_texts(store, 30)
    firsts, _ = store.unembedded("zeros", 10_000, firsts_only=True)
    store.put_vectors("zeros", [digest for digest, _ in firsts[:7]], np.ones((7, 8), np.float32))
    stats = store.stats()  # the first note's 7 passages by their first texts; 3 have no other
    assert (stats.searchable_passages, stats.embedded_passages, stats.passages) == (7, 3, 210)
    embedded: list[str] = []

    class Recording(_Zeros):
        def embed(self, texts: Sequence[str], role: TextRole) -> np.ndarray[Any, Any]:
            embedded.extend(texts)
            return super().embed(texts, role)

    EmbeddingBuilder(store, Recording()).run_until_done()  # type: ignore[arg-type]
    first = [text.endswith(" text 0") for text in embedded]
    assert len(embedded) == 30 * 13 - 7 and sum(first) == 29 * 7
    assert first == sorted(first, reverse=True)  # every first text, then the rest
    # Within each pass, notes one after another, as stored.
    assert embedded[:3] == [f"note 1 passage {j} text 0" for j in range(3)]
    stats = store.stats()
    assert stats.searchable_passages == stats.embedded_passages == stats.passages
