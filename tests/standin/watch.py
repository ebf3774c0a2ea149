"""A minimal Linux inotify reader (ctypes, stdlib only) used as a "something changed" signal.

The vault and ``.smart-env`` caches stay valid only while no event arrives from the folders
they watch. The kernel queues an event inside the writing system call, so a change made
before a request is sent is always seen by that request: caching never serves stale data.
Where inotify is unavailable (not Linux, limits reached) :func:`Watcher.create` returns None
and callers re-stat everything on every request, as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
import threading

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)

WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
)
#: Events after which only a full re-scan is safe.
RESCAN_MASK = IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_ISDIR

_HEADER = struct.Struct("iIII")
_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.inotify_init1.argtypes = [ctypes.c_int]
            lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
            _libc = lib
        except (OSError, AttributeError):
            return None
    return _libc


class Watcher:
    """One inotify instance; :meth:`read` drains it without blocking."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self._fd = fd
        self._libc = libc
        self._lock = threading.Lock()

    @classmethod
    def create(cls) -> Watcher | None:
        if os.environ.get("STANDIN_NO_INOTIFY"):
            return None
        libc = _load_libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        return cls(fd, libc) if fd >= 0 else None

    def add(self, folder: str) -> int:
        """Watch ``folder`` (idempotent: the same folder gives the same id); -1 on failure."""
        wd: int = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), WATCH_MASK)
        return wd

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self._fd, wd)

    def read(self) -> list[tuple[int, int, str]] | None:
        """Pending ``(wd, mask, name)`` events; None when the queue cannot be trusted."""
        events: list[tuple[int, int, str]] = []
        with self._lock:
            while True:
                try:
                    buf = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    return events
                except OSError:
                    return None
                if not buf:
                    return events
                offset = 0
                while offset + _HEADER.size <= len(buf):
                    wd, mask, _cookie, length = _HEADER.unpack_from(buf, offset)
                    offset += _HEADER.size
                    raw = buf[offset : offset + length].split(b"\0", 1)[0]
                    offset += length
                    if mask & IN_Q_OVERFLOW:
                        return None
                    events.append((wd, mask, os.fsdecode(raw)))
