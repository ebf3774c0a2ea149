"""The vault as the rest of the program sees it: one live source, and the folder beside it.

Selection: with an API key, the REST API is the live source; with only a vault folder, the
folder is. With both, REST serves live data and the folder serves what only the disk has
(Smart Connections vectors, empty folders), and stands in when Obsidian stops answering:
for reads on any outage, for writes only when the request never reached Obsidian (a write
that may have landed is never repeated elsewhere). Every path is checked here first.
"""

import difflib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from obsidian_mcp.errors import (
    NoteNotFound,
    ObsidianConnectionLost,
    ObsidianTimeout,
    ObsidianUnreachable,
    VaultError,
)
from obsidian_mcp.paths import is_markdown, normalize_vault_path, note_name
from obsidian_mcp.sources.base import FileBytes, FileStat, NoteData, Source, TextSearchHit
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource
from obsidian_mcp.text.versions import RecentTexts

logger = logging.getLogger(__name__)

_OUTAGES = (ObsidianUnreachable, ObsidianTimeout, ObsidianConnectionLost)
# After an outage, reads go to the folder for this long without asking Obsidian; each read
# that found it hanging cost a full request timeout (10 s by default) before this existed.
# The same span the semantic sources leave a failed source alone.
OUTAGE_SECONDS = 60.0
# When the span ends, one `GET /` with this bound decides whether Obsidian is back: the
# stand-in answers it in about 2 ms on the bench machine, a local Obsidian in milliseconds.
PROBE_SECONDS = 1.0

T = TypeVar("T")


@dataclass
class SourceStatus:
    live: str
    disk: str | None
    notes: list[str] = field(default_factory=list[str])


class NoVaultConfigured(VaultError):
    def __init__(self, why: str) -> None:
        super().__init__(
            f"No vault is available: {why} Set OBSIDIAN_API_KEY (with Obsidian open and the "
            "Local REST API plugin enabled) or OBSIDIAN_VAULT_PATH to the vault folder."
        )


# Through REST alone an appended entry is checked this many times, this long after its
# POST: a racing writer's write-back lands within milliseconds on a desktop.
_ENTRY_ATTEMPTS = 3
_ENTRY_SETTLE_SECONDS = 0.1


def _under_any(path: str, links: set[str]) -> bool:
    return any(path == link or path.startswith(link + "/") for link in links)


