"""The memory store's domain code over the vault folder: file format, integrity, index."""

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.memory.files import MemoryFiles, writer_of
from obsidian_mcp.memory.model import (
    IdMaker,
    Memory,
    Tombstone,
    decode,
    encode,
    normalize_tags,
)
from obsidian_mcp.memory.render import recall_data, render_recall
from obsidian_mcp.memory.store import MemoryStore, UnknownMemoryId
from obsidian_mcp.memory.timespec import age, mentioned_period, parse_moment, window
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.memory_files import MEMORY, live_ids, memory_entries, memory_lines, writer_paths

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime = START) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def make_store(
    vault: Path,
    clock: Callable[[], datetime] | None = None,
    *,
    compact_min_dead: int = 200,
    config: Path | None = None,
) -> MemoryStore:
    """A store as one process of a device has it: every store made with the same `config`
    (by default the one beside the vault) is another process of the same device, with a
    writer slot and a file of its own."""
    return MemoryStore(
        Vault(None, FolderSource(vault)), MEMORY, clock=clock or Clock(),
        compact_min_dead=compact_min_dead,
        config_dir=config if config is not None else vault.parent / "config",
    )


async def own_file(vault: Path, store: MemoryStore) -> Path:
    """The file this store writes (it must have written)."""
    own = (await store.status()).own_file
    assert own is not None
    return vault / own


