# pyright: strict
"""One tool call as one line of the usage log, keeping no more than the mode allows.

A line holds the time, the tool, the session, the names of the arguments given, the
options (numbers, flags and choices from a list, as given), the reply's tokens, the
elapsed time, the error's kind, and what the tool returned and which of several vaults it
worked on, by their configured names (`facts`). Text arguments
(questions, paths, headings, tags) are kept as written only with `full`; `on` keeps a
keyed hash of each, enough to see the same question or note again. What an agent writes
into the vault (`WRITTEN_ARGUMENTS`) is never kept, only its length. The words of a
search's question are kept one by one (hashed with `on`) so `stats` can tell a second
search on similar words without the question itself.
"""

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from obsidian_mcp.retrieval.keyword import terms
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.usage.facts import CallFacts

FORMAT_VERSION = 1
# How a line names a tool the server does not have: the name is the client's text.
UNKNOWN_TOOL = "(unknown tool)"
# The arguments that carry a search's question, whose words a line keeps.
QUESTION_ARGUMENTS = ("query", "topic")
# What the agent writes into the vault (a memory, an edit, a scratch entry): never logged.
WRITTEN_ARGUMENTS = frozenset({"content", "text", "context"})
# A logged text (with `full`) is cut here; a question is at most 1,000 characters.
FULL_TEXT_CHARS = 2000
# Characters of a question whose words are kept (the tools refuse longer questions).
QUESTION_CHARS = 1000
# Hex characters of a keyed hash: 64 bits, no collision in any one user's log.
HASH_CHARS = 16
# An option given a value of the wrong kind (refused by the tool) is logged as this.
INVALID_OPTION = "(invalid)"

LoggedMode = Literal["on", "full"]
Schema = Mapping[str, object]


@dataclass(frozen=True)
class ToolCall:
    """A finished tool call as the server's dispatch point saw it."""

    tool: str
    arguments: Mapping[str, object]
    # Each parameter's JSON schema, to tell options from text.
    parameters: Mapping[str, Schema]
    started: datetime
    seconds: float
    reply: str  # the text the model reads
    error: str | None  # the failure's kind
    facts: CallFacts
    definitions_tokens: int


class Redactor:
    """Text as the mode keeps it: as written (cut when long) with `full`, an HMAC-SHA256
    under the installation's key with `on` (a plain hash of a short question could be
    reversed by trying likely questions)."""

    def __init__(self, mode: LoggedMode, key: bytes) -> None:
        self.mode: LoggedMode = mode
        # Keyed once; each hash starts from a copy (a third of the cost of a new HMAC).
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)

    def text(self, value: str) -> str:
        if self.mode == "full":
            if len(value) <= FULL_TEXT_CHARS:
                return value
            return f"{value[:FULL_TEXT_CHARS]}… ({len(value):,} characters)"
        keyed = self._keyed.copy()
        keyed.update(value.encode("utf-8", "surrogatepass"))
        return keyed.hexdigest()[:HASH_CHARS]


def _is_option(spec: Schema) -> bool:
    return "enum" in spec or spec.get("type") in ("integer", "number", "boolean")


def _option_value(value: object, spec: Schema) -> object:
    if value is None or isinstance(value, bool | int | float):
        return value
    choices = cast(list[object], spec.get("enum", []))
    return value if isinstance(value, str) and value in choices else INVALID_OPTION


def _text_value(value: object, redactor: Redactor) -> object:
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, list):
        items = cast(list[object], value)
        return [
            redactor.text(item if isinstance(item, str) else json.dumps(item, default=str))
            for item in items
        ]
    return redactor.text(json.dumps(value, default=str))


def _length(value: object) -> int:
    return len(value) if isinstance(value, str) else len(json.dumps(value, default=str))


def _question_words(arguments: Mapping[str, object], redactor: Redactor) -> list[str]:
    question = next(
        (v for name in QUESTION_ARGUMENTS if isinstance(v := arguments.get(name), str)), ""
    )
    return sorted({redactor.text(term) for term in terms(question[:QUESTION_CHARS])})


def call_record(call: ToolCall, redactor: Redactor, session: str) -> dict[str, object]:
    """The log line's object for `call`, made in server process `session`."""
    known = {name: value for name, value in call.arguments.items() if name in call.parameters}
    options: dict[str, object] = {}
    texts: dict[str, object] = {}
    sizes: dict[str, int] = {}
    # replace_text's target is text of the note (an earlier edit may have written it):
    # kept as its length only, like what the agent writes.
    written: frozenset[str] = WRITTEN_ARGUMENTS | (
        frozenset({"target"}) if known.get("operation") == "replace_text" else frozenset[str]()
    )
    for name, value in known.items():
        spec = call.parameters[name]
        if _is_option(spec):
            options[name] = _option_value(value, spec)
        elif name in written:
            sizes[name] = _length(value)
        else:
            texts[name] = _text_value(value, redactor)
    return {
        "v": FORMAT_VERSION,
        "at": call.started.isoformat(timespec="milliseconds"),
        "session": session,
        "tool": call.tool,
        "mode": redactor.mode,
        "args": list(known),
        "unknown_args": len(call.arguments) - len(known),
        "options": options,
        "text": texts,
        "sizes": sizes,
        "words": _question_words(known, redactor),
        "tokens": estimate_tokens(call.reply),
        "ms": round(call.seconds * 1000, 2),
        "error": call.error,
        "sources": list(call.facts.sources),
        "vaults": list(call.facts.vaults),
        "items": call.facts.items,
        "notes": [
            [redactor.text(note), redactor.text(section) if section else ""]
            for note, section in call.facts.notes
        ],
        "defs": call.definitions_tokens,
    }
