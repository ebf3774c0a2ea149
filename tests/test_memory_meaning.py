"""The memory index's cache (a new process answers from it; it is checked against the file
and rebuilt when they differ) and recall by meaning with the real embedding model."""

import json
import logging
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from obsidian_mcp.config import default_cache_dir
from obsidian_mcp.index.embedder import Embedder, Matrix, OnnxEmbedder
from obsidian_mcp.index.recipe import ModelRecipe, Pooling, TextRole
from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.files import MemoryFiles
from obsidian_mcp.memory.index import LogReader, MemoryIndex, parse, terms
from obsidian_mcp.memory.model import Memory, Tombstone, encode
from obsidian_mcp.memory.render import render_recall
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.conftest import folder_settings
from tests.memory_files import MEMORY, memory_lines, writer_paths
from tests.test_status import read_status

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class CountingEmbedder:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def vector_space(self) -> str:
        return self._inner.vector_space

    @property
    def dims(self) -> int:
        return self._inner.dims

    @property
    def recipe(self) -> ModelRecipe:
        return self._inner.recipe

    @property
    def pooling(self) -> Pooling | None:
        return self._inner.pooling

    def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        self.texts += len(texts)
        return self._inner.embed(texts, role)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


def store_at(vault: Path, cache: Path | None = None, embedder: Embedder | None = None
             ) -> MemoryStore:
    """Another process of the one device beside the vault: a writer slot of its own."""
    return MemoryStore(Vault(None, FolderSource(vault)), MEMORY, cache=cache,
                       embedder=(lambda: embedder) if embedder is not None else None,
                       config_dir=vault.parent / "config")


# Where seeded lines go: the single file of earlier versions (still read), or the file of a
# writer on another device.
FILES = {"legacy": MEMORY, "writer": f"{MemoryFiles(MEMORY).folder}/elsewhere-0-2.jsonl"}


def write_lines(vault: Path, lines: list[str], name: str = MEMORY) -> None:
    (vault / name).parent.mkdir(parents=True, exist_ok=True)
    (vault / name).write_text("".join(lines), "utf-8")


def entry(n: int, content: str, tags: tuple[str, ...] = ("t",)) -> Memory:
    return Memory(f"0entry{n:07d}", START + timedelta(minutes=n), content, tags, "")


# -- the cache -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_new_process_answers_from_the_cache_without_rebuilding(
    vault: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache" / "memory.sqlite"
    write_lines(vault, [encode(entry(n, f"fact {n}")) for n in range(50)])
    first = store_at(vault, cache)
    assert (await first.recall(limit=1)).total == 50
    generation = first._reader.generation  # pyright: ignore[reportPrivateUsage]

    later = store_at(vault, cache)  # another session, same cache
    await later.remember("a new fact", ["t"], "")
    assert (await later.recall(query="fact")).total == 51
    assert later._reader.generation == generation  # pyright: ignore[reportPrivateUsage]
    status = await later.status()
    assert status.cache == str(cache) and status.memories == 51


@pytest.fixture(params=sorted(FILES))
def seeded(request: pytest.FixtureRequest) -> str:
    """The file the seeded memories are in."""
    return FILES[request.param]


@pytest.fixture
async def warm_cache(vault: Path, tmp_path: Path, seeded: str) -> Path:
    """A file of five memories, and a cache built from it by an earlier session."""
    cache = tmp_path / "memory.sqlite"
    write_lines(vault, [encode(entry(n, f"fact {n}")) for n in range(5)], seeded)
    assert (await store_at(vault, cache).recall(query="fact")).total == 5
    return cache


