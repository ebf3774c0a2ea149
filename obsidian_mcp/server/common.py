"""What every tool module shares: state access, error translation, annotations, formats."""

import json
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, is_dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BeforeValidator, Field

from obsidian_mcp.errors import (
    FileSystemFailure,
    InvalidArgument,
    IsAFolder,
    NoteNotFound,
    VaultError,
)
from obsidian_mcp.limits import excerpt
from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.qualified import (
    qualified,
    qualify,
    split_qualified,
    with_edit_ids_qualified,
)
from obsidian_mcp.reading import notes_named
from obsidian_mcp.server.app import AppState, ServedVault, VaultServices
from obsidian_mcp.usage.facts import vaults_used
from obsidian_mcp.vault_set import MAX_NAME_CHARS

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Appends to the tool's own file (scratch note, memory file); never touches the user's notes.
APPEND_ONLY = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)

# The enum says it all: the same answer as markdown (default) or as JSON.
OutputFormat = Literal["markdown", "json"]
# Its meaning and default are in the server's instructions, once for the four tools.
MaxTokens = Annotated[int | None, Field(ge=100, le=20_000)]


# Every tool's `vault` argument. `VaultServer` lists it only when several vaults are
# configured, and the server's instructions say once what it takes.
VaultName = Annotated[str | None, Field(max_length=MAX_NAME_CHARS)]

T = TypeVar("T")
R = TypeVar("R")

# The memory tools' calls that memory replies suggest (`memory.render`).
_MEMORY_CALL = re.compile(r"\bvault_(?:recall|forget|remember)\(")


def _one_as_list(value: object) -> object:
    return [value] if isinstance(value, str) else value


# On a list parameter, after its Field (else pydantic lists the bound as maxLength): one
# text given alone is the list of it (`tags="debt"` is `tags=["debt"]`, what the model
# meant); the schema still says list.
OneOrMore = BeforeValidator(_one_as_list)


def app_state(ctx: Context[AppState]) -> AppState:
    return ctx.request_context.lifespan_context


@dataclass(frozen=True, slots=True)
class VaultCall:
    """The vault one tool call works on: its services, the path the call gave with the
    vault's name taken off, and how the reply shows paths (qualified by the vault's name
    when several vaults are served, so that each reads back as shown)."""

    name: str
    services: VaultServices
    several: bool
    path: str = ""
    default: bool = True
    served: ServedVault | None = None

    def in_its_terms(self, text: str) -> str:
        """`text` naming the vault's own settings (`NamedVault.in_its_terms`)."""
        return self.served.in_its_terms(text) if self.served is not None else text

    def shown(self, result: T) -> T:
        return qualified(result, self.name) if self.several else result

    def shown_path(self, path: str) -> str:
        return qualify(self.name, path) if self.several else path

    def memory_calls(self, text: str) -> str:
        """A memory reply whose suggested memory calls name this vault when it is not the
        default one: its memories are found only there."""
        if not self.several or self.default:
            return text
        return _MEMORY_CALL.sub(lambda call: f"{call[0]}vault={self.name!r}, ", text)


def _vault_named(state: AppState, vault: str | None, path: str) -> tuple[ServedVault | None, str]:
    """The vault a call names, by `vault` or by its path's prefix (None: it names none),
    and the path without the prefix."""
    if not state.several:
        return state.served(vault), path
    prefixed, rest = split_qualified(path, [v.name for v in state.vaults])
    named = state.served(vault) if vault is not None else None
    if prefixed is not None and named is not None and prefixed != named.name:
        raise InvalidArgument(
            f"the path {excerpt(path)} is in vault {prefixed}, but vault={vault!r}; leave one "
            "of them out."
        )
    return (state.served(prefixed) if prefixed is not None else named), rest


