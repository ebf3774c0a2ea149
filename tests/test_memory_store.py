"""The memory store's domain code over the vault folder: file format, integrity, index."""

import json
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.memory.model import IdMaker, Memory, decode, encode, normalize_tags
from obsidian_mcp.memory.render import render_recall
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.memory.timespec import age, parse_moment, window
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault

MEMORY = "obsidian-mcp/memory.jsonl"
START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime = START) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def make_store(
    vault: Path, clock: Callable[[], datetime] | None = None, *, compact_min_dead: int = 200
) -> MemoryStore:
    return MemoryStore(
        Vault(None, FolderSource(vault)), MEMORY, clock=clock or Clock(),
        compact_min_dead=compact_min_dead,
    )


def lines(vault: Path) -> list[str]:
    return (vault / MEMORY).read_text("utf-8").split("\n")


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


# -- the line format and the id -------------------------------------------------------------


def test_a_record_round_trips_through_one_line() -> None:
    memory = Memory("0abc", START, 'says "hi"\nthen\u2028leaves', ("gale",), "why", "fact", "a.md")
    line = encode(memory)
    assert line.endswith("\n") and line.count("\n") == 1
    assert decode(line.encode()) == memory


@pytest.mark.parametrize(
    "line",
    [b"", b"not json", b"[1]", b'{"id":"x"}', b'{"id":"x","ts":"2026-05-01T00:00:00"}',
     b'{"id":"x","ts":"2026-05-01T00:00:00Z","content":"c","tags":[1]}',
     b'{"id":"x","ts":"2026-05-01T00:00:00Z","content":"c","tags":["a"],"type":3}'],
)
def test_invalid_lines_decode_to_none(line: bytes) -> None:
    assert decode(line) is None


def test_ids_are_short_unique_and_sorted_by_time_even_within_one_millisecond() -> None:
    maker = IdMaker()
    ids = [maker.make(START) for _ in range(1000)]
    ids += [maker.make(START + timedelta(milliseconds=1))]
    ids += [maker.make(START - timedelta(seconds=5))]  # the clock stepped back
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert {len(i) for i in ids} == {13}


def test_tags_are_normalised_and_bad_ones_refused() -> None:
    assert normalize_tags(["#Gale", "gale", " Project/X "], required=True) == ("gale", "project/x")
    for bad in (["#bad tag"], ["a#b"], ["#"], ["2024"], ["x" * 65]):
        with pytest.raises(InvalidArgument):
            normalize_tags(bad, required=True)
    with pytest.raises(InvalidArgument, match="at most 20"):
        normalize_tags([f"t{i}" for i in range(1000)], required=True)


# -- time -----------------------------------------------------------------------------------


def test_moments_and_windows() -> None:
    now = START
    assert parse_moment("3d", now=now, name="since", end_of_day=False) == now - timedelta(days=3)
    assert parse_moment("2026-04-01T10:00Z", now=now, name="since", end_of_day=False) == (
        datetime(2026, 4, 1, 10, tzinfo=UTC)
    )
    day_end = parse_moment("2026-04-01", now=now, name="until", end_of_day=True)
    assert day_end == datetime(2026, 4, 2).astimezone()
    with pytest.raises(InvalidArgument, match="not a date"):
        parse_moment("last tuesday", now=now, name="since", end_of_day=False)
    with pytest.raises(InvalidArgument, match="not one of"):
        window("yesterday", None, None, now)
    with pytest.raises(InvalidArgument, match="empty"):
        window("all", "2026-04-02", "2026-04-01T00:00Z", now)
    assert window("week", "30d", None, now) == (now - timedelta(days=7), None)
    assert age(now - timedelta(hours=2), now) == "2 hours ago"
    assert age(now - timedelta(days=22), now) == "3 weeks ago"
    assert age(now, now) == "just now"


# -- remember, recall, forget ---------------------------------------------------------------


@pytest.mark.anyio
async def test_remember_recall_forget(vault: Path) -> None:
    clock = Clock()
    store = make_store(vault, clock)
    first = await store.remember("Gale agreed to captain the ship.", ["#Gale", "ship"], "plot")
    clock.advance(hours=1)
    again = await store.remember("Gale  agreed to captain the ship. ", ["ship", "gale"], "x")
    assert again.memory.id == first.memory.id and not again.created
    assert len([line for line in lines(vault) if line]) == 1

    await store.remember("Mira fears dragons.", ["mira"], "", type="fact", source="Characters/Mira")
    recall = await store.recall(query="dragon")
    assert [m.content for m in recall.memories] == ["Mira fears dragons."]
    assert recall.memories[0].source == "Characters/Mira"

    forgotten = await store.forget(first.memory.id.upper())
    assert forgotten.id == first.memory.id
    assert (await store.recall(tags=["gale"])).total == 0
    with pytest.raises(InvalidArgument, match="already forgotten"):
        await store.forget(first.memory.id)
    with pytest.raises(InvalidArgument, match="No memory has the id"):
        await store.forget("nope")
    # A second store (another session) reads the same state from the file.
    assert (await make_store(vault).recall()).total == 1


