"""The tool boundary: what the model reads when a call fails outside a tool's own handling.

The SDK reports an argument that fails validation with pydantic's full dump (class names,
a documentation URL) and a crash with a bare "Error executing tool X". Both are turned
here, in one place for every tool, into one sentence that says what to change or try.
"""

import inspect
import logging
from collections.abc import Callable
from typing import Any, cast

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, Icon, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from obsidian_mcp.limits import lone_surrogate_at
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.stdio import SurrogateTolerantReader, stdio_server
from obsidian_mcp.validation import Schema, describe_invalid_arguments

logger = logging.getLogger(__name__)

def _lone_surrogate(arguments: dict[str, Any]) -> str | None:
    """The first argument holding a lone surrogate, named as the model wrote it."""

    def find(value: object, where: str) -> str | None:
        if isinstance(value, str):
            return where if lone_surrogate_at(value) is not None else None
        if isinstance(value, list):
            items = cast(list[object], value)
            return next(
                (hit for i, v in enumerate(items) if (hit := find(v, f"{where}[{i}]"))), None
            )
        if isinstance(value, dict):
            entries = cast(dict[str, object], value)
            return next(
                (hit for k, v in entries.items() if (hit := find(v, f"{where}.{k}"))), None
            )
        return None

    return next((hit for key, value in arguments.items() if (hit := find(value, key))), None)


def crash_message(tool: str, cause: BaseException | None) -> str:
    kind = type(cause).__name__ if cause is not None else "unknown"
    return (
        f"{tool} failed on an internal error ({kind}); this is a fault in the obsidian-mcp "
        "server, not in your arguments. Try the call once more; if it fails again, get the "
        "answer another way (vault_semantic_query, vault_read_note) and tell the user to "
        "check the server's log."
    )


class VaultServer(MCPServer[AppState]):
    """MCPServer whose failed calls always end with a sentence the model can act on, and
    whose tool descriptions are dedented docstrings (the SDK sends `fn.__doc__` as it is,
    indentation included: tokens every client pays for in every session)."""

    def add_tool(  # the SDK's signature, with one default changed
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        super().add_tool(
            fn,
            name=name,
            title=title,
            description=description or inspect.cleandoc(fn.__doc__ or ""),
            annotations=annotations,
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )

    async def run_stdio_async(self) -> None:
        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                SurrogateTolerantReader(read_stream),
                write_stream,
                self._lowlevel_server.create_initialization_options(),
            )

    _schemas: dict[str, Schema] | None = None

    async def _tool_schema(self, name: str) -> Schema:
        if self._schemas is None:
            self._schemas = {tool.name: tool.input_schema for tool in await self.list_tools()}
        return self._schemas.get(name, {})

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        surrogate_in = _lone_surrogate(arguments)
        if surrogate_in is not None:
            raise ToolError(
                f"{surrogate_in} contains half of a UTF-16 surrogate pair (a lone \\ud800-"
                "\\udfff), which is not text; remove it, or send the whole character it was "
                "part of."
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            logger.error("%s crashed", name, exc_info=exc.__cause__)
            raise ToolError(crash_message(name, exc.__cause__)) from exc
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                schema = await self._tool_schema(name)
                raise ToolError(describe_invalid_arguments(exc.__cause__, schema)) from exc
            raise