def folder_of(vault: Path) -> Path:
    return vault / MemoryFiles(MEMORY).folder


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
    assert len(memory_lines(vault)) == 1

    await store.remember("Mira fears dragons.", ["mira"], "", type="fact", source="Characters/Mira")
    recall = await store.recall(query="dragon")
    assert [m.content for m in recall.memories] == ["Mira fears dragons."]
    assert recall.memories[0].source == "Characters/Mira"

    forgotten = await store.forget(first.memory.id.upper())
    assert forgotten.id == first.memory.id
    assert (await store.recall(tags=["gale"])).total == 0
    # Idempotent, as the tool is annotated: forgetting again writes nothing and says when.
    lines = memory_lines(vault)
    again_forgotten = await store.forget(first.memory.id)
    assert isinstance(again_forgotten, Tombstone) and again_forgotten.id == first.memory.id
    assert memory_lines(vault) == lines
    with pytest.raises(UnknownMemoryId, match="No memory has the id"):
        await store.forget("nope")
    # A second store (another session) reads the same state from the files.
    assert (await make_store(vault).recall()).total == 1
    assert (await make_store(vault, config=vault.parent / "other").recall()).total == 1


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
    assert f"- {huge.short_ids[huge.memory.id]} " in text and "…" in text


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
    assert list(vault.iterdir()) == []


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
    path = await own_file(vault, store)
    # An append killed mid-write: half a line, no newline; the process is gone, and so is
    # its hold on its writer slot.
    whole = encode(Memory("0zzzzzzzzzzzz", START, "torn", ("t",), ""))
    with path.open("ab") as handle:
        handle.write(whole.encode()[: len(whole) // 2])
    store.close()

    fresh = make_store(vault)  # a new session reads the damaged file
    assert (await fresh.recall(limit=10)).total == 3
    status = await fresh.status()
    assert status.torn_tail and status.invalid_lines == 0

    after = await fresh.remember("after the crash", ["t"], "")
    # The next process of the device takes the free slot, and goes on with its file.
    assert await own_file(vault, fresh) == path
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
    with (await own_file(vault, store)).open("a", encoding="utf-8") as handle:
        handle.write("garbage\n\n{\"id\": 1}\n")
    # The legacy file, still read, may hold bad lines too.
    (vault / MEMORY).write_text("{not json\n", "utf-8")
    await store.remember("second", ["t"], "")
    recall = await make_store(vault).recall()
    assert [m.content for m in recall.memories] == ["second", "first"]
    assert (await store.status()).invalid_lines == 3


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
    other_device = make_store(vault, config=vault.parent / "other")
    await other_device.remember("three", ["t"], "")  # a new file appears: read, no rebuild
    assert (await reader.recall()).total == 3
    assert state.generation == before  # extended, not rebuilt

    # Sync replaces the writer's file with other content: the reader notices and starts over.
    synced = [encode(Memory(f"0synced00000{n}", START, f"synced fact number {n} " + "x" * 80,
                            ("t",), "")) for n in range(2)]
    (await own_file(vault, writer)).write_text("".join(synced), "utf-8")
    recall = await reader.recall()
    assert sorted(m.content[:15] for m in recall.memories) == [
        "synced fact num", "synced fact num", "three"]
    assert state.generation == before + 1

    # A file that vanished (its writer folded it elsewhere) leaves the index too.
    (await own_file(vault, other_device)).unlink()
    assert (await reader.recall()).total == 2
    assert state.generation == before + 2


@pytest.mark.anyio
async def test_a_file_rewritten_shorter_is_noticed(vault: Path) -> None:
    """Sync replaces a file with a shorter version (another device's copy): the very next
    recall, and every one after it, answers from what the files hold now."""
    writer, reader = make_store(vault), make_store(vault)
    await writer.remember("one", ["t"], "")
    await writer.remember("two", ["t"], "")
    assert (await reader.recall()).total == 2
    other = encode(Memory("0other0000000", START, "synced", ("t",), ""))
    own = await own_file(vault, writer)
    # As sync tools write: a new file renamed over the old one.
    own.with_name(".sync-tmp").write_text(other, "utf-8")
    own.with_name(".sync-tmp").replace(own)
    recall = await reader.recall()
    assert [m.content for m in recall.memories] == ["synced"]
    assert [m.content for m in (await make_store(vault).recall()).memories] == ["synced"]


@pytest.mark.anyio
async def test_compaction_folds_idle_files_keeps_every_tombstone_and_drops_the_rest(
    vault: Path,
) -> None:
    legacy = vault / MEMORY
    legacy.parent.mkdir(parents=True)
    legacy.write_text(encode(Memory("0legacy000000", START, "in the old file", ("l",), "")))
    store = make_store(vault, compact_min_dead=10**6)
    keep = await store.remember("keep me", ["k"], "")
    gone = await store.remember("forget me", ["f"], "")
    await store.forget(gone.memory.id)
    await store.forget("0legacy000000")
    own = await own_file(vault, store)
    mine = writer_of(own.name)
    assert mine is not None and (mine.slot, mine.generation) == (0, 0)
    folder = folder_of(vault)
    # What an earlier process of this device left in slot 1, which no process holds now: a
    # repeat it wrote before it saw ours, and a bad line. A sync tool's conflict copy of
    # this process's file. Another device's file, which only that device may fold.
    idle = folder / f"{mine.device}-1-4.jsonl"
    idle.write_text(encode(Memory("0repeat000000", START, "keep me", ("k",), "")) + "junk\n")
    copy = folder / f"{own.stem}.sync-conflict-20260501-120000-ABCDEFG.jsonl"
    copy.write_text(encode(Memory("0copyonly0000", START, "only in the copy", ("c",), ""))
                    + encode(keep.memory))
    foreign = folder / "elsewhere-0-0.jsonl"
    foreign.write_text(encode(Memory("0foreign00000", START, "another device's", ("o",), ""))
                       + encode(Tombstone("0foreigngone0", START)))
    untouched = {path: path.read_bytes() for path in (legacy, foreign)}

    report = await store.compact()
    # Lines: 4 of this process's file, 2 of the idle one, 2 of the copy; kept: the live
    # memories once each (the repeat too: the index keeps its row, so that it takes over if
    # the first is forgotten) and both tombstones; dropped: the forgotten memory, the bad
    # line and the copy's duplicate.
    assert (report.files_folded, report.kept, report.dropped_lines) == (3, 5, 3)
    target = folder / f"{mine.device}-0-1.jsonl"
    assert writer_paths(vault) == sorted([target, foreign])  # the folded files are gone
    assert {path: path.read_bytes() for path in untouched} == untouched
    assert not [path.name for path in folder.iterdir() if path.name.startswith(".")]
    assert report.bytes_after == target.stat().st_size < report.bytes_before
    folded = [(entry["id"], entry.get("forgotten", False))
              for entry in map(json.loads, target.read_text("utf-8").splitlines())]
    assert sorted(folded) == sorted([
        (keep.memory.id, False), ("0copyonly0000", False), ("0repeat000000", False),
        (gone.memory.id, True), ("0legacy000000", True),  # kept for good
    ])
    status = await store.status()
    assert status.own_file == f"{MemoryFiles(MEMORY).folder}/{target.name}"
    assert (status.dead_lines, status.files) == (0, 3)

    expected = {keep.memory.id, "0copyonly0000", "0foreign00000"}
    assert live_ids(vault) == expected | {"0repeat000000"}  # recall hides the repeat
    for reader in (make_store(vault), make_store(vault, config=vault.parent / "other")):
        assert {m.id for m in (await reader.recall(limit=10)).memories} == expected
    after = await store.remember("written after the fold", ["k"], "")
    assert decode(target.read_bytes().splitlines()[-1]) == after.memory


@pytest.mark.anyio
async def test_a_fold_keeps_a_repeat_so_every_reader_agrees_when_it_is_forgotten(
    vault: Path,
) -> None:
    """A repeat (the same content and tags under another id, written by a process that had
    not seen the first) is hidden while the first lives. A fold keeps its line, so the
    index and the files never disagree: a forget elsewhere retires both, in the folding
    process and in every reader that builds from the files alike."""
    store = make_store(vault, compact_min_dead=10**6)
    keep = await store.remember("keep me", ["k"], "")
    device = writer_of((await own_file(vault, store)).name)
    assert device is not None
    idle = folder_of(vault) / f"{device.device}-1-0.jsonl"  # left by an ended process
    idle.write_text(encode(Memory("0repeat000000", START, "keep me", ("k",), "")))
    await store.compact()
    assert [m.id for m in (await store.recall(tags=["k"])).memories] == [keep.memory.id]

    elsewhere = make_store(vault, config=vault.parent / "other")
    await elsewhere.forget(keep.memory.id)
    assert live_ids(vault) == set()
    fresh = make_store(vault, config=vault.parent / "third")
    for reader in (store, fresh):
        assert (await reader.recall(tags=["k"])).memories == []
        assert (await reader.status()).memories == 0


@pytest.mark.anyio
async def test_compaction_runs_by_itself_once_everything_in_the_file_is_forgotten(
    vault: Path,
) -> None:
    store = make_store(vault, compact_min_dead=5)
    ids = [(await store.remember(f"m{n}", ["t"], "")).memory.id for n in range(5)]
    first = await own_file(vault, store)
    for memory_id in ids:
        await store.forget(memory_id)
    [folded] = writer_paths(vault)
    assert folded != first
    assert sorted(json.loads(line)["id"] for line in folded.read_text("utf-8").splitlines()) \
        == sorted(ids)
    assert all(entry.get("forgotten") for entry in memory_entries(vault))


@pytest.mark.anyio
async def test_compaction_runs_by_itself_once_the_file_is_mostly_dead(vault: Path) -> None:
    """Six memories, five forgotten: the five lines are dead, and the file is folded to the
    live memory and the five tombstones."""
    store = make_store(vault, compact_min_dead=5)
    ids = [(await store.remember(f"m{n}", ["t"], "")).memory.id for n in range(6)]
    for memory_id in ids[:5]:
        await store.forget(memory_id)
    entries = memory_entries(vault)
    assert sorted((e["id"], e.get("forgotten", False)) for e in entries) == sorted(
        [(ids[5], False)] + [(memory_id, True) for memory_id in ids[:5]]
    ), f"{len(entries)} lines: the file was not compacted"
    assert (await store.status()).dead_lines == 0


def test_appends_racing_with_compaction_are_not_lost(vault: Path) -> None:
    """Writers in other threads (own descriptors and slot locks, as other processes have)
    keep appending while one store folds again and again. Writers come and go: each writes
    a round through a store and closes it, so its file is idle until a later store takes
    the slot again, and the folding store folds whichever idle files of its device it
    finds. Half the writers are another device, whose files it never touches."""
    writers, rounds, per_round = 4, 3, 25
    config = vault.parent / "config"
    errors: list[BaseException] = []

    def write(n: int) -> None:
        async def run() -> None:
            device = config if n % 2 == 0 else vault.parent / "elsewhere"
            for r in range(rounds):
                store = make_store(vault, compact_min_dead=10**6, config=device)
                try:
                    for i in range(per_round):
                        await store.remember(f"writer {n} round {r} entry {i}", ["race"], "")
                finally:
                    store.close()

        try:
            anyio.run(run)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    async def compact_until(done: threading.Event) -> tuple[int, str]:
        store = make_store(vault, compact_min_dead=10**6, config=config)
        seed = await store.remember("seed", ["seed"], "")
        await store.forget(seed.memory.id)
        runs = 0
        try:
            while not done.is_set():
                await store.compact()
                runs += 1
            # Every writer has ended: one more fold takes every idle file of the device.
            await store.compact()
            return runs, (await own_file(vault, store)).name
        finally:
            store.close()

    done = threading.Event()
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    results: list[tuple[int, str]] = []

    def compactor() -> None:
        results.append(anyio.run(compact_until, done))

    compacting = threading.Thread(target=compactor)
    compacting.start()
    for thread in threads:
        thread.join()
    done.set()
    compacting.join()
    assert not errors
    [(runs, last)] = results
    # Idle files are folded by the compactor or by a writer's first write, whichever comes
    # first (both race the appends); the end state below shows every one was.
    assert runs > 1
    entries = memory_entries(vault)
    contents = [entry["content"] for entry in entries if "content" in entry]
    expected = {f"writer {n} round {r} entry {i}"
                for n in range(writers) for r in range(rounds) for i in range(per_round)}
    # Each line once: a fold removed every file it read, and dropped the forgotten seed.
    assert sorted(contents) == sorted(expected)
    assert [entry["content"] for entry in entries if entry["id"] in live_ids(vault)] \
        == contents
    assert [e for e in entries if e.get("forgotten")] != []  # the seed's tombstone stays
    mine = writer_of(last)
    assert mine is not None
    devices = [writer_of(path.name) for path in writer_paths(vault)]
    # This device: the folding store's file alone; the other: its writers' slots.
    assert [(w.slot, w.generation) for w in devices if w is not None
            and w.device == mine.device] == [(mine.slot, mine.generation)]


# -- dates a question names ---------------------------------------------------------------

ANCHOR = datetime(2023, 10, 26, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        ("Who did Maria have dinner with on May 3, 2023?", "2023-05-03", "2023-05-03"),
        ("What did Joanna finish on 23rd January, 2022?", "2022-01-23", "2022-01-23"),
        ("the forest picture shared on December 1,2023", "2023-12-01", "2023-12-01"),
        ("what happened on 2023-05-03", "2023-05-03", "2023-05-03"),
        ("What setback did Melanie face in October 2023?", "2023-10-01", "2023-10-31"),
        ("How many times has Melanie gone to the beach in 2023?", "2023-01-01", "2023-12-31"),
        # A date or month without a year: the latest up to the anchor.
        ("When did Melanie go camping in June?", "2023-06-01", "2023-06-30"),
        ("What did we plan in December?", "2022-12-01", "2022-12-31"),
        ("the party on May 3", "2023-05-03", "2023-05-03"),
        ("the party on 30 October", "2022-10-30", "2022-10-30"),
        # "last October" said in October is a year back.
        ("what did we do last October", "2022-10-01", "2022-10-31"),
        ("what did we do two weeks ago", "2023-10-09", "2023-10-15"),
        ("the trip 3 days ago", "2023-10-23", "2023-10-23"),
        ("what happened yesterday", "2023-10-25", "2023-10-25"),
        ("what did we do last week", "2023-10-16", "2023-10-22"),
        ("the match last weekend", "2023-10-21", "2023-10-22"),
        ("what did I read last month", "2023-09-01", "2023-09-30"),
        ("where did John go last year", "2022-01-01", "2022-12-31"),
    ],
)
def test_a_question_names_a_period_of_the_calendar(question: str, first: str, last: str) -> None:
    period = mentioned_period(question, ANCHOR)
    assert period is not None
    start, end = period
    assert start == datetime.combine(datetime.fromisoformat(first).date(), datetime.min.time()
                                     ).astimezone()
    assert (end - timedelta(days=1)).date().isoformat() == last


@pytest.mark.parametrize(
    "question",
    ["What may happen next?", "Meet at 10:30", "the 31 February, 2023 party", "in the summer"],
)
def test_a_question_without_a_date_names_no_period(question: str) -> None:
    assert mentioned_period(question, ANCHOR) is None


@pytest.mark.anyio
async def test_a_date_in_the_question_prefers_what_happened_then_and_hides_nothing(
    vault: Path,
) -> None:
    store = make_store(vault)
    dinners = {
        "2023-05-03": "Maria had dinner with her mother at the harbour.",
        "2023-06-10": "Maria had dinner with Jean and talked about the shelter.",
        "2023-06-24": "Maria had dinner with the volunteers after the shelter event.",
    }
    for day, content in dinners.items():
        await store.remember(content, ["maria"], scope="maria", occurred=day)
    await store.remember("Maria had dinner again.", ["maria"], scope="maria", occurred="2023-07-01")

    recall = await store.recall(query="Who did Maria have dinner with on May 3, 2023?",
                                scope="maria")
    assert recall.memories[0].content == dinners["2023-05-03"]
    assert recall.total == 4  # a preference: the other dinners follow
    # Calendar words count from the latest memory in view (2023-07-01): last June.
    recall = await store.recall(query="Maria dinner with volunteers last June", scope="maria")
    assert [m.occurred for m in recall.memories[:2]] == ["2023-06-24", "2023-06-10"]
    # Without the date, the same words rank the fullest match first.
    recall = await store.recall(query="Maria had dinner with her mother", scope="maria")
    assert recall.memories[0].content == dinners["2023-05-03"]
    # An explicit range still filters; the question's date ranks within it.
    ranged = await store.recall(query="Maria dinner on May 3, 2023", since="2023-06-01",
                                scope="maria")
    assert {m.occurred for m in ranged.memories} == {"2023-06-10", "2023-06-24", "2023-07-01"}
    store.close()


@pytest.mark.anyio
async def test_recall_entries_leave_out_what_the_request_said(vault: Path) -> None:
    """Each entry spends tokens on the memory: no scope or tag the recall named, one date
    (the day it happened, else its age), the same in JSON."""
    store = make_store(vault)
    for n in range(3):
        await store.remember(f"Bram keeps the {n} keys of the cellar.", ["bram", "keys"],
                             scope="bram", occurred="2026-04-03")
    await store.remember("Bram hates the cellar.", ["bram"], scope="bram", type="fact")
    recall = await store.recall(query="cellar keys", scope="bram", tags=["keys"], limit=2)
    lines = render_recall(recall, 1000).splitlines()
    assert lines[0] == "Best 2 of 3 memories known to bram (or shared) tagged keys:"
    # Tagged keys (asked) and bram (the scope asked for): neither is news. With only id and
    # date to say, the content follows on the line; the id by its shortest unique ending.
    shown = recall.short_ids[recall.memories[0].id]
    assert recall.memories[0].id.endswith(shown) and len(shown) == 5
    assert lines[1] == f"- {shown} 2026-04-03 {recall.memories[0].content}"
    assert not any(line.startswith("Left out") for line in lines)  # the summary said it
    first = recall_data(recall, 1000)["memories"][0]
    assert first == {"id": recall.memories[0].id, "occurred": "2026-04-03",
                     "content": recall.memories[0].content}
    # Without `occurred`, its age; its type is news.
    fact = await store.recall(query="hates", scope="bram")
    assert render_recall(fact, 1000).splitlines()[1:3] == [
        f"- {fact.short_ids[fact.memories[0].id]} just now · fact", "  Bram hates the cellar."
    ]
    store.close()
