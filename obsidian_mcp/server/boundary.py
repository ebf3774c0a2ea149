"""The tool boundary: what the model reads of a tool's definition, and when a call fails
outside a tool's own handling.

The SDK reports an argument that fails validation with pydantic's full dump (class names,
a documentation URL) and a crash with a bare "Error executing tool X", and it drops an
argument the tool does not take without a word (`limt=3` ran with the default limit).
All three are turned here, in one place for every tool, into one sentence that says what
to change or try.
"""

import difflib
import inspect
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, cast

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, Icon, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from obsidian_mcp.limits import excerpt, lone_surrogate_at
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.stdio import SurrogateTolerantReader, stdio_server
from obsidian_mcp.validation import Schema, describe_invalid_arguments

logger = logging.getLogger(__name__)

# Unknown argument names quoted in the refusal; a client sending thousands gets the count.
_UNKNOWN_NAMES_SHOWN = 3
# What the MCP specification says a client assumes of a hint a tool leaves out.
_DEFAULT_HINTS = {
    "read_only_hint": False,
    "destructive_hint": True,
    "idempotent_hint": False,
    "open_world_hint": True,
}
# Hints the specification gives meaning only for tools that write.
_WRITE_HINTS = ("destructive_hint", "idempotent_hint")


def compact_annotations(hints: ToolAnnotations | None) -> ToolAnnotations | None:
    """The hints a client could not assume: a hint at the specification's default goes,
    and so do a read-only tool's destructive and idempotent hints (it is neither)."""
    if hints is None:
        return None
    given = hints.model_dump(exclude_none=True)
    read_only = given.get("read_only_hint", False)
    return ToolAnnotations(
        **{
            name: value
            for name, value in given.items()
            if _DEFAULT_HINTS.get(name) != value and not (read_only and name in _WRITE_HINTS)
        }
    )


def compact_schema(schema: Schema) -> Schema:
    """A tool's input schema without what tells the model nothing, since every client sends
    it with every request: the titles pydantic derives from the names, and an optional
    parameter's null option and null default (leaving the parameter out says the same).
    Validation is unchanged: the tool still accepts null there."""
    properties = cast(dict[str, Schema], schema.get("properties", {}))
    compact = {key: value for key, value in schema.items() if key != "title"}
    compact["properties"] = {
        name: _compact_parameter(name, spec) for name, spec in properties.items()
    }
    return compact


def _untitled(spec: Schema) -> Schema:
    kept = {key: value for key, value in spec.items() if key != "title"}
    if "items" in kept:
        kept["items"] = _untitled(cast(Schema, kept["items"]))
    return kept


# Defaults the server's instructions state once (`server_instructions`), rather than
# every tool repeating them: `format` is markdown, and a flag (a boolean) is off.
_DEFAULTS_IN_INSTRUCTIONS = frozenset({"format"})


def _compact_parameter(name: str, spec: Schema) -> Schema:
    options = cast(list[Schema], spec.get("anyOf", []))
    concrete = [option for option in options if option.get("type") != "null"]
    if "default" in spec and spec["default"] is None and len(concrete) == 1:
        rest = {key: value for key, value in spec.items() if key not in ("anyOf", "default")}
        spec = {**concrete[0], **rest}
    if "enum" in spec:
        # The values already say what type they are.
        spec = {key: value for key, value in spec.items() if key != "type"}
    if name in _DEFAULTS_IN_INSTRUCTIONS or (
        spec.get("type") == "boolean" and spec.get("default") is False
    ):
        spec = {key: value for key, value in spec.items() if key != "default"}
    return _untitled(spec)


# Limits that guard the server and never guide a call: the longest text a parameter takes
# (1,000 to 20,000 characters), the most items of a list (20 tags), and that a required
# text is not empty.
_ABUSE_LIMITS = ("maxLength", "maxItems", "minLength")


def without_abuse_limits(schema: Schema) -> Schema:
    """The schema as listed: without `_ABUSE_LIMITS`. A value past one is refused with the
    limit named (`validation`); the listing would repeat them in every request."""

    def strip(spec: Schema) -> Schema:
        kept = {key: value for key, value in spec.items() if key not in _ABUSE_LIMITS}
        if "items" in kept:
            kept["items"] = strip(cast(Schema, kept["items"]))
        return kept

    properties = cast(dict[str, Schema], schema.get("properties", {}))
    return {**schema, "properties": {name: strip(spec) for name, spec in properties.items()}}


