"""Memories as text for a model: a summary line first, compact entries, what was left out."""

from datetime import datetime
from typing import Any

from obsidian_mcp.memory.model import Memory, format_ts
from obsidian_mcp.memory.store import MemoryStatus, Recall
from obsidian_mcp.memory.timespec import age
from obsidian_mcp.paths import note_name
from obsidian_mcp.text.tokens import estimate_tokens

# Tokens kept back for the footer that says what was left out.
_FOOTER_TOKENS = 60
_MIN_CONTENT_CHARS = 80


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def _memories(count: int) -> str:
    return f"{count:,} memory" if count == 1 else f"{count:,} memories"


def format_memory(memory: Memory, now: datetime, *, max_content: int | None = None) -> str:
    """One memory in three short lines: id, age, type and tags; content; why and source."""
    head = [memory.id, age(memory.ts, now)]
    if memory.type:
        head.append(memory.type)
    head.append(" ".join("#" + tag for tag in memory.tags))
    content = memory.content
    if max_content is not None and len(content) > max_content:
        content = content[: max(max_content - 1, 0)].rstrip() + "…"
    lines = ["- " + " · ".join(head), "  " + content.replace("\n", "\n  ")]
    tail: list[str] = []
    if memory.context:
        tail.append("why: " + memory.context)
    if memory.source:
        tail.append(f"source: [[{note_name(memory.source)}]] ({memory.source})")
    if tail:
        lines.append("  " + " · ".join(tail))
    return "\n".join(lines)


def summary_line(recall: Recall) -> str:
    what = " ".join([_memories(recall.total), *recall.criteria])
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
    what = " ".join(["No memories", *recall.criteria])
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
    return [f"({recall.meaning_note})"] if recall.meaning_note else []


def _pack(recall: Recall, max_tokens: int) -> tuple[list[str], int]:
    """The entries that fit the budget (the first always, shortened if it must be)."""
    budget = max_tokens - estimate_tokens(summary_line(recall)) - _FOOTER_TOKENS
    budget -= sum(estimate_tokens(line) + 1 for line in _meaning_line(recall))
    shown: list[str] = []
    for memory in recall.memories:
        text = format_memory(memory, recall.now)
        cost = estimate_tokens(text) + 1
        if cost > budget:
            if shown:
                break
            overflow_chars = (cost - max(budget, 0)) * 4
            keep = max(len(memory.content) - overflow_chars, _MIN_CONTENT_CHARS)
            text = format_memory(memory, recall.now, max_content=keep)
            cost = estimate_tokens(text) + 1
        shown.append(text)
        budget -= cost
    return shown, len(shown)


def _left_out(recall: Recall, shown: int) -> str | None:
    missing = recall.total - shown
    if missing <= 0:
        return None
    by_limit = recall.total - len(recall.memories)
    by_budget = len(recall.memories) - shown
    reasons: list[str] = []
    if by_budget:
        reasons.append(f"{by_budget} by the token budget")
    if by_limit:
        reasons.append(f"{by_limit} by limit={len(recall.memories)}")
    return (
        f"Left out {_memories(missing)} ({', '.join(reasons)}). To see more, call vault_recall "
        f"again with a larger limit or max_tokens, or narrow it with query, tags or since."
    )


def render_recall(recall: Recall, max_tokens: int) -> str:
    if not recall.total:
        return "\n".join([_nothing_found(recall), *_meaning_line(recall)])
    entries, shown = _pack(recall, max_tokens)
    lines = [summary_line(recall), *entries]
    footer = _left_out(recall, shown)
    if footer:
        lines.append(footer)
    return "\n".join([*lines, *_meaning_line(recall)])


def memory_data(memory: Memory, now: datetime) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": memory.id,
        "ts": format_ts(memory.ts),
        "age": age(memory.ts, now),
        "content": memory.content,
        "tags": list(memory.tags),
        "context": memory.context,
    }
    if memory.type:
        data["type"] = memory.type
    if memory.source:
        data["source"] = memory.source
    return data


def recall_data(recall: Recall, max_tokens: int) -> dict[str, Any]:
    """The same answer as `render_recall`, as data; the same entries fit the same budget."""
    _, shown = _pack(recall, max_tokens)
    data: dict[str, Any] = {
        "summary": summary_line(recall) if recall.total else _nothing_found(recall),
        "total": recall.total,
        "memories": [memory_data(m, recall.now) for m in recall.memories[:shown]],
    }
    if recall.known_tags:
        data["known_tags"] = dict(recall.known_tags)
    if recall.meaning_note:
        data["meaning"] = recall.meaning_note
    footer = _left_out(recall, shown) if recall.total else None
    if footer:
        data["left_out"] = footer
    return data


def render_overview(
    memories: list[Memory], tags: list[tuple[str, int]], status: MemoryStatus, now: datetime
) -> str:
    lines = [
        f"# Memory: {_memories(status.memories)}, {_plural(len(tags), 'tag')} "
        f"({status.path}, {status.source})"
    ]
    problems: list[str] = []
    if status.invalid_lines:
        problems.append(f"{_plural(status.invalid_lines, 'invalid line')} skipped")
    if status.torn_tail:
        problems.append("a torn last line (an interrupted write) skipped")
    if status.compaction_refused and status.dead_lines:
        problems.append(
            f"{_plural(status.dead_lines, 'retired line')} kept: compaction needs the vault "
            "folder (OBSIDIAN_VAULT_PATH)"
        )
    if problems:
        lines.append("File: " + "; ".join(problems) + ".")
    if tags:
        lines.append("Tags: " + ", ".join(f"{tag} ({count})" for tag, count in tags))
    if memories:
        lines += ["", "## Most recent"]
        lines += [format_memory(memory, now) for memory in memories]
    else:
        lines.append("No memories yet; save one with vault_remember.")
    lines.append("")
    lines.append("Recall by tag or text with vault_recall(tags=[...], query=...).")
    return "\n".join(lines)
