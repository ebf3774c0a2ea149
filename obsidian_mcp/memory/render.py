"""Memories as text for a model: a summary line first, compact entries, what was left out."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from obsidian_mcp.limits import MAX_ID_CHARS, MAX_MOMENT_CHARS
from obsidian_mcp.memory.model import (
    MAX_CONTENT_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_SCOPE_CHARS,
    MAX_SOURCE_CHARS,
    MAX_SUPERSEDES,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TYPE_CHARS,
    Memory,
    Record,
    Tombstone,
    format_ts,
)
from obsidian_mcp.memory.store import MemoryStatus, Recall, Remembered
from obsidian_mcp.memory.timespec import age
from obsidian_mcp.paths import note_name
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.text.wording import plural

# Tokens kept back for the footer that says what was left out.
_FOOTER_TOKENS = 60
# The least a squeezed entry keeps of each field, so it still says what it is about.
_MIN_FIELD_CHARS = 60


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: max(most - 1, 0)].rstrip() + "…"


def _fitting_tags(tags: tuple[str, ...], most: int) -> tuple[str, ...]:
    """The first tags whose '#tag' list fits `most` characters (at least one)."""
    kept: list[str] = []
    used = 0
    for tag in tags:
        used += len(tag) + 2
        if kept and used > most:
            break
        kept.append(tag)
    return tuple(kept)


def shown_fields(memory: Memory, max_field: int | None = None) -> Memory:
    """The memory with every field within what may be stored, and within `max_field`.

    The file is the user's and other processes write it: a line may hold far more than
    vault_remember accepts (a 3 MB source once made every recall 3 MB), and no reply may
    carry that.
    """
    most = max_field if max_field is not None else MAX_CONTENT_CHARS

    def field(text: str, limit: int) -> str:
        return _clip(text, min(limit, most))

    return Memory(
        id=_clip(memory.id, MAX_ID_CHARS),
        ts=memory.ts,
        content=field(memory.content, MAX_CONTENT_CHARS),
        tags=_fitting_tags(tuple(field(t, MAX_TAG_CHARS) for t in memory.tags[:MAX_TAGS]), most),
        context=field(memory.context, MAX_CONTEXT_CHARS),
        type=field(memory.type, MAX_TYPE_CHARS) if memory.type is not None else None,
        source=field(memory.source, MAX_SOURCE_CHARS) if memory.source is not None else None,
        scope=field(memory.scope, MAX_SCOPE_CHARS) if memory.scope is not None else None,
        occurred=field(memory.occurred, MAX_MOMENT_CHARS) if memory.occurred else None,
        supersedes=tuple(field(old, MAX_ID_CHARS) for old in memory.supersedes[:MAX_SUPERSEDES]),
    )


def _memories(count: int) -> str:
    return plural(count, "memory", "memories")


def _happened(memory: Memory) -> str | None:
    """When it happened, where that is not the day it was written (then its age says it).
    `occurred` is a date on the user's calendar: compared with the local day of writing."""
    if memory.occurred and memory.occurred[:10] != memory.ts.astimezone().date().isoformat():
        return memory.occurred
    return None


def _unsaid(tags: tuple[str, ...], scope: str | None, asked: tuple[str, ...]) -> list[str]:
    """The memory's tags but those the recall named, in `asked` or as its `scope` (a
    character's memories are often tagged with the name they are scoped to)."""
    return [tag for tag in tags if tag not in asked and tag != scope]


