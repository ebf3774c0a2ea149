# pyright: strict
"""Loading a stored index in bulk without the cycle collector running through it.

A new process builds hundreds of thousands of objects from the index (notes, passages,
text hashes, vectors). Each few hundred allocations start a collection, and every few
of those walk all objects made so far, none of which is garbage: at 10,000 notes that
was 0.25 s of the 0.73 s the notes took to load (python -m bench.speed.index --prebuilt).
The collector is off while a load runs, in whichever thread, and on again when the last
load ends. It only finds reference cycles, and loads make none.

What a server process's first load of the notes builds lives as long as the process, so
it is then frozen (`gc.freeze`, `frozen_after=True`): a full collection no longer walks it.
One still ran every few stat listings at 10,000 notes, 146 ms inside a question asked after
an edit (a quarter of the questions after an edit took 0.37-0.46 s instead of 0.22). Only
that load freezes: freezing takes in every object alive at the moment, and cyclic garbage
frozen is never collected, so freezing after every query's small load would leak. A note's
records are replaced whole on an edit and freed by their counts.

Freezing is the whole process's business: frozen objects are out of `gc.get_referrers`
too (Hypothesis's check of a registered random generator failed in the test process after
a server ran in it). So only a process that is a server for its whole life turns it on
(`freeze_first_loads`, from `obsidian-mcp serve`); a library user or a test process does not.
"""

import ctypes
import gc
import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from functools import cache

_lock = threading.Lock()
_loads = 0
_collector_was_on = False
_freezing = False


def freeze_first_loads(on: bool = True) -> None:
    """Let `collector_paused(frozen_after=True)` freeze what its load built (this process
    serves for its whole life), or not."""
    global _freezing
    _freezing = on


@contextmanager
def collector_paused(*, frozen_after: bool = False) -> Generator[None]:
    global _loads, _collector_was_on
    with _lock:
        if _loads == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _loads += 1
    try:
        yield
    finally:
        with _lock:
            if frozen_after and _freezing:
                gc.freeze()
                release_free_memory()
            _loads -= 1
            if _loads == 0 and _collector_was_on:
                gc.enable()


def release_free_memory() -> None:
    """Hand the C allocator's free pages back to the system (glibc's `malloc_trim`; a
    no-op where the C library has none), after work that frees large buffers: glibc
    raises its mmap threshold after freeing a large block, so later ones (a listing's
    response body, a load's rows) come from the heap, and their pages stay resident
    once freed. After the first load, at 10,000 notes, the server held 5 MB less after
    the benchmark's calls (372-375 -> 367 MB through the folder; python -m
    bench.speed.index --prebuilt); after each listing (`Corpus._list`), 13-27 MB more. The
    process's own symbols are looked in, not a library found by name:
    `ctypes.util.find_library` runs `ldconfig` (or a compiler) in a subprocess, on the
    way to the first answer."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # Windows loads no library by None
        return None
