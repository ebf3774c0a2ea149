"""Memory over many files: every writer its own file, readers merging by id, forgets that
outlive any copy, conflict copies read, the legacy single file still read, compaction that
folds idle files, and the facts a companion needs (changed facts, scopes, when it happened,
near-duplicates, an honest "nothing found", the user's page)."""

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import TextContent

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.index.embedder import OnnxEmbedder
from obsidian_mcp.memory.files import MemoryFiles, writer_of
from obsidian_mcp.memory.index import LogReader, bytes_view
from obsidian_mcp.memory.model import Memory, Tombstone, encode
from obsidian_mcp.memory.render import recall_data, render_recall, render_remembered
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.memory.timespec import parse_moment, resolve_occurred
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.conftest import folder_settings
from tests.memory_files import MEMORY, live_ids, memory_entries, writer_paths

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def store(vault: Path, config: Path, *, embedder: OnnxEmbedder | None = None,
          compact_min_dead: int = 200, clock: datetime = NOW) -> MemoryStore:
    """A store as one process of the device whose config folder is `config` has it."""
    return MemoryStore(
        Vault(None, FolderSource(vault)), MEMORY, clock=lambda: clock,
        config_dir=config, compact_min_dead=compact_min_dead,
        embedder=(lambda: embedder) if embedder is not None else None,
    )


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


# -- files and writers ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_writer_appends_to_a_file_of_its_own_and_reads_them_all(
    vault: Path, tmp_path: Path
) -> None:
    first, second = store(vault, tmp_path / "dev"), store(vault, tmp_path / "dev")
    other_device = store(vault, tmp_path / "other")
    a = await first.remember("the lighthouse keeper is Ada", ["ada"])
    b = await second.remember("Ada keeps a cat named Soot", ["ada"])
    c = await other_device.remember("Ada's lamp is blue", ["ada"])
    files = writer_paths(vault)
    writers = {writer_of(path.name) for path in files}
    assert len(files) == 3
    assert len({(w.device, w.slot) for w in writers if w is not None}) == 3
    assert len({w.device for w in writers if w is not None}) == 2
    for reader in (first, second, other_device):
        assert {m.id for m in await reader.export()} == {a.memory.id, b.memory.id, c.memory.id}
    assert not (vault / MEMORY).exists()  # the legacy file is never written
    for each in (first, second, other_device):
        each.close()


@pytest.mark.anyio
async def test_a_forget_wins_over_its_memory_in_any_order_and_in_any_copy(
    vault: Path, tmp_path: Path
) -> None:
    one = store(vault, tmp_path / "dev")
    kept = await one.remember("Bram owes Ada ten marks", ["bram"])
    gone = await one.remember("Bram is in Osk", ["bram"])
    await one.forget(gone.memory.id)
    own = writer_paths(vault)[0]
    # A sync tool restores an old copy of the file beside it: the memory line is back on
    # disk, its tombstone is in the other file; and the tombstone is read first by name.
    stale = own.read_text("utf-8").split("\n")[:2]
    (own.parent / "aaa-conflict.sync-conflict-20261126-1.jsonl").write_text(
        "\n".join(stale) + "\n", "utf-8")
    fresh = store(vault, tmp_path / "reader")
    assert {m.id for m in await fresh.export()} == {kept.memory.id}
    assert gone.memory.id not in live_ids(vault)
    one.close()
    fresh.close()


@pytest.mark.anyio
async def test_conflict_copies_and_the_legacy_file_are_read(vault: Path, tmp_path: Path) -> None:
    legacy = vault / MEMORY
    legacy.parent.mkdir(parents=True)
    old = Memory("0legacy000001", NOW - timedelta(days=3), "Gran bakes on Sundays", ("gran",), "")
    retired = Memory("0legacy000002", NOW - timedelta(days=3), "Gran lives alone", ("gran",), "")
    legacy.write_text(encode(old) + encode(retired) + encode(Tombstone(retired.id, NOW)), "utf-8")
    copy = Memory("0copy00000001", NOW - timedelta(days=2), "Gran's dog is Pip", ("gran",), "")
    (legacy.parent / "memory (conflicted copy 2026-11-26).jsonl").write_text(encode(copy), "utf-8")
    folder = vault / MemoryFiles(MEMORY).folder
    folder.mkdir()
    other = Memory("0other0000001", NOW - timedelta(days=1), "Gran met Ada", ("gran",), "")
    (folder / "ffffff-0-0.sync-conflict-20261126-031500-ABCDEFG.jsonl").write_text(
        encode(other), "utf-8")
    reader = store(vault, tmp_path / "dev")
    assert {m.id for m in await reader.export()} == {old.id, copy.id, other.id}
    await reader.remember("Gran likes rye", ["gran"])
    assert legacy.read_text("utf-8").count("\n") == 3  # read, never written
    reader.close()


