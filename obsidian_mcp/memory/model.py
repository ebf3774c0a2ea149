"""A memory, its line in the store, and the rules for what may be stored.

One record per line, UTF-8 JSON. An entry line carries the memory; a tombstone line
(`{"id": ..., "ts": ..., "forgotten": true}`) retires the id for good. Records never change
once written: a memory's id is minted once, so the lines of several files (one per writer,
see `files`) merge by id in any order, and a tombstone wins over its memory wherever each
was read from. An entry may name the ids it `supersedes` (a fact that changed): those stay
stored, and recall shows them only on request.
"""

import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from obsidian_mcp.errors import InvalidArgument, VaultError
from obsidian_mcp.limits import MAX_PATH_CHARS, excerpt
from obsidian_mcp.paths import normalize_vault_path

MAX_CONTENT_CHARS = 4000
MAX_CONTEXT_CHARS = 1000
MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_TYPE_CHARS = 32
MAX_SCOPE_CHARS = 64
# A memory replaces a few others at most; more means the agent meant something else.
MAX_SUPERSEDES = 20
# The source is a vault path, so it has a path's limit.
MAX_SOURCE_CHARS = MAX_PATH_CHARS

# Obsidian's own tag alphabet: letters, digits, `_`, `-`, and `/` for nesting.
_TAG = re.compile(r"^[\w/-]+$")
_TYPE = re.compile(r"^[\w-]+$")


@dataclass(frozen=True, slots=True)
class Memory:
    id: str
    ts: datetime
    content: str
    tags: tuple[str, ...]
    context: str
    type: str | None = None
    source: str | None = None
    # Whose knowledge it is (a character, persona or project); None is shared by all.
    scope: str | None = None
    # When it happened, if not when it was written: an ISO date or a UTC date and time.
    occurred: str | None = None
    # Ids of the memories this one replaces.
    supersedes: tuple[str, ...] = ()

    @property
    def dedup_key(self) -> tuple[str, frozenset[str]]:
        return dedup_key(self.content, self.tags, self.scope)


@dataclass(frozen=True, slots=True)
class Tombstone:
    id: str
    ts: datetime


Record = Memory | Tombstone


def dedup_key(
    content: str, tags: Iterable[str], scope: str | None = None
) -> tuple[str, frozenset[str]]:
    """What makes two memories the same: their words (spacing aside), their tag set and
    their scope (the same words known to two characters are two memories)."""
    words = " ".join(content.split())
    return (words if scope is None else f"{scope}\0{words}"), frozenset(tags)


