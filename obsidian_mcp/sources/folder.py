"""The vault folder on disk: the same operations as the REST API, with Obsidian closed.

Blocking file I/O runs on worker threads. Appends take an exclusive `flock` on the file,
so two server processes on one vault never interleave their lines.
"""

import errno
import fcntl
import logging
import os
import stat
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import anyio.from_thread
import anyio.to_thread

from obsidian_mcp.errors import (
    FileSystemFailure,
    IsAFolder,
    NoteNotFound,
    NotReadable,
    NotText,
    OutOfSpace,
    PathRefused,
    VaultError,
)
from obsidian_mcp.limits import excerpt
from obsidian_mcp.paths import is_hidden, is_markdown
from obsidian_mcp.sources import swap
from obsidian_mcp.sources.base import (
    FileBytes,
    FileStat,
    NoteData,
    TextSearchHit,
    holds_every_word,
    lowered_to_look_at,
    search_words,
    text_hit,
)
from obsidian_mcp.sources.recovery import PendingWrite, RecoveryLog, cut_short

logger = logging.getLogger(__name__)

# Enough of a file's head to tell text from binary: NUL bytes do not occur in text notes.
_SNIFF_BYTES = 8192
# Notes a scan looks at between two asks whether its request is still wanted: asked for
# each note, that was 0.04 s of a 0.5 s scan of 50,000 cached notes; 64 notes take well
# under a millisecond.
_NOTES_PER_CANCEL_CHECK = 64


def mtime_ms(st: os.stat_result) -> int:
    return st.st_mtime_ns // 1_000_000


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _not_a_file(path: str) -> NotReadable:
    return NotReadable(path, "it is not a regular file (a pipe, socket or device)", "read a note.")


_NO_SPACE = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT", errno.EFBIG: "EFBIG"}


def append_whole(descriptor: int, data: bytes, size: int, path: str) -> None:
    """Append all of `data` to a file of `size` bytes opened with O_APPEND, whose lock the
    caller holds, or nothing: a disk that fills part way would leave half a line, so the
    file is cut back to `size` and OutOfSpace says why."""
    written = 0
    try:
        while written < len(data):  # a short write is finished while the lock is held
            written += os.write(descriptor, data[written:])
    except OSError as exc:
        if exc.errno not in _NO_SPACE:
            raise
        os.ftruncate(descriptor, size)  # shrinking needs no space
        raise OutOfSpace(path, _NO_SPACE[exc.errno]) from None


def decode_text(data: bytes) -> str:
    """Notes are UTF-8; a stray invalid byte must not make a whole note unreadable."""
    return data.decode("utf-8", errors="replace")


