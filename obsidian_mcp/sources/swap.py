"""Rewrite a note in place, only if it still holds the text an edit was made from.

Obsidian saves a note in place (Node's `fs.writeFile`: open with truncation, then write),
and so does this server, so a note keeps its identity through an edit: its inode, its hard
links, its extended attributes (Finder tags) and its creation time (Dataview's
`file.ctime`); a symlinked note stays a link and its target is rewritten. A filesystem has
no compare-and-swap and the user's editor takes no lock, so:

1. This server's own processes take the vault's lock first (`locking.py`; the caller does).
2. The note is opened and a write lease taken on it (Linux `F_SETLEASE`). The kernel
   grants the lease only while no other process has the file open, and while it is held
   any other open of the file (an editor's save, which truncates as it opens) waits. So a
   save that has the note open when an edit comes is waited for (it writes, it closes),
   and a save that comes during the edit waits for the edit to finish.
3. Under the lease the note is read from the descriptor and compared with the expected
   text; anything else is a conflict (NoteChanged, with what it holds).
4. The old and new texts are recorded for recovery (`recovery.py`); the new text is
   written over the old: space reserved first (a full disk refuses before a byte
   changes), written from the start, cut to its length, synced and read back.
5. The lease is released. If another process tried to open the note meanwhile, a save
   may now write into it: a moment later the note is checked once more, and if a save
   replaced the text (a save writes a whole text: the user's, read before the edit), the
   edit reports a conflict and is made again on that text; lines a program appended
   after the edit's text (`echo >>`, a logger) leave the edit standing. A save by rename
   (write a sibling, rename it over the note) opens nothing, so no lease holds it back:
   it is seen because the path then names another file, whose text is the user's.

Without a lease (other systems, network and FUSE filesystems, a note some program keeps
open for longer than LEASE_WAIT_SECONDS) step 2 is a check of the file's stat right before
the write, and step 5 always waits. A save that truncates the note in the microseconds
between that check and the write is then seen in step 5, and its text keeps the user's
words; but where it is shorter than the edit's text, the end of the edit's text stays
after it, as with any two programs writing one file in place. The record of step 4 is
kept in that case, so the old text can be recovered too.
"""

import errno
import fcntl
import logging
import os
import secrets
import signal
import sys
import time
from pathlib import Path

from obsidian_mcp.errors import OutOfSpace, VaultError
from obsidian_mcp.sources.recovery import RecoveryLog

logger = logging.getLogger(__name__)

# How long a save that tried to open the note during the edit may take to write into it
# once the edit lets go: Node's `fs.writeFile` truncates when it opens and writes on a
# later turn of its event loop (under a millisecond on a desktop; 2 ms gaps lost whole
# notes in bench/robustness/edit_races.py before this wait existed). Paid only when someone tried to
# open the note meanwhile, or no lease could be had.
SETTLE_SECONDS = 0.05
# How long an edit waits for the programs that have the note open to close it before it
# writes without a lease: a save or a read holds it for milliseconds; a program that keeps
# it open (a viewer following the file) would hold it for ever.
LEASE_WAIT_SECONDS = 0.5
# The lease's break notice goes to the holder as a signal; SIGIO, the default, would end
# the process. SIGURG is ignored unless a handler is set, and nothing here sets one.
_LEASE_SIGNAL = signal.SIGURG
_LEASES = sys.platform.startswith("linux") and hasattr(fcntl, "F_SETLEASE")
_CHUNK = 1 << 20
_NO_SPACE = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT", errno.EFBIG: "EFBIG"}
# The temporary name of a note being created: short, so that a note whose own name is
# near the filesystem's 255-byte limit still has one that fits.
_TEMPORARY = ".omcp-{}.tmp"


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


class WriteInterrupted(VaultError):
    def __init__(self, path: str, reason: str, record: Path | None) -> None:
        kept = (
            f"its previous text is kept in {record} and is put back when the server starts "
            "next (or copy it back yourself)"
            if record is not None
            else "its previous text could not be kept"
        )
        super().__init__(
            f"Writing {path!r} failed part way ({reason}) and the note could not be put back "
            f"as it was; {kept}. Fix the cause (free space, permissions), then check the note."
        )


