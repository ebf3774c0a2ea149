"""A file's birth time, from Linux's statx (Python 3.11's os.stat does not give it there)."""

import ctypes
import ctypes.util
import os
from pathlib import Path

_STATX_BTIME = 0x800
_AT_FDCWD = -100
_BTIME_OFFSET = 80  # struct statx: stx_btime follows the fixed fields and stx_atime
_MASK_OFFSET = 0


def birth_time_ns(path: Path) -> int | None:
    """The file's creation time in nanoseconds, None where the system or the filesystem
    does not record one."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    statx = getattr(libc, "statx", None)
    if statx is None:
        return None
    buffer = ctypes.create_string_buffer(256)
    if statx(_AT_FDCWD, os.fsencode(path), 0, _STATX_BTIME, buffer) != 0:
        return None
    mask = int.from_bytes(buffer.raw[_MASK_OFFSET : _MASK_OFFSET + 4], "little")
    if not mask & _STATX_BTIME:
        return None
    seconds = int.from_bytes(buffer.raw[_BTIME_OFFSET : _BTIME_OFFSET + 8], "little", signed=True)
    nanos = int.from_bytes(buffer.raw[_BTIME_OFFSET + 8 : _BTIME_OFFSET + 12], "little")
    return seconds * 1_000_000_000 + nanos