def format_ts(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode(record: Record) -> str:
    """The record as one line, newline included. JSON escapes every newline in a value."""
    data: dict[str, Any] = {"id": record.id, "ts": format_ts(record.ts)}
    if isinstance(record, Tombstone):
        data["forgotten"] = True
    else:
        data.update(content=record.content, tags=list(record.tags), context=record.context)
        if record.type is not None:
            data["type"] = record.type
        if record.source is not None:
            data["source"] = record.source
        if record.scope is not None:
            data["scope"] = record.scope
        if record.occurred is not None:
            data["occurred"] = record.occurred
        if record.supersedes:
            data["supersedes"] = list(record.supersedes)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def _optional_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError("not a string")


def decode(line: bytes) -> Record | None:
    """The record on one line, or None when the line is not a valid record."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            return None
        fields = cast(dict[str, object], data)
        record_id, ts_text = fields["id"], fields["ts"]
        if not isinstance(record_id, str) or not record_id or not isinstance(ts_text, str):
            return None
        ts = datetime.fromisoformat(ts_text)
        if ts.tzinfo is None:
            return None
        if fields.get("forgotten") is True:
            return Tombstone(record_id, ts)
        content, tags, context = fields["content"], fields["tags"], fields.get("context", "")
        if not isinstance(content, str) or not isinstance(tags, list):
            return None
        tag_list = cast(list[object], tags)
        if not all(isinstance(tag, str) for tag in tag_list) or not isinstance(context, str):
            return None
        replaced = fields.get("supersedes", [])
        if not isinstance(replaced, list):
            return None
        replaced_list = cast(list[object], replaced)
        if not all(isinstance(old, str) for old in replaced_list):
            return None
        return Memory(
            id=record_id,
            ts=ts,
            content=content,
            tags=tuple(cast(list[str], tag_list)),
            context=context,
            type=_optional_str(fields.get("type")),
            source=_optional_str(fields.get("source")),
            scope=_optional_str(fields.get("scope")),
            occurred=_optional_str(fields.get("occurred")),
            supersedes=tuple(cast(list[str], replaced_list)),
        )
    except (ValueError, KeyError, TypeError):
        return None


# -- validation of what the agent asks to store -----------------------------------------


def normalize_tag(raw: str) -> str:
    tag = raw.strip().lstrip("#").lower()
    if not tag:
        raise InvalidArgument(
            f"The tag {excerpt(raw)} is empty; give words like 'gale' or 'project/x'."
        )
    if len(tag) > MAX_TAG_CHARS:
        raise InvalidArgument(
            f"The tag {excerpt(raw)} is longer than {MAX_TAG_CHARS} characters; use a short label."
        )
    if not _TAG.match(tag):
        suggestion = "-".join(re.findall(r"[\w/-]+", tag)) or "a-single-word"
        raise InvalidArgument(
            f"The tag {excerpt(raw)} has spaces or characters a tag cannot hold (use letters, "
            f"digits, '_', '-', '/'); write it as {excerpt(suggestion)}."
        )
    if tag.isdigit():
        raise InvalidArgument(
            f"The tag {excerpt(raw)} is only digits; add a letter, e.g. {excerpt('y' + tag)}."
        )
    return tag


def normalize_tags(raw: Iterable[str], *, required: bool) -> tuple[str, ...]:
    raw_list = list(raw)
    if len(raw_list) > MAX_TAGS:
        raise InvalidArgument(
            f"{len(raw_list)} tags is too many; give at most {MAX_TAGS}, the few that you "
            "will recall this memory by."
        )
    tags = tuple(dict.fromkeys(normalize_tag(tag) for tag in raw_list))
    if required and not tags:
        raise InvalidArgument(
            "Give at least one tag (a person, project or topic, e.g. ['gale']); memories are "
            "recalled by tag."
        )
    return tags


def normalize_type(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    kind = raw.strip().lower()
    if len(kind) > MAX_TYPE_CHARS or not _TYPE.match(kind):
        raise InvalidArgument(
            f"The type {excerpt(raw)} should be one short word (at most {MAX_TYPE_CHARS} "
            "characters), e.g. fact, decision, event, preference."
        )
    return kind


def normalize_scope(raw: str | None) -> str | None:
    """A scope is a name like a tag ('tamsin', 'project-x'); empty means shared."""
    if raw is None or not raw.strip():
        return None
    scope = raw.strip().lower()
    if len(scope) > MAX_SCOPE_CHARS or not _TAG.match(scope):
        suggestion = "-".join(re.findall(r"[\w/-]+", scope))[:MAX_SCOPE_CHARS] or "tamsin"
        raise InvalidArgument(
            f"The scope {excerpt(raw)} should be one short name (letters, digits, '_', '-', "
            f"'/'; at most {MAX_SCOPE_CHARS} characters), e.g. {excerpt(suggestion)}."
        )
    return scope


def normalize_ids(raw: Iterable[str], name: str) -> tuple[str, ...]:
    """Memory ids as the agent passed them, cleaned and without repeats."""
    ids = tuple(dict.fromkeys(part.strip().lower() for part in raw if part.strip()))
    if len(ids) > MAX_SUPERSEDES:
        raise InvalidArgument(
            f"{name} names {len(ids)} memories; give at most {MAX_SUPERSEDES}, the ids this "
            "memory replaces."
        )
    return ids


def validate_memory(
    content: str, tags: Iterable[str], context: str, type_: str | None, source: str | None
) -> tuple[str, tuple[str, ...], str, str | None, str | None]:
    """The arguments of a memory, cleaned; raises InvalidArgument with what to change."""
    text = content.strip()
    if not text:
        raise InvalidArgument("The content is empty; write the thing to remember in a sentence.")
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidArgument(
            f"The content has {len(text):,} characters; the limit is {MAX_CONTENT_CHARS:,}. "
            "Store the gist and put the full text in a note, then pass its path as source."
        )
    why = context.strip()
    if len(why) > MAX_CONTEXT_CHARS:
        raise InvalidArgument(
            f"The context has {len(why):,} characters; the limit is {MAX_CONTEXT_CHARS:,}. "
            "Say in a sentence or two why this matters."
        )
    clean_source: str | None = None
    if source is not None and len(source) > MAX_SOURCE_CHARS:
        raise InvalidArgument(
            f"source has {len(source):,} characters; the limit is {MAX_SOURCE_CHARS:,}. Give "
            "the vault path of the note, like 'Projects/Gale.md'."
        )
    if source is not None and source.strip():
        try:
            clean_source = normalize_vault_path(source)
        except VaultError as exc:
            raise InvalidArgument(f"source: {exc}") from None
    return text, normalize_tags(tags, required=True), why, normalize_type(type_), clean_source


# -- ids ----------------------------------------------------------------------------------

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
# Milliseconds in base 36 fit 9 digits until the year 5188; 4 random digits follow.
_TIME_DIGITS = 9
_RANDOM_DIGITS = 4
ID_LENGTH = _TIME_DIGITS + _RANDOM_DIGITS


def _base36(number: int, width: int) -> str:
    digits: list[str] = []
    while number:
        number, rest = divmod(number, 36)
        digits.append(_DIGITS[rest])
    return "".join(reversed(digits)).rjust(width, "0")


class IdMaker:
    """Short ids that sort by creation time: base-36 milliseconds, then random digits."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.SystemRandom()
        self._last = ""

    def make(self, at: datetime) -> str:
        millis = int(at.timestamp() * 1000)
        candidate = _base36(millis, _TIME_DIGITS) + _base36(
            self._rng.randrange(36**_RANDOM_DIGITS), _RANDOM_DIGITS
        )
        # Strictly increasing within the process: ids minted in one millisecond, or after
        # the clock stepped back, still sort in the order they were made and never repeat.
        if candidate <= self._last:
            candidate = _base36(int(self._last, 36) + 1, ID_LENGTH)
        self._last = candidate
        return candidate
