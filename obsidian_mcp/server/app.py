"""The server's long-lived state: settings, and per configured vault its HTTP client and
what serves it (the vault itself, the memory store, the retriever and its caches, the
editor and its undo journal), built once per server run. Vaults share nothing but the
process (and the embedding model it loaded once)."""

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx

from obsidian_mcp.config import Settings
from obsidian_mcp.editing.service import Editor
from obsidian_mcp.errors import ConfigurationInvalid, VaultError
from obsidian_mcp.index.embedder import Embedder
from obsidian_mcp.limits import excerpt
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.opening import model_loader, open_editor, open_memory, open_retriever, open_vault
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.identity import compare_sources
from obsidian_mcp.sources.rest import build_http_client
from obsidian_mcp.vault import NoVaultConfigured, Vault
from obsidian_mcp.vault_set import NamedVault, VaultSet, configured_vaults, name_key

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
            f"{default} (a search then covers every vault)."
        )


# How long a check waits to tell whether a REST vault is a folder vault served twice.
_TWIN_CHECK_SECONDS = 5.0


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
    # How its fixes name its settings (`NamedVault.in_its_terms`).
    named: NamedVault | None = None
    # The folder vaults (name, folder) this REST vault is still to be compared with, to
    # tell whether it is one of them served again: it did not answer when the server
    # started, so it is compared when a call first finds it answering (`check_twins`).
    twins_unchecked: list[tuple[str, FolderSource]] = field(
        default_factory=list[tuple[str, FolderSource]]
    )
    _twin_lock: anyio.Lock = field(default_factory=anyio.Lock, init=False, repr=False)

    def in_its_terms(self, text: str) -> str:
        return self.named.in_its_terms(text) if self.named is not None else text

    async def check_twins(self) -> str | None:
        """Why this REST vault is not served: it answers as a folder vault of this server
        does (the API carries no vault identity; the listing and a sample of notes tell).
        Then every call on it says so. None while it is not one, or does not answer yet."""
        if not self.twins_unchecked:
            return self.configuration_error  # the hot path: nothing left to compare
        async with self._twin_lock:
            rest = self.services.vault.rest if self.services is not None else None
            while self.twins_unchecked and rest is not None:
                other, disk = self.twins_unchecked[0]
                try:
                    with anyio.fail_after(_TWIN_CHECK_SECONDS):
                        check = await compare_sources(rest, disk)
                except (VaultError, TimeoutError):
                    return None  # Obsidian not answering: nothing to tell yet
                self.twins_unchecked.pop(0)
                if check.verdict == "same":
                    why = (
                        f"it serves the same vault as {other} (its Local REST API at "
                        f"{rest.url} and {other}'s folder {disk.root}: {check.evidence}); keep "
                        "one of them, or both the folder and the API key in one vault's table."
                    )
                    logger.error("vault %s is not served: %s", self.name, why)
                    self.twins_unchecked.clear()
                    self.configuration_error = self.unavailable_reason = why
            return self.configuration_error

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
        wanted = name_key(name if name is not None else self.default)
        found = next((v for v in self.vaults if name_key(v.name) == wanted), None)
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
    if named.problem is not None:
        logger.error("vault %s is not served: %s", named.name, named.problem)
        return ServedVault(named.name, settings, None, named.problem, named.problem, named)
    try:
        http = await clients.enter_async_context(build_http_client(settings, transport=transport))
    except VaultError as exc:
        logger.error("%s", exc)
        return ServedVault(named.name, settings, None, str(exc), str(exc), named)
    vault, note = await open_vault(settings, http)
    if vault is None:
        return ServedVault(named.name, settings, None, note, named=named)
    services = VaultServices(
        vault=vault,
        memory=open_memory(settings, vault, model),
        retriever=open_retriever(vault, settings, model),
        editor=open_editor(settings, vault),
    )
    return ServedVault(named.name, settings, services, note, named=named)


async def _refuse_twins(served: dict[str, ServedVault]) -> None:
    """One vault configured twice, through its folder and through its Local REST API: the
    REST one is not served, so one vault's notes, memories and edits never answer under two
    names. A REST vault that does not answer yet is compared when it first does."""
    folders = [
        (name, disk)
        for name, vault in served.items()
        if vault.services is not None and (disk := vault.services.vault.disk) is not None
    ]
    for name, vault in list(served.items()):
        if vault.services is None or vault.services.vault.rest is None:
            continue
        own = vault.services.vault.disk
        vault.twins_unchecked = [(other, disk) for other, disk in folders if disk is not own]
        if await vault.check_twins() is not None:
            await _close(vault.services)
            served[name] = ServedVault(
                name,
                vault.settings,
                None,
                vault.unavailable_reason,
                vault.configuration_error,
                vault.named,
            )


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
        await _refuse_twins(served)
        state = AppState(settings, [served[name] for name in configured.names], configured.default)
        running = [v.services for v in state.vaults if v.services is not None]
        try:
            async with anyio.create_task_group() as background:
                for services in running:
                    background.start_soon(services.retriever.warm_up)
                    background.start_soon(services.retriever.keep_current)
                    if settings.memory_meaning:
                        background.start_soon(services.memory.keep_meaning_current)
                    background.start_soon(services.memory.keep_view_current)
                yield state
                background.cancel_scope.cancel()
        finally:
            for services in running:
                await _close(services)
