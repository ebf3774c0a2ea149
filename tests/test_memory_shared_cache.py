"""Processes of one installation share one memory index cache (`memory_cache_path`): what
one reads, the others find read. A fold by one and a refresh by another, interleaved at the
worst moment, must leave that shared index holding every memory.

The worst moment: the other process listed the files before the fold wrote its new file,
and looks at them after the fold removed the files it folded but before the folder has
settled the shared index. Its listing then lacks both the folded files and the new one.
Rebuilding the shared index from it left out every memory of the folded files, and the
folder then took its new file as read: its own memories were gone from the index for good
(`test_memory_compaction_race` saw a forget of a live memory refused, once in a while)."""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsidian_mcp.memory.cache import open_cache
from obsidian_mcp.memory.files import MemoryFiles, SlotLocks
from obsidian_mcp.memory.index import FileView, LogReader, MemoryIndex
from obsidian_mcp.memory.logfile import DiskAccess, MemoryLog
from obsidian_mcp.memory.model import Memory, Record
from tests.memory_files import MEMORY

DEVICE = "shared"
FILES = MemoryFiles(MEMORY)


class PausingRemoves(DiskAccess):
    """The vault folder, where `between` runs once, right after the first file removed
    (as another process would be scheduled there)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.between: Callable[[], Awaitable[None]] | None = None

    async def remove(self, name: str) -> None:
        await super().remove(name)
        between, self.between = self.between, None
        if between is not None:
            await between()


class ListingTakenEarlier(DiskAccess):
    """The vault folder, whose listings (once frozen) are those of an earlier moment: the
    listing another process took just before a fold wrote its new file. `lagging` keeps
    them so until thawed (a listing that lags the disk, as Obsidian's may); otherwise only
    the listing before the files are looked at is old."""

    def __init__(self, root: Path, *, lagging: bool) -> None:
        super().__init__(root)
        self.lagging = lagging
        self.frozen: dict[str, list[str]] = {}

    async def listing(self, folder: str) -> list[str]:
        if folder in self.frozen:
            return self.frozen[folder]
        return await super().listing(folder)

    async def freeze(self) -> None:
        for folder in (FILES.legacy_folder, FILES.folder):
            self.frozen[folder] = await super().listing(folder)

    async def views(self, names: list[str]) -> dict[str, FileView]:
        if not self.lagging:
            self.frozen = {}
        return await super().views(names)


def memories(count: int) -> list[Record]:
    at = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    return [
        Memory(id=f"0fact{n:08d}", ts=at, content=f"fact {n}", tags=("x",), context="")
        for n in range(count)
    ]


WRITTEN = memories(10)


def live_ids(reader: LogReader) -> set[str]:
    """Those of the memories written that the index holds live."""
    with reader.reading():
        return {
            record.id for record in WRITTEN if isinstance(reader.index.latest(record.id), Memory)
        }


@pytest.mark.anyio
@pytest.mark.parametrize("lagging", [False, True], ids=["overtaken", "lagging"])
async def test_a_refresh_from_a_listing_a_fold_overtook_keeps_every_memory(
    tmp_path: Path, lagging: bool
) -> None:
    """Overtaken: the other process lists again before it rebuilds, finds the new file,
    and reads it; its index is whole right after its refresh. Lagging: its listing shows
    neither file, so it rebuilds without them; the fold, finding the index rebuilt since it
    read it, reads its new file into it rather than taking it as read."""
    vault, cache = tmp_path / "vault", tmp_path / "cache" / "memory.sqlite3"
    vault.mkdir()
    locks = tmp_path / "locks"
    folding, other = PausingRemoves(vault), ListingTakenEarlier(vault, lagging=lagging)
    log_a = MemoryLog(folding, FILES, DEVICE, SlotLocks(locks))
    log_b = MemoryLog(other, FILES, DEVICE, SlotLocks(locks))
    reader_a = LogReader(MemoryIndex(open_cache(cache)))
    reader_b = LogReader(MemoryIndex(open_cache(cache)))
    every = {record.id for record in WRITTEN}
    try:
        reader_a, _ = await log_a.append(reader_a, lambda _: WRITTEN)
        reader_b = await log_b.refresh(reader_b, force=True)
        assert live_ids(reader_b) == live_ids(reader_a) == every

        async def refresh_the_other() -> None:
            nonlocal reader_b
            reader_b = await log_b.refresh(reader_b, force=True)
            assert live_ids(reader_b) == (set() if lagging else every)

        await other.freeze()
        folding.between = refresh_the_other
        reader_a, report = await log_a.compact(reader_a)
        assert report.files_folded == 1 and folding.between is None

        assert live_ids(reader_a) == every, "the folding process lost its own memories"
        other.frozen = {}
        reader_b = await log_b.refresh(reader_b, force=True)
        assert live_ids(reader_b) == every
        # A process of the installation that starts now reads the same cache.
        fresh = LogReader(MemoryIndex(open_cache(cache)))
        fresh = await MemoryLog(DiskAccess(vault), FILES, DEVICE, SlotLocks(locks)).refresh(
            fresh, force=True
        )
        assert live_ids(fresh) == every
        with fresh.reading():
            assert fresh.index.file_lines(FILES.writer_name(DEVICE, 0, 1)) == (0, 10)
    finally:
        log_a.close()
        log_b.close()