async def _refuse_an_unknown_vault(state: AppState, calls: Sequence[VaultCall], path: str) -> None:
    """A path or folder whose first name holds a colon names a vault, else nothing: text
    before the colon that names no vault is that path only where the vaults in scope hold
    it exactly (a note `10:30 standup.md`), and otherwise refused with the vault names, so
    a misspelt prefix never reads, searches or writes in another vault."""
    head, colon, _ = path.partition(":")
    if not colon or "/" in head:
        return
    wanted = path.strip("/")
    for call in calls:
        try:
            stats = await call.services.vault.note_stats()
        except VaultError:
            continue
        if (
            wanted in stats
            or wanted + ".md" in stats
            or any(name.startswith(wanted + "/") for name in stats)
        ):
            return
    names = ", ".join(v.name for v in state.vaults)
    raise InvalidArgument(
        f"{excerpt(path)} starts with {excerpt(head + ':')}, which names no vault (the vaults "
        f"are {names}), and no note or folder of that name exists. Write the vault's name "
        "before the colon, e.g. " + f"{state.vaults[0].name}:{path.partition(':')[2] or 'Note.md'}"
        ", or leave the prefix out."
    )


def _call(state: AppState, served: ServedVault, path: str) -> VaultCall:
    """The call on a served vault; why it cannot serve, naming it among several."""
    try:
        services = served.require()
    except VaultError as exc:
        if not state.several:
            raise
        raise VaultError(f"In vault {served.name}: {served.in_its_terms(str(exc))}") from exc
    return VaultCall(
        served.name, services, state.several, path, served.name == state.default, served
    )


def _in_vault(call: VaultCall, exc: VaultError) -> VaultError:
    """A failure as the agent reads it: with several vaults, a missing note's paths are
    qualified (the closest ones read back as shown) and any other failure names its vault."""
    if not call.several:
        return exc
    if isinstance(exc, NoteNotFound):
        return NoteNotFound(
            call.shown_path(exc.path), [call.shown_path(p) for p in exc.suggestions]
        )
    if isinstance(exc, IsAFolder):
        return IsAFolder(call.shown_path(exc.path))
    message = with_edit_ids_qualified(call.name, call.in_its_terms(str(exc)))
    return VaultError(f"In vault {call.name}: {message}")


@contextmanager
def _failures_in(call: VaultCall) -> Generator[None]:
    """Domain failures of work on `call`'s vault, as `_in_vault` words them."""
    try:
        yield
    except TimeoutError:
        raise
    except (VaultError, OSError) as exc:
        shown = _in_vault(call, domain_failure(exc))
        if shown is exc:
            raise
        raise shown from exc


async def _elsewhere(state: AppState, call: VaultCall) -> list[str]:
    """The call's note path in the other vaults, qualified: where a path given without its
    vault's name may have been meant."""
    try:
        wanted = normalize_vault_path(call.path)
    except VaultError:
        return []
    found: list[str] = []
    for other in state.vaults:
        if other.name == call.name or other.services is None:
            continue
        try:
            stats = await other.services.vault.note_stats()
        except VaultError:
            continue
        exact = [p for p in (wanted, wanted + ".md") if p in stats]
        # A bare note name ([[Rook]]) names the notes of that name there too.
        found += [qualify(other.name, p) for p in exact or notes_named(wanted, stats)]
    return found


@asynccontextmanager
async def vault_call(
    ctx: Context[AppState], vault: str | None, path: str = ""
) -> AsyncGenerator[VaultCall]:
    """The vault a tool works on: named by `vault`, by the prefix of `path` (a note or a
    folder), else the default one; domain failures become ToolErrors (`tool_errors`). A
    note missing from the default vault is looked for in the others too."""
    with tool_errors():
        state = app_state(ctx)
        served, bare = _vault_named(state, vault, path)
        await (served or state.served()).check_twins()
        call = _call(state, served or state.served(), bare)
        if call.several and bare == path:  # no vault's name before a colon
            await _refuse_an_unknown_vault(state, [call], bare)
        if call.several:
            vaults_used([call.name])
        try:
            with _failures_in(call):
                yield call
        except NoteNotFound as missing:
            elsewhere = await _elsewhere(state, call) if served is None and call.several else []
            if not elsewhere:
                raise
            raise NoteNotFound(missing.path, elsewhere) from missing


