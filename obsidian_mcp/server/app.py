"""The server's long-lived state: settings, and per configured vault its HTTP client and
what serves it (the vault itself, the memory store, the retriever and its caches, the
editor and its undo journal), built once per server run. Vaults share nothing but the
process (and the embedding model it loaded once)."""

import logging
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx

from obsidian_mcp.config import Settings
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.errors import ConfigurationInvalid, VaultError
from obsidian_mcp.index.embedder import (
    Embedder,
    ModelUnavailable,
    OnnxEmbedder,
    configured_model_files,
)
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.index.vectors import EmbedderSlot, EmbeddingBuilder
from obsidian_mcp.limits import excerpt
from obsidian_mcp.memory.cache import memory_cache_path
from obsidian_mcp.memory.files import MemoryFiles
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.sources.base import Source
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.identity import journal_file, lock_names, recovery_log
from obsidian_mcp.sources.locking import VaultLock, lock_file
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.vault import NoVaultConfigured, Vault
from obsidian_mcp.vault_set import NamedVault, VaultSet, configured_vaults

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VaultServices:
    vault: Vault
    memory: MemoryStore
    retriever: Retriever
    editor: Editor


class UnknownVault(VaultError):
    def __init__(self, name: str, vaults: "list[ServedVault]", default: str) -> None:
        names = ", ".join(v.name + (" (the default)" if v.name == default else "") for v in vaults)
        super().__init__(
            f"There is no vault {excerpt(name)}; the vaults are {names}. Leave vault out for "
            f"{default}."
        )


@dataclass
class ServedVault:
    """One configured vault at run time: its settings, and what serves it or why nothing
    does."""

    name: str
    settings: Settings
    services: VaultServices | None
    # Why no source could be opened; what every tool on this vault says until it is fixed.
    unavailable_reason: str
    # Settings that cannot work (a bad value, an unusable certificate): the server runs
    # anyway, so the client sees this message instead of "Connection closed".
    configuration_error: str | None = None

    def require(self) -> VaultServices:
        if self.configuration_error is not None:
            raise ConfigurationInvalid(self.configuration_error)
        if self.services is None:
            raise NoVaultConfigured(self.unavailable_reason)
        return self.services


@dataclass
class AppState:
    settings: Settings
    vaults: list[ServedVault]
    default: str

    @property
    def several(self) -> bool:
        return len(self.vaults) > 1

    def served(self, name: str | None = None) -> ServedVault:
        """The vault of this name (in any case), the default for None; UnknownVault."""
        wanted = (name if name is not None else self.default).strip().casefold()
        found = next((v for v in self.vaults if v.name.casefold() == wanted), None)
        if found is None:
            raise UnknownVault(name or "", self.vaults, self.default)
        return found

    def require(self, name: str | None = None) -> VaultServices:
        return self.served(name).require()

    @property
    def services(self) -> VaultServices | None:
        """The default vault's services."""
        return self.served().services

    @property
    def unavailable_reason(self) -> str:
        return self.served().unavailable_reason


class StateRef:
    """The running server's state, for handlers the SDK gives no Context (static resources)."""

    def __init__(self) -> None:
        self._state: AppState | None = None

    def set(self, state: AppState | None) -> None:
        self._state = state

    def get(self) -> AppState:
        if self._state is None:
            raise RuntimeError("the server is not running")
        return self._state


async def open_vault(settings: Settings, http: httpx.AsyncClient) -> tuple[Vault | None, str]:
    """Choose the sources; the note says why a configured source is not in use."""
    disk = (
        FolderSource(settings.vault_path, recovery=recovery_log(settings))
        if settings.vault_path is not None
        else None
    )
    if disk is not None and not disk.root.is_dir():
        return None, (
            f"the vault folder {settings.vault_path} does not exist or is not a folder; point "
            "--vault or OBSIDIAN_VAULT_PATH at the vault's root folder."
        )
    live: Source | None = None
    note = ""
    if settings.api_key is not None:
        rest = RestSource(http, settings)
        live = rest
        try:
            info = await rest.server_info()
            if not info.authenticated:
                note = "Obsidian rejected the API key; check OBSIDIAN_API_KEY."
        except VaultError as exc:
            # Keep REST as the live source: Obsidian may simply not be open yet, and the
            # folder (if any) answers meanwhile.
            note = f"Obsidian did not answer at start-up: {exc}"
            logger.warning("%s", note)
    if live is None and disk is None:
        return None, "neither OBSIDIAN_API_KEY nor OBSIDIAN_VAULT_PATH is set."
    # The memory page is for the user; searching it would answer from the memories twice.
    generated = frozenset({MemoryFiles(settings.memory_path).view})
    lock = VaultLock([lock_file(settings.config_dir / "locks", n) for n in lock_names(settings)])
    vault = Vault(live, disk, selection_note=note, generated=generated, lock=lock)
    # Edits a stopped server left half written, and a folder and an API key that show two
    # different vaults, are found now (both log what they find; doctor reports them).
    await vault.recover_interrupted_writes()
    await vault.check_identity()
    return vault, note


