"""The memory file itself, through the vault folder or through Obsidian's REST API.

Folder (used whenever the vault folder is known, with or without Obsidian running): every
write holds an exclusive `flock` on the file and is one `os.write` of whole lines, so two
server processes never interleave; the newline rule (close a torn last line first) is
applied under the same lock. Compaction writes a sibling, locks it, and renames it over
the file while holding both locks. A writer that opened the old file and waited for its
lock would then append to an orphan, so every writer checks, once it holds the lock, that
its descriptor is still the file at the path, and opens again if not. Obsidian itself (a
REST-only process appending through the plugin) takes no lock: whatever it appended to the
old file between compaction's read and its rename is carried over to the new file.

REST alone (no vault folder): the plugin has no cheap stat and no range read for a
non-markdown file, so a refresh GETs the whole file and parses only the bytes after the
anchor, at most every `max_staleness` seconds (this server's own writes are applied to the
index at once). Appends POST whole lines; a POST that timed out or lost its connection may
have landed, so the file is read back and only lines that are missing are sent again.
Compaction is refused: the plugin can neither lock nor rename, so a rewrite (GET, then PUT)
would erase whatever another client appended in between, and nothing can prove afterwards
that no one did. The file keeps its retired lines until a process with the folder compacts.
"""

import fcntl
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio.to_thread

from obsidian_mcp.errors import (
    CompactionRefused,
    NoteNotFound,
    ObsidianConnectionLost,
    ObsidianTimeout,
    PathRefused,
)
from obsidian_mcp.memory.index import LogReader, MemoryIndex, parse, settle
from obsidian_mcp.memory.model import Record, encode
from obsidian_mcp.sources.folder import append_whole
from obsidian_mcp.vault import Vault

logger = logging.getLogger(__name__)

# Decides what to write once the index is current (and, on disk, while the lock is held).
Builder = Callable[[MemoryIndex], list[Record]]

# A POST that may have landed is checked and re-sent at most this many times.
_RESEND_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Compaction:
    kept: int
    dropped_lines: int
    bytes_before: int
    bytes_after: int


class MemoryLog(Protocol):
    def describe(self) -> str: ...

    def compaction_refused(self) -> str | None:
        """Why this log cannot be compacted safely, or None when it can."""
        ...

    async def refresh(self, reader: LogReader) -> LogReader:
        """The reader brought up to the file's end (a new reader if the file was rewritten)."""
        ...

    async def append(self, reader: LogReader, build: Builder) -> tuple[LogReader, list[Record]]:
        """Refresh, let `build` choose the records, and append them as whole lines."""
        ...

    async def compact(self, reader: LogReader) -> tuple[LogReader, Compaction]: ...


def _lines(records: list[Record]) -> bytes:
    return "".join(encode(record) for record in records).encode("utf-8")


def _whole_lines(data: bytes) -> bytes:
    """`data` up to its last newline: a line still being written is not carried over."""
    return data[: data.rfind(b"\n") + 1]


def _fsync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def catch_up(reader: LogReader, data: bytes) -> LogReader:
    """`reader` advanced over `data` (the whole file), or rebuilt if the file was rewritten."""
    with reader.writing():
        reader.follow(len(data), lambda start, length: data[start : start + length])
    return reader


def _apply(reader: LogReader, records: list[Record]) -> None:
    with reader.writing():
        for record in records:
            reader.index.apply(record)


def compacted(data: bytes) -> tuple[bytes, Compaction]:
    """The file's live memories, one line each in their order; repeats and tombstones gone."""
    parsed = parse(data, keep_raw=True)
    line_of = dict(zip((record.id for record in parsed.records), parsed.raw, strict=True))
    settled = settle(parsed.records)
    kept_ids = [m.id for m, repeat in zip(settled.live, settled.repeats, strict=True)
                if not repeat]
    kept = b"".join(line_of[memory_id] for memory_id in kept_ids)
    total_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    return kept, Compaction(
        kept=len(kept_ids),
        dropped_lines=total_lines - len(kept_ids),
        bytes_before=len(data),
        bytes_after=len(kept),
    )