async def refuse_if_another_vault_holds(
    state: AppState,
    call: VaultCall,
    kind: str,
    holds: Callable[[VaultServices], Awaitable[bool]],
    retry: str,
) -> None:
    """An id shown without its vault (`call.path`) that the vault in scope lacks: when
    another vault `holds` it, the refusal names that vault and the call that works, `retry`
    with the qualified id in its `{}`. Nothing when no other vault has it."""
    if not call.several:
        return
    for other in state.vaults:
        if other.name == call.name or other.services is None:
            continue
        try:
            found = await holds(other.services)
        except VaultError:
            continue
        if found:
            raise InvalidArgument(
                f"No {kind} has the id {call.path!r} in vault {call.name}; vault {other.name} "
                f"has it: {retry.format(qualify(other.name, call.path.strip()))}."
            )


@dataclass(frozen=True, slots=True)
class Searched(Generic[R]):
    """What a search found in each vault it covered, and where it could not search."""

    found: list[tuple[VaultCall, R]]
    failures: list[str]

    @property
    def notes(self) -> str:
        """The vaults left out and why, as lines above the reply."""
        return "".join(f"(not searched: {failure})\n" for failure in self.failures)


async def search_every_vault(
    ctx: Context[AppState],
    vault: str | None,
    folder: str,
    search: Callable[[VaultCall], Awaitable[R]],
) -> Searched[R]:
    """`search` in the vault the call names (by `vault` or by the folder's prefix), else in
    every vault side by side; a vault that fails is left out and said, unless all fail."""
    with tool_errors():
        state = app_state(ctx)
        served, bare = _vault_named(state, vault, folder)
        if served is not None:
            await served.check_twins()
            call = _call(state, served, bare)
            if call.several:
                vaults_used([call.name])
            with _failures_in(call):
                return Searched([(call, await search(call))], [])
    found: dict[str, R] = {}
    failures: dict[str, VaultError] = {}
    calls: list[VaultCall] = []

    async def run(call: VaultCall) -> None:
        try:
            with _failures_in(call):
                found[call.name] = await search(call)
        except VaultError as exc:
            failures[call.name] = exc

    unchecked = [each for each in state.vaults if each.twins_unchecked]
    if unchecked:  # only a REST vault that did not answer at start has any
        async with anyio.create_task_group() as checks:
            for each in unchecked:
                checks.start_soon(each.check_twins)
    for each in state.vaults:
        try:
            calls.append(_call(state, each, bare))
        except VaultError as exc:
            failures[each.name] = exc
    if state.several and bare == folder:
        with tool_errors():
            await _refuse_an_unknown_vault(state, calls, bare)
    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(run, call)
    # The vaults that answered: one that failed searched nothing, so its figures in
    # `stats` (calls, misses) leave this call out.
    vaults_used(call.name for call in calls if call.name in found)
    if not found:
        with tool_errors():
            raise next(iter(failures.values()))
    return Searched(
        [(call, found[call.name]) for call in calls if call.name in found],
        [str(failures[v.name]) for v in state.vaults if v.name in failures],
    )


def results_of(searched: Sequence[tuple[VaultCall, T]]) -> list[T]:
    """Each vault's result with its paths shown as the reply shows them."""
    return [call.shown(result) for call, result in searched]


def domain_failure(exc: VaultError | OSError) -> VaultError:
    """A failure as a VaultError: the filesystem's refusal (a file where a folder should
    be, a read-only or full disk) said with its cause and fix, wherever in the vault folder
    it happened."""
    if isinstance(exc, VaultError):
        return exc
    where = str(exc.filename) if exc.filename else "a file"
    return FileSystemFailure(where, "use", exc)


@contextmanager
def tool_errors() -> Generator[None]:
    """Turn domain failures into ToolErrors, whose text the model reads unchanged."""
    try:
        yield
    except VaultError as exc:
        raise ToolError(str(exc)) from exc
    except TimeoutError:
        raise  # an OSError by inheritance only; a timeout is not the filesystem's refusal
    except OSError as exc:
        raise ToolError(str(domain_failure(exc))) from exc


@contextmanager
def resource_errors() -> Generator[None]:
    """The same translation for resources, whose anticipated failure is a ResourceError."""
    try:
        with tool_errors():
            yield
    except ToolError as exc:
        raise ResourceError(str(exc)) from exc


def to_json(data: Any) -> str:
    if is_dataclass(data) and not isinstance(data, type):
        data = asdict(data)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
