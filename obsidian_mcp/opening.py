"""How a vault's parts are opened from its settings: the sources, the embedding model
(loaded once per process), the memory store, the editor and the retriever. The server
opens them for its run (server/app.py); the command line opens them for one command
without importing the MCP SDK, which alone takes over a second to import."""

import logging
import threading
from collections.abc import Callable

import httpx

from obsidian_mcp.config import Settings
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.errors import VaultError
from obsidian_mcp.index.embedder import (
    Embedder,
    ModelFiles,
    ModelUnavailable,
    OnnxEmbedder,
    configured_model_files,
    optimized_model_cache,
)
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.index.vectors import EmbedderSlot, EmbeddingBuilder
from obsidian_mcp.memory.cache import memory_cache_path
from obsidian_mcp.memory.files import MemoryFiles
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.sources.base import Source
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.identity import journal_file, lock_names, recovery_log
from obsidian_mcp.sources.locking import VaultLock, lock_file
from obsidian_mcp.sources.rest import RestSource
from obsidian_mcp.vault import Vault

logger = logging.getLogger(__name__)


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
_MODELS: dict[tuple[ModelFiles, int], Embedder] = {}
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
            key = (files, settings.model_threads)
            if key not in _MODELS:
                _MODELS[key] = OnnxEmbedder(
                    files,
                    threads=settings.model_threads,
                    optimized_cache=optimized_model_cache(settings),
                )
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