@pytest.mark.anyio
async def test_recall_filters_rank_and_summarise(vault: Path) -> None:
    clock = Clock()
    store = make_store(vault, clock)
    await store.remember("The storm sank the Wren near the reef.", ["gale", "ship"], "",
                         type="event")
    clock.advance(days=20)
    await store.remember("Gale hates storms since the Wren.", ["gale"], "mood", type="fact")
    clock.advance(days=5)
    await store.remember("Gale prefers tea.", ["gale"], "", type="preference")
    clock.advance(hours=2)
    await store.remember("The reef is east of the harbour.", ["map"], "navigation")
    clock.advance(hours=2)

    recall = await store.recall(tags=["gale"])
    assert [m.content[:9] for m in recall.memories] == ["Gale pref", "Gale hate", "The storm"]
    assert render_recall(recall, 1000).splitlines()[0] == (
        "3 memories tagged gale, newest 4 hours ago, oldest 3 weeks ago"
    )
    both = await store.recall(tags=["gale", "ship"], all_tags=True)
    assert [m.type for m in both.memories] == ["event"]
    assert (await store.recall(tags=["gale", "map"])).total == 4

    ranked = await store.recall(query="storm reef")
    assert ranked.memories[0].content.startswith("The storm sank")  # both words
    assert {m.content[:4] for m in ranked.memories} == {"The ", "Gale"}

    assert (await store.recall(time_range="week")).total == 3
    assert (await store.recall(time_range="month")).total == 4
    assert (await store.recall(since="1d")).total == 2
    assert (await store.recall(until="2026-05-02")).total == 1
    assert (await store.recall(type="Fact")).memories[0].content.startswith("Gale hates")

    limited = await store.recall(limit=2)
    text = render_recall(limited, 1000)
    assert "Left out 2 memories (2 by limit=2)" in text

    nothing = await store.recall(tags=["nobody"])
    text = render_recall(nothing, 1000)
    assert text.startswith("No memories tagged nobody (of 4 memories stored).")
    assert "gale (3)" in text and "vault_semantic_query" in text


@pytest.mark.anyio
async def test_the_token_budget_cuts_entries_and_says_so(vault: Path) -> None:
    store = make_store(vault)
    for n in range(30):
        await store.remember(f"Fact number {n}: " + "detail " * 60, ["bulk"], "")
    text = render_recall(await store.recall(tags=["bulk"], limit=30), 300)
    assert len(text) / 4 <= 300
    assert "by the token budget" in text
    huge = await store.remember("x" * 4000, ["huge"], "")
    text = render_recall(await store.recall(tags=["huge"]), 100)
    assert huge.memory.id in text and "…" in text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "tags", "kwargs", "message"),
    [
        ("", ["a"], {}, "content is empty"),
        ("   ", ["a"], {}, "content is empty"),
        ("x" * 4001, ["a"], {}, "4,001 characters"),
        ("ok", [f"t{i}" for i in range(1000)], {}, "1000 tags is too many"),
        ("ok", ["#bad tag"], {}, "write it as 'bad-tag'"),
        ("ok", [], {}, "at least one tag"),
        ("ok", ["a"], {"type": "two words"}, "one short word"),
        ("ok", ["a"], {"source": "../outside.md"}, "leaves the vault"),
    ],
)
async def test_bad_input_is_refused_and_writes_nothing(
    vault: Path, content: str, tags: list[str], kwargs: dict[str, str], message: str
) -> None:
    store = make_store(vault)
    with pytest.raises(InvalidArgument, match=message):
        await store.remember(content, tags, "", **kwargs)
    assert not (vault / MEMORY).exists()


@pytest.mark.anyio
async def test_a_hidden_memory_path_is_reported_not_fatal(vault: Path) -> None:
    store = MemoryStore(Vault(None, FolderSource(vault)), ".hidden/memory.jsonl")
    with pytest.raises(InvalidArgument, match="hidden"):
        await store.recall()


