"""The server's long-lived state: settings, the HTTP client, and what serves the vault (the
vault itself, the memory store, the retriever and its caches), built once per server run."""

import functools
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import VaultError
from obsidian_mcp.index.embedder import Embedder, OnnxEmbedder, default_model_files
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.index.vectors import EmbedderSlot, EmbeddingBuilder
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.sources.base import Source
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.vault import NoVaultConfigured, Vault

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VaultServices:
    vault: Vault
    memory: MemoryStore
    retriever: Retriever


@dataclass
class AppState:
    settings: Settings
    services: VaultServices | None
    # Why no vault could be opened; what every tool says until the configuration is fixed.
    unavailable_reason: str

    def require(self) -> VaultServices:
        if self.services is None:
            raise NoVaultConfigured(self.unavailable_reason)
        return self.services


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
    disk = FolderSource(settings.vault_path) if settings.vault_path is not None else None
    if disk is not None and not disk.root.is_dir():
        return None, f"OBSIDIAN_VAULT_PATH={settings.vault_path} is not a folder."
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
    return Vault(live, disk, selection_note=note), note


@functools.cache
def load_embedder() -> Embedder:
    """The embedding model, once per process: queries and the background build share it
    (a second ONNX session costs ~200 MB of resident memory; a query waits at most for
    the build's batch in hand), and so do servers started in one process (tests,
    benchmarks)."""
    return OnnxEmbedder(default_model_files())


def open_retriever(vault: Vault, settings: Settings) -> Retriever:
    """The retriever over the vault's persistent index; the model starts loading in the
    background now, so the first query finds it ready."""
    store = IndexStore(index_path(settings))
    if not settings.index_embeddings:
        return Retriever(vault, settings, store, None, None)
    model = EmbedderSlot(load_embedder)
    model.preload()
    return Retriever(vault, settings, store, model, EmbeddingBuilder(store, model))


@asynccontextmanager
async def app_lifespan(
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncGenerator[AppState, None]:
    async with build_http_client(settings, transport=transport) as http:
        vault, note = await open_vault(settings, http)
        services = (
            VaultServices(
                vault=vault,
                memory=MemoryStore(vault, settings.memory_path),
                retriever=open_retriever(vault, settings),
            )
            if vault is not None
            else None
        )
        try:
            yield AppState(settings=settings, services=services, unavailable_reason=note)
        finally:
            if services is not None:
                services.retriever.close()