# Loaded models by (file, threads): queries, the background index build and memory
# recall share one (a second ONNX session costs ~200 MB of resident memory), and so do
# servers started in one process (tests, benchmarks).
_MODELS: dict[tuple[Path, int], Embedder] = {}
_MODELS_LOCK = threading.Lock()


def model_loader(settings: Settings) -> Callable[[], Embedder] | None:
    """A loader of the configured embedding model, shared per process; None (and a log
    line saying why) when the settings name a model that is not there."""
    try:
        files = configured_model_files(settings)
    except ModelUnavailable as exc:
        logger.warning("no embedding model, ranking by words only: %s", exc)
        return None

    def load() -> Embedder:
        with _MODELS_LOCK:
            key = (files.onnx, settings.model_threads)
            if key not in _MODELS:
                _MODELS[key] = OnnxEmbedder(files, threads=settings.model_threads)
            return _MODELS[key]

    return load


def open_memory(
    settings: Settings, vault: Vault, model: Callable[[], Embedder] | None
) -> MemoryStore:
    """The memory store, its index cached per vault and memory file outside the vault."""
    identity = str(settings.vault_path.resolve()) if settings.vault_path else settings.base_url
    return MemoryStore(
        vault,
        settings.memory_path,
        cache=memory_cache_path(settings.cache_dir, identity, settings.memory_path),
        embedder=model if settings.memory_meaning else None,
        config_dir=settings.config_dir,
        device=settings.memory_device,
    )


def open_editor(settings: Settings, vault: Vault) -> Editor:
    """The editor, its undo journal kept per vault (not per address) in the cache folder."""
    journal = EditJournal(journal_file(settings))
    vault.note_writes_with(journal.wrote)
    return Editor(vault, journal, protected=MemoryFiles(settings.memory_path).owns)


def open_retriever(
    vault: Vault, settings: Settings, model: Callable[[], Embedder] | None
) -> Retriever:
    """The retriever over the vault's persistent index; the model starts loading in the
    background now, so the first query finds it ready."""
    store = IndexStore(index_path(settings))
    if not settings.index_embeddings or model is None:
        return Retriever(vault, settings, store, None, None)
    slot = EmbedderSlot(model)
    slot.preload()
    return Retriever(vault, settings, store, slot, EmbeddingBuilder(store, slot))


# At exit, the memory page still owed after a change is written within this bound (a
# 100,000-memory page takes about a second).
_VIEW_FLUSH_SECONDS = 5.0


async def _serve_vault(
    named: NamedVault,
    model: Callable[[], Embedder] | None,
    transport: httpx.AsyncBaseTransport | None,
    clients: AsyncExitStack,
) -> ServedVault:
    """Open one vault: its REST client (kept open by `clients`), its sources and services."""
    settings = named.settings
    try:
        http = await clients.enter_async_context(build_http_client(settings, transport=transport))
    except VaultError as exc:
        logger.error("%s", exc)
        return ServedVault(named.name, settings, None, str(exc), str(exc))
    vault, note = await open_vault(settings, http)
    if vault is None:
        return ServedVault(named.name, settings, None, note)
    services = VaultServices(
        vault=vault,
        memory=open_memory(settings, vault, model),
        retriever=open_retriever(vault, settings, model),
        editor=open_editor(settings, vault),
    )
    return ServedVault(named.name, settings, services, note)


async def _close(services: VaultServices) -> None:
    with anyio.move_on_after(_VIEW_FLUSH_SECONDS, shield=True):
        await services.memory.flush_view()
    services.retriever.close()
    services.memory.close()
    services.editor.close()


@asynccontextmanager
async def app_lifespan(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
    configuration_error: str | None = None,
    vaults: VaultSet | None = None,
) -> AsyncGenerator[AppState, None]:
    if configuration_error is not None:
        names = vaults.names if vaults is not None else ["vault"]
        broken = [
            ServedVault(name, settings, None, configuration_error, configuration_error)
            for name in names
        ]
        yield AppState(settings, broken, vaults.default if vaults is not None else names[0])
        return
    configured = vaults if vaults is not None else configured_vaults(settings)
    model = model_loader(settings)
    async with AsyncExitStack() as clients:
        served: dict[str, ServedVault] = {}

        async def serve(named: NamedVault) -> None:
            served[named.name] = await _serve_vault(named, model, transport, clients)

        # Side by side: a vault whose Obsidian does not answer costs its timeout once.
        async with anyio.create_task_group() as opening:
            for named in configured.vaults:
                opening.start_soon(serve, named)
        state = AppState(settings, [served[name] for name in configured.names], configured.default)
        running = [v.services for v in state.vaults if v.services is not None]
        try:
            async with anyio.create_task_group() as background:
                for services in running:
                    background.start_soon(services.retriever.warm_up)
                    if settings.memory_meaning:
                        background.start_soon(services.memory.keep_meaning_current)
                    background.start_soon(services.memory.keep_view_current)
                yield state
                background.cancel_scope.cancel()
        finally:
            for services in running:
                await _close(services)