# -- integrity ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_torn_last_line_is_skipped_counted_and_never_glued(vault: Path) -> None:
    store = make_store(vault)
    kept = [await store.remember(f"entry {n}", ["t"], "") for n in range(3)]
    path = vault / MEMORY
    # An append killed mid-write: half a line, no newline.
    whole = encode(Memory("0zzzzzzzzzzzz", START, "torn", ("t",), ""))
    with path.open("ab") as handle:
        handle.write(whole.encode()[: len(whole) // 2])

    fresh = make_store(vault)  # a new session reads the damaged file
    assert (await fresh.recall(limit=10)).total == 3
    status = await fresh.status()
    assert status.torn_tail and status.invalid_lines == 0

    after = await fresh.remember("after the crash", ["t"], "")
    raw = path.read_bytes().split(b"\n")
    assert raw[-1] == b""  # the file ends with a newline
    assert decode(raw[-2]) == after.memory  # our line stands alone
    assert decode(raw[-3]) is None  # the torn fragment, closed off, is its own bad line
    status = await fresh.status()
    assert not status.torn_tail and status.invalid_lines == 1
    reread = make_store(vault)
    recalled = await reread.recall(limit=10)
    assert {m.id for m in recalled.memories} == {k.memory.id for k in kept} | {after.memory.id}
    assert (await reread.status()).invalid_lines == 1


@pytest.mark.anyio
async def test_invalid_lines_anywhere_are_skipped_and_counted(vault: Path) -> None:
    store = make_store(vault)
    await store.remember("first", ["t"], "")
    with (vault / MEMORY).open("a", encoding="utf-8") as handle:
        handle.write("garbage\n\n{\"id\": 1}\n")
    await store.remember("second", ["t"], "")
    recall = await make_store(vault).recall()
    assert [m.content for m in recall.memories] == ["second", "first"]
    assert (await store.status()).invalid_lines == 2


@pytest.mark.anyio
async def test_the_index_reads_only_what_was_appended_and_rebuilds_after_a_rewrite(
    vault: Path,
) -> None:
    writer, reader = make_store(vault), make_store(vault)
    await writer.remember("one", ["t"], "")
    assert (await reader.recall()).total == 1
    state = reader._reader  # pyright: ignore[reportPrivateUsage]
    before = state.generation
    await writer.remember("two", ["t"], "")
    assert (await reader.recall()).total == 2
    assert state.generation == before  # extended, not rebuilt

    # Sync replaces the file with other content: the reader notices and starts over.
    other = encode(Memory("0other0000000", START, "synced", ("t",), ""))
    (vault / MEMORY).write_text(other, "utf-8")
    recall = await reader.recall()
    assert [m.content for m in recall.memories] == ["synced"]
    assert state.generation == before + 1


@pytest.mark.anyio
async def test_compaction_drops_retired_and_repeated_entries(vault: Path) -> None:
    clock = Clock()
    store = make_store(vault, clock, compact_min_dead=10**6)
    keep = await store.remember("keep me", ["k"], "")
    gone = await store.remember("forget me", ["f"], "")
    await store.forget(gone.memory.id)
    # A repeat another process wrote before it saw ours, and a bad line.
    repeat = encode(Memory("0repeat000000", START, "keep me", ("k",), ""))
    with (vault / MEMORY).open("a", encoding="utf-8") as handle:
        handle.write(repeat + "junk\n")
    inode = os.stat(vault / MEMORY).st_ino
    report = await store.compact()
    assert report.kept == 1 and report.dropped_lines == 4
    assert [json.loads(line)["id"] for line in lines(vault) if line] == [keep.memory.id]
    assert os.stat(vault / MEMORY).st_ino != inode  # replaced whole, by rename
    assert (await store.status()).dead_lines == 0
    assert (await make_store(vault).recall()).memories[0].id == keep.memory.id


@pytest.mark.anyio
async def test_compaction_runs_by_itself_once_the_file_is_mostly_dead(vault: Path) -> None:
    store = make_store(vault, compact_min_dead=10)
    ids = [(await store.remember(f"m{n}", ["t"], "")).memory.id for n in range(6)]
    for memory_id in ids[:5]:
        await store.forget(memory_id)
    assert len([line for line in lines(vault) if line]) == 1


def test_appends_racing_with_compaction_are_not_lost(vault: Path) -> None:
    """Writers in other threads (own descriptors, as another process would have) keep
    appending while compaction replaces the file again and again."""
    writers, per_writer = 4, 150
    errors: list[BaseException] = []

    def write(n: int) -> None:
        async def run() -> None:
            store = make_store(vault, compact_min_dead=10**6)
            for i in range(per_writer):
                await store.remember(f"writer {n} entry {i}", ["race"], "")

        try:
            anyio.run(run)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    async def compact_until(done: threading.Event) -> int:
        store = make_store(vault, compact_min_dead=10**6)
        seed = await store.remember("seed", ["seed"], "")
        await store.forget(seed.memory.id)
        runs = 0
        while not done.is_set():
            await store.compact()
            runs += 1
        return runs

    done = threading.Event()
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    results: list[int] = []

    def compactor() -> None:
        results.append(anyio.run(compact_until, done))

    compacting = threading.Thread(target=compactor)
    compacting.start()
    for thread in threads:
        thread.join()
    done.set()
    compacting.join()
    assert not errors
    assert results[0] > 1
    contents = [json.loads(line)["content"] for line in lines(vault) if line]
    assert len(contents) == len(set(contents)) == writers * per_writer