@pytest.mark.anyio
async def test_compaction_folds_idle_files_of_this_device_keeps_tombstones_loses_nothing(
    vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "dev"
    first, second = store(vault, config), store(vault, config)
    stored = [await first.remember(f"first fact {n}", ["x"]) for n in range(5)]
    stored += [await second.remember(f"second fact {n}", ["x"]) for n in range(5)]
    await first.forget(stored[0].memory.id)
    await second.forget(stored[5].memory.id)
    second.close()  # its process ends: its slot is idle
    foreign = store(vault, tmp_path / "elsewhere")
    await foreign.remember("another device's fact", ["x"])
    report = await first.compact()
    assert report.files_folded == 2
    own = (await first.status()).own_file
    assert own is not None
    device = own.rsplit("/", 1)[-1].split("-")[0]
    writers = [writer_of(path.name) for path in writer_paths(vault)]
    # This device: one file, the next generation of the first's slot; the other device's
    # file untouched.
    assert sorted((w.slot, w.generation) for w in writers if w and w.device == device) == [
        (0, 1)]
    assert len(writers) == 2
    expected = {s.memory.id for s in stored} - {stored[0].memory.id, stored[5].memory.id}
    reader = store(vault, tmp_path / "reader")
    assert {m.id for m in await reader.export()} >= expected
    tombstones = {e["id"] for e in memory_entries(vault) if e.get("forgotten")}
    assert tombstones == {stored[0].memory.id, stored[5].memory.id}
    forgotten_lines = [e for e in memory_entries(vault)
                       if e["id"] in tombstones and not e.get("forgotten")]
    assert forgotten_lines == []  # the retired memories' own lines were dropped
    for each in (first, foreign, reader):
        each.close()


@pytest.mark.anyio
async def test_a_new_process_of_the_device_folds_the_files_of_slots_no_one_holds(
    vault: Path, tmp_path: Path
) -> None:
    config = tmp_path / "dev"
    stores = [store(vault, config) for _ in range(3)]
    for n, each in enumerate(stores):
        await each.remember(f"fact from process {n}", ["x"])
    for each in stores[1:]:
        each.close()
    assert len(writer_paths(vault)) == 3
    await stores[0].remember("after the others ended", ["x"])
    stores[0].close()
    later = store(vault, config)
    await later.remember("a later process", ["x"])  # takes slot 0, folds slots 1 and 2
    assert len(writer_paths(vault)) == 1
    assert len(await later.export()) == 5
    later.close()


# -- changed facts, scopes, time ----------------------------------------------------------


@pytest.mark.anyio
async def test_a_superseded_fact_is_shown_only_on_request_marked_with_its_replacement(
    vault: Path, tmp_path: Path
) -> None:
    one = store(vault, tmp_path / "dev")
    old = await one.remember("Mira lives in Osk", ["mira"])
    new = await one.remember("Mira moved to Vastry", ["mira"], supersedes=[old.memory.id])
    assert [m.id for m in (await one.recall(query="where does Mira live")).memories] == [
        new.memory.id]
    everything = await one.recall(query="Mira", include_superseded=True)
    assert {m.id for m in everything.memories} == {old.memory.id, new.memory.id}
    assert everything.replaced_by == {old.memory.id: new.memory.id}
    shown = everything.short_ids[new.memory.id]
    assert f"SUPERSEDED by {shown}" in render_recall(everything, 1000)
    # The replacement was wrong: forgetting it makes the old fact current again.
    await one.forget(new.memory.id)
    assert [m.id for m in (await one.recall(query="Mira")).memories] == [old.memory.id]
    with pytest.raises(InvalidArgument, match="names '0nosuchid0000', which no memory has"):
        await one.remember("Mira moved again", ["mira"], supersedes=["0nosuchid0000"])
    with pytest.raises(InvalidArgument, match="was forgotten"):
        await one.remember("Mira moved again", ["mira"], supersedes=[new.memory.id])
    one.close()


@pytest.mark.anyio
async def test_a_scope_sees_its_own_and_shared_memories_never_another_scopes(
    vault: Path, tmp_path: Path
) -> None:
    one = store(vault, tmp_path / "dev")
    shared = await one.remember("The inn is called the Gull", ["inn"])
    tamsin = await one.remember("The inn's cellar hides smuggled wine", ["inn"], scope="Tamsin")
    bram = await one.remember("The inn's owner cheats at dice", ["inn"], scope="bram")
    seen = await one.recall(query="inn cellar wine dice owner", scope="tamsin")
    assert {m.id for m in seen.memories} == {shared.memory.id, tamsin.memory.id}
    assert {m.id for m in (await one.recall(tags=["inn"], scope="bram")).memories} == {
        shared.memory.id, bram.memory.id}
    everyone = await one.recall(tags=["inn"])
    assert len(everyone.memories) == 3
    assert everyone.scopes == [("bram", 1), ("tamsin", 1)]
    assert "Scopes: bram (1), tamsin (1)" in render_recall(everyone, 1000)
    # The same words known to two characters are two memories, not a repeat.
    again = await one.remember("The inn is called the Gull", ["inn"], scope="bram")
    assert again.created
    with pytest.raises(InvalidArgument, match="scope"):
        await one.remember("x", ["inn"], supersedes=[tamsin.memory.id], scope="bram")
    one.close()


def test_relative_dates_are_resolved_when_written() -> None:
    today = NOW.astimezone().date()
    assert resolve_occurred("yesterday", NOW) == (today - timedelta(days=1)).isoformat()
    assert resolve_occurred("3 days ago", NOW) == (today - timedelta(days=3)).isoformat()
    assert resolve_occurred("a week ago", NOW) == (today - timedelta(days=7)).isoformat()
    assert resolve_occurred("2w", NOW) == (today - timedelta(days=14)).isoformat()
    assert resolve_occurred("2026-06-01", NOW) == "2026-06-01"
    assert resolve_occurred("2026-06-01T14:30Z", NOW) == "2026-06-01T14:30:00Z"
    for bad in ("soon", "next week", "2027-01-01", "31 days from now"):
        with pytest.raises(InvalidArgument, match="occurred="):
            resolve_occurred(bad, NOW)


@pytest.mark.anyio
async def test_time_filters_use_when_it_happened(vault: Path, tmp_path: Path) -> None:
    one = store(vault, tmp_path / "dev")
    trip = await one.remember("We walked the cliff path together", ["walks"], occurred="9 days ago")
    today = await one.remember("We baked bread", ["baking"])
    week = await one.recall(time_range="week")
    assert [m.id for m in week.memories] == [today.memory.id]
    older = await one.recall(until="8d")
    assert [m.id for m in older.memories] == [trip.memory.id]
    text = render_recall(older, 1000)
    nine = (NOW.astimezone().date() - timedelta(days=9)).isoformat()
    # One date: the day it happened (when it was written is not news).
    shown = older.short_ids[trip.memory.id]
    assert f"- {shown} {nine} · #walks\n" in text and "just now" not in text
    assert date.fromisoformat(trip.memory.occurred or "") < NOW.date()
    one.close()


# -- meaning: near-duplicates and "nothing found" ---------------------------------------------


@pytest.mark.anyio
async def test_remember_reports_a_reworded_restatement_and_never_merges_it(
    vault: Path, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    one = store(vault, tmp_path / "dev", embedder=embedder)
    first = await one.remember("Ada's daughter Lin starts school in September", ["ada"])
    again = await one.remember("Lin, Ada's daughter, begins school this September", ["ada"])
    assert again.created  # never merged on its own
    assert again.near_duplicate is not None and again.near_duplicate.id == first.memory.id
    text = render_remembered(again, NOW)
    assert f"Nearly the same as {again.short_ids[first.memory.id]}" in text
    other = await one.remember("The harbour freezes over most winters", ["harbour"])
    assert other.near_duplicate is None
    one.close()


@pytest.mark.anyio
async def test_the_first_remember_of_a_new_process_is_compared_with_what_is_stored(
    vault: Path, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """A new process holds no vectors of the stored memories until its background catch-up
    has run: its first remember was compared with nothing, so a one-shot client (one call
    per process) never heard of the twin it stored."""
    one = store(vault, tmp_path / "dev", embedder=embedder)
    twin = await one.remember("Hobb Marrow hides the guild money in a mutton pie.", ["hobb"])
    one.close()
    fresh = store(vault, tmp_path / "dev", embedder=embedder)  # no catch-up has run
    again = await fresh.remember("Hobb Marrow hides the guild's money in a mutton pie.", ["pie"])
    assert again.created
    assert again.near_duplicate is not None and again.near_duplicate.id == twin.memory.id
    assert f"Nearly the same as {again.short_ids[twin.memory.id]}" in render_remembered(
        again, NOW)
    fresh.close()


def test_every_date_parameter_takes_one_grammar() -> None:
    """since, until and occurred read the same words: `until=yesterday` was refused while
    `occurred=yesterday` was taken. A day as an end includes that day."""
    today = NOW.astimezone().date()
    for text, days in (
        ("today", 0), ("yesterday", 1), ("3 days ago", 3), ("a week ago", 7), ("last week", 7),
        ("Yesterday", 1),
    ):
        day = today - timedelta(days=days)
        midnight = datetime.combine(day, datetime.min.time()).astimezone()
        assert parse_moment(text, now=NOW, name="since", end_of_day=False) == midnight, text
        until = parse_moment(text, now=NOW, name="until", end_of_day=True)
        next_day = datetime.combine(day + timedelta(days=1), datetime.min.time())
        assert until == next_day.astimezone(), text
        assert resolve_occurred(text, NOW) == day.isoformat(), text
    assert parse_moment("now", now=NOW, name="until", end_of_day=True) == NOW
    assert resolve_occurred("now", NOW) == today.isoformat()
    with pytest.raises(InvalidArgument, match="'yesterday', '3 days ago'") as refused:
        parse_moment("the day before", now=NOW, name="until", end_of_day=True)
    assert "until='the day before' is not a date or time" in str(refused.value)


@pytest.mark.anyio
async def test_recall_until_yesterday_keeps_what_happened_before_today(
    vault: Path, tmp_path: Path
) -> None:
    one = store(vault, tmp_path / "dev")
    old = await one.remember("We mended the nets", ["nets"], occurred="yesterday")
    await one.remember("We sold the nets", ["nets"])
    recall = await one.recall(until="yesterday")
    assert [m.id for m in recall.memories] == [old.memory.id]
    assert [m.id for m in (await one.recall(since="today")).memories] != [old.memory.id]
    one.close()


@pytest.mark.anyio
async def test_a_query_about_nothing_stored_says_so_first(
    vault: Path, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    one = store(vault, tmp_path / "dev", embedder=embedder)
    await one.catch_up_meaning()
    for content in ("Ada's daughter Lin starts school in September",
                    "The harbour freezes over most winters",
                    "Bram owes Ada ten marks since the storm"):
        await one.remember(content, ["story"])
    await one.catch_up_meaning()
    missing = await one.recall(query="favourite programming language for compilers")
    assert missing.no_match
    assert render_recall(missing, 1000).startswith("No memor")
    assert recall_data(missing, 1000)["no_match"] is True
    found = await one.recall(query="when does the girl begin her schooling")
    assert not found.no_match and recall_data(found, 1000)["no_match"] is False
    one.close()


# -- the user's page ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_page_shows_current_memories_by_scope_and_tag(vault: Path, tmp_path: Path
                                                                ) -> None:
    one = store(vault, tmp_path / "dev")
    old = await one.remember("Mira lives in Osk", ["mira"])
    await one.remember("Mira moved to Vastry", ["mira"], supersedes=[old.memory.id])
    await one.remember("The cellar hides wine", ["inn"], scope="tamsin")
    path = await one.write_view()
    text = (vault / path).read_text("utf-8")
    assert text.splitlines()[0].startswith("> Generated by obsidian-mcp")
    assert "forget" in text.splitlines()[0]
    assert "Mira moved to Vastry" in text and "Mira lives in Osk" not in text
    assert text.index("## Shared") < text.index("## Known to tamsin")
    assert path == "obsidian-mcp/memory.md"
    one.close()


def test_a_file_caught_short_mid_write_is_waited_for_then_taken_as_rewritten() -> None:
    """The plugin writes a file by truncating it, then writing it whole: a read between sees
    it short. That never drops what the index holds; a file still short after the grace
    period was rewritten, and the index is rebuilt from it."""
    memories = [Memory(f"0short{n:07d}", NOW, f"fact {n}", ("t",), "") for n in range(3)]
    lines = [encode(memory).encode() for memory in memories]
    whole = lines[0] + lines[1]
    reader = LogReader(rewrite_after=0.2)

    def follow(data: bytes) -> int:
        with reader.writing():
            reader.follow({"obsidian-mcp/memory/a-0-0.jsonl": bytes_view(data)})
            return reader.index.live_count

    assert follow(whole) == 2
    assert follow(b"") == 2 and reader.waiting  # mid-write: wait for it
    assert follow(whole + lines[2]) == 3 and not reader.waiting
    assert follow(lines[0]) == 3  # short again: waits
    time.sleep(0.25)
    assert follow(lines[0]) == 1  # still short: rewritten


@pytest.mark.anyio
async def test_a_server_writes_the_page_after_changes_and_at_exit_and_searches_skip_it(
    vault: Path, tmp_path: Path
) -> None:
    settings = folder_settings(vault, tmp_path / "config", memory_meaning=False)
    async with Client(build_server(settings)) as client:
        answer = await client.call_tool(
            "vault_remember", {"content": "Quillon the heron guards the weir", "tags": ["weir"]})
        assert not answer.is_error
    page = (vault / "obsidian-mcp" / "memory.md").read_text("utf-8")  # written at exit
    assert "Quillon the heron guards the weir" in page
    async with Client(build_server(settings)) as client:
        found = await client.call_tool("vault_smart_search", {"query": "Quillon"})
        text = found.content[0]
        assert isinstance(text, TextContent)
        assert "memory.md" not in text.text


@pytest.mark.anyio
async def test_facts_that_change_twice_and_back(vault: Path, tmp_path: Path) -> None:
    one = store(vault, tmp_path / "dev")
    a = await one.remember("The bridge is open", ["bridge"])
    b = await one.remember("The bridge is closed for repairs", ["bridge"],
                           supersedes=[a.memory.id])
    c = await one.remember("The bridge reopened in May", ["bridge"], supersedes=[b.memory.id])
    # The middle fact was wrong: forgetting it leaves the newest current, not the oldest.
    await one.forget(b.memory.id)
    assert [m.id for m in (await one.recall(tags=["bridge"])).memories] == [c.memory.id]
    fresh = store(vault, tmp_path / "other")  # a reader that builds from the files agrees
    assert [m.id for m in (await fresh.recall(tags=["bridge"])).memories] == [c.memory.id]
    # A fact can become current again in the same words as before.
    again = await one.remember("The bridge is open", ["bridge"], supersedes=[c.memory.id])
    assert again.created and again.memory.id != a.memory.id
    assert [m.id for m in (await one.recall(tags=["bridge"])).memories] == [again.memory.id]
    one.close()
    fresh.close()


@pytest.mark.anyio
async def test_a_scoped_recall_hints_only_at_what_that_scope_may_see(
    vault: Path, tmp_path: Path
) -> None:
    one = store(vault, tmp_path / "dev")
    shared = await one.remember("The north door sticks", ["door"])
    with pytest.raises(InvalidArgument, match="within its scope"):
        await one.remember("The north door is trapped", ["door"], scope="tamsin",
                           supersedes=[shared.memory.id])
    await one.remember("Tamsin plans to betray the crew", ["betrayal-plan"], scope="tamsin")
    nothing = await one.recall(tags=["vault"], scope="gale")
    assert nothing.total == 0 and nothing.store_size == 1
    assert dict(nothing.known_tags) == {"door": 1}
    one.close()
