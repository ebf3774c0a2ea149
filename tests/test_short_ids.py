"""Memory ids as replies show them: each by its shortest unique ending (issue 37).

The law, property-tested on ids drawn to share endings and to end other ids: for every id
a store holds, of a memory or a forgotten one, the ending `short_ids` shows is at least
SHORT_ID_CHARS long (or the whole id), and `ids_named` takes it back to that id alone.
Through the store: forget and supersedes take the ending, write the whole id, and refuse
an ending two ids share (as one can come to, when another device's memory arrives).
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.index import SHORT_ID_CHARS, MemoryIndex
from obsidian_mcp.memory.model import Memory, Tombstone, encode
from obsidian_mcp.memory.render import render_recall
from tests.memory_files import memory_entries, writer_paths
from tests.test_memory_store import make_store

_WHEN = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root

# Few letters, so that endings are shared and some ids end others ("ab0" and "xab0").
_IDS = st.lists(st.text("ab0", min_size=1, max_size=9), min_size=1, max_size=40, unique=True)


@settings(max_examples=200, deadline=None)
@given(ids=_IDS, forgotten=st.sets(st.integers(0, 39)))
def test_every_shown_id_names_its_memory_alone(ids: list[str], forgotten: set[int]) -> None:
    index = MemoryIndex(open_cache(None))
    for n, memory_id in enumerate(ids):
        index.apply(Memory(memory_id, _WHEN, f"memory {n}", ("t",), ""), "f")
        if n in forgotten:
            index.apply(Tombstone(memory_id, _WHEN), "f")
    shown = index.short_ids(ids)
    for memory_id in ids:
        ending = shown[memory_id]
        assert memory_id.endswith(ending)
        assert len(ending) >= SHORT_ID_CHARS or ending == memory_id
        assert index.ids_named(ending) == [memory_id], (memory_id, ending)
        # It is the shortest: one character less no longer names this memory alone.
        if len(ending) > SHORT_ID_CHARS:
            assert index.ids_named(ending[1:]) != [memory_id], (memory_id, ending)


def test_short_ids_at_scale_are_mostly_five_characters() -> None:
    """Minted ids (four random base-36 digits after the time) at 20,000 memories."""
    from obsidian_mcp.memory.model import IdMaker

    index = MemoryIndex(open_cache(None))
    maker = IdMaker()
    ids = [maker.make(_WHEN + timedelta(seconds=n)) for n in range(20_000)]
    for memory_id in ids:
        index.apply(Memory(memory_id, _WHEN, memory_id, (), ""), "f")
    lengths = [len(ending) for ending in index.short_ids(ids).values()]
    assert sum(length == SHORT_ID_CHARS for length in lengths) > 0.99 * len(ids)
    assert max(lengths) < 13


@pytest.mark.anyio
async def test_forget_and_supersedes_take_the_ending_and_write_the_whole_id(
    vault: Path,
) -> None:
    store = make_store(vault)
    old = await store.remember("The ferry leaves at nine.", ["ferry"], "")
    shown = old.short_ids[old.memory.id]
    assert len(shown) == SHORT_ID_CHARS and old.memory.id.endswith(shown)
    new = await store.remember("The ferry leaves at ten.", ["ferry"], "", supersedes=[shown])
    assert new.superseded == [old.memory]
    lines = memory_entries(vault)
    assert lines[-1]["supersedes"] == [old.memory.id]  # the whole id, never the ending
    recall = await store.recall(tags=["ferry"], include_superseded=True)
    text = render_recall(recall, 1000)
    assert f"SUPERSEDED by {new.short_ids[new.memory.id]}" in text
    assert f"replaces {shown}" in text
    forgotten = await store.forget(new.short_ids[new.memory.id])
    assert forgotten.id == new.memory.id
    tombstone = memory_entries(vault)[-1]
    assert tombstone == {"id": new.memory.id, "ts": tombstone["ts"], "forgotten": True}
    # A refusal names the id as it was given.
    gone = new.short_ids[new.memory.id]
    with pytest.raises(InvalidArgument, match=f"supersedes names '{gone}', which was forgotten"):
        await store.remember("The ferry leaves at noon.", ["ferry"], "", supersedes=[gone])
    store.close()


@pytest.mark.anyio
async def test_an_ending_two_ids_come_to_share_is_refused_naming_both(vault: Path) -> None:
    """A receipt named a memory by five characters; then another device's memory with the
    same ending arrives. The ending no longer names one memory: refused, nothing written."""
    store = make_store(vault)
    mine = await store.remember("Mira's locket is silver.", ["mira"], "")
    shown = mine.short_ids[mine.memory.id]
    other_id = "0zzzzzzz" + mine.memory.id[-SHORT_ID_CHARS:]
    assert other_id.endswith(shown)  # the same five last characters
    other = Memory(other_id, _WHEN, "The tide turns at noon.", ("tide",), "")
    (writer_paths(vault)[0].parent / "otherdev-0-1.jsonl").write_text(encode(other), "utf-8")
    before = [path.read_bytes() for path in writer_paths(vault)]
    with pytest.raises(InvalidArgument) as refused:
        await store.forget(shown)
    message = str(refused.value)
    assert mine.memory.id in message and other_id in message and "whole id" in message
    assert "Mira's locket is silver." in message
    with pytest.raises(InvalidArgument, match="supersedes names"):
        await store.remember("Mira's locket is gold.", ["mira"], "", supersedes=[shown])
    assert [path.read_bytes() for path in writer_paths(vault)] == before
    # Replies now show both by longer endings, each naming its memory alone.
    both = await store.short_ids([mine.memory.id, other_id])
    assert all(len(ending) > SHORT_ID_CHARS for ending in both.values())
    assert (await store.forget(both[other_id])).id == other_id
    store.close()


@pytest.mark.anyio
async def test_a_whole_id_that_ends_another_names_itself(vault: Path) -> None:
    store = make_store(vault)
    short = Memory("ab0ab", _WHEN, "The short one.", ("x",), "")
    long = Memory("0xxxxxxxab0ab", _WHEN, "The long one.", ("x",), "")
    folder = vault / "obsidian-mcp" / "memory"
    folder.mkdir(parents=True)
    (folder / "otherdev-0-1.jsonl").write_text(encode(short) + encode(long), "utf-8")
    shown = await store.short_ids([short.id, long.id])
    assert shown == {short.id: "ab0ab", long.id: "xab0ab"}
    assert (await store.forget("ab0ab")).id == short.id
    assert (await store.forget("xab0ab")).id == long.id
    assert json.loads(
        (folder / "otherdev-0-1.jsonl").read_text("utf-8").splitlines()[0]
    )["id"] == short.id
    store.close()
