"""The memory files themselves, through the vault folder or through Obsidian's REST API.

`files` says which files there are and why each writer has its own. `MemoryLog` keeps the
index (`index.LogReader`) current over all of them and writes only this process's file:

- Refresh: list the files, and read what each added since the last refresh (a file that
  shrank or vanished rebuilds the index, see `LogReader.follow`). On disk an unchanged
  listing (names, sizes, times) is not read again; through REST alone the plugin has no
  cheap stat and no range read for a non-markdown file, so a refresh GETs every file, at
  most every `max_staleness` seconds (this process's own writes are in the index at once).
- Append: whole lines to this process's file. On disk: one `os.write` (O_APPEND), a torn
  last line from a crash closed first. Through REST: a POST, which the plugin performs as a
  read-modify-write of the whole file; safe here because no one else writes this file. A
  POST that timed out or lost its connection may have landed, so the file is read back and
  only the lines missing from it are sent again.
- Compaction folds: the live lines (and every tombstone, so a forget outlives any stale
  copy) of this process's files, of its device's slots no process holds, and of their
  conflict copies, into a new file of this slot's next generation; then the folded files are
  removed. The new file is complete before anything is removed (on disk written aside and
  renamed; through REST put and read back), so a crash at any point loses nothing: the
  lines are then in both, and merging by id reads them once.
"""

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio.from_thread
import anyio.to_thread

from obsidian_mcp.errors import (
    FileSystemFailure,
    NoteNotFound,
    ObsidianConnectionLost,
    ObsidianTimeout,
    PathRefused,
    VaultError,
)
from obsidian_mcp.memory.files import MemoryFiles, SlotLocks, writer_of
from obsidian_mcp.memory.index import (
    FileView,
    ListingStale,
    LogReader,
    MemoryIndex,
    bytes_view,
    parse,
)
from obsidian_mcp.memory.model import Record, Tombstone, encode
from obsidian_mcp.sources.folder import append_whole
from obsidian_mcp.sources.rest import RestSource

logger = logging.getLogger(__name__)

# Decides what to write once the index is current.
Builder = Callable[[MemoryIndex], list[Record]]

# A POST that may have landed is checked and re-sent at most this many times.
_RESEND_ATTEMPTS = 3
# Listings are taken again while another process folds files under them, for at most this
# long, a growing pause apart (a fold of 100,000 memories writes its new file in a second).
_LISTING_SECONDS = 20.0
_LISTING_PAUSE_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Compaction:
    files_folded: int
    kept: int
    dropped_lines: int
    bytes_before: int
    bytes_after: int


def _lines(records: list[Record]) -> bytes:
    return "".join(encode(record) for record in records).encode("utf-8")


def folded(contents: Mapping[str, bytes], index: MemoryIndex) -> bytes:
    """The lines of these files worth keeping, once each: every line but the memories the
    index knows forgotten. Tombstones stay for good, and so does a line the index has not
    read yet, or a repeat (whose row the index keeps, so that it takes over if the first
    is forgotten)."""
    kept: dict[tuple[str, bool], bytes] = {}
    for name in sorted(contents):
        parsed = parse(contents[name], keep_raw=True)
        for record, line in zip(parsed.records, parsed.raw, strict=True):
            key = (record.id, isinstance(record, Tombstone))
            if key in kept:
                continue
            if isinstance(record, Tombstone) or not index.is_retired(record.id):
                kept[key] = line
    return b"".join(kept.values())


class FileAccess(Protocol):
    """The few file operations a memory log needs, on one kind of source."""

    def describe(self) -> str: ...

    async def listing(self, folder: str) -> list[str]:
        """Vault paths of the files directly in `folder` ('' is the root)."""
        ...

    async def views(self, names: list[str]) -> dict[str, FileView]:
        """The named files as they are now; missing ones left out."""
        ...

    async def append(self, name: str, data: bytes) -> None: ...

    async def create(self, name: str, data: bytes) -> None:
        """Write a new file whole, and only then let it be seen complete."""
        ...

    async def remove(self, name: str) -> None: ...


