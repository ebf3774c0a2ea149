"""stdio transport with one repair: a request holding a lone surrogate escape is answered.

JSON may spell half of a UTF-16 surrogate pair (`"\\ud800"`); Python's json reads it, but
the JSON parser the SDK's stdio reader uses (pydantic-core) refuses the whole line. The SDK
then drops the line at debug level, and the client waits forever for an answer to its
request id (mcp 2.3; reported upstream). Here such a line is parsed again with Python's
json. A tool call goes on to the tool boundary, which answers that the argument is not
text; anything else has the surrogates replaced by U+FFFD, because a reply quoting one
could not be encoded for the wire at all.
"""

import json
import re
from types import TracebackType
from typing import Any, Self, cast

from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

from obsidian_mcp.limits import lone_surrogate_at

Item = SessionMessage | Exception

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(value: object) -> object:
    if isinstance(value, str):
        return value if lone_surrogate_at(value) is None else _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in cast(list[object], value)]
    if isinstance(value, dict):
        return {k: _replace_surrogates(v) for k, v in cast(dict[str, object], value).items()}
    return value


def _is_tool_call(message: object) -> bool:
    if not isinstance(message, dict):
        return False
    return cast(dict[str, object], message).get("method") == "tools/call"


def recover_lone_surrogates(item: Item) -> Item:
    """The message the SDK's reader refused for a lone surrogate escape, or `item` as is."""
    if not isinstance(item, ValidationError):
        return item
    errors = item.errors(include_url=False)
    line = errors[0].get("input") if errors and errors[0]["type"] == "json_invalid" else None
    if not isinstance(line, str) or not _SURROGATE_ESCAPE.search(line):
        return item
    try:
        raw = cast(object, json.loads(line))
        data = raw if _is_tool_call(raw) else _replace_surrogates(raw)
        return SessionMessage(jsonrpc_message_adapter.validate_python(data, by_name=False))
    except (ValueError, ValidationError):
        return item


class SurrogateTolerantReader:
    """The stdio read stream, with `recover_lone_surrogates` applied to every item."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        return recover_lone_surrogates(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        return recover_lone_surrogates(await self._inner.__anext__())

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)


__all__ = ["SurrogateTolerantReader", "recover_lone_surrogates", "stdio_server"]
