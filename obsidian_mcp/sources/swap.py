"""Replace a note on disk only if it still holds the text an edit was made from.

A filesystem has no compare-and-swap, and the user's editor takes no lock: Obsidian writes
a note in place (open with truncate, then write), other tools write a sibling and rename
it over. So the check is made as close to the swap as possible and the swap is checked
afterwards:

1. Open the note, lock it (this project's own processes take the same lock) and read it
   from that descriptor; anything but the expected text is a conflict.
2. Write the new text to a sibling, then exchange the two names in one step
   (`renameat2(RENAME_EXCHANGE)` on Linux). The sibling's name now holds exactly what was
   at the note's path at that instant.
3. If that is not the file read in step 1, or that file changed since (an in-place writer
   truncates it when it opens it), another writer got in between: the names are
   exchanged back, so the other writer's text is the note again, and the edit reports a
   conflict. Without the exchange call (other systems) the last check runs just before a
   plain rename, which leaves a window of microseconds.
4. A moment later the old file is checked once more: an in-place save that opened it just
   before the swap writes its text into it just after. If it did, that text is put back.
"""

import ctypes
import ctypes.util
import errno
import fcntl
import logging
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from obsidian_mcp.errors import VaultError

logger = logging.getLogger(__name__)

# How long a save that opened the note just before the swap may take to write into it:
# Node's `fs.writeFile` truncates when it opens and writes on a later turn of its event
# loop (under a millisecond on a desktop; 2 ms gaps lost whole notes in bench/edit_races.py
# before this wait existed). Every edit on disk waits this long once.
SETTLE_SECONDS = 0.05

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


class NoteChanged(VaultError):
    """The note no longer holds the text the edit was made from; `current` is what it
    holds now (None when it is gone)."""

    def __init__(self, path: str, current: str | None) -> None:
        self.current = current
        super().__init__(f"{path!r} changed while it was being edited; nothing was written.")


class NotUtf8(VaultError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path!r} is not valid UTF-8 text, so an edit could not keep its bytes; nothing "
            "was written. Edit it in Obsidian instead."
        )


