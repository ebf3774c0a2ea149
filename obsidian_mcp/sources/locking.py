"""One writer of a vault at a time, across this machine's server processes.

Several server processes serve one vault when several MCP clients start their own, or one
client runs a stdio server while an HTTP one runs beside it. An edit is a compare and a
write; two processes doing that at once each see the other's old text, and one edit is
lost while both answer "Edited" (through the REST API the plugin has no conditional
write to prevent it, `rest.py`). So every edit's compare-and-write, undo and scratch
append takes the vault's lock: `flock` on lock files in the configuration folder, which
every process of the installation shares. A process knows the vault by the names it has
(`identity.lock_names`): its folder, its API key; it takes the lock of each, in one order,
so two processes that know the vault by different settings still meet on one of them.

A lock is per open file description, so a second task of the same process opening the
file waits like another process would; a thread lock in front keeps one process's tasks
from each holding a worker thread while they wait.
"""

import errno
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import anyio.to_thread

from obsidian_mcp.errors import VaultError

# A holder keeps the lock for one compare-and-write: a few milliseconds, 50 ms more when
# the write waits for a save to settle (`swap.SETTLE_SECONDS`), a second or two for a large
# note over REST on a loaded machine. A holder still there after this long is stuck.
WAIT_SECONDS = 30.0
# Between two tries of a lock another process holds: short, since holds are short.
_POLL_SECONDS = (0.001, 0.02)


class VaultBusy(VaultError):
    def __init__(self, seconds: float, holder: str) -> None:
        super().__init__(
            f"Another obsidian-mcp process ({holder}) has held this vault's edit lock for "
            f"{seconds:.0f} s, so nothing was written. Try again; if it keeps happening, stop "
            "the stuck server process."
        )


def lock_file(folder: Path, name: str) -> Path:
    """The lock file for a vault known by `name` (a folder path, a key digest)."""
    return folder / f"{hashlib.sha256(name.encode('utf-8')).hexdigest()[:24]}.lock"


def _holder(descriptor: int) -> str:
    try:
        return os.pread(descriptor, 64, 0).decode("ascii", "replace").strip() or "pid unknown"
    except OSError:
        return "pid unknown"


def _flock(path: Path, deadline: float) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    pause = _POLL_SECONDS[0]
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() > deadline:
                raise VaultBusy(WAIT_SECONDS, _holder(descriptor))
            time.sleep(pause)
            pause = min(pause * 2, _POLL_SECONDS[1])
        # Who holds it, for the message another process gives when this one hangs.
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"pid {os.getpid()}".encode("ascii"), 0)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


class VaultLock:
    def __init__(self, files: Sequence[Path], *, wait_seconds: float = WAIT_SECONDS) -> None:
        # Always taken in the same order: two processes never wait for each other crosswise.
        self._files = sorted(set(files))
        self._wait = wait_seconds
        self._threads = threading.Lock()
        self._tasks = anyio.Lock()

    @property
    def files(self) -> list[Path]:
        return list(self._files)

    @contextmanager
    def held_sync(self) -> Generator[None]:
        """Hold the lock in this thread (blocking); VaultBusy after `wait_seconds`."""
        deadline = time.monotonic() + self._wait
        if not self._threads.acquire(timeout=self._wait):
            raise VaultBusy(self._wait, f"pid {os.getpid()}, this process")
        descriptors: list[int] = []
        try:
            for file in self._files:
                # One at a time: those taken before one that fails are let go below.
                descriptors.append(_flock(file, deadline))  # noqa: PERF401
            yield
        finally:
            for descriptor in reversed(descriptors):
                os.close(descriptor)  # closing the last descriptor releases the flock
            self._threads.release()

    @asynccontextmanager
    async def held(self) -> AsyncGenerator[None]:
        """Hold the lock around an async block; the waiting happens on a worker thread."""
        async with self._tasks:
            entered = self.held_sync()
            # Shielded: a cancellation landing as the lock is taken must not leave it held.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(entered.__enter__)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(entered.__exit__, None, None, None)
