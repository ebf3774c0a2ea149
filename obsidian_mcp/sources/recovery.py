"""What an edit cut short would lose, kept outside the vault until the new text is verified.

A note is rewritten in place (`swap.py`), so a process killed during the write, or a power
cut before the write reached the disk, could leave it half old, half new. Before the first
byte changes, the old and the new text go to a record in the cache folder (synced to
disk); once the new text is written, synced and read back, the record is removed. A record
found while holding the vault's lock belongs to a write that never finished: a writer
removes its record before it lets the lock go. `FolderSource.recover`, run when a server
starts, settles each one (`obsidian-mcp doctor` lists them):

- the note holds the new text, or the old one: the write finished, or never began;
- it holds what a cut write leaves (the new text's start over the old text): the old text
  is written back, and the log says so;
- anything else: someone changed the note since; it is left as it is, and the old text is
  saved as a file in the `recovered` folder beside the records, which the log and
  `obsidian-mcp doctor` name, for the user to take what they need from it.
"""

import base64
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingWrite:
    record: Path
    path: str  # the vault path the edit named
    file: Path  # the file written (a symlinked note's target)
    device: int
    inode: int
    old: bytes
    new: bytes
    at: float


def _sync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def cut_short(current: bytes, old: bytes, new: bytes) -> bool:
    """Whether `current` is what rewriting `old` with `new` in place leaves when stopped
    part way: space reserved (`old` followed by zeros up to the new length), then the first
    bytes of `new` written over it, before the cut to the new length."""
    padded = old + b"\0" * max(0, len(new) - len(old))
    if len(current) != len(padded) or current in (old, new):
        return False
    prefix = 0
    limit = min(len(current), len(new))
    while prefix < limit and current[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < len(current) and current[-1 - suffix] == padded[-1 - suffix]:
        suffix += 1
    # Some k with current[:k] == new[:k] and current[k:] == padded[k:].
    return len(current) - suffix <= prefix


class RecoveryLog:
    """The records of one vault's writes in progress, and the texts recovered from them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.recovered = folder.with_name(folder.name + "-recovered")

    def begin(self, path: str, file: Path, st: os.stat_result, old: bytes, new: bytes) -> Path:
        """Record a write about to begin, durably; its record."""
        self.folder.mkdir(parents=True, exist_ok=True)
        body = {
            "path": path,
            "file": str(file),
            "device": st.st_dev,
            "inode": st.st_ino,
            "old": base64.b64encode(old).decode("ascii"),
            "new": base64.b64encode(new).decode("ascii"),
            "at": time.time(),
            "pid": os.getpid(),
        }
        name = f"{time.time_ns()}-{secrets.token_hex(4)}"
        staged = self.folder / f".{name}.tmp"
        record = self.folder / f"{name}.json"
        descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(descriptor, json.dumps(body).encode("ascii"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(staged, record)
        _sync_folder(self.folder)
        return record

    def end(self, record: Path) -> None:
        # Not synced: a record that outlives a crash is found holding the new text, and goes.
        record.unlink(missing_ok=True)

    def pending(self) -> list[PendingWrite]:
        try:
            records = sorted(self.folder.glob("*.json"))
        except OSError:
            return []
        found: list[PendingWrite] = []
        for record in records:
            try:
                body = json.loads(record.read_text("ascii"))
                found.append(
                    PendingWrite(
                        record,
                        str(body["path"]),
                        Path(body["file"]),
                        int(body["device"]),
                        int(body["inode"]),
                        base64.b64decode(body["old"]),
                        base64.b64decode(body["new"]),
                        float(body["at"]),
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                # Cut short while it was being written: its write never began.
                logger.warning("an unreadable write record %s is removed", record)
                record.unlink(missing_ok=True)
        return found

    def keep(self, write: PendingWrite) -> Path:
        """Save a write's old text where the user can find it; where it went."""
        self.recovered.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(write.at, UTC).strftime("%Y%m%d-%H%M%S")
        name = write.path.replace("/", " - ")
        target = self.recovered / f"{stamp} {name}"[:200]
        if target.suffix != ".md":
            target = target.with_name(target.name + ".md")
        target.write_bytes(write.old)
        return target

    def kept_files(self) -> list[Path]:
        try:
            return sorted(self.recovered.iterdir())
        except OSError:
            return []
