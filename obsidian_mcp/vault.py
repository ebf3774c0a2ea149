"""The vault as the rest of the program sees it: one live source, and the folder beside it.

Selection: with an API key, the REST API is the live source; with only a vault folder, the
folder is. With both, REST serves live data and the folder serves what only the disk has
(Smart Connections vectors, empty folders), and stands in when Obsidian stops answering:
for reads on any outage, for writes only when the request never reached Obsidian (a write
that may have landed is never repeated elsewhere). Every path is checked here first.
"""

import difflib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from obsidian_mcp.errors import (
    NoteNotFound,
    ObsidianConnectionLost,
    ObsidianTimeout,
    ObsidianUnreachable,
    VaultError,
)
from obsidian_mcp.paths import is_markdown, normalize_vault_path, note_name
from obsidian_mcp.sources.base import FileStat, NoteData, Source, TextSearchHit
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource

logger = logging.getLogger(__name__)

_OUTAGES = (ObsidianUnreachable, ObsidianTimeout, ObsidianConnectionLost)

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


class Vault:
    def __init__(
        self,
        live: Source | None,
        disk: FolderSource | None,
        *,
        selection_note: str = "",
    ) -> None:
        if live is None and disk is None:
            raise NoVaultConfigured(selection_note or "nothing is configured.")
        self._live: Source = live if live is not None else disk  # type: ignore[assignment]
        self._disk = disk
        self.selection_note = selection_note
        # Writes made through this vault; caches of the vault's notes re-list when it moves.
        self.writes = 0

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

    async def _read_op(self, operation: Callable[[Source], Awaitable[T]]) -> T:
        """Run a read on the live source; on an outage, answer from the folder if we have it."""
        try:
            return await operation(self._live)
        except _OUTAGES:
            if self._disk is None or self._live is self._disk:
                raise
            logger.warning("Obsidian is not answering; reading from the vault folder instead")
            return await operation(self._disk)

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
        return await self._read_op(lambda source: source.note_stats())

    async def read_note(self, raw_path: str) -> NoteData:
        path = normalize_vault_path(raw_path)
        try:
            return await self._read_op(lambda source: source.read_note(path))
        except NoteNotFound as missing:
            if not is_markdown(path):
                # Agents often leave off ".md"; Obsidian links do too.
                try:
                    return await self._read_op(lambda source: source.read_note(path + ".md"))
                except NoteNotFound:
                    pass
            raise NoteNotFound(path, await self.closest_paths(path)) from missing

    async def search_text(self, query: str, context_length: int = 100) -> list[TextSearchHit]:
        return await self._read_op(lambda source: source.search_text(query, context_length))

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
