"""The notes' snapshot (index schema 7): a new process makes its notes from one row and the
rows of the notes changed since. The law: whatever was written, by this process or another,
before or after a snapshot, `load_notes()` equals the notes made from their rows alone."""

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from obsidian_mcp.index import store as store_module
from obsidian_mcp.index.store import IndexStore, NoteRow, PassageRow, StoredNote

PATHS = ("A.md", "Folder/B.md", "Ünïcode/Ç 1.md", "d.md")


def note_row(path: str, variant: int) -> NoteRow:
    """A note of `path` in one of several shapes: passages with several texts, one, or none;
    headings shared and not; links and backlinks or none; a title or none."""
    passages = tuple(
        PassageRow(
            section=(f"Title {variant % 2}", f"Part {n}") if n % 2 else (f"Title {variant % 2}",),
            start=n * 10,
            end=n * 10 + 9,
            terms=tuple(f"t{variant}{n}{k}" for k in range(n + variant % 3)),
            heading_terms=("part",),
            texts=tuple(f"{path} v{variant} p{n} w{k} «quoted»" for k in range((n + variant) % 3)),
        )
        for n in range(variant % 4)
    )
    return NoteRow(
        path=path,
        mtime_ms=1_700_000_000_000 + variant,
        size=100 + variant,
        content=f"# {path}\n\nvariant {variant}\n",
        label_terms=("name", f"v{variant}") if variant % 3 else (),
        backlinks=None if variant % 2 else (PATHS[0], "Ünïcode/Ç 1.md"),
        passages=passages,
        links=(("Target ∑", 3, 12), (PATHS[1], 20, 30))[: variant % 3],
        title=f"Title {variant % 2}",
    )


# One step: a note written (by this process or another), deleted, its links and title
# taken away as an index before schemas 5 and 6 held them, kept again from a parse
# (`put_parsed`; both UPDATEs), or a snapshot written.
steps = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(PATHS), st.integers(0, 7), st.booleans()),
    st.tuples(
        st.sampled_from(["delete", "older", "parsed"]),
        st.sampled_from(PATHS),
        st.just(0),
        st.booleans(),
    ),
    st.tuples(st.just("snapshot"), st.just(""), st.just(0), st.booleans()),
)