def _name_too_long(path: str, folder: Path) -> PathRefused:
    """The name the filesystem refused as too long, with its real limit."""
    try:
        limit = os.pathconf(folder if folder.is_dir() else folder.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    longest = max(path.split("/"), key=lambda name: len(name.encode("utf-8")))
    return PathRefused(
        f"The name {excerpt(longest)} in {path!r} is {len(longest.encode('utf-8'))} bytes; "
        f"this filesystem allows at most {limit} bytes in one name. Choose a shorter name."
    )


@dataclass(frozen=True)
class _Scan:
    """A scan's notes: when it began (monotonic), how many writes this source had begun by
    then, the notes it left out, and the path of every other note it read."""

    began: float
    writes: int
    leaving_out: frozenset[str]
    paths: list[str]


class FolderSource:
    def __init__(self, root: Path, *, recovery: RecoveryLog | None = None) -> None:
        """`recovery`: where edits keep a note's previous text while they rewrite it (see
        `sources/recovery.py`); without it an edit cut short cannot be put back."""
        self._root = root.resolve()
        self._recovery = recovery
        # Decoded text by path, with the (mtime, size) it was read at: searches scan every
        # note not read yet, and most have not changed since the last one. A note read
        # leaves it (`_read_text`).
        self._texts: dict[str, tuple[tuple[int, int], str]] = {}
        # The last scan for `search_each`, and the writes begun through this source.
        self._last_scan: _Scan | None = None
        self._writes = 0

    @property
    def kind(self) -> Literal["folder"]:
        return "folder"

    @property
    def root(self) -> Path:
        return self._root

    def describe(self) -> str:
        return f"vault folder {self._root}"

    def _resolve(self, path: str) -> Path:
        """The file for a vault path; refuses a symlink that points outside the vault, or
        round a loop of links."""
        if self._in_loop(path):
            raise PathRefused(
                f"{path!r} is a link that leads round a loop of links, to no file; it is not "
                "followed. Point the link at a note (or remove it), or read another note."
            )
        if self._leaves(path):
            raise PathRefused(
                f"{path!r} is a link that points outside the vault; it is not followed. "
                "Read a note inside the vault instead (vault_tree lists them)."
            )
        return self._root / path

    def check_readable(self, path: str) -> None:
        """Raise PathRefused when `path` on disk is, or lies under, a link leaving the vault,
        and NotReadable when it is a pipe, socket or device."""
        try:
            st = self._resolve(path).stat()
        except OSError:
            return  # missing here: the live source says what it knows
        if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            raise _not_a_file(path)

    def admits(self, paths: list[str]) -> list[bool]:
        """For each path, whether `check_readable` lets it through."""
        admitted: list[bool] = []
        for path in paths:
            try:
                self.check_readable(path)
            except (PathRefused, NotReadable):
                admitted.append(False)
            else:
                admitted.append(True)
        return admitted

    # -- listing ---------------------------------------------------------------------------

    def _scan(self, folder: str = "") -> Iterator[tuple[str, os.DirEntry[str]]]:
        """Every non-hidden entry under `folder`, depth first in name order, as (vault path,
        entry); a folder's path ends in `/`. Linked folders are listed, never entered, so
        only a link itself can lead outside the vault. An unreadable folder is skipped."""
        try:
            with os.scandir(self._root / folder) as scanned:
                entries = sorted(
                    (e for e in scanned if not e.name.startswith(".")), key=lambda e: e.name
                )
        except OSError:
            return
        folders: list[os.DirEntry[str]] = []
        for entry in entries:
            if _is_folder(entry):
                folders.append(entry)
            else:
                yield folder + entry.name, entry
        for entry in folders:
            path = folder + entry.name + "/"
            yield path, entry
            if not entry.is_symlink():
                yield from self._scan(path)

    def _walk(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """What the vault shows: real folders and files, links that stay inside it."""
        for path, entry in self._scan():
            if entry.is_symlink() and (path.endswith("/") or self._leaves(path)):
                continue
            yield path, entry

    def _in_loop(self, path: str) -> bool:
        try:
            os.stat(self._root / path)
        except OSError as exc:
            return exc.errno == errno.ELOOP
        return False

    def _leaves(self, path: str) -> bool:
        """Whether `path` leads out of the vault, or nowhere (a loop of links, which
        Python before 3.13 cannot resolve): neither is followed or listed."""
        if self._in_loop(path):
            return True
        real = (self._root / path).resolve()
        return real != self._root and not real.is_relative_to(self._root)

    def refused_paths(self) -> set[str]:
        """Vault paths no note may come from: links (files or folders) that point outside
        the vault, and pipes, sockets and devices."""
        refused: set[str] = set()
        for path, entry in self._scan():
            bare = path.rstrip("/")
            if (entry.is_symlink() and self._leaves(bare)) or (
                not path.endswith("/") and not _is_file(entry)
            ):
                refused.add(bare)
        return refused

    async def list_tree(self) -> list[str]:
        return await anyio.to_thread.run_sync(lambda: sorted(path for path, _ in self._walk()))

    def _note_stats(self) -> dict[str, FileStat]:
        stats: dict[str, FileStat] = {}
        for path, entry in self._walk():
            if not is_markdown(path):
                continue
            try:
                st = entry.stat()
            except OSError:
                continue  # a dangling link, or deleted since the scan
            if stat.S_ISREG(st.st_mode):  # a pipe or socket named .md is no note
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
        target = self._resolve(path)
        return self._read_text(path, self._file_stat(path, target), target)

    @staticmethod
    def _file_stat(path: str, target: Path) -> os.stat_result:
        """The stat of a regular file to read; refusals for anything else."""
        try:
            st = target.stat()
        except (FileNotFoundError, NotADirectoryError):
            # 'Home.md/x.md': a note cannot sit under a note, so there is no such note.
            raise NoteNotFound(path) from None
        except OSError as exc:
            raise FileSystemFailure(path, "read", exc) from exc
        if stat.S_ISDIR(st.st_mode):
            raise IsAFolder(path)
        if not stat.S_ISREG(st.st_mode):
            # Opening a pipe for reading waits for a writer: never open what is not a file.
            raise _not_a_file(path)
        return st

    @staticmethod
    def _file_bytes(path: str, target: Path) -> bytes:
        try:
            return target.read_bytes()
        except FileNotFoundError:
            raise NoteNotFound(path) from None
        except PermissionError:
            raise NotReadable(
                path,
                "permission denied",
                "give the server's user read access to it, or read another note.",
            ) from None
        except OSError as exc:  # anything else the filesystem refuses
            raise FileSystemFailure(path, "read", exc) from exc

    def _read_text(self, path: str, st: os.stat_result, target: Path | None = None) -> NoteData:
        """The note's text at `st` (its stat, taken before): a scan's, while that is the
        same, else the file's; `target`: the file, when the caller resolved it (else the
        vault's path). The text leaves the cache: a note read is left out of the next
        scans (the first build's read-ahead searches the notes not read yet), and the
        cache of a first build at 50,000 notes held every text, 111 MB, for the rest of
        the session."""
        cached = self._texts.pop(path, None)
        if cached is not None and cached[0] == (st.st_mtime_ns, st.st_size):
            content = cached[1]
        else:
            content = self._decoded(path, self._root / path if target is None else target)
        return NoteData(path, content, FileStat(path, mtime_ms(st), st.st_size))

    def _scanned_text(self, path: str, take_stat: Callable[[], os.stat_result]) -> str | None:
        """The note's text for a scan, at the stat `take_stat` takes: cached, while that is
        the same; None when it is not a regular file or cannot be read, which a scan
        skips."""
        try:
            st = take_stat()
            if not stat.S_ISREG(st.st_mode):
                return None
            cached = self._texts.get(path)
            if cached is None or cached[0] != (st.st_mtime_ns, st.st_size):
                # Keyed by the stat taken before reading: a write during the read changes
                # the modification time, so the next scan reads again.
                cached = ((st.st_mtime_ns, st.st_size), self._decoded(path, self._root / path))
                self._texts[path] = cached
        except (NotText, NotReadable, NoteNotFound, FileSystemFailure, OSError):
            return None
        return cached[1]

    def _decoded(self, path: str, target: Path) -> str:
        data = self._file_bytes(path, target)
        if looks_binary(data[:_SNIFF_BYTES]):
            raise NotText(path)
        return decode_text(data)

    async def read_note(self, path: str) -> NoteData:
        return await anyio.to_thread.run_sync(self._read_note, path)

    def _read_bytes(self, path: str) -> FileBytes:
        if is_hidden(path):
            raise NoteNotFound(path)
        target = self._resolve(path)
        st = self._file_stat(path, target)
        data = self._file_bytes(path, target)
        return FileBytes(path, data, FileStat(path, mtime_ms(st), st.st_size))

    async def read_bytes(self, path: str) -> FileBytes:
        return await anyio.to_thread.run_sync(self._read_bytes, path)

    # -- writing ---------------------------------------------------------------------------

    def _writable(self, path: str) -> Path:
        self._writes += 1  # counted before the write: a scan begun since sees it
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
        temporary = swap.temporary_beside(target)
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
                append_whole(descriptor, data, size, path)
            finally:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
        finally:
            os.close(descriptor)

    async def append(self, path: str, content: str) -> None:
        await anyio.to_thread.run_sync(self._append, path, content)

    def _checked(self, operation: Callable[[], None], path: str, doing: str) -> None:
        try:
            operation()
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise _name_too_long(path, self._root / path) from None
            raise FileSystemFailure(path, doing, exc) from exc

    def _read_exact(self, path: str) -> NoteData:
        note = self._read_note(path)
        # A read replaces bytes that are not UTF-8 with U+FFFD; only then is the file read
        # again, strictly, to tell such bytes (an edit would lose them) from a real U+FFFD.
        if "\ufffd" in note.content:
            swap.read_exact(self._resolve(path), path)
        return note

    async def read_exact(self, path: str) -> NoteData:
        """The note as a read gives it, refusing a note with bytes that are not UTF-8."""
        return await anyio.to_thread.run_sync(self._read_exact, path)

    def _edited_file(self, path: str) -> Path:
        """The file an edit of `path` writes: a symlinked note's target (the link stays a
        link; one that leaves the vault is refused by `_resolve`)."""
        return self._writable(path).resolve()

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        """Write the note only if it holds `expected` (None: only if it does not exist);
        NoteChanged with what it holds otherwise. The note is rewritten in place and keeps
        its identity; see `swap`."""

        def replace() -> None:
            target = self._edited_file(path)
            swap.replace_if_unchanged(target, path, expected, content, self._recovery)

        await anyio.to_thread.run_sync(self._checked, replace, path, "write")

    async def remove_if(self, path: str, expected: str) -> None:
        target = self._resolve(path)
        await anyio.to_thread.run_sync(
            self._checked, lambda: swap.remove_if_unchanged(target, path, expected), path, "remove"
        )

    def names_in(self, folder: str) -> list[str]:
        """The names of the entries directly in `folder` ([] when there is none)."""
        try:
            return sorted(os.listdir(self._resolve(folder) if folder else self._root))
        except OSError:
            return []

    # -- edits a stopped process left unfinished --------------------------------------------

    def recover(self) -> list[str]:
        """Settle the writes a process stopped in the middle of (see `recovery`); one line
        per write that needed anything. The caller holds the vault's lock."""
        if self._recovery is None:
            return []
        said: list[str] = []
        for write in self._recovery.pending():
            try:
                line = self._settle(write, self._recovery)
            except (OSError, VaultError) as exc:
                line = (
                    f"an edit of {write.path!r} was cut short and could not be settled "
                    f"({exc}); its record stays in {write.record}"
                )
                logger.warning("%s", line)
                said.append(line)
                continue
            self._recovery.end(write.record)
            if line:
                logger.warning("%s", line)
                said.append(line)
        return said

    def _settle(self, write: PendingWrite, recovery: RecoveryLog) -> str:
        try:
            st = os.stat(write.file)
            current = write.file.read_bytes()
        except FileNotFoundError:
            current = None
            same_file = False
        else:
            same_file = (st.st_dev, st.st_ino) == (write.device, write.inode)
        if current is not None and current in (write.new, write.old):
            return ""  # the write finished, or never began
        if same_file and current is not None and cut_short(current, write.old, write.new):
            swap.rewrite_if_unchanged(write.file, write.path, current, write.old, None)
            return (
                f"an edit of {write.path!r} was cut short (the server stopped while writing "
                "it); the note's previous text was put back"
            )
        kept = recovery.keep(write)
        return (
            f"an edit of {write.path!r} was cut short and the note has changed since (or is "
            f"gone), so it was left as it is; its text from before the edit is saved in {kept}"
        )

    # -- search ----------------------------------------------------------------------------

    def _texts_to_search(self, leaving_out: Collection[str]) -> Iterator[tuple[str, str]]:
        """Every note's path and text but those of `leaving_out`, the unreadable skipped.
        The scan runs on a worker thread, which a cancelled request cannot interrupt: it
        asks, every `_NOTES_PER_CANCEL_CHECK` notes, whether the request is still wanted."""
        looked_at = 0
        for path, entry in self._walk():
            if not is_markdown(path) or path in leaving_out:
                continue
            if not looked_at % _NOTES_PER_CANCEL_CHECK:
                anyio.from_thread.check_cancelled()
            looked_at += 1
            # The listing's own stat: a path made and statted again for each note took
            # 0.16 s of a scan of 10,000 notes against 0.05 s.
            content = self._scanned_text(path, entry.stat)
            if content is not None:
                yield path, content

    def _search_text(self, query: str, leaving_out: Collection[str]) -> list[TextSearchHit]:
        words = search_words(query)
        if not words.words:
            raise VaultError("The search query is empty; give one or more words.")
        hits: list[TextSearchHit] = []
        for path, content in self._texts_to_search(leaving_out):
            hit = text_hit(path, content, words)
            if hit is not None:
                hits.append(hit)
        return hits

    async def search_text(
        self, query: str, context_length: int, leaving_out: Collection[str] = ()
    ) -> list[TextSearchHit]:
        # The folder source has the content itself; callers cut their own windows.
        del context_length
        return await anyio.to_thread.run_sync(self._search_text, query, leaving_out)

    def _holding(
        self, queries: Sequence[str], leaving_out: Collection[str], fresh_within: float
    ) -> Iterator[tuple[str, str, list[bool]]]:
        """Every note scanned (`_texts_scanned`): its path, its text, and whether it holds
        every word of each query (as `search_text` finds them)."""
        searches = [search_words(query) for query in queries]
        if not all(search.words for search in searches):
            raise VaultError("A search word is empty; give one or more words.")
        look = any(search.ascii for search in searches)
        for path, content in self._texts_scanned(frozenset(leaving_out), fresh_within):
            lowered = lowered_to_look_at(content) if look else None
            yield path, content, [holds_every_word(content, lowered, s) for s in searches]

    def _search_each(
        self, words: Sequence[str], leaving_out: Collection[str], fresh_within: float
    ) -> list[set[str]]:
        holding: list[set[str]] = [set() for _ in words]
        for path, _, held in self._holding(words, leaving_out, fresh_within):
            for paths, holds in zip(holding, held, strict=True):
                if holds:
                    paths.add(path)
        return holding

    def _texts_holding(
        self, query: str, leaving_out: Collection[str], fresh_within: float
    ) -> list[tuple[str, str]]:
        return [
            (path, content)
            for path, content, (holds,) in self._holding([query], leaving_out, fresh_within)
            if holds
        ]

    def _texts_scanned(
        self, leaving_out: frozenset[str], fresh_within: float
    ) -> list[tuple[str, str]]:
        """Every note's path and text but those of `leaving_out` (`_texts_to_search`); from
        the last scan when it began under `fresh_within` seconds ago, nothing was written
        through this source since, and it left out no note that this one searches."""
        last, now = self._last_scan, time.monotonic()
        if (
            last is not None
            and now - last.began < fresh_within
            and last.writes == self._writes
            and last.leaving_out <= leaving_out
        ):
            return list(self._texts_again(last.paths, leaving_out))
        writes = self._writes
        texts = list(self._texts_to_search(leaving_out))
        self._last_scan = _Scan(now, writes, leaving_out, [path for path, _ in texts])
        return texts

    def _texts_again(
        self, paths: list[str], leaving_out: frozenset[str]
    ) -> Iterator[tuple[str, str]]:
        """The texts a recent scan read of `paths`, but those of `leaving_out`, without a
        stat; a note read since (by a call, which takes its text out of the cache) is read
        again, at its stat now."""
        for path in paths:
            if path in leaving_out:
                continue
            cached = self._texts.get(path)
            content = (
                cached[1]
                if cached is not None
                else self._scanned_text(path, partial(os.stat, self._root / path))
            )
            if content is not None:
                yield path, content

    async def search_each(
        self, words: Sequence[str], leaving_out: Collection[str] = (), fresh_within: float = 0.0
    ) -> list[set[str]]:
        """For each of `words` (each searched as `search_text` searches a query), the notes
        whose text holds it, found in one scan of the folder: a scan of 50,000 notes is
        about 0.45 s with their texts cached, nearly all of it spent note by note (the walk
        and a stat each, 0.3 s), not word by word. A scan begun under `fresh_within`
        seconds ago is searched again instead, unless a write went through this source
        since: the walk and the stats say only what changed in those seconds, which a
        listing as old may miss too (`index_refresh_seconds`)."""
        return await anyio.to_thread.run_sync(self._search_each, words, leaving_out, fresh_within)

    async def texts_holding(
        self, query: str, leaving_out: Collection[str] = (), fresh_within: float = 0.0
    ) -> list[tuple[str, str]]:
        """The path and text of every note whose text holds every word of `query` (the
        notes `search_text` finds), from one scan as `search_each` makes it."""
        return await anyio.to_thread.run_sync(self._texts_holding, query, leaving_out, fresh_within)