def format_memory(
    memory: Memory,
    now: datetime,
    *,
    max_field: int | None = None,
    replaced_by: str | None = None,
    scope: str | None = None,
    tags: tuple[str, ...] = (),
    short_ids: Mapping[str, str] | None = None,
) -> str:
    """One memory in short lines: id and when (the day it happened, else its age), then
    type, scope and tags; content; why, source, and what replaced it. The `scope` and
    `tags` a recall was filtered by are left out (`_unsaid`): every entry would repeat them.
    Ids are shown as `short_ids` has them (their shortest unique endings).

    With nothing but id and date to say, the content follows on the same line: most
    recalled memories are one line, and their entries then cost the id and the date. On
    LoCoMo's development questions (`python -m bench.memory.locomo`) a recall of 10 took 485
    tokens with the whole id and " · " on a line of its own; 465 with short ids; 448 with
    this line and a summary that no longer says a larger limit shows more."""
    memory = shown_fields(memory, max_field)
    shown = short_ids or {}
    head = [f"{shown.get(memory.id, memory.id)} {_happened(memory) or age(memory.ts, now)}"]
    if memory.type:
        head.append(memory.type)
    if memory.scope and memory.scope != scope:
        head.append(f"scope {memory.scope}")
    other_tags = _unsaid(memory.tags, scope, tags)
    if other_tags:
        head.append(" ".join("#" + tag for tag in other_tags))
    if len(head) == 1 and "\n" not in memory.content:
        lines = [f"- {head[0]} {memory.content}"]
    else:
        lines = ["- " + " · ".join(head), "  " + memory.content.replace("\n", "\n  ")]
    tail: list[str] = []
    if replaced_by:
        tail.append(f"SUPERSEDED by {shown.get(replaced_by, replaced_by)}")
    if memory.supersedes:
        tail.append("replaces " + ", ".join(shown.get(old, old) for old in memory.supersedes))
    if memory.context:
        tail.append("why: " + memory.context)
    if memory.source:
        tail.append(f"source: [[{note_name(memory.source)}]] ({memory.source})")
    if tail:
        lines.append("  " + " · ".join(tail))
    return "\n".join(lines)


def _criteria(recall: Recall) -> list[str]:
    return [*recall.criteria, "matching the query"] if recall.ranked else recall.criteria


def summary_line(recall: Recall) -> str:
    if recall.no_match:
        return (
            f"No memory is about that ({' '.join(_criteria(recall))}); the nearest follow, "
            "weak. Next: other words, tags, or vault_semantic_query on the notes."
        )
    what = " ".join([_memories(recall.total), *recall.criteria])
    if recall.ranked:
        # Best first; how many the limit left out is said here, not in a footer.
        best = len(recall.memories)
        if recall.total > best:
            return f"Best {best} of {what}:"
        return f"{what}, best first"
    if recall.newest is None or recall.oldest is None:
        return what
    newest, oldest = age(recall.newest, recall.now), age(recall.oldest, recall.now)
    if recall.total == 1 or newest == oldest:
        return f"{what}, {newest}"
    return f"{what}, newest {newest}, oldest {oldest}"


def _nothing_found(recall: Recall) -> str:
    if recall.store_size == 0:
        return (
            "No memories are stored yet. Save what you learn with vault_remember(content, "
            "tags, context); to find facts in the notes, use vault_semantic_query."
        )
    what = " ".join(["No memories", *_criteria(recall)])
    lines = [f"{what} (of {_memories(recall.store_size)} stored)."]
    if recall.known_tags:
        tags = ", ".join(f"{tag} ({count})" for tag, count in recall.known_tags)
        lines.append(f"Known tags: {tags}.")
    lines.append(
        "Next: vault_recall with one of those tags, a wider time_range or other query words; "
        "or search the notes with vault_semantic_query."
    )
    return "\n".join(lines)


def _meaning_line(recall: Recall) -> list[str]:
    lines = [f"({recall.meaning_note})"] if recall.meaning_note else []
    if recall.scopes:
        scopes = ", ".join(f"{scope} ({count})" for scope, count in recall.scopes)
        lines.append(f"Scopes: {scopes}; scope= shows one's and the shared.")
    return lines