@pytest.fixture
def every_change_due(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot is written whenever one note changed outside it (the vault is small)."""
    monkeypatch.setattr(store_module, "NOTE_SNAPSHOT_MIN_CHANGES", 1)
    monkeypatch.setattr(store_module, "SNAPSHOT_REWRITE_SHARE", 0.0)


def from_rows_alone(store: IndexStore) -> dict[str, StoredNote]:
    """Every stored note made from its rows (`load_notes` of the paths the file holds)."""
    return store.load_notes(list(store.stored_stats()))


def apply(step: tuple[str, str, int, bool], own: IndexStore, other: IndexStore) -> None:
    kind, path, variant, by_other = step
    writer = other if by_other else own
    if kind == "put":
        writer.put_notes([note_row(path, variant)])
    elif kind == "delete":
        writer.delete_notes([path])
    elif kind == "older":
        with sqlite3.connect(writer.path) as db:
            db.execute("UPDATE notes SET links = NULL, title = NULL WHERE path = ?", (path,))
    elif kind == "parsed":
        stored = writer.load_notes([path]).get(path)
        if stored is not None:
            writer.put_parsed([(path, stored.content_hash, [("Found ∆", 1, 2)], "Found")])
    else:
        writer.save_note_snapshot()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=st.lists(steps, max_size=14))
@example(
    history=[("put", "A.md", 1, False), ("snapshot", "", 0, False), ("delete", "A.md", 0, True)]
)
@example(
    history=[
        ("put", "A.md", 2, False),
        ("snapshot", "", 0, True),
        ("put", "A.md", 3, True),
        ("older", "A.md", 0, True),
        ("snapshot", "", 0, True),
        ("parsed", "A.md", 0, False),
        ("snapshot", "", 0, False),
        ("put", "d.md", 0, False),
    ]
)
def test_notes_loaded_through_the_snapshot_are_the_notes_made_from_their_rows(
    every_change_due: None, history: list[tuple[str, str, int, bool]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "index.sqlite3"
        own, other = IndexStore(file), IndexStore(file)
        try:
            for step in history:
                apply(step, own, other)
                assert own.load_notes() == from_rows_alone(own)
            # A new process, too: it reads the snapshot first.
            fresh = IndexStore(file)
            assert fresh.load_notes() == from_rows_alone(own)
            fresh.close()
        finally:
            own.close()
            other.close()


def test_a_new_process_loads_the_snapshot_and_only_the_notes_changed_after_it(
    tmp_path: Path, every_change_due: None, loads_from_rows: list[list[str] | None]
) -> None:
    file = tmp_path / "index.sqlite3"
    writer = IndexStore(file)
    writer.put_notes([note_row(path, 3) for path in PATHS])
    assert writer.save_note_snapshot() == len(PATHS)
    assert writer.save_note_snapshot() == 0  # nothing changed since: not due
    writer.put_notes([note_row("A.md", 6)])
    writer.delete_notes(["d.md"])
    loads_from_rows.clear()

    reader = IndexStore(file)
    notes = reader.load_notes()
    assert loads_from_rows == [["A.md", "d.md"]]  # not every note: the two changed
    assert notes == from_rows_alone(reader) and "d.md" not in notes
    assert notes["A.md"].mtime_ms == note_row("A.md", 6).mtime_ms

    # Written again, the log of changes it holds is pruned.
    assert writer.save_note_snapshot() == len(PATHS) - 1
    with sqlite3.connect(file) as db:
        assert db.execute("SELECT count(*) FROM note_changes").fetchone()[0] == 0
    loads_from_rows.clear()
    assert IndexStore(file).load_notes() == notes and loads_from_rows == [[]]
    writer.close()
    reader.close()


def test_the_snapshot_is_written_once_enough_notes_changed_outside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "NOTE_SNAPSHOT_MIN_CHANGES", 4)
    store = IndexStore(tmp_path / "index.sqlite3")
    store.put_notes([note_row(path, 1) for path in PATHS[:3]])
    assert store.save_note_snapshot() == 0  # three notes: their rows load as fast
    store.put_notes([note_row(PATHS[3], 1)])
    assert store.save_note_snapshot() == 4
    for variant in range(3):  # six rows of changes: a delete and an insert a write
        store.put_notes([note_row("A.md", variant)])
    assert store.save_note_snapshot() == 4
    store.close()


def test_an_older_snapshot_never_replaces_a_newer_one(
    tmp_path: Path, every_change_due: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes write snapshots at once: the one that read first must not replace the
    other's, whose changes it lacks, once the log up to the newer one is pruned."""
    file = tmp_path / "index.sqlite3"
    slow, fast = IndexStore(file), IndexStore(file)
    slow.put_notes([note_row("A.md", 1)])
    encoded = store_module._encoded_note_snapshot  # pyright: ignore[reportPrivateUsage]

    def meanwhile(notes: Any) -> tuple[bytes, bytes, bytes, bytes]:
        blobs = encoded(notes)  # read before the other process wrote and snapshot
        monkeypatch.setattr(store_module, "_encoded_note_snapshot", encoded)
        fast.put_notes([note_row("Folder/B.md", 2)])
        assert fast.save_note_snapshot() == 2
        return blobs

    monkeypatch.setattr(store_module, "_encoded_note_snapshot", meanwhile)
    assert slow.save_note_snapshot() == 0
    assert sorted(IndexStore(file).load_notes()) == ["A.md", "Folder/B.md"]
    slow.close()
    fast.close()


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE note_snapshot SET notes = x'7b'",  # not JSON
        "UPDATE note_snapshot SET passages = substr(passages, 1, length(passages) - 8)",
        "UPDATE note_snapshot SET hashes = x'ff00'",  # not ASCII
        "UPDATE note_snapshot SET hashes = ''",  # fewer text hashes than passages name
        "UPDATE note_snapshot SET sections = '[]'",  # headings the passages point past
    ],
)
def test_a_damaged_snapshot_is_said_and_the_notes_come_from_their_rows(
    tmp_path: Path, every_change_due: None, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    store.put_notes([note_row(path, 3) for path in PATHS])
    assert store.save_note_snapshot() == len(PATHS)
    expected = from_rows_alone(store)
    with sqlite3.connect(file) as db:
        db.execute(damage)
    assert store.load_notes() == expected
    assert "notes' snapshot is damaged" in caplog.text
    # Dropped, so the server's next look writes it again; and it is read from then on.
    assert store.save_note_snapshot() == len(PATHS)
    caplog.clear()
    assert store.load_notes() == expected and "damaged" not in caplog.text
    store.close()