def decode_exact(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotUtf8(path) from None


def read_exact(target: Path, path: str) -> str:
    return decode_exact(path, target.read_bytes())


def temporary_beside(target: Path) -> Path:
    return target.with_name(_TEMPORARY.format(secrets.token_hex(4)))


def _same_file(a: os.stat_result, b: os.stat_result, *, renamed: bool = False) -> bool:
    """Whether two stats are of one file, unwritten between them. The inode change time
    also moves when a write keeps the modification time (a truncation in the same clock
    tick, an editor restoring it); a rename moves it too, so `renamed` leaves it out."""
    keys = (
        (a.st_dev, a.st_ino, a.st_mtime_ns, a.st_size),
        (b.st_dev, b.st_ino, b.st_mtime_ns, b.st_size),
    )
    return keys[0] == keys[1] and (renamed or a.st_ctime_ns == b.st_ctime_ns)


def _names(target: Path, st: os.stat_result) -> bool:
    """Whether the path still names the file `st` describes."""
    try:
        now = os.stat(target)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def _read_all(descriptor: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(descriptor, _CHUNK, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(descriptor: int, data: bytes) -> None:
    written = 0
    while written < len(data):
        written += os.pwrite(descriptor, data[written : written + _CHUNK], written)


def _read_path(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


class _Replaced(Exception):
    """The path names another file than the one opened, or (without a lease) the file
    changed since it was read."""


def _changed(path: str, data: bytes | None) -> NoteChanged:
    return NoteChanged(path, None if data is None else decode_exact(path, data))


# -- the lease ---------------------------------------------------------------------------


def _take_lease(descriptor: int) -> bool:
    """A write lease on the open note, waiting up to LEASE_WAIT_SECONDS for the programs
    that have it open to close it; False where none can be had."""
    if not _LEASES:
        return False
    try:
        fcntl.fcntl(descriptor, fcntl.F_SETSIG, _LEASE_SIGNAL)
    except OSError:
        return False
    deadline = time.monotonic() + LEASE_WAIT_SECONDS
    pause = 0.0005
    while True:
        try:
            fcntl.fcntl(descriptor, fcntl.F_SETLEASE, fcntl.F_WRLCK)
            return True
        except OSError as exc:
            # EAGAIN: open elsewhere. Anything else: leases off, another filesystem, a file
            # this user does not own.
            if exc.errno != errno.EAGAIN:
                return False
        if time.monotonic() > deadline:
            logger.info("a program keeps the note open; writing it without a lease")
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def _release_lease(descriptor: int) -> bool:
    """Release the lease; whether another process tried to open the note meanwhile (the
    kernel then asks the holder to let go, and the lease reads as no longer a write one)."""
    tried = fcntl.fcntl(descriptor, fcntl.F_GETLEASE) != fcntl.F_WRLCK
    fcntl.fcntl(descriptor, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    return tried


# -- writing in place --------------------------------------------------------------------


def _put_back(descriptor: int, old: bytes) -> None:
    _write_all(descriptor, old)
    os.ftruncate(descriptor, len(old))
    os.fsync(descriptor)


def _write_in_place(
    descriptor: int, content: bytes, old: bytes, path: str, record: Path | None
) -> None:
    """`content` over `old`, whole or not at all: a failure part way puts `old` back."""
    try:
        if len(content) > len(old) and hasattr(os, "posix_fallocate"):  # not on macOS
            try:
                os.posix_fallocate(descriptor, 0, len(content))
            except OSError as exc:
                if exc.errno in _NO_SPACE:
                    raise
                # No reservation on this filesystem: the write itself finds out.
        _write_all(descriptor, content)
        os.ftruncate(descriptor, len(content))
        os.fsync(descriptor)
    except OSError as exc:
        try:
            _put_back(descriptor, old)
        except OSError as again:
            raise WriteInterrupted(path, again.strerror or str(again), record) from exc
        if exc.errno in _NO_SPACE:
            raise OutOfSpace(path, _NO_SPACE[exc.errno]) from None
        raise


def _open_note(target: Path, path: str) -> int:
    try:
        return os.open(target, os.O_RDWR)
    except FileNotFoundError:
        raise NoteChanged(path, None) from None


def rewrite_if_unchanged(
    target: Path, path: str, expected: bytes, content: bytes, recovery: RecoveryLog | None
) -> None:
    """Write `content` over the note at `target` if it holds `expected`; NoteChanged with
    what it holds otherwise (see the module's docstring for the steps)."""
    descriptor = _open_note(target, path)
    try:
        leased = _take_lease(descriptor)
        try:
            try:
                opened = os.fstat(descriptor)
                current = _read_all(descriptor)
                if current != expected:
                    raise _changed(path, current)
                record = _begin(recovery, path, target, opened, current, content)
                # Without a lease, the last look right before the write.
                if not _names(target, opened) or not (
                    leased or _same_file(os.fstat(descriptor), opened)
                ):
                    if recovery is not None and record is not None:
                        recovery.end(record)
                    raise _Replaced
                _write_in_place(descriptor, content, current, path, record)
                written = os.fstat(descriptor)
                whole = _holds(_read_all(descriptor), content, current)
            finally:
                # Without a lease nobody can be known not to have opened the note meanwhile.
                tried = _release_lease(descriptor) if leased else True
        except _Replaced:
            # Read once the lease is let go: opening the leased file would wait for it.
            raise _changed(path, _read_path(target)) from None
        if not whole:
            # Another program wrote during ours (possible only without a lease): the record
            # stays, so the next start offers the old text too.
            logger.warning("%s was written by another program during an edit", path)
            raise _changed(path, _read_path(target))
        if recovery is not None and record is not None:
            recovery.end(record)
        if tried:
            time.sleep(SETTLE_SECONDS)
        _check_after(descriptor, target, path, written, content, current)
    finally:
        os.close(descriptor)


def _begin(
    recovery: RecoveryLog | None,
    path: str,
    target: Path,
    st: os.stat_result,
    old: bytes,
    new: bytes,
) -> Path | None:
    if recovery is None:
        return None
    try:
        return recovery.begin(path, target, st, old, new)
    except OSError as exc:
        # A full or read-only cache disk must not stop an edit; it loses its safety net.
        logger.warning("no recovery record for %s (%s); writing without one", path, exc)
        return None


def _check_after(
    descriptor: int,
    target: Path,
    path: str,
    written: os.stat_result,
    content: bytes,
    old: bytes,
) -> None:
    """After the write: the note is still ours, or another writer's whole text replaced it
    (NoteChanged with that text)."""
    if not _names(target, written):
        # A save by rename put another file at the path. Other hard links to the file we
        # wrote get its old text back: the edit was not made.
        if os.fstat(descriptor).st_nlink > 0 and _read_all(descriptor) == content:
            _put_back(descriptor, old)
        raise _changed(path, _read_path(target))
    if _same_file(os.fstat(descriptor), written):
        return
    now = _read_all(descriptor)
    if not _holds(now, content, old):
        raise _changed(path, now)


def _holds(now: bytes, content: bytes, old: bytes) -> bool:
    """Whether the note holds the text written, whole: as written, or with lines another
    program appended after it (`echo >>`, a logger); the edit stands then, and a conflict
    would make it again on top of itself. Where the text written begins the old text (an
    edit that cut the note's end), a save of the old text with lines added would look the
    same: a conflict then."""
    appended = now.startswith(content) and not old.startswith(content)
    if appended and now != content:
        logger.info("another program appended to the note right after an edit; the edit stands")
    return now == content or appended


def replace_if_unchanged(
    target: Path,
    path: str,
    expected: str | None,
    content: str,
    recovery: RecoveryLog | None = None,
) -> None:
    """Write `content` at `target` if it holds `expected` (None: if there is no file);
    NoteChanged otherwise, with the file as it is."""
    if expected is None:
        _create_new(target, path, content)
        return
    rewrite_if_unchanged(target, path, expected.encode("utf-8"), content.encode("utf-8"), recovery)


def _create_new(target: Path, path: str, content: str) -> None:
    temporary = temporary_beside(target)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            _write_all(descriptor, content.encode("utf-8"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        # A hard link never replaces an existing name: the note is created whole, or not.
        os.link(temporary, target)
    except FileExistsError:
        raise _changed(path, _read_path(target)) from None
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise OutOfSpace(path, _NO_SPACE[exc.errno]) from None
        raise
    finally:
        temporary.unlink(missing_ok=True)


def remove_if_unchanged(target: Path, path: str, expected: str) -> None:
    """Remove the note if it holds `expected`; NoteChanged otherwise."""
    descriptor = _open_note(target, path)
    try:
        leased = _take_lease(descriptor)
        try:
            opened = os.fstat(descriptor)
            current = _read_all(descriptor)
            if current != expected.encode("utf-8"):
                raise _changed(path, current)
            if not _names(target, opened):
                raise _changed(path, _read_path(target))
            taken = temporary_beside(target)
            os.rename(target, taken)
        finally:
            if leased:
                _release_lease(descriptor)
        if _names(taken, opened) and _same_file(os.fstat(descriptor), opened, renamed=True):
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
        raise _changed(path, _read_path(target))
    finally:
        os.close(descriptor)
