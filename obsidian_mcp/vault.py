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
import unicodedata
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection, Sequence
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
from obsidian_mcp.sources.identity import IdentityCheck, compare_sources
from obsidian_mcp.sources.locking import VaultLock
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


# Whether Obsidian's API and the folder show one vault is asked again before an edit once
# the last answer is this old: the user may have opened another vault on the same port.
IDENTITY_SECONDS = 60.0


class OtherVault(VaultError):
    def __init__(self, folder: str, url: str, evidence: str) -> None:
        super().__init__(
            f"The vault folder {folder} and the vault Obsidian serves at {url} are not the "
            f"same vault ({evidence}), so reads show one and edits would write the other; "
            "nothing was written. Point OBSIDIAN_VAULT_PATH at the folder of the vault open in "
            "Obsidian, or OBSIDIAN_API_KEY at this folder's key (Obsidian > Settings > Local "
            "REST API), then restart the server; `obsidian-mcp doctor` checks it."
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
        lock: VaultLock | None = None,
    ) -> None:
        """`generated`: notes this server writes for the user to read (the memory view):
        never listed among the notes, so never indexed or searched. `lock`: the vault's
        lock shared with this machine's other server processes (`locking.py`); without
        it, edits are one at a time within this process only."""
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
        # One edit, undo or entry append at a time, across processes (see `locking.py`).
        self._lock = lock if lock is not None else VaultLock([])
        # Told of each text this server appends into a note (see `note_writes_with`).
        self._noted: Callable[[str, str], None] | None = None
        # Whether the folder and Obsidian's API show one vault, and when that was asked.
        self._identity: IdentityCheck | None = None
        self._identity_at = -float("inf")
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
        self._identity_at = -float("inf")  # it may have come back with another vault open
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
            # Agents often leave off ".md" (Obsidian links do too), and a name typed on one
            # system may be spelled in another Unicode form on disk (macOS writes NFD).
            async for spelled in self._spellings(path):
                if spelled == path:
                    continue
                try:
                    return await self._read_checked(spelled)
                except NoteNotFound:
                    continue
            raise NoteNotFound(path, await self.closest_paths(path)) from missing

    async def read_bytes(self, raw_path: str) -> FileBytes:
        """Any file's bytes as stored (an attachment), checked as a note's read is."""
        path = normalize_vault_path(raw_path)
        await self._check_on_disk(path)
        return await self._read_op(lambda source: source.read_bytes(path))

    async def search_text(
        self, query: str, context_length: int = 100, leaving_out: Collection[str] = ()
    ) -> list[TextSearchHit]:
        """Notes holding every word of `query`; `leaving_out`: see `Source.search_text`."""
        hits = await self._read_op(
            lambda source: source.search_text(query, context_length, leaving_out)
        )
        hits = [hit for hit in hits if hit.path not in self._generated]
        if self._disk is None or not self._rest_beside_disk:
            return hits
        # A few hits: checking each on disk is cheaper than scanning the vault for links.
        admitted = await anyio.to_thread.run_sync(self._disk.admits, [hit.path for hit in hits])
        return [hit for hit, ok in zip(hits, admitted, strict=True) if ok]

    async def search_each(
        self, words: Sequence[str], leaving_out: Collection[str] = (), fresh_within: float = 0.0
    ) -> AsyncGenerator[tuple[str, set[str]]]:
        """For each of `words` in turn, the notes whose text holds it (`search_text` of the
        word alone). A folder vault finds them all in one scan before the first, where a
        scan a word cost a question two scans at 50,000 notes (python -m
        bench.speed.first_day), and may search again a scan begun under `fresh_within`
        seconds ago (`FolderSource.search_each`); Obsidian is asked word by word as the
        caller takes them, so one that stops early asks no more."""
        disk = self._disk
        if disk is not None and self._live is disk:
            found = await disk.search_each(words, leaving_out, fresh_within)
            for word, paths in zip(words, found, strict=True):
                yield word, paths - self._generated
            return
        for word in words:
            hits = await self.search_text(word, context_length=len(word), leaving_out=leaving_out)
            yield word, {hit.path for hit in hits}

    async def texts_holding(
        self, query: str, leaving_out: Collection[str] = (), fresh_within: float = 0.0
    ) -> list[tuple[str, str]]:
        """The path and text of every note in the vault folder whose text holds every word
        of `query`, from one scan of the folder (`FolderSource.texts_holding`): a search
        of the notes a first build has not read yet. Needs the folder."""
        disk = self._disk
        if disk is None:
            raise VaultError(
                "The notes' texts can be scanned only in the vault folder; set OBSIDIAN_VAULT_PATH."
            )
        found = await disk.texts_holding(query, leaving_out, fresh_within)
        return [(path, content) for path, content in found if path not in self._generated]

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
        """A note about to be edited, its text exact; `.md` may be left off, and its name
        may be spelled in another Unicode form than on disk."""
        await self.refuse_if_other_vault()
        path = normalize_vault_path(raw_path)
        async for spelled in self._spellings(path):
            await self._check_on_disk(spelled)
            try:
                return await self._editing.read_exact(spelled)
            except NoteNotFound:
                continue
        raise NoteNotFound(path, await self.closest_paths(path))

    async def _spellings(self, path: str) -> AsyncIterator[str]:
        """The paths a note asked for as `path` may have, most likely first: as given (with
        `.md` added when it has none), then as spelled on disk in another Unicode form;
        the listing that finds the spelling is asked for only when the first ones fail."""
        candidates = [path] if is_markdown(path) else [path + ".md", path]
        for candidate in candidates:
            yield candidate
        for candidate in candidates:
            spelled = await self._spelled_on_disk(candidate)
            if spelled is not None and spelled != candidate:
                yield spelled

    async def _names_in(self, folder: str) -> list[str]:
        if self._disk is not None:
            return await anyio.to_thread.run_sync(self._disk.names_in, folder)
        rest = self.rest
        if rest is None:
            return []
        return [name.rstrip("/") for name in await rest.list_folder(folder)]

    async def _spelled_on_disk(self, path: str) -> str | None:
        """`path` as the vault spells it, where only the Unicode normal form of its names
        differs (é as one code point, or as e and a combining accent); None when no such
        file exists, or several do. Only paths with non-ASCII names can differ."""
        if path.isascii():
            return None
        return await self._alike_on_disk(path, lambda name: unicodedata.normalize("NFC", name))

    async def _alike_on_disk(self, path: str, key: Callable[[str], str]) -> str | None:
        """`path` as the vault spells it, each name matched as itself or else as the one
        name of its folder with the same `key`; None when a name has no such match."""
        spelled: list[str] = []
        for name in path.split("/"):
            names = await self._names_in("/".join(spelled))
            if name in names:
                spelled.append(name)
                continue
            alike = [n for n in names if key(n) == key(name)]
            if len(alike) != 1:
                return None
            spelled.append(alike[0])
        return "/".join(spelled)

    async def existing_spelling(self, path: str) -> str | None:
        """Another spelling of `path` that exists, if any: its names in another Unicode
        form or another case (`casing/plan.md` beside `casing/Plan.md`). A note created at
        `path` would look the same as it in Obsidian's file list, and macOS and Windows
        keep both in one file."""
        found = await self._alike_on_disk(
            path, lambda name: unicodedata.normalize("NFC", name).casefold()
        )
        return found if found is not None and found != path else None

    async def refuse_if_other_vault(self) -> None:
        """OtherVault when the folder and Obsidian's API show different vaults (asked again
        once the last answer is IDENTITY_SECONDS old)."""
        if time.monotonic() - self._identity_at >= IDENTITY_SECONDS:
            await self.check_identity()
        check = self._identity
        if check is not None and check.verdict == "different":
            rest, disk = self.rest, self._disk
            assert rest is not None and disk is not None
            raise OtherVault(str(disk.root), rest.url, check.evidence)

    async def check_identity(self) -> IdentityCheck | None:
        """Compare the vault Obsidian serves with the folder (when both are configured and
        Obsidian answers); None when there is nothing to compare."""
        rest, disk = self.rest, self._disk
        if rest is None or disk is None:
            return None
        # A short probe first: a hanging Obsidian would hold an edit for the whole retry
        # budget of every request of the comparison.
        if await self._obsidian_is_down() or not await rest.answers_within(PROBE_SECONDS):
            # Reads come from the folder meanwhile, so they and edits show one vault; asked
            # again when Obsidian answers (`_obsidian_is_down` forgets the last answer).
            self._identity = IdentityCheck("unknown", "Obsidian is not answering")
            self._identity_at = time.monotonic()
            return self._identity
        try:
            check = await compare_sources(rest, disk)
        except VaultError as exc:
            check = IdentityCheck("unknown", f"Obsidian did not answer: {exc}")
        if check.verdict == "different" and (self._identity is None or self._identity != check):
            logger.warning(
                "the vault folder %s and the vault Obsidian serves at %s differ (%s): edits "
                "are refused until they agree",
                disk.root,
                rest.url,
                check.evidence,
            )
        self._identity = check
        self._identity_at = time.monotonic()
        return check

    async def recover_interrupted_writes(self) -> list[str]:
        """Settle edits a stopped process left half written (`FolderSource.recover`)."""
        disk = self._disk
        if disk is None:
            return []

        def recover() -> list[str]:
            with self._lock.held_sync():
                return disk.recover()

        return await anyio.to_thread.run_sync(recover)

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        """Write the whole note only if it still holds `expected` (None: only if there is
        none); NoteChanged otherwise. Under the vault's lock: no other edit of this
        machine's server processes runs between the compare and the write."""
        await self.refuse_if_other_vault()
        async with self._lock.held():
            try:
                await self._editing.replace_if(path, expected, content)
            finally:
                self.writes += 1

    async def remove_if(self, path: str, expected: str) -> None:
        await self.refuse_if_other_vault()
        async with self._lock.held():
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

    def note_writes_with(self, noted: Callable[[str, str], None]) -> None:
        """Tell `noted(path, text)` the note's text after each entry this server appends:
        the editor's journal, so that an edit of the scratch note right after an entry
        (from any of this server's processes) does not take the entry for the user typing."""
        self._noted = noted

    async def _note_entry(self, path: str, text: str | None = None) -> None:
        if self._noted is None:
            return
        if text is None:
            try:
                text = (await self._editing.read_exact(path)).content
            except VaultError:
                return  # the entry is written; only the note of it is missing
        self._noted(path, text)

    async def _text_after_append(self, disk: FolderSource, path: str, content: str) -> str | None:
        """The note's text once `content` is appended on disk (`FolderSource.append` starts
        it on a line of its own); None when the note cannot be read."""
        if self._noted is None:
            return None
        try:
            before = (await disk.read_exact(path)).content
        except NoteNotFound:
            before = ""
        except VaultError:
            return None
        return before + ("\n" if before and not before.endswith("\n") else "") + content

    async def append_entry(self, raw_path: str, content: str) -> str:
        """Append an entry to a note that several writers append to at once (the scratch
        note). The plugin's POST reads the whole note and writes it back, so two at once
        keep one (`appendFileContent`): with the folder known the entry is appended on disk
        instead (one write under the vault's lock, which an edit of the note, in any of this
        machine's server processes, holds from its compare to its write; the edit rewrites
        the note in place, so the entry never lands in a file the note no longer is;
        Obsidian reloads the note). Through REST alone
        nothing can make it atomic: the note is read back a moment later and the entry sent
        again while it is missing, which shrinks the loss but cannot remove it."""
        path = normalize_vault_path(raw_path)
        async with self._lock.held():
            if self._disk is not None:
                # Noted before it is written, as an edit's text is: an edit of the note in
                # another process may read it the moment it lands, before the read below.
                expected = await self._text_after_append(self._disk, path, content)
                if expected is not None:
                    await self._note_entry(path, expected)
                try:
                    await self._disk.append(path, content)
                finally:
                    self.writes += 1
                await self._note_entry(path)
                return path
            for _ in range(_ENTRY_ATTEMPTS):
                await self.append(path, content)
                await anyio.sleep(_ENTRY_SETTLE_SECONDS)
                now = (await self.read_note(path)).content
                if content.strip() in now:
                    await self._note_entry(path, now)
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
