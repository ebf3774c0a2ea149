# pyright: strict
"""Loading a stored index in bulk without the cycle collector running through it.

A new process builds hundreds of thousands of objects from the index (notes, passages,
text hashes, vectors). Each few hundred allocations start a collection, and every few
of those walk all objects made so far, none of which is garbage: at 10,000 notes that
was 0.25 s of the 0.73 s the notes took to load (python -m bench.speed.index --prebuilt).
The collector is off while a load runs, in whichever thread, and on again when the last
load ends. It only finds reference cycles, and loads make none.
"""

import gc
import threading
from collections.abc import Generator
from contextlib import contextmanager

_lock = threading.Lock()
_loads = 0
_collector_was_on = False


@contextmanager
def collector_paused() -> Generator[None]:
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
            _loads -= 1
            if _loads == 0 and _collector_was_on:
                gc.enable()
