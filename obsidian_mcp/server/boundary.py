"""The tool boundary: what the model reads of a tool's definition, and when a call fails
outside a tool's own handling.

The SDK reports an argument that fails validation with pydantic's full dump (class names,
a documentation URL) and a crash with a bare "Error executing tool X", and it drops an
argument the tool does not take without a word (`limt=3` ran with the default limit).
All three are turned here, in one place for every tool, into one sentence that says what
to change or try. Every call passes the same place on its way out, which is where the
usage log (`obsidian_mcp.usage`, when OBSIDIAN_USAGE_LOG is on) records it.
"""

import difflib
import inspect
import json
import logging
import time
import types
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Union, cast, get_args, get_origin

import anyio
from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import (
    INVALID_PARAMS,
    SERVER_INFO_META_KEY,
    CallToolResult,
    GetPromptResult,
    Icon,
    InputRequiredResult,
    ListToolsResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import ValidationError

from obsidian_mcp.limits import excerpt, lone_surrogate_at
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.stdio import SurrogateTolerantReader, stdio_server
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.usage.facts import CallFacts, collecting
from obsidian_mcp.usage.log import UsageRecorder
from obsidian_mcp.usage.record import UNKNOWN_TOOL, ToolCall
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
    """The `vault` argument listed as text without a description: the instructions say
    once that it takes a vault's name, and name them. Typed, so a client that checks
    arguments knows it (issue 35, item 17): 224 characters over the untyped listing, paid
    for by shorter instructions, 2,650 tokens for two vaults against the bound of 2,650
    (python -m bench.economy.definitions). A value that is not a name is refused with the names
    (`AppState.served`)."""
    properties = cast(dict[str, Schema], schema.get("properties", {}))
    if VAULT_PARAMETER not in properties:
        return schema
    return {**schema, "properties": {**properties, VAULT_PARAMETER: {"type": "string"}}}


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


def unknown_tool(name: str, tools: Sequence[str]) -> str:
    """The refusal of a tool this server does not have, with the closest name and the list
    (a client may have cached an old list, or the model misspelt one)."""
    guess = difflib.get_close_matches(name, tools, n=1)
    maybe = f" (did you mean {guess[0]!r}?)" if guess else ""
    return f"No tool named {excerpt(name)}{maybe}; the tools are: {', '.join(tools)}."


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


class ArgumentsRefused(ToolError):
    """Arguments refused before the tool ran; `kind` names why, for the usage log."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def error_kind(exc: BaseException) -> str:
    """What kind of failure a tool call ended in, as the usage log counts them: the
    domain's own error class (NoteNotFound, ObsidianUnreachable...) where there is one."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__
    if isinstance(exc, ArgumentsRefused):
        return exc.kind
    if any(isinstance(link, UnexpectedToolError) for link in chain):
        return "internal_error"
    if any(isinstance(link, ValidationError) for link in chain):
        return "invalid_arguments"
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "cancelled"
    return type(chain[-1]).__name__ if len(chain) > 1 else "tool_error"


def reply_text(result: CallToolResult | InputRequiredResult) -> str:
    """The text the model reads of a tool's result."""
    if not isinstance(result, CallToolResult):
        return ""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def crash_message(tool: str, cause: BaseException | None) -> str:
    kind = type(cause).__name__ if cause is not None else "unknown"
    return (
        f"{tool} failed on an internal error ({kind}); this is a fault in the obsidian-mcp "
        "server, not in your arguments. Try the call once more; if it fails again, get the "
        "answer another way (vault_semantic_query, vault_read_note) and tell the user to "
        "check the server's log."
    )


def is_text(annotation: object) -> bool:
    """Whether a parameter takes text and nothing a JSON string could stand for: `str`,
    optional or not, or a choice of words (`Literal["markdown", "json"]`)."""
    if annotation is str or annotation is type(None):
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return all(isinstance(value, str) for value in get_args(annotation))
    if origin is Union or origin is types.UnionType:
        return all(is_text(option) for option in get_args(annotation))
    return False


class TextAsSent(FuncMetadata):
    """A tool's argument handling with the SDK's JSON pre-parsing left to the parameters
    that are not text: a text parameter receives the characters the client sent ("null",
    "true", '["a", "b"]' included); a list parameter still accepts a JSON string (Claude
    Desktop sends lists that way)."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        fields = self.arg_model.model_fields
        text = {
            key
            for name, info in fields.items()
            if is_text(info.annotation)
            for key in (name, info.alias)
            if key is not None
        }
        parsed = super().pre_parse_json({k: v for k, v in data.items() if k not in text})
        return {key: data[key] if key in text else parsed[key] for key in data}

    @classmethod
    def of(cls, metadata: FuncMetadata) -> "TextAsSent":
        """The same metadata (argument model, output schema) with text delivered as sent.
        Every field is carried over: `FuncMetadata.model_fields` is what the SDK defines."""
        return cls(**{name: getattr(metadata, name) for name in FuncMetadata.model_fields})


class VaultServer(MCPServer[AppState]):
    """MCPServer whose failed calls always end with a sentence the model can act on, and
    whose tool definitions carry nothing a client could do without: descriptions are
    docstrings with each paragraph on one line (the SDK sends `fn.__doc__` as it is,
    indentation included), input schemas and annotations are compacted (`compact_schema`,
    `compact_annotations`). Clients send the definitions with every request, so each
    character is paid for many times in every session."""

    def __init__(
        self,
        *args: Any,
        several_vaults: bool = False,
        usage: UsageRecorder | None = None,
        **kwargs: Any,
    ) -> None:
        # Each tool's schema with every bound, for the messages of refused arguments.
        self._schemas: dict[str, Schema] = {}
        # Whether tools list their `vault` argument: only with more than one vault to name.
        self._several_vaults = several_vaults
        # The usage log (None: off), and the tool list's tokens it puts on each line.
        self._usage = usage
        self._definitions_tokens: int | None = None
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
            tool.fn_metadata = TextAsSent.of(tool.fn_metadata)
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
                del self._schemas[tool.name]

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

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> GetPromptResult | InputRequiredResult:
        """A prompt, or a refusal that says what to send: the SDK answers a missing argument
        with "Missing required arguments: {'work'}" and an unknown prompt by its name alone."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = [p.name for p in self._prompt_manager.list_prompts()]
            raise MCPError(
                INVALID_PARAMS,
                f"No prompt named {excerpt(name)}; the prompts: " + ", ".join(known) + ".",
            )
        missing = [
            argument
            for argument in prompt.arguments or []
            if argument.required and argument.name not in (arguments or {})
        ]
        if missing:
            needs = "; ".join(
                f"{argument.name} ({(argument.description or 'text').rstrip('.')})"
                for argument in missing
            )
            raise MCPError(
                INVALID_PARAMS,
                f"The prompt {name} needs {needs}. Send it in the arguments of prompts/get.",
            )
        return await super().get_prompt(name, arguments, context)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Every tool call passes here: the one place the usage log hears of them."""
        usage = self._usage
        if usage is None:
            return await self._checked_call(name, arguments, context)
        definitions = await self._definitions()
        started, clock = datetime.now(UTC), time.perf_counter()

        def log(facts: CallFacts, reply: str, error: str | None) -> None:
            known = self._tool_manager.get_tool(name) is not None
            parameters = self.full_schema(name).get("properties", {})
            usage.record(
                ToolCall(
                    tool=name if known else UNKNOWN_TOOL,
                    arguments=arguments,
                    parameters=cast(dict[str, Schema], parameters),
                    started=started,
                    seconds=time.perf_counter() - clock,
                    reply=reply,
                    error=error if known or error is None else "unknown_tool",
                    facts=facts,
                    definitions_tokens=definitions,
                )
            )

        with collecting() as facts:
            try:
                result = await self._checked_call(name, arguments, context)
            except BaseException as exc:
                log(facts, str(exc), error_kind(exc))
                raise
        failed = isinstance(result, CallToolResult) and result.is_error
        log(facts, reply_text(result), "tool_error" if failed else None)
        return result

    async def _definitions(self) -> int:
        """Tokens of the tool list and instructions a client sends with every request,
        counted as `bench.economy.definitions` counts them (once: the list is fixed at build). The
        list is the one a current client receives, the SDK's server-identity stamp included."""
        if self._definitions_tokens is None:
            stamp = {SERVER_INFO_META_KEY: self._lowlevel_server.server_info_stamp}
            listed = ListToolsResult(tools=await self.list_tools(), _meta=stamp)
            dumped = listed.model_dump(by_alias=True, mode="json", exclude_none=True)
            characters = json.dumps(dumped) + (self.instructions or "")
            self._definitions_tokens = estimate_tokens(characters)
        return self._definitions_tokens

    async def _checked_call(
        self, name: str, arguments: dict[str, Any], context: Context[AppState, Any] | None
    ) -> CallToolResult | InputRequiredResult:
        schema = self.full_schema(name)
        if not schema:
            raise ToolError(unknown_tool(name, sorted(self._schemas)))
        known = list(cast(Schema, schema.get("properties", {})))
        unknown = [key for key in arguments if key not in known]
        if schema and unknown:
            raise ArgumentsRefused(unknown_arguments(name, unknown, known), "unknown_arguments")
        surrogate_in = _lone_surrogate(arguments)
        if surrogate_in is not None:
            raise ArgumentsRefused(
                f"{surrogate_in} contains half of a UTF-16 surrogate pair (a lone \\ud800-"
                "\\udfff), which is not text; remove it, or send the whole character it was "
                "part of.",
                "invalid_arguments",
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