class Vault:
    def __init__(
        self,
        live: Source | None,
        disk: FolderSource | None,
        *,
        selection_note: str = "",
        outage_seconds: float = OUTAGE_SECONDS,
        generated: frozenset[str] = frozenset(),
    ) -> None:
        """`generated`: notes this server writes for the user to read (the memory view):
        never listed among the notes, so never indexed or searched."""
        if live is None and disk is None:
            raise NoVaultConfigured(selection_note or "nothing is configured.")
        self._live: Source = live if live is not None else disk  # type: ignore[assignment]
        self._disk = disk
        self.selection_note = selection_note
        self._outage_seconds = outage_seconds
        self._outage_until = -float("inf")  # monotonic time until which Obsidian is skipped
        # Writes made through this vault; caches of the vault's notes re-list when it moves.
        self.writes = 0
        self._generated = generated
        # One entry appended at a time by this process (see `append_entry`).
        self._entries = anyio.Lock()
        # Note texts reads handed out, by version: an edit refused for an old version says
        # what changed since.
        self.recent = RecentTexts()

    def handed_out(self, text: str) -> str:
        """A read gives the agent this note text: its version token."""
        return self.recent.saw(text)

    @property
    def live(self) -> Source:
        return self._live

    @property
    def disk(self) -> FolderSource | None:
        return self._disk

    @property
    def rest(self) -> RestSource | None:
        return self._live if isinstance(self._live, RestSource) else None

    @property
    def smart_env_dir(self) -> Path | None:
        if self._disk is None:
            return None
        candidate = self._disk.root / ".smart-env"
        return candidate if candidate.is_dir() else None

    def status(self) -> SourceStatus:
        notes = [self.selection_note] if self.selection_note else []
        return SourceStatus(
            live=self._live.describe(),
            disk=self._disk.describe() if self._disk is not None else None,
            notes=notes,
        )

    @property
    def _rest_beside_disk(self) -> bool:
        return self._disk is not None and self._live is not self._disk

    async def _obsidian_is_down(self) -> bool:
        """True while a recent outage is remembered; at its end, one short probe decides."""
        if time.monotonic() < self._outage_until:
            return True
        if self._outage_until == -float("inf"):
            return False
        rest = self.rest
        if rest is not None and not await rest.answers_within(PROBE_SECONDS):
            self._outage_until = time.monotonic() + self._outage_seconds
            return True
        logger.warning("Obsidian answers again; reading through the REST API")
        self._outage_until = -float("inf")
        return False

    async def _read_op(self, operation: Callable[[Source], Awaitable[T]]) -> T:
        """Run a read on the live source; on an outage, answer from the folder if we have it,
        and keep answering from it until Obsidian is back."""
        if self._disk is None or not self._rest_beside_disk:
            return await operation(self._live)
        if await self._obsidian_is_down():
            return await operation(self._disk)
        try:
            return await operation(self._live)
        except _OUTAGES:
            logger.warning(
                "Obsidian is not answering; reading from the vault folder for the next %.0f s",
                self._outage_seconds,
            )
            self._outage_until = time.monotonic() + self._outage_seconds
            return await operation(self._disk)

    async def _check_on_disk(self, path: str) -> None:
        """Obsidian follows links out of the vault and opens what it lists; with the folder
        known, REST reads are held to the folder's rules first."""
        if self._disk is not None and self._rest_beside_disk:
            await anyio.to_thread.run_sync(self._disk.check_readable, path)

    async def _refused_on_disk(self) -> set[str]:
        if self._disk is None or not self._rest_beside_disk:
            return set()
        return await anyio.to_thread.run_sync(self._disk.refused_paths)

    async def _write_op(self, operation: Callable[[Source], Awaitable[None]]) -> None:
        try:
            await operation(self._live)
        except ObsidianUnreachable:
            if self._disk is None or self._live is self._disk:
                raise
            # The request never reached Obsidian, so writing the file directly cannot
            # double it; Obsidian picks the change up from disk when it runs again.
            logger.warning("Obsidian is not reachable; writing to the vault folder instead")
            await operation(self._disk)
        finally:
            # Counted once the write is done (or failed half-way): a listing after this
            # sees it.
            self.writes += 1

    # -- reads -----------------------------------------------------------------------------

    async def list_tree(self) -> list[str]:
        if self._disk is not None:
            # The folder sees empty folders, which the REST API never lists.
            return await self._disk.list_tree()
        return await self._live.list_tree()

    async def note_stats(self) -> dict[str, FileStat]:
        # Reads are checked one by one; this keeps refused paths out of listings and
        # suggestions too (one scan of the folder: about 56 ms at 10,000 notes, measured
        # with FolderSource.refused_paths on the bench machine).
        stats = await self._read_op(lambda source: source.note_stats())
        for path in self._generated:
            stats.pop(path, None)
        links = await self._refused_on_disk()
        if not links:
            return stats
        return {path: st for path, st in stats.items() if not _under_any(path, links)}

    async def _read_checked(self, path: str) -> NoteData:
        await self._check_on_disk(path)
        return await self._read_op(lambda source: source.read_note(path))

    async def read_note(self, raw_path: str) -> NoteData:
        path = normalize_vault_path(raw_path)
        try:
            return await self._read_checked(path)
        except NoteNotFound as missing:
            if not is_markdown(path):
                # Agents often leave off ".md"; Obsidian links do too.
                try:
                    return await self._read_checked(path + ".md")
                except NoteNotFound:
                    pass
            raise NoteNotFound(path, await self.closest_paths(path)) from missing

    async def read_bytes(self, raw_path: str) -> FileBytes:
        """Any file's bytes as stored (an attachment), checked as a note's read is."""
        path = normalize_vault_path(raw_path)
        await self._check_on_disk(path)
        return await self._read_op(lambda source: source.read_bytes(path))

    async def search_text(self, query: str, context_length: int = 100) -> list[TextSearchHit]:
        hits = await self._read_op(lambda source: source.search_text(query, context_length))
        hits = [hit for hit in hits if hit.path not in self._generated]
        if self._disk is None or not self._rest_beside_disk:
            return hits
        # A few hits: checking each on disk is cheaper than scanning the vault for links.
        admitted = await anyio.to_thread.run_sync(self._disk.admits, [hit.path for hit in hits])
        return [hit for hit, ok in zip(hits, admitted, strict=True) if ok]

    async def closest_paths(self, path: str, count: int = 3) -> list[str]:
        try:
            paths = list(await self.note_stats())
        except VaultError:
            return []
        by_name: dict[str, list[str]] = {}
        for candidate in paths:
            by_name.setdefault(note_name(candidate).lower(), []).append(candidate)
        names = difflib.get_close_matches(note_name(path).lower(), list(by_name), count, 0.5)
        close = [p for name in names for p in by_name[name]]
        close += difflib.get_close_matches(path, paths, count, 0.6)
        return list(dict.fromkeys(close))[:count]

    # -- writes (always to the live source, so Obsidian sees them) -----------------------

    async def write(self, raw_path: str, content: str) -> str:
        path = normalize_vault_path(raw_path)
        await self._write_op(lambda source: source.write(path, content))
        return path

    async def append(self, raw_path: str, content: str) -> str:
        path = normalize_vault_path(raw_path)
        await self._write_op(lambda source: source.append(path, content))
        return path

    # -- edits: read and written where the write can be checked ----------------------------

    @property
    def _editing(self) -> Source:
        """Where edits read and write: the folder when it is known, because only there can
        a write be checked against a concurrent one (`sources/swap.py`); else Obsidian."""
        return self._disk if self._disk is not None else self._live

    @property
    def writes_checked(self) -> bool:
        """Whether an edit's write is checked against a concurrent one (on disk)."""
        return self._disk is not None

    async def read_for_edit(self, raw_path: str) -> NoteData:
        """A note about to be edited, its text exact; `.md` may be left off."""
        path = normalize_vault_path(raw_path)
        candidates = [path] if is_markdown(path) else [path + ".md", path]
        for candidate in candidates:
            await self._check_on_disk(candidate)
            try:
                return await self._editing.read_exact(candidate)
            except NoteNotFound:
                continue
        raise NoteNotFound(path, await self.closest_paths(path))

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        """Write the whole note only if it still holds `expected` (None: only if there is
        none); NoteChanged otherwise."""
        try:
            await self._editing.replace_if(path, expected, content)
        finally:
            self.writes += 1

    async def remove_if(self, path: str, expected: str) -> None:
        try:
            await self._editing.remove_if(path, expected)
        finally:
            self.writes += 1

    async def open_in_obsidian(self, path: str) -> bool | None:
        """Whether `path` is the note open in Obsidian; None when that cannot be known
        (no REST API, or Obsidian not answering)."""
        rest = self.rest
        if rest is None or await self._obsidian_is_down():
            return None
        try:
            return await rest.active_note() == path
        except VaultError:
            return None

    async def append_entry(self, raw_path: str, content: str) -> str:
        """Append an entry to a note that several writers append to at once (the scratch
        note). The plugin's POST reads the whole note and writes it back, so two at once
        keep one (`appendFileContent`): with the folder known the entry is appended on disk
        instead (one write under a lock; Obsidian reloads the note). Through REST alone
        nothing can make it atomic: the note is read back a moment later and the entry sent
        again while it is missing, which shrinks the loss but cannot remove it."""
        path = normalize_vault_path(raw_path)
        async with self._entries:
            if self._disk is not None:
                try:
                    await self._disk.append(path, content)
                finally:
                    self.writes += 1
                return path
            for _ in range(_ENTRY_ATTEMPTS):
                await self.append(path, content)
                await anyio.sleep(_ENTRY_SETTLE_SECONDS)
                if content.strip() in (await self.read_note(path)).content:
                    return path
                logger.warning(
                    "an entry appended to %s was overwritten by another writer; sending it again",
                    path,
                )
        raise VaultError(
            f"The entry appended to {path} was overwritten by another writer "
            f"{_ENTRY_ATTEMPTS} times. Try again; set OBSIDIAN_VAULT_PATH so that appends "
            "go to the vault folder, where they cannot be lost."
        )