class DiskLog:
    def __init__(self, root: Path, path: str) -> None:
        self._target = root / path
        self._path = path
        real = self._target.resolve()
        if not real.is_relative_to(root.resolve()):
            raise PathRefused(f"The memory file {path!r} is a link that leaves the vault.")
        # (inode, size, mtime) at the last refresh: unchanged means nothing to read.
        self._seen: tuple[int, int, int] | None = None

    def describe(self) -> str:
        return f"vault folder ({self._target})"

    def compaction_refused(self) -> str | None:
        return None

    def _catch_up(self, handle: int, reader: LogReader) -> LogReader:
        st = os.fstat(handle)
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return reader
        with reader.writing():
            reader.follow(st.st_size, lambda start, length: os.pread(handle, length, start))
        self._seen = seen
        return reader

    def _refresh(self, reader: LogReader) -> LogReader:
        try:
            handle = os.open(self._target, os.O_RDONLY)
        except FileNotFoundError:
            self._seen = None
            with reader.writing():
                reader.follow(0, lambda start, length: b"")
            return reader
        try:
            return self._catch_up(handle, reader)
        finally:
            os.close(handle)

    async def refresh(self, reader: LogReader) -> LogReader:
        return await anyio.to_thread.run_sync(self._refresh, reader)

    def _open_locked(self) -> int:
        self._target.parent.mkdir(parents=True, exist_ok=True)
        while True:
            handle = os.open(self._target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX)
                held, current = os.fstat(handle), os.stat(self._target)
            except BaseException:
                os.close(handle)
                raise
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                return handle
            os.close(handle)  # compaction replaced the file while we waited: open the new one

    def _append(self, reader: LogReader, build: Builder) -> tuple[LogReader, list[Record]]:
        handle = self._open_locked()
        try:
            with reader.writing():
                reader = self._catch_up(handle, reader)
                records = build(reader.index)
                if not records:
                    return reader, records
                data = _lines(records)
                size = os.fstat(handle).st_size
                if size and os.pread(handle, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a torn last line is closed, never glued to ours
                append_whole(handle, data, size, self._path)
                return self._catch_up(handle, reader), records
        except BaseException:
            self._seen = None  # the transaction rolled back what the refresh had read
            raise
        finally:
            os.close(handle)  # releases the lock

    async def append(self, reader: LogReader, build: Builder) -> tuple[LogReader, list[Record]]:
        return await anyio.to_thread.run_sync(self._append, reader, build)

    def _compact(self, reader: LogReader) -> tuple[LogReader, Compaction]:
        handle = self._open_locked()
        try:
            data = os.pread(handle, os.fstat(handle).st_size, 0)
            kept, report = compacted(data)
            temporary = self._target.with_name(f".{self._target.name}.{os.getpid()}.tmp")
            fresh = os.open(temporary, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                # Locked before it becomes the file: a writer that opens the new file waits
                # until the carried-over lines below are in.
                fcntl.flock(fresh, fcntl.LOCK_EX)
                try:
                    append_whole(fresh, kept, 0, self._path)
                    os.fsync(fresh)
                except BaseException:
                    temporary.unlink()  # the file itself is untouched
                    raise
                os.replace(temporary, self._target)
                _fsync_directory(self._target.parent)  # the rename itself survives a crash
                late = _whole_lines(os.pread(handle, os.fstat(handle).st_size, len(data)))
                if late:
                    # Appended to the old file by a writer that takes no lock (Obsidian,
                    # for a REST-only process) after our read: carried over, not lost.
                    append_whole(fresh, late, len(kept), self._path)
                    os.fsync(fresh)
                with reader.writing():
                    reader.reset()
                    reader.consume(kept + late)
                st = os.fstat(fresh)
            finally:
                os.close(fresh)
            self._seen = (st.st_ino, st.st_size, st.st_mtime_ns)
            return reader, report
        finally:
            os.close(handle)

    async def compact(self, reader: LogReader) -> tuple[LogReader, Compaction]:
        # Compaction re-reads the file under the lock; `reader` is rebuilt over the result.
        return await anyio.to_thread.run_sync(self._compact, reader)


class RestLog:
    def __init__(self, vault: Vault, path: str, *, max_staleness: float) -> None:
        self._vault = vault
        self._path = path
        self._max_staleness = max_staleness
        self._fetched_at = -float("inf")

    def describe(self) -> str:
        rest = self._vault.rest
        return rest.describe() if rest is not None else "the REST API"

    def compaction_refused(self) -> str | None:
        return (
            "The memory file is not compacted through the REST API alone: Obsidian cannot "
            "lock or rename it, so rewriting it could erase a memory another client saves at "
            "the same moment. Set OBSIDIAN_VAULT_PATH to the vault folder and compaction runs "
            "on disk, under a lock; until then retired entries stay in the file and are ignored."
        )

    async def _get(self) -> bytes:
        try:
            content = (await self._vault.live.read_note(self._path)).content
        except NoteNotFound:
            content = ""
        self._fetched_at = time.monotonic()
        return content.encode("utf-8")

    async def refresh(self, reader: LogReader) -> LogReader:
        if time.monotonic() - self._fetched_at < self._max_staleness:
            return reader
        return await anyio.to_thread.run_sync(catch_up, reader, await self._get())

    async def _post(self, records: list[Record]) -> None:
        data = _lines(records)
        try:
            await self._vault.append(self._path, data.decode("utf-8"))
            return
        except (ObsidianTimeout, ObsidianConnectionLost) as exc:
            failure: Exception = exc
        for _ in range(_RESEND_ATTEMPTS):
            # The POST may have landed before the answer was lost: send only what is missing.
            content = await self._get()
            missing = [r for r in records if encode(r).encode("utf-8") not in content]
            if not missing:
                return
            logger.warning("memory append unconfirmed (%s); sending %d line(s) again",
                           type(failure).__name__, len(missing))
            try:
                await self._vault.append(self._path, _lines(missing).decode("utf-8"))
                return
            except (ObsidianTimeout, ObsidianConnectionLost) as exc:
                failure = exc
        raise failure

    async def append(self, reader: LogReader, build: Builder) -> tuple[LogReader, list[Record]]:
        reader = await self.refresh(reader)
        records = build(reader.index)
        if records:
            await self._post(records)
            # Visible at once; the refresh that later reads these lines finds them applied.
            await anyio.to_thread.run_sync(_apply, reader, records)
        return reader, records

    async def compact(self, reader: LogReader) -> tuple[LogReader, Compaction]:
        raise CompactionRefused(self.compaction_refused() or "")
