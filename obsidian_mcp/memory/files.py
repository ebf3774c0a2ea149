"""Which files hold the memories, and which of them this process may write.

Several writers never share a file: the plugin's append is a read-modify-write (two
overlapping appends keep one), and sync tools copy whole files (two devices writing one file
keep one device's version). So each writer appends only to a file of its own, and readers
merge every file by id (`index.settle`):

    obsidian-mcp/memory.jsonl               earlier versions' single file: read, not written
    obsidian-mcp/memory/<device>-<slot>-<generation>.jsonl    one writer's file
    obsidian-mcp/memory/<other name>.jsonl  conflict copies left by sync tools: read

A device is one installation (its id is kept in the config folder, or set with
OBSIDIAN_MEMORY_DEVICE); a slot is one of its processes at a time, held by an advisory lock
in the config folder for the process's life, so a slot's files have one writer at a time and
the number of files stays at the most processes a device ran at once. Compaction (`logfile`)
writes a slot's live lines to its next generation and then removes the files it folded:
the slot's own, those of the device's slots no process holds, and conflict copies of them.
"""

import fcntl
import hashlib
import logging
import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

logger = logging.getLogger(__name__)

_WRITER = re.compile(r"^(?P<device>[a-z0-9]{1,32})-(?P<slot>\d{1,4})-(?P<generation>\d{1,9})")
_DEVICE = re.compile(r"^[a-z0-9]{1,32}$")
# Processes of one device writing one vault's memory at once; far above what a user runs.
MAX_SLOTS = 1000


@dataclass(frozen=True, slots=True)
class MemoryFiles:
    """Where a store's files live inside the vault."""

    # The configured path, e.g. 'obsidian-mcp/memory.jsonl': the single file of earlier
    # versions, still read.
    legacy: str

    @property
    def folder(self) -> str:
        """The writers' folder: the legacy path without its extension."""
        path = PurePosixPath(self.legacy)
        return str(path.with_suffix("")) if path.suffix else f"{self.legacy}.d"

    @property
    def legacy_folder(self) -> str:
        parent = str(PurePosixPath(self.legacy).parent)
        return "" if parent == "." else parent

    def is_legacy_copy(self, name: str) -> bool:
        """A sync tool's conflict copy of the legacy file (a name beside it)."""
        legacy = PurePosixPath(self.legacy)
        stem, suffix = legacy.stem, legacy.suffix
        if name == legacy.name or not name.endswith(suffix) or not name.startswith(stem):
            return False
        rest = name[len(stem) : len(name) - len(suffix)]
        return rest.startswith(".sync-conflict-") or "conflicted copy" in rest

    @property
    def view(self) -> str:
        """The generated Markdown page of current memories (`view`)."""
        return f"{self.folder}.md"

    def owns(self, path: str) -> bool:
        """Whether a vault path is one of the store's files or its page (never edited)."""
        return (
            path in (self.legacy, self.view)
            or path.startswith(self.folder + "/")
            or (
                str(PurePosixPath(path).parent) in (self.legacy_folder or ".",)
                and self.is_legacy_copy(PurePosixPath(path).name)
            )
        )

    def writer_name(self, device: str, slot: int, generation: int) -> str:
        return f"{self.folder}/{device}-{slot}-{generation}.jsonl"


@dataclass(frozen=True, slots=True)
class WriterFile:
    """What a file's name says of its writer; conflict copies carry their original's."""

    device: str
    slot: int
    generation: int
    # False for a conflict copy, whose name only starts like its original's.
    exact: bool


def writer_of(name: str) -> WriterFile | None:
    """The writer a file in the writers' folder belongs to (by its base name), or None."""
    base = PurePosixPath(name).name
    found = _WRITER.match(base)
    if found is None:
        return None
    exact = base == found[0] + ".jsonl"
    return WriterFile(found["device"], int(found["slot"]), int(found["generation"]), exact)


def device_id(config_dir: Path, configured: str | None) -> str:
    """This installation's id: configured, or made once and kept in the config folder."""
    if configured:
        return configured
    path = config_dir / "device-id"
    try:
        kept = path.read_text(encoding="utf-8").strip()
        if _DEVICE.match(kept):
            return kept
    except OSError:
        pass
    made = secrets.token_hex(3)
    try:
        config_dir.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".device-id.{os.getpid()}")
        temporary.write_text(made + "\n", encoding="utf-8")
        # Two processes starting at once: the first to link wins and both use its id.
        try:
            os.link(temporary, path)
        except FileExistsError:
            kept = path.read_text(encoding="utf-8").strip()
            made = kept if _DEVICE.match(kept) else made
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning(
            "the device id cannot be kept in %s (%s); this run uses %s", config_dir, exc, made
        )
    return made


def installation_folder(config_dir: Path | None) -> Path:
    """Where this installation keeps its device id and writer locks: the config folder, or
    (a store made without one, as in tests and benchmarks) one in the temporary folder."""
    return config_dir if config_dir is not None else Path(tempfile.gettempdir()) / "obsidian-mcp"


def lock_folder(installation: Path, memory_path: str) -> Path:
    """Where the slot locks of one memory path live: per installation, outside the vault
    (locks do not travel with sync, and the REST API has none). Not per vault: a process
    that reaches the vault through REST and one that reads its folder name it differently,
    and must still never share a file; two vaults sharing slot numbers costs nothing."""
    key = hashlib.blake2b(memory_path.encode(), digest_size=8)
    return installation / "memory-writers" / key.hexdigest()


class SlotLocks:
    """Advisory locks on slot numbers: one per process (held for its life), and, for
    folding, the slots no process holds."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._held: dict[int, int] = {}

    def try_take(self, slot: int) -> bool:
        if slot in self._held:
            return True
        self._folder.mkdir(parents=True, exist_ok=True)
        handle = os.open(self._folder / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return False
        except BaseException:
            os.close(handle)
            raise
        self._held[slot] = handle
        return True

    def claim(self) -> int:
        """The lowest slot no other process holds, now held by this one."""
        for slot in range(MAX_SLOTS):
            if self.try_take(slot):
                return slot
        raise RuntimeError(f"all {MAX_SLOTS} memory writer slots in {self._folder} are held")

    def release(self, slot: int) -> None:
        handle = self._held.pop(slot, None)
        if handle is not None:
            os.close(handle)

    def close(self) -> None:
        for slot in list(self._held):
            self.release(slot)