def _load_renameat2() -> Any:
    """libc's renameat2 (Linux, glibc 2.28+), or None."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return getattr(libc, "renameat2", None)


_renameat2 = _load_renameat2()


def _exchange(first: Path, second: Path) -> bool:
    """Swap two names atomically; False where the system cannot."""
    if _renameat2 is None:
        return False
    result = _renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False  # a filesystem without the call (some network and FUSE mounts)
    raise OSError(code, os.strerror(code), str(first))


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_mtime_ns, a.st_size) == (
        b.st_dev,
        b.st_ino,
        b.st_mtime_ns,
        b.st_size,
    )


def _read_all(descriptor: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(descriptor, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def decode_exact(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotUtf8(path) from None


def read_exact(target: Path, path: str) -> str:
    return decode_exact(path, target.read_bytes())


def _sibling(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.edit")


class _LockedNote:
    """The note open and locked, as it is at its path right now."""

    def __init__(self, target: Path, path: str) -> None:
        self.target = target
        self.path = path
        while True:
            try:
                descriptor = os.open(target, os.O_RDONLY)
            except FileNotFoundError:
                raise NoteChanged(path, None) from None
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            # Another of our writers may have swapped the file while we waited for its
            # lock: then lock the file the path names now.
            try:
                current = os.stat(target)
            except FileNotFoundError:
                os.close(descriptor)
                raise NoteChanged(path, None) from None
            opened = os.fstat(descriptor)
            if (current.st_dev, current.st_ino) == (opened.st_dev, opened.st_ino):
                self.descriptor = descriptor
                self.stat = opened
                return
            os.close(descriptor)

    def text(self) -> str:
        return decode_exact(self.path, _read_all(self.descriptor))

    def unchanged(self) -> bool:
        return _same_file(os.fstat(self.descriptor), self.stat)

    def close(self) -> None:
        os.close(self.descriptor)


def _write_sibling(target: Path, content: str, mode: int | None) -> Path:
    sibling = _sibling(target)
    descriptor = os.open(sibling, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        data = content.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(descriptor, data[written:])
        os.fsync(descriptor)
        if mode is not None:
            os.fchmod(descriptor, mode)
    except BaseException:
        os.close(descriptor)
        sibling.unlink(missing_ok=True)
        raise
    os.close(descriptor)
    return sibling


def replace_if_unchanged(target: Path, path: str, expected: str | None, content: str) -> None:
    """Write `content` at `target` if it holds `expected` (None: if there is no file);
    NoteChanged otherwise, with the file as it is."""
    if expected is None:
        _create_new(target, path, content)
        return
    note = _LockedNote(target, path)
    try:
        current = note.text()
        if current != expected:
            raise NoteChanged(path, current)
        sibling = _write_sibling(target, content, note.stat.st_mode & 0o7777)
        try:
            _swap_in(note, sibling, content)
        finally:
            sibling.unlink(missing_ok=True)
    finally:
        note.close()


def _swap_in(note: _LockedNote, sibling: Path, content: str) -> None:
    if _exchange(sibling, note.target):
        # `sibling` now names what the path held at the swap.
        if not (_same_file(os.stat(sibling), note.stat) and note.unchanged()):
            _exchange(sibling, note.target)  # theirs back at the path
            raise NoteChanged(note.path, read_exact(note.target, note.path))
        _settle(note, content, old_file=sibling)
        return
    if not (_same_file(os.stat(note.target), note.stat) and note.unchanged()):
        raise NoteChanged(note.path, read_exact(note.target, note.path))
    os.replace(sibling, note.target)
    _settle(note, content, old_file=None)


def _settle(note: _LockedNote, content: str, *, old_file: Path | None) -> None:
    """A save that opened (and truncated) the old file just before the swap writes its
    text into it just after: wait that long, and if it did, give the note back to it.
    With the exchange, the old file itself goes back to the path, so a save still writing
    into it finishes there; without it, its text as it stands is copied back."""
    time.sleep(SETTLE_SECONDS)
    if note.unchanged():
        return
    current = read_exact(note.target, note.path)
    if current != content:
        # Changed twice: the path holds a newer text than ours already; it stays.
        raise NoteChanged(note.path, current)
    if old_file is not None:
        _exchange(old_file, note.target)
    else:
        restored = _write_sibling(note.target, note.text(), note.stat.st_mode & 0o7777)
        os.replace(restored, note.target)
    raise NoteChanged(note.path, read_exact(note.target, note.path))


def _create_new(target: Path, path: str, content: str) -> None:
    sibling = _write_sibling(target, content, None)
    try:
        # A hard link never replaces an existing name: the note is created whole, or not.
        os.link(sibling, target)
    except FileExistsError:
        raise NoteChanged(path, read_exact(target, path)) from None
    finally:
        sibling.unlink(missing_ok=True)


def remove_if_unchanged(target: Path, path: str, expected: str) -> None:
    """Remove the note if it holds `expected`; NoteChanged otherwise."""
    note = _LockedNote(target, path)
    try:
        current = note.text()
        if current != expected:
            raise NoteChanged(path, current)
        taken = _sibling(target)
        os.rename(target, taken)
        if _same_file(os.stat(taken), note.stat) and note.unchanged():
            taken.unlink()
            return
        # Another writer got in between: give its file back its name.
        try:
            os.link(taken, target)
            taken.unlink()
        except FileExistsError:
            # It wrote a new file there as well; the old one stays under the hidden name
            # rather than be lost.
            logger.warning(
                "%s changed twice during an undo; its older text is kept in %s", path, taken.name
            )
        raise NoteChanged(path, read_exact(target, path))
    finally:
        note.close()