class DiskAccess:
    def __init__(self, root: Path) -> None:
        self._root = root.resolve()

    def describe(self) -> str:
        return f"vault folder ({self._root})"

    def _path(self, name: str) -> Path:
        path = self._root / name
        if not path.resolve().is_relative_to(self._root):
            raise PathRefused(f"The memory file {name!r} is a link that leaves the vault.")
        return path

    def _list(self, folder: str) -> list[str]:
        prefix = f"{folder}/" if folder else ""
        try:
            with os.scandir(self._root / folder) as entries:
                return [prefix + entry.name for entry in entries if entry.is_file()]
        except FileNotFoundError:
            return []  # nothing remembered yet
        except OSError as exc:  # a file where the folder goes, no permission, ...
            raise FileSystemFailure(folder, "list the memory files in", exc) from exc

    async def listing(self, folder: str) -> list[str]:
        return await anyio.to_thread.run_sync(self._list, folder)

    def signature(self, names: list[str]) -> tuple[tuple[str, int, int, int], ...]:
        """What changes whenever a file does (name, inode, size, time); cheap to compare."""
        marks: list[tuple[str, int, int, int]] = []
        for name in sorted(names):
            try:
                st = os.stat(self._root / name)
            except FileNotFoundError:
                continue
            marks.append((name, st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(marks)

    def _view(self, name: str) -> FileView | None:
        path = self._path(name)
        try:
            st = path.stat()
        except FileNotFoundError:
            return None

        def read(start: int, length: int) -> bytes:
            try:
                with path.open("rb") as handle:
                    handle.seek(start)
                    return handle.read(length)
            except FileNotFoundError:
                raise ListingStale(f"{name} was removed while it was read") from None

        return FileView(st.st_size, read, st.st_ino)

    async def views(self, names: list[str]) -> dict[str, FileView]:
        def gather() -> dict[str, FileView]:
            found = {name: self._view(name) for name in names}
            return {name: view for name, view in found.items() if view is not None}

        return await anyio.to_thread.run_sync(gather)

    def _append(self, name: str, data: bytes) -> None:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(handle).st_size
            if size and os.pread(handle, 1, size - 1) != b"\n":
                data = b"\n" + data  # a torn last line is closed, never glued to ours
            append_whole(handle, data, size, name)
        finally:
            os.close(handle)

    async def append(self, name: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._append, name, data)

    def _create(self, name: str, data: bytes) -> None:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            append_whole(handle, data, 0, name)
            os.fsync(handle)
        except BaseException:
            os.close(handle)
            temporary.unlink(missing_ok=True)
            raise
        os.close(handle)
        os.replace(temporary, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash
        finally:
            os.close(directory)

    async def create(self, name: str, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._create, name, data)

    async def remove(self, name: str) -> None:
        await anyio.to_thread.run_sync(lambda: self._path(name).unlink(missing_ok=True))


class RestAccess:
    def __init__(self, rest: RestSource) -> None:
        self._rest = rest

    def describe(self) -> str:
        return self._rest.describe()

    async def listing(self, folder: str) -> list[str]:
        prefix = f"{folder}/" if folder else ""
        return [
            prefix + child
            for child in await self._rest.list_folder(folder)
            if not child.endswith("/")
        ]

    async def get(self, name: str) -> bytes | None:
        try:
            return (await self._rest.read_note(name)).content.encode("utf-8")
        except NoteNotFound:
            return None

    async def views(self, names: list[str]) -> dict[str, FileView]:
        found: dict[str, FileView] = {}
        for name in names:
            data = await self.get(name)
            if data is not None:
                found[name] = bytes_view(data)
        return found

    async def append(self, name: str, data: bytes) -> None:
        try:
            await self._rest.append(name, data.decode("utf-8"))
            return
        except (ObsidianTimeout, ObsidianConnectionLost) as exc:
            failure: Exception = exc
        lines = data.splitlines(keepends=True)
        for _ in range(_RESEND_ATTEMPTS):
            # The POST may have landed before the answer was lost: send only what is missing.
            content = await self.get(name) or b""
            missing = [line for line in lines if line not in content]
            if not missing:
                return
            logger.warning(
                "memory append unconfirmed (%s); sending %d line(s) again",
                type(failure).__name__,
                len(missing),
            )
            try:
                await self._rest.append(name, b"".join(missing).decode("utf-8"))
                return
            except (ObsidianTimeout, ObsidianConnectionLost) as exc:
                failure = exc
        raise failure

    async def create(self, name: str, data: bytes) -> None:
        await self._rest.write(name, data.decode("utf-8"))
        # The plugin writes in place (truncate, then write): only a read-back proves the
        # file whole before the folded files are removed.
        if await self.get(name) != data:
            raise VaultError(
                f"The folded memory file {name} did not read back whole; the "
                "files it folds are kept."
            )

    async def remove(self, name: str) -> None:
        await self._rest.delete(name)


class MemoryLog:
    def __init__(
        self,
        access: FileAccess,
        files: MemoryFiles,
        device: str,
        locks: SlotLocks,
        *,
        max_staleness: float = 0.0,
    ) -> None:
        self._access = access
        self._files = files
        self._device = device
        self._locks = locks
        self._max_staleness = max_staleness
        self._fetched_at = -float("inf")
        self._signature: object = None
        # This process's slot and file, once it first writes.
        self._slot: int | None = None
        self.own: str | None = None

    def describe(self) -> str:
        return self._access.describe()

    async def names(self) -> list[str]:
        """Every memory file there is now: the legacy file and its conflict copies, and
        every file in the writers' folder."""
        files = self._files
        beside = await self._access.listing(files.legacy_folder)
        legacy = [
            name
            for name in beside
            if name == files.legacy or files.is_legacy_copy(name.rsplit("/", 1)[-1])
        ]
        writers = [
            name for name in await self._access.listing(files.folder) if name.endswith(".jsonl")
        ]
        return sorted(legacy + writers)

    async def refresh(self, reader: LogReader, *, force: bool = False) -> LogReader:
        if not force and time.monotonic() - self._fetched_at < self._max_staleness:
            return reader
        access = self._access
        deadline = time.monotonic() + _LISTING_SECONDS
        attempt = 0
        while time.monotonic() < deadline:
            attempt += 1
            names = await self.names()
            if isinstance(access, DiskAccess):
                signature = await anyio.to_thread.run_sync(access.signature, names)
                if signature == self._signature and not force:
                    return reader
            else:
                signature = None
            views = await access.views(names)
            self._fetched_at = time.monotonic()

            try:
                await anyio.to_thread.run_sync(self._follow, reader, names, views)
            except ListingStale as stale:
                # Another process folded files after this listing: list again rather than
                # rebuild the shared index from a listing that misses its new file.
                logger.info("memory: %s; listing the files again", stale)
                await anyio.sleep(min(_LISTING_PAUSE_SECONDS * attempt, 0.5))
                continue
            # A file caught short is read again next time, even if nothing else changes.
            self._signature = None if reader.waiting else signature
            return reader
        raise ListingStale(
            "The memory files kept changing while they were read (another process is "
            "compacting them); call again in a few seconds."
        )

    def _follow(self, reader: LogReader, names: list[str], views: dict[str, FileView]) -> None:
        """In a worker thread: the index brought over `views` of the files `names` listed;
        before a rebuild the files are listed again through the event loop (REST needs
        it), inside the index's write transaction, so no fold of this installation settles
        meanwhile."""

        def appeared() -> set[str]:
            return set(anyio.from_thread.run(self.names)) - set(names)

        with reader.writing():
            reader.follow(views, appeared)

    async def _claim(self, reader: LogReader) -> str:
        """This process's file: its slot's newest, or the slot's first."""
        if self.own is not None:
            return self.own
        slot = await anyio.to_thread.run_sync(self._locks.claim)
        self._slot = slot
        generations = [
            writer.generation
            for name in await self.names()
            if (writer := writer_of(name)) is not None
            and writer.exact
            and writer.device == self._device
            and writer.slot == slot
        ]
        self.own = self._files.writer_name(self._device, slot, max(generations, default=0))
        logger.info("memory: this process writes %s", self.own)
        return self.own

    async def append(self, reader: LogReader, build: Builder) -> tuple[LogReader, list[Record]]:
        """Refresh, let `build` choose the records, append them as whole lines to this
        process's file, and apply them to the index."""
        own = await self._claim(reader)
        reader = await self.refresh(reader)

        def decide() -> list[Record]:
            with reader.reading():
                return build(reader.index)

        records = await anyio.to_thread.run_sync(decide)
        if not records:
            return reader, records
        await self._access.append(own, _lines(records))
        # Visible at once; the refresh that later reads these lines finds them applied.
        await anyio.to_thread.run_sync(self._apply, reader, own, records)
        return reader, records

    @staticmethod
    def _apply(reader: LogReader, own: str, records: list[Record]) -> None:
        with reader.writing():
            for record in records:
                reader.index.apply(record, own)

    def dead_lines(self, reader: LogReader) -> tuple[int, int]:
        """(memory lines of this process's file that folding would drop, live ones it
        would keep); inside `reading()`."""
        if self.own is None:
            return 0, 0
        return reader.index.file_lines(self.own)

    async def compact(
        self, reader: LogReader, *, rewrite_own: bool = True
    ) -> tuple[LogReader, Compaction]:
        """Fold this device's idle files (and, with `rewrite_own`, this process's own) into
        this slot's next generation; without it, their lines are appended to this
        process's file instead, which is not rewritten (a large one takes seconds)."""
        own = await self._claim(reader)
        assert self._slot is not None
        taken: list[int] = []
        try:
            inputs: list[str] = []
            for name in await self.names():
                writer = writer_of(name)
                if writer is None or writer.device != self._device:
                    continue
                if name == own and not rewrite_own:
                    continue
                if writer.slot != self._slot and writer.slot not in taken:
                    if not await anyio.to_thread.run_sync(self._locks.try_take, writer.slot):
                        continue  # another process writes it
                    taken.append(writer.slot)
                inputs.append(name)
            if not inputs:
                return reader, Compaction(0, 0, 0, 0, 0)
            # Read after the slots are held: no line of theirs can come in unread.
            reader = await self.refresh(reader, force=True)
            return await self._fold(reader, own, inputs, rewrite_own)
        finally:
            for slot in taken:
                self._locks.release(slot)

    async def _fold(
        self, reader: LogReader, own: str, inputs: list[str], rewrite_own: bool
    ) -> tuple[LogReader, Compaction]:
        """Fold `inputs`, which `reader` has just read whole under their slots' locks."""
        # The index is whole at this rebuild count; another process may rebuild it before
        # the fold settles (`settle`).
        complete_at = reader.generation
        views = await self._access.views(inputs)
        contents = await anyio.to_thread.run_sync(
            lambda: {name: view.read(0, view.size) for name, view in views.items()}
        )

        def keep() -> bytes:
            with reader.reading():
                return folded(contents, reader.index)

        data = await anyio.to_thread.run_sync(keep)
        if rewrite_own:
            assert self._slot is not None
            generations = [
                writer.generation
                for name in [own, *inputs]
                if (writer := writer_of(name)) is not None and writer.slot == self._slot
            ]
            target = self._files.writer_name(self._device, self._slot, max(generations) + 1)
            await self._access.create(target, data)
        else:
            target = own
            if data:
                await self._access.append(own, data)
        for name in contents:
            if name == target:
                continue
            try:
                await self._access.remove(name)
            except (OSError, VaultError) as exc:
                # Still there: read again (and merged by id) until a later fold removes it.
                logger.warning("memory: folded file %s not removed (%s)", name, exc)
        self.own = target

        def settle() -> None:
            with reader.writing():
                if rewrite_own and reader.generation == complete_at:
                    # Every line of the new file is in the index already (the inputs were
                    # read under their slots' locks): its place is taken, nothing applied.
                    reader.adopt(target, data)
                elif rewrite_own:
                    # Another process rebuilt the shared index meanwhile, from a listing
                    # that may have had neither the inputs nor the new file (one that lags
                    # the disk, as Obsidian's can): the new file is read like any other.
                    reader.extend({target: bytes_view(data)})
                reader.fold(contents, into=target)

        await anyio.to_thread.run_sync(settle)
        self._signature = None
        before = sum(len(content) for content in contents.values())
        lines_before = sum(content.count(b"\n") for content in contents.values())
        kept = data.count(b"\n")
        return reader, Compaction(len(contents), kept, lines_before - kept, before, len(data))

    async def foldable(self) -> int:
        """Files a fold would take besides this process's own: its device's files that no
        process holds (left by processes that ended while others ran) and conflict copies
        of its device's files. 0 before this process first writes."""
        if self._slot is None:
            return 0
        found = 0
        for name in await self.names():
            writer = writer_of(name)
            if writer is None or writer.device != self._device or name == self.own:
                continue
            if writer.slot == self._slot:
                found += 1
            elif await anyio.to_thread.run_sync(self._locks.try_take, writer.slot):
                self._locks.release(writer.slot)
                found += 1
        return found

    async def write_text(self, name: str, text: str) -> None:
        """Replace a generated file (the Markdown view) whole."""
        await self._access.create(name, text.encode("utf-8"))

    def close(self) -> None:
        self._locks.close()
