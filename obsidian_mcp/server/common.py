"""What every tool module shares: state access, error translation, annotations, formats."""

import json
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BeforeValidator, Field

from obsidian_mcp.errors import FileSystemFailure, VaultError
from obsidian_mcp.server.app import AppState

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


def _one_as_list(value: object) -> object:
    return [value] if isinstance(value, str) else value


# On a list parameter, after its Field (else pydantic lists the bound as maxLength): one
# text given alone is the list of it (`tags="debt"` is `tags=["debt"]`, what the model
# meant); the schema still says list.
OneOrMore = BeforeValidator(_one_as_list)


def app_state(ctx: Context[AppState]) -> AppState:
    return ctx.request_context.lifespan_context


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
        # The filesystem refused (a file where a folder should be, a read-only or full
        # disk): said with its cause and fix, wherever in the vault folder it happened.
        where = str(exc.filename) if exc.filename else "a file"
        raise ToolError(str(FileSystemFailure(where, "use", exc))) from exc


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
