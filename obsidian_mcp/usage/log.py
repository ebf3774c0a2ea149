# pyright: strict
"""The usage log on disk: JSON lines in the cache folder, bounded, never in the way.

Each line is appended with one `write` to a file opened for appending, so servers in
several processes can share the log and a line is never interleaved with another. The
file is opened for each line: a log deleted, moved or truncated while the server runs is
simply written anew. A line that was cut short (a full disk, a truncation mid-line) is
never glued to the next one: an append to a file that does not end with a newline starts
with one, and the reader skips the torn line. At `max_bytes` the file is renamed to
`usage.1.jsonl`, replacing the older one: two files, at most twice the limit on disk.

A failure to write (a read-only or full cache folder, a log turned into a folder) is
logged once on stderr and never reaches the tool call; the next line is tried again.
"""

import fcntl
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from obsidian_mcp.config import Settings
from obsidian_mcp.usage.record import Redactor, ToolCall, call_record

logger = logging.getLogger(__name__)

LOG_FILE = "usage.jsonl"
ROTATED_FILE = "usage.1.jsonl"
_LOCK_FILE = "usage.lock"
# The key `on` hashes with, kept in the configuration folder: never beside the log, so a
# user who shares the log (the cache folder's `usage/`) does not share the key that would
# let anyone test guesses against its hashes.
KEY_FILE = "usage-log.key"
# Where the key was kept before it moved (issue 35): moved to the configuration folder at
# the next start, so hashes stay comparable across the move.
_OLD_KEY_FILE = "key"
_KEY_BYTES = 32


@dataclass(frozen=True)
class LogFiles:
    """The log's files in a folder, oldest first."""

    folder: Path

    @property
    def current(self) -> Path:
        return self.folder / LOG_FILE

    @property
    def rotated(self) -> Path:
        return self.folder / ROTATED_FILE

    @property
    def in_order(self) -> tuple[Path, Path]:
        return self.rotated, self.current


class UsageLog:
    """Appends whole lines to the log, rotating it at `max_bytes`; raises OSError."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.files = LogFiles(folder)
        self.max_bytes = max_bytes

    def _open(self) -> int:
        # Read too: the last byte says whether the file ends with a whole line.
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            return os.open(self.files.current, flags, 0o600)
        except FileNotFoundError:
            self.files.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            return os.open(self.files.current, flags, 0o600)

    def append(self, line: bytes) -> None:
        descriptor = self._open()
        try:
            size = os.fstat(descriptor).st_size
            if size and os.pread(descriptor, 1, size - 1) != b"\n":
                line = b"\n" + line  # after a torn line, start a line of our own
            os.write(descriptor, line)
            written = os.fstat(descriptor)
        finally:
            os.close(descriptor)
        if written.st_size >= self.max_bytes:
            self._rotate(written)

    def _rotate(self, written: os.stat_result) -> None:
        """Rename the full log, unless another process already has: under a lock, and only
        the very file this process found full."""
        lock = os.open(self.files.folder / _LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                now = os.stat(self.files.current)
            except FileNotFoundError:
                return
            same = (now.st_dev, now.st_ino) == (written.st_dev, written.st_ino)
            if same and now.st_size >= self.max_bytes:
                os.replace(self.files.current, self.files.rotated)
        finally:
            os.close(lock)


def _key(path: Path) -> bytes:
    key = bytes.fromhex(path.read_text("ascii").strip())
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} does not hold a {_KEY_BYTES}-byte key; delete it for a new one")
    return key


def installation_key(folder: Path, log_folder: Path | None = None) -> bytes:
    """The key `on` hashes with, made once per configuration folder (so a question asked
    in two sessions hashes the same); one kept in `log_folder` by an earlier version moves
    here first. When it cannot be kept, a key for this process only: hashes then match
    within a session, which is all the follow-up signals need."""
    path = folder / KEY_FILE
    old = log_folder / _OLD_KEY_FILE if log_folder is not None else None
    try:
        if old is not None and old.is_file():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():
                os.replace(old, path)
            else:
                old.unlink()
        try:
            return _key(path)
        except FileNotFoundError:
            pass
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = secrets.token_hex(_KEY_BYTES)
        draft = folder / f".key-{os.getpid()}-{secrets.token_hex(4)}"
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(fresh)
        try:
            os.link(draft, path)  # whole or not at all; a racing process's key wins
            return bytes.fromhex(fresh)
        except FileExistsError:
            return _key(path)
        finally:
            draft.unlink(missing_ok=True)
    except (OSError, ValueError) as exc:
        logger.warning(
            "usage log: no lasting hash key in %s (%s); this process hashes with its own",
            folder,
            exc,
        )
        return secrets.token_bytes(_KEY_BYTES)


class UsageRecorder:
    """Writes one line per tool call. Never raises: the first failure in a row is logged
    on stderr, and the call it was about answers as if nothing happened."""

    def __init__(self, log: UsageLog, redactor: Redactor) -> None:
        self.log = log
        self._redactor = redactor
        # One session per server process: a stdio server lives as long as its client's
        # conversation (HTTP clients of one server share it).
        self.session = secrets.token_hex(6)
        self._failing = False

    def record(self, call: ToolCall) -> None:
        try:
            data = call_record(call, self._redactor, self.session)
            # A lone surrogate (a refused argument, logged with `full`) is written as its
            # JSON escape, which reads back as the same string.
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            self.log.append(text.encode("utf-8", "backslashreplace") + b"\n")
        except Exception as exc:  # the log is never worth a failed tool call
            if not self._failing:
                logger.warning(
                    "usage log: cannot write to %s (%s); tool calls go on unlogged until it can",
                    self.log.files.current,
                    exc,
                )
            self._failing = True
        else:
            if self._failing:
                logger.warning("usage log: writing to %s again", self.log.files.current)
            self._failing = False


def usage_recorder(settings: Settings) -> UsageRecorder | None:
    """The recorder the settings ask for; None with the log off (nothing is written)."""
    if settings.usage_log == "off":
        return None
    folder = settings.usage_log_dir
    key = installation_key(settings.config_dir, folder) if settings.usage_log == "on" else b""
    return UsageRecorder(
        UsageLog(folder, settings.usage_log_max_bytes), Redactor(settings.usage_log, key)
    )