@pytest.mark.anyio
async def test_a_cache_that_no_longer_matches_the_file_is_rebuilt_with_a_log_line(
    vault: Path, warm_cache: Path, seeded: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = warm_cache
    # Edited in the middle, same length: the anchor (the last line) still matches, the CRC
    # of the prefix does not.
    text = (vault / seeded).read_text("utf-8").replace("fact 2", "gist 2")
    (vault / seeded).write_text(text, "utf-8")
    with caplog.at_level(logging.INFO):
        recall = await store_at(vault, cache).recall(query="gist")
    assert [m.content for m in recall.memories] == ["gist 2"]
    assert f"{seeded}'s start changed since the cache was built" in caplog.text
    assert "rebuilding it from the files" in caplog.text


@pytest.mark.anyio
async def test_a_corrupt_cache_is_rebuilt_never_a_crash(
    vault: Path, tmp_path: Path, warm_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = warm_cache
    for leftover in tmp_path.glob("memory.sqlite-*"):
        leftover.unlink()
    cache.write_bytes(b"\0garbage" * 512)  # overwritten by something else
    with caplog.at_level(logging.WARNING):
        assert (await store_at(vault, cache).recall()).total == 5
    assert "unreadable" in caplog.text
    with sqlite3.connect(cache) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def index_rows(index: MemoryIndex) -> tuple[object, ...]:
    db = index.db
    memories = db.execute(
        "SELECT id, ts, content, tags, repeat, file FROM memories ORDER BY slot")
    return (
        memories.fetchall(),
        db.execute("SELECT id, ts, file, memory_file FROM retired ORDER BY id").fetchall(),
        index.tag_counts(),
        index.file_lines("a.jsonl"),
        index.file_lines("b.jsonl"),
        index.live_count,
    )


def test_a_bulk_load_builds_the_same_index_as_one_record_at_a_time() -> None:
    kept = entry(1, "kept", ("a", "b"))
    # Two files, read one after the other.
    first = [
        encode(entry(0, "superseded")),
        encode(kept),
        encode(entry(2, "kept", ("b", "a"))),  # a repeat of the one above
        encode(Tombstone(entry(0, "").id, START)),
        encode(Tombstone(entry(3, "").id, START)),  # a forget read before its memory
    ]
    second = [
        encode(entry(3, "revived")),
        encode(Tombstone(entry(3, "").id, START)),  # the same forget in another file
        encode(entry(3, "revived again")),  # a memory line after its tombstone
        encode(kept),  # the same line in both files
        encode(Tombstone(entry(1, "").id, START)),  # the first of a repeated pair retired
        encode(entry(4, "plain", ("c",))),
    ]
    records = [("a.jsonl", record) for record in parse("".join(first).encode()).records]
    records += [("b.jsonl", record) for record in parse("".join(second).encode()).records]
    bulk = LogReader()
    with bulk.writing():
        bulk.index.load(records)
    one_by_one = LogReader()
    with one_by_one.writing():
        for file, record in records:
            one_by_one.index.apply(record, file)
    with bulk.reading(), one_by_one.reading():
        assert index_rows(bulk.index) == index_rows(one_by_one.index)
        # A tombstone retires its id for good, whichever order the lines come in: left are
        # the repeat (now the one shown) and the plain memory.
        assert [m.id for m in bulk.index.primaries()] == [entry(2, "").id, entry(4, "").id]
        assert bulk.index.live_count == 2
        assert bulk.index.latest(entry(3, "").id) == Tombstone(entry(3, "").id, START)
        # (dead, live) memory lines per file: a.jsonl's first two memories were forgotten
        # and its repeat lives; b.jsonl's forgotten memory counts once, its plain one lives.
        assert bulk.index.file_lines("a.jsonl") == (2, 1)
        assert bulk.index.file_lines("b.jsonl") == (1, 1)


def test_the_cache_schema_is_created_once_and_shared(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    first, second = open_cache(path), open_cache(path)
    assert first.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    first.execute("INSERT INTO state VALUES ('probe', 1)")
    assert second.execute("SELECT value FROM state WHERE key = 'probe'").fetchone() == (1,)


# -- meaning ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def model(embedder: OnnxEmbedder) -> Embedder:
    return embedder  # loaded once for the whole test session


# (memory, its tags, a paraphrase that shares no content word with it)
PARAPHRASED = [
    ("The user prefers dark mode in every editor.", ("user",),
     "which colour theme do they like for coding tools?"),
    ("Gale is afraid of deep water since the shipwreck.", ("gale",),
     "what frightens her about the sea?"),
    ("The deploy script needs Python 3.11 on the build server.", ("project",),
     "interpreter version required for releasing"),
]
DISTRACTORS = [
    ("The council meets on the first Monday of each month.", ("lore",)),
    ("Mira keeps the ledger of the guild's debts.", ("mira",)),
    ("Tests must never assert timings.", ("project",)),
]


@pytest.mark.anyio
async def test_recall_finds_a_memory_by_a_paraphrase_that_shares_no_word_with_it(
    vault: Path, tmp_path: Path, model: Embedder
) -> None:
    store = store_at(vault, tmp_path / "cache.sqlite", model)
    for content, tags in [(c, t) for c, t, _ in PARAPHRASED] + DISTRACTORS:
        await store.remember(content, tags, "")
    await store.catch_up_meaning()
    for content, tags, paraphrase in PARAPHRASED:
        assert not terms(paraphrase) & terms(content + " " + " ".join(tags))
        recall = await store.recall(query=paraphrase, limit=1)
        assert [m.content for m in recall.memories] == [content], paraphrase
        assert recall.meaning_note is None
    words_only = store_at(vault)  # the same file, no model: the paraphrase finds nothing
    recall = await words_only.recall(query=PARAPHRASED[0][2])
    assert recall.total == 0
    assert "(ranked by words only: no embedding model is set up)" in render_recall(recall, 500)


@pytest.mark.anyio
async def test_a_filtered_recall_finds_by_meaning_among_the_memories_it_keeps(
    vault: Path, tmp_path: Path, model: Embedder
) -> None:
    """Meaning ranks the memories the tags (or type, or time range) keep, not the vault's
    nearest few of which the filter then keeps none: 40 memories closer to the query under
    another tag once hid the one memory with the tag asked for."""
    content, tags, paraphrase = PARAPHRASED[1]
    store = store_at(vault, tmp_path / "cache.sqlite", model)
    await store.remember(content, tags, "")
    for n in range(40):  # nearer the query than the memory it paraphrases
        await store.remember(f"{paraphrase} (asked again, {n})", ("elsewhere",), "")
    await store.catch_up_meaning()
    recall = await store.recall(query=paraphrase, tags=list(tags), limit=3)
    assert [m.content for m in recall.memories] == [content]
    unfiltered = await store.recall(query=paraphrase, limit=3)
    assert all(m.tags == ("elsewhere",) for m in unfiltered.memories)


@pytest.mark.anyio
async def test_a_memory_words_alone_find_is_not_buried_under_the_nearest_in_meaning(
    vault: Path, tmp_path: Path, model: Embedder
) -> None:
    """LoCoMo's "What country is Caroline's grandma from?": the turn that answers holds the
    question's rare words, while dozens of others are nearer in meaning. A fusion that
    weighs meaning twice over words showed 30 of those before it."""
    store = store_at(vault, tmp_path / "cache.sqlite", model)
    answer = "Caroline: This necklace was a gift from my grandma in my home country, Sweden."
    await store.remember(answer, ["caroline"], "")
    for n in range(40):
        # Nearer the question than the answer, and none of its words.
        question = f"What nation is the grandmother of Carolyn from? ({n})"
        await store.remember(question, ["talk"], "")
    await store.catch_up_meaning()
    recall = await store.recall(query="What country is Caroline's grandma from?", limit=5)
    assert recall.memories[0].content == answer


@pytest.mark.anyio
async def test_missing_vectors_are_embedded_once_and_cached_outside_the_file(
    vault: Path, tmp_path: Path, model: Embedder
) -> None:
    cache = tmp_path / "cache.sqlite"
    writer = store_at(vault)  # another process, without the model
    for content, tags, _ in PARAPHRASED:
        await writer.remember(content, tags, "")
    counting = CountingEmbedder(model)
    reader = store_at(vault, cache, counting)
    await reader.catch_up_meaning()
    recall = await reader.recall(query=PARAPHRASED[1][2])
    assert recall.memories[0].content == PARAPHRASED[1][0] and recall.meaning_note is None
    embedded = counting.texts  # three memories, one query

    # A memory another process adds is found by words at once, and the note says meaning
    # has not reached it yet; the catch-up embeds only that one.
    await writer.remember("Obsidian sync runs every ten minutes.", ["vault"], "")
    recall = await reader.recall(query="sync")
    assert recall.meaning_note == "meaning covers 3 of 4 memories so far; the rest by words"
    await reader.catch_up_meaning()
    assert counting.texts == embedded + 2  # that memory, and the query "sync"

    # A new process finds every vector in the cache: nothing is embedded again.
    again = CountingEmbedder(model)
    await store_at(vault, cache, again).catch_up_meaning()
    assert again.texts == 0
    fields = {"id", "ts", "content", "tags", "context"}
    stored = memory_lines(vault)
    assert len(stored) == 4 and len(writer_paths(vault)) == 1  # only the writer wrote
    assert all(set(json.loads(line)) == fields for line in stored)
    assert (await store_at(vault, cache, again).status()).meaning == "loading"


@pytest.mark.anyio
async def test_the_server_recalls_by_meaning_once_its_background_catch_up_is_done(
    vault: Path, tmp_path: Path, model: Embedder
) -> None:
    """Through a real MCP client: the server loads the model and embeds the file's memories
    in the background; status says so; then a paraphrase finds its memory."""
    del model  # loaded already by the fixture: the server shares it, it does not load again
    write_lines(vault, [encode(entry(n, content, tags))
                        for n, (content, tags, _) in enumerate(PARAPHRASED)])
    settings = folder_settings(vault, tmp_path / "cfg")
    async with Client(build_server(settings)) as client:
        async def memory_status() -> dict[str, str]:
            memory = (await read_status(client))["memory"]
            assert isinstance(memory, dict)
            return cast(dict[str, str], memory)

        with anyio.fail_after(60):
            while "3 memory vectors" not in (await memory_status())["meaning"]:
                await anyio.sleep(0.05)
        assert (await memory_status())["cache"].startswith(str(default_cache_dir()))
        result = await client.call_tool("vault_recall", {"query": PARAPHRASED[2][2], "limit": 1})
        block = result.content[0]
        assert isinstance(block, TextContent) and not result.is_error
        assert block.text.startswith("1 memory, best first\n")
        assert PARAPHRASED[2][0] in block.text and "words only" not in block.text


@pytest.mark.anyio
async def test_forgotten_memories_do_not_keep_their_vectors(
    vault: Path, tmp_path: Path, model: Embedder
) -> None:
    cache = tmp_path / "memory-cache.sqlite"
    store = store_at(vault, cache, model)
    await store.recall(query="warm up the model")
    assert await store._vectors.load() is not None  # pyright: ignore[reportPrivateUsage]
    for n in range(300):
        remembered = await store.remember(f"The harbour ledger entry {n} was settled.", ["t"])
        await store.forget(remembered.memory.id)
    kept = await store.remember("The lighthouse keeper owes three crates of oil.", ["t"])
    vectors = store._vectors  # pyright: ignore[reportPrivateUsage]
    # 301 memories embedded, 1 live: the vectors of the forgotten ones were dropped (at most
    # 200 of them wait for the next drop), in memory and in the cache file.
    assert len(vectors) <= 201
    assert sqlite3.connect(cache).execute("SELECT count(*) FROM vectors").fetchone()[0] <= 201
    found = await store.recall(query="who owes oil to the lighthouse")
    assert [m.id for m in found.memories] == [kept.memory.id]
