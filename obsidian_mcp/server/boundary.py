"""The tool boundary: what the model reads when a call fails outside a tool's own handling.

The SDK reports an argument that fails validation with pydantic's full dump (class names,
a documentation URL) and a crash with a bare "Error executing tool X". Both are turned
here, in one place for every tool, into one sentence that says what to change or try.
"""

import logging
from typing import Any, cast

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from obsidian_mcp.limits import excerpt, lone_surrogate_at
from obsidian_mcp.server.app import AppState

logger = logging.getLogger(__name__)

Schema = dict[str, Any]


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _expected(schema: Schema) -> str:
    """What a parameter's JSON schema accepts, in words."""
    options = cast(list[Schema], schema.get("anyOf", []))
    if options:
        concrete = [option for option in options if option.get("type") != "null"]
        if len(concrete) == 1:
            return _expected(concrete[0]) + " (or null)"
    if "enum" in schema:
        return "one of " + ", ".join(repr(value) for value in schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return f"a whole number between {_number(low)} and {_number(high)}"
        if low is not None:
            return f"a whole number of at least {_number(low)}"
        return "a whole number"
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        most = schema.get("maxLength")
        return f"text of at most {_number(most)} characters" if most is not None else "text"
    if kind == "array":
        most = schema.get("maxItems")
        items = _expected(cast(Schema, schema.get("items", {})))
        count = f"at most {_number(most)} items" if most is not None else "items"
        return f"a list of {count}, each {items}"
    return "a valid value"


def _parameter_schema(tool_schema: Schema, name: str) -> Schema:
    return cast(Schema, cast(Schema, tool_schema.get("properties", {})).get(name, {}))


def describe_error(error: ErrorDetails, tool_schema: Schema) -> str:
    """One pydantic error as one sentence: the argument, what it must be, what was given."""
    location = [str(part) for part in error["loc"]]
    name = location[0] if location else "an argument"
    schema = _parameter_schema(tool_schema, name)
    given = error.get("input")
    kind = error["type"]
    if kind == "missing":
        return f"{name} is required; add it ({_expected(schema)})."
    if len(location) > 1 and location[1].isdigit():
        item = cast(Schema, schema.get("items", {}))
        for option in cast(list[Schema], schema.get("anyOf", [])):
            item = cast(Schema, option.get("items", item))
        return (
            f"{name}[{location[1]}] must be {_expected(item)}; you gave {excerpt(given)}."
        )
    if kind == "string_too_long" and isinstance(given, str):
        return (
            f"{name} is {len(given):,} characters long; the limit is "
            f"{_number(error.get('ctx', {}).get('max_length'))}. Shorten it."
        )
    if kind == "too_long" and isinstance(given, list):
        most = error.get("ctx", {}).get("max_length")
        return f"{name} has {len(cast(list[object], given)):,} items; give at most {most}."
    return f"{name} must be {_expected(schema)}; you gave {excerpt(given)}."


def describe_invalid_arguments(exc: ValidationError, tool_schema: Schema) -> str:
    """Every distinct problem, one sentence each (the first three, which is enough to fix)."""
    sentences = list(dict.fromkeys(describe_error(error, tool_schema) for error in exc.errors()))
    more = len(sentences) - 3
    tail = f" ({more} more argument problems after these.)" if more > 0 else ""
    return " ".join(sentences[:3]) + tail


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
    """MCPServer whose failed calls always end with a sentence the model can act on."""

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