# The argument that picks a vault when several are served (`server.common.VaultName`).
VAULT_PARAMETER = "vault"


def without_parameter(schema: Schema, name: str) -> Schema:
    properties = cast(dict[str, Schema], schema.get("properties", {}))
    if name not in properties:
        return schema
    kept: Schema = {
        **schema,
        "properties": {key: spec for key, spec in properties.items() if key != name},
    }
    return kept


def listed_vault(schema: Schema) -> Schema:
    """The `vault` argument listed bare: the instructions say once that it takes a vault's
    name, and name them. Its type repeated in every tool would cost the two-vault listing 224
    characters: 2,625 tokens with it, 2,569 without, against issue 28's 2,600 (python -m
    bench.definitions). A value that is not a name is refused with the names
    (`AppState.served`)."""
    properties = cast(dict[str, Schema], schema.get("properties", {}))
    if VAULT_PARAMETER not in properties:
        return schema
    return {**schema, "properties": {**properties, VAULT_PARAMETER: {}}}


def _paragraphs(docstring: str) -> str:
    """A docstring as the model reads it best: each paragraph on one line, no indentation."""
    paragraphs = inspect.cleandoc(docstring).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def unknown_arguments(tool: str, unknown: Sequence[str], known: Sequence[str]) -> str:
    """The refusal of arguments a tool does not take, with the closest name and the list."""

    def named(key: str) -> str:
        guess = difflib.get_close_matches(key, known, n=1)
        return excerpt(key) + (f" (did you mean {guess[0]!r}?)" if guess else "")

    shown = ", ".join(named(key) for key in unknown[:_UNKNOWN_NAMES_SHOWN])
    more = len(unknown) - _UNKNOWN_NAMES_SHOWN
    if more > 0:
        shown += f" and {more:,} more"
    noun = "argument" if len(unknown) == 1 else "arguments"
    takes = f"it takes: {', '.join(known)}." if known else "it takes none."
    return f"{tool} has no {noun} {shown}; {takes}"


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
            return next((hit for k, v in entries.items() if (hit := find(v, f"{where}.{k}"))), None)
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
    whose tool definitions carry nothing a client could do without: descriptions are
    docstrings with each paragraph on one line (the SDK sends `fn.__doc__` as it is,
    indentation included), input schemas and annotations are compacted (`compact_schema`,
    `compact_annotations`). Clients send the definitions with every request, so each
    character is paid for many times in every session."""

    def __init__(self, *args: Any, several_vaults: bool = False, **kwargs: Any) -> None:
        # Each tool's schema with every bound, for the messages of refused arguments.
        self._schemas: dict[str, Schema] = {}
        # Whether tools list their `vault` argument: only with more than one vault to name.
        self._several_vaults = several_vaults
        super().__init__(*args, **kwargs)

    def add_tool(  # the SDK's signature; the definition it registers is compacted
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
            description=description or _paragraphs(fn.__doc__ or ""),
            annotations=compact_annotations(annotations),
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )
        tool = self._tool_manager.get_tool(name or fn.__name__)
        if tool is not None:
            compact = compact_schema(tool.parameters)
            if not self._several_vaults:
                # One vault: the argument is not listed, and refused like any unknown one.
                compact = without_parameter(compact, VAULT_PARAMETER)
            # Error messages quote every bound; the listing leaves abuse limits out.
            self._schemas[tool.name] = compact
            tool.parameters = listed_vault(without_abuse_limits(compact))

    def keep_tools(self, names: Collection[str]) -> None:
        """Unregister every tool not named: the families OBSIDIAN_TOOLS leaves out."""
        for tool in self._tool_manager.list_tools():
            if tool.name not in names:
                self.remove_tool(tool.name)

    async def run_stdio_async(self) -> None:
        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                SurrogateTolerantReader(read_stream),
                write_stream,
                self._lowlevel_server.create_initialization_options(),
            )

    def full_schema(self, name: str) -> Schema:
        """A tool's input schema with every bound, the abuse limits the listing leaves out
        included; {} for a tool it does not have."""
        return self._schemas.get(name, {})

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        schema = self.full_schema(name)
        known = list(cast(Schema, schema.get("properties", {})))
        unknown = [key for key in arguments if key not in known]
        if schema and unknown:
            raise ToolError(unknown_arguments(name, unknown, known))
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
                raise ToolError(describe_invalid_arguments(exc.__cause__, schema)) from exc
            raise