def _pack(recall: Recall, max_tokens: int) -> tuple[list[str], int, int | None]:
    """The entries that fit the budget (the first always, its fields shortened if it must
    be), and the field length the first was shortened to."""
    budget = max_tokens - estimate_tokens(summary_line(recall)) - _FOOTER_TOKENS
    budget -= sum(estimate_tokens(line) + 1 for line in _meaning_line(recall))
    shown: list[str] = []
    squeezed: int | None = None
    for memory in recall.memories:
        replaced_by = recall.replaced_by.get(memory.id)
        text = format_memory(
            memory,
            recall.now,
            replaced_by=replaced_by,
            scope=recall.scope,
            tags=recall.tags,
            short_ids=recall.short_ids,
        )
        cost = estimate_tokens(text) + 1
        if cost > budget:
            if shown:
                break
            # What is left, about 4 characters per token, shared by the free fields:
            # content, context, tags, and the source (shown twice, as link and path). Each
            # keeps a readable minimum, so a tiny budget still says what the memory is.
            squeezed = max(max(budget, 0) * 4 // 5, _MIN_FIELD_CHARS)
            text = format_memory(
                memory,
                recall.now,
                max_field=squeezed,
                replaced_by=replaced_by,
                scope=recall.scope,
                tags=recall.tags,
                short_ids=recall.short_ids,
            )
            cost = estimate_tokens(text) + 1
        shown.append(text)
        budget -= cost
    return shown, len(shown), squeezed


def _left_out(recall: Recall, shown: int) -> str | None:
    # A ranked recall's summary says what the limit left out.
    by_limit = 0 if recall.ranked else recall.total - len(recall.memories)
    by_budget = len(recall.memories) - shown
    missing = by_limit + by_budget
    reasons: list[str] = []
    if by_budget:
        reasons.append(f"{by_budget} by the token budget")
    if by_limit:
        reasons.append(f"{by_limit} by limit={len(recall.memories)}")
    if not missing:
        return None
    return (
        f"Left out {_memories(missing)} ({', '.join(reasons)}); raise limit or max_tokens, or "
        "narrow by query, tags or since."
    )


def render_recall(recall: Recall, max_tokens: int) -> str:
    if not recall.total:
        return "\n".join([_nothing_found(recall), *_meaning_line(recall)])
    entries, shown, _ = _pack(recall, max_tokens)
    lines = [summary_line(recall), *entries]
    footer = _left_out(recall, shown)
    if footer:
        lines.append(footer)
    return "\n".join([*lines, *_meaning_line(recall)])


def memory_data(
    memory: Memory,
    now: datetime,
    max_field: int | None = None,
    *,
    scope: str | None = None,
    tags: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A memory as `format_memory` shows it, as data: the day it happened, else when it
    was written; no empty fields, nor the `scope` and `tags` the recall was filtered by."""
    memory = shown_fields(memory, max_field)
    data: dict[str, Any] = {"id": memory.id}
    happened = _happened(memory)
    if happened:
        data["occurred"] = happened
    else:
        data["ts"] = format_ts(memory.ts)
        data["age"] = age(memory.ts, now)
    data["content"] = memory.content
    other_tags = _unsaid(memory.tags, scope, tags)
    if other_tags:
        data["tags"] = other_tags
    if memory.context:
        data["context"] = memory.context
    if memory.type:
        data["type"] = memory.type
    if memory.source:
        data["source"] = memory.source
    if memory.scope and memory.scope != scope:
        data["scope"] = memory.scope
    if memory.supersedes:
        data["supersedes"] = list(memory.supersedes)
    return data


def recall_data(recall: Recall, max_tokens: int) -> dict[str, Any]:
    """The same answer as `render_recall`, as data; the same entries fit the same budget."""
    _, shown, squeezed = _pack(recall, max_tokens)
    memories = [
        memory_data(
            m, recall.now, squeezed if i == 0 else None, scope=recall.scope, tags=recall.tags
        )
        for i, m in enumerate(recall.memories[:shown])
    ]
    for entry in memories:
        if entry["id"] in recall.replaced_by:
            entry["superseded_by"] = recall.replaced_by[entry["id"]]
    data: dict[str, Any] = {
        "summary": summary_line(recall) if recall.total else _nothing_found(recall),
        "no_match": recall.no_match or not recall.total,
        "total": recall.total,
        "memories": memories,
    }
    if recall.scopes:
        data["scopes"] = dict(recall.scopes)
    if recall.known_tags:
        data["known_tags"] = dict(recall.known_tags)
    if recall.meaning_note:
        data["meaning"] = recall.meaning_note
    footer = _left_out(recall, shown) if recall.total else None
    if footer:
        data["left_out"] = footer
    return data


def render_overview(
    memories: list[Memory],
    tags: list[tuple[str, int]],
    status: MemoryStatus,
    now: datetime,
    short_ids: Mapping[str, str] | None = None,
) -> str:
    replaced = f" (and {status.superseded:,} superseded)" if status.superseded else ""
    lines = [
        f"# Memory: {_memories(status.memories)}{replaced}, {plural(len(tags), 'tag')} "
        f"({status.folder}, {status.source})"
    ]
    problems: list[str] = [f"{plural(status.files, 'file')} read"]
    if status.invalid_lines:
        problems.append(f"{plural(status.invalid_lines, 'invalid line')} skipped")
    if status.torn_tail:
        problems.append("a torn last line (an interrupted write) skipped")
    lines.append("Files: " + "; ".join(problems) + ".")
    if tags:
        lines.append("Tags: " + ", ".join(f"{tag} ({count})" for tag, count in tags))
    if memories:
        lines += ["", "## Most recent"]
        lines += [format_memory(memory, now, short_ids=short_ids) for memory in memories]
    else:
        lines.append("No memories yet; save one with vault_remember.")
    lines.append("")
    lines.append("Recall by tag or text with vault_recall(tags=[...], query=...).")
    return "\n".join(lines)


def render_forgotten(record: Record, now: datetime, short_ids: Mapping[str, str]) -> str:
    """What vault_forget answers: what it forgot, or that it was forgotten before."""
    if isinstance(record, Tombstone):
        shown = short_ids.get(record.id, record.id)
        return f"{shown} was already forgotten ({age(record.ts, now)}); nothing changed."
    return "Forgot:\n" + format_memory(record, now, short_ids=short_ids)


def render_remembered(result: Remembered, now: datetime) -> str:
    """What vault_remember answers: the id, what it replaced, and the memories close to it
    with what to do about the nearest."""
    memory = result.memory

    def shown(other: Memory) -> str:
        return result.short_ids.get(other.id, other.id)

    tag_list = ", ".join(repr(tag) for tag in memory.tags)
    recall = f"vault_recall(tags=[{tag_list}]" + (
        f", scope={memory.scope!r})" if memory.scope else ")"
    )
    if not result.created:
        return (
            f"Already remembered as {shown(memory)} (same content, tags and scope); nothing "
            f"written. Recall with {recall}."
        )
    lines = [f"Remembered as {shown(memory)}. Recall with {recall}."]
    if result.superseded:
        lines.append(
            "It replaces "
            + ", ".join(shown(old) for old in result.superseded)
            + "; recall shows them only with include_superseded=true."
        )
    near = result.near_duplicate
    if near is not None:
        lines.append(
            f"Nearly the same as {shown(near)}: if the new one replaces it, call "
            f"vault_forget({shown(memory)!r}) and remember it again with "
            f"supersedes=[{shown(near)!r}]; if it adds nothing, vault_forget({shown(memory)!r})."
        )
    if result.similar:
        lines.append("Closest stored:")
        lines += [
            f"- {shown(close.memory)} ({close.score:.2f}) "
            f"{_clip(' '.join(close.memory.content.split()), 120)}"
            for close in result.similar
        ]
    return "\n".join(lines)
