"""The vault folder on disk: the same operations as the REST API, with Obsidian closed.

Blocking file I/O runs on worker threads. Appends take an exclusive `flock` on the file,
so two server processes on one vault never interleave their lines.
"""

import fcntl
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio.from_thread
import anyio.to_thread

from obsidian_mcp.errors import (
    FileSystemFailure,
    IsAFolder,
    NoteNotFound,
    NotText,
    PathRefused,
    VaultError,
)
from obsidian_mcp.paths import is_hidden, is_markdown
from obsidian_mcp.sources.base import FileStat, NoteData, TextMatch, TextSearchHit

# Enough of a file's head to tell text from binary: NUL bytes do not occur in text notes.
_SNIFF_BYTES = 8192


def mtime_ms(st: os.stat_result) -> int:
    return st.st_mtime_ns // 1_000_000


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head


def decode_text(data: bytes) -> str:
    """Notes are UTF-8; a stray invalid byte must not make a whole note unreadable."""
    return data.decode("utf-8", errors="replace")


class FolderSource:
    def __init__(self, root: Path) -> None:
        self._root = root.resolve()
        # Decoded text by path, with the (mtime, size) it was read at: searches scan every
        # note, and most have not changed since the last one.
        self._texts: dict[str, tuple[tuple[int, int], str]] = {}

    @property
    def kind(self) -> Literal["folder"]:
        return "folder"

    @property
    def root(self) -> Path:
        return self._root

    def describe(self) -> str:
        return f"vault folder {self._root}"

    def _resolve(self, path: str) -> Path:
        """The file for a vault path; refuses a symlink that points outside the vault."""
        target = self._root / path
        real = target.resolve()
        if real != self._root and not real.is_relative_to(self._root):
            raise PathRefused(
                f"{path!r} is a link that points outside the vault; it is not followed."
            )
        return target

    # -- listing ---------------------------------------------------------------------------

    def _walk(self) -> Iterator[str]:
        for dirpath, dirnames, filenames in os.walk(self._root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            rel_dir = os.path.relpath(dirpath, self._root)
            prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            if prefix:
                yield prefix
            for name in sorted(filenames):
                if not name.startswith("."):
                    yield prefix + name

    async def list_tree(self) -> list[str]:
        return await anyio.to_thread.run_sync(lambda: sorted(self._walk()))

    def _note_stats(self) -> dict[str, FileStat]:
        stats: dict[str, FileStat] = {}
        for path in self._walk():
            if is_markdown(path):
                st = (self._root / path).stat()
                stats[path] = FileStat(path, mtime_ms(st), st.st_size)
        return stats

    async def note_stats(self) -> dict[str, FileStat]:
        return await anyio.to_thread.run_sync(self._note_stats)

    def _stat(self, path: str) -> FileStat | None:
        target = self._resolve(path)
        if target.is_dir():
            raise IsAFolder(path)
        try:
            st = target.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise FileSystemFailure(path, "read", exc) from exc
        return FileStat(path, mtime_ms(st), st.st_size)

    async def stat(self, path: str) -> FileStat | None:
        return await anyio.to_thread.run_sync(self._stat, path)

    # -- reading ---------------------------------------------------------------------------

    def _read_note(self, path: str) -> NoteData:
        if is_hidden(path):
            raise NoteNotFound(path)
        return self._read_text(path, self._resolve(path))

    def _read_text(self, path: str, target: Path) -> NoteData:
        try:
            st = target.stat()
        except (FileNotFoundError, NotADirectoryError):
            # 'Home.md/x.md': a note cannot sit under a note, so there is no such note.
            raise NoteNotFound(path) from None
        except OSError as exc:
            raise FileSystemFailure(path, "read", exc) from exc
        if stat.S_ISDIR(st.st_mode):
            raise IsAFolder(path)
        cached = self._texts.get(path)
        if cached is None or cached[0] != (st.st_mtime_ns, st.st_size):
            try:
                data = target.read_bytes()
            except FileNotFoundError:
                raise NoteNotFound(path) from None
            except OSError as exc:
                raise FileSystemFailure(path, "read", exc) from exc
            if looks_binary(data[:_SNIFF_BYTES]):
                raise NotText(path)
            # Keyed by the stat taken before reading: a write during the read changes the
            # modification time, so the next call reads again.
            cached = ((st.st_mtime_ns, st.st_size), decode_text(data))
            self._texts[path] = cached
        return NoteData(path, cached[1], FileStat(path, mtime_ms(st), st.st_size))

    async def read_note(self, path: str) -> NoteData:
        return await anyio.to_thread.run_sync(self._read_note, path)

    # -- writing ---------------------------------------------------------------------------

    def _writable(self, path: str) -> Path:
        if is_hidden(path):
            raise PathRefused(f"{path!r} is inside a hidden folder; notes cannot be written there.")
        target = self._resolve(path)
        if target.is_dir():
            raise IsAFolder(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _write(self, path: str, content: str) -> None:
        try:
            self._replace_file(path, content)
        except OSError as exc:
            raise FileSystemFailure(path, "write", exc) from exc

    def _replace_file(self, path: str, content: str) -> None:
        target = self._writable(path)
        # Write a sibling and rename over the target, so a reader never sees half a file.
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temporary.write_bytes(content.encode("utf-8"))
        os.replace(temporary, target)

    async def write(self, path: str, content: str) -> None:
        await anyio.to_thread.run_sync(self._write, path, content)

    def _append(self, path: str, content: str) -> None:
        try:
            self._append_locked(path, content)
        except OSError as exc:
            raise FileSystemFailure(path, "append to", exc) from exc

    def _append_locked(self, path: str, content: str) -> None:
        target = self._writable(path)
        data = content.encode("utf-8")
        descriptor = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            try:
                size = os.fstat(descriptor).st_size
                if size:
                    with target.open("rb") as reader:
                        reader.seek(size - 1)
                        if reader.read(1) != b"\n":
                            data = b"\n" + data
                os.write(descriptor, data)
            finally:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
        finally:
            os.close(descriptor)

    async def append(self, path: str, content: str) -> None:
        await anyio.to_thread.run_sync(self._append, path, content)

    # -- search ----------------------------------------------------------------------------

    def _search_text(self, query: str) -> list[TextSearchHit]:
        words = [w.lower() for w in query.split()]
        if not words:
            raise VaultError("The search query is empty; give one or more words.")
        patterns = [re.compile(re.escape(w), re.IGNORECASE) for w in words]
        hits: list[TextSearchHit] = []
        for path in self._walk():
            if not is_markdown(path):
                continue
            # The scan runs on a worker thread, which a cancelled request cannot interrupt;
            # it asks, note by note, whether the request is still wanted.
            anyio.from_thread.check_cancelled()
            target = self._root / path
            try:
                # The walk never enters a linked folder, so only a linked file can lead
                # outside the vault; resolving every path would dominate the search.
                if target.is_symlink():
                    target = self._resolve(path)
                content = self._read_text(path, target).content
            except (NotText, NoteNotFound, PathRefused):
                continue
            found = [
                [TextMatch(m.start(), m.end()) for m in pattern.finditer(content)]
                for pattern in patterns
            ]
            if all(found):
                matches = sorted((m for group in found for m in group), key=lambda m: m.start)
                hits.append(TextSearchHit(path, tuple(matches), {}))
        return hits

    async def search_text(self, query: str, context_length: int) -> list[TextSearchHit]:
        # The folder source has the content itself; callers cut their own windows.
        del context_length
        return await anyio.to_thread.run_sync(self._search_text, query)
