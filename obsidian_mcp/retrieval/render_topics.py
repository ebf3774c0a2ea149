# pyright: strict
"""Find-related and quick-context results as markdown or JSON, in the conventions of
`render`: quotes labelled `passage`, what this server derived labelled `summary`."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from obsidian_mcp.limits import QUERY_ECHO_CHARS, clip
from obsidian_mcp.retrieval.quick_context import QuickContext
from obsidian_mcp.retrieval.related import Neighbour, Related
from obsidian_mcp.retrieval.render import (
    echo_argument,
    passage_block,
    passage_data,
    quote,
    read_call,
    source_text,
)
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.text.wording import plural

# -- find related ------------------------------------------------------------------------


def _neighbour_line(neighbour: Neighbour, concise: bool) -> str:
    where = neighbour.path if neighbour.path is not None else f"{neighbour.name} (no such note)"
    score = f" · score {neighbour.score:.2f}" if neighbour.score is not None else ""
    if concise or not neighbour.why:
        return f"- {where}{score}"
    return f"- {where}{score} · {neighbour.why_label}: {neighbour.why}"


def format_related(related: Related, *, concise: bool = False) -> str:
    lines = [f"# {related.path} ({related.title})"]
    if related.links_note:
        lines.append(related.links_note)
    sections = (
        ("links to", related.outlinks, related.total_outlinks),
        ("linked from", related.backlinks, related.total_backlinks),
    )
    for name, neighbours, total in sections:
        more = f", showing {len(neighbours)}" if total > len(neighbours) else ""
        lines.append(f"## {name} ({total}{more})")
        lines.extend(_neighbour_line(n, concise) for n in neighbours)
    if related.attachments:
        lines.append(f"({plural(related.attachments, 'link')} to attachments not listed)")
    lines.append(f"## similar, not linked (by {related.similar_source})")
    lines.extend(_neighbour_line(n, concise) for n in related.similar)
    if not related.similar:
        lines.append("- none found")
    lines.append(f"next: {read_call(related.path, ())} or vault_find_related(path=<one of these>)")
    return "\n".join(lines)


def _neighbour_data(neighbour: Neighbour, concise: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"path": neighbour.path, "name": neighbour.name}
    if neighbour.score is not None:
        data["score"] = neighbour.score
    if not concise:
        data["why"] = neighbour.why
        data["why_label"] = neighbour.why_label
    return data


def related_data(related: Related, *, concise: bool = False) -> dict[str, Any]:
    return {
        "path": related.path,
        "title": related.title,
        "outlinks": [_neighbour_data(n, concise) for n in related.outlinks],
        "total_outlinks": related.total_outlinks,
        "backlinks": [_neighbour_data(n, concise) for n in related.backlinks],
        "total_backlinks": related.total_backlinks,
        "similar": [_neighbour_data(n, concise) for n in related.similar],
        "similar_source": related.similar_source,
        "attachment_links": related.attachments,
        **({"links_note": related.links_note} if related.links_note else {}),
    }


# -- quick context -----------------------------------------------------------------------


def _quick_next(context: QuickContext) -> str:
    calls = [f"vault_semantic_query(query={echo_argument(context.topic)})"]
    if context.main_files:
        calls.append(f"vault_find_related(path={quote(context.main_files[0].path)})")
    return " or ".join(calls)


def format_quick_context(context: QuickContext) -> str:
    label = source_text(context.source)
    lines = [
        f"# {clip(context.topic, QUERY_ECHO_CHARS)}",
        f"summary: found in {plural(context.passages_found, 'passage')} across "
        f"{plural(context.files_found, 'note')} ({label}).",
    ]
    if context.main_files:
        lines.append("## main notes")
        for file in context.main_files:
            tags = " " + " ".join("#" + t for t in file.tags[:4]) if file.tags else ""
            gist = f" · summary: {file.gist}" if file.gist else ""
            lines.append(f"- {file.path} ({file.tokens:,} tokens){tags}{gist}")
    if context.entities:
        lines.append("## people, places and things linked from the passages (summary)")
        lines.extend(
            f"- {e.name} ({e.kind}, {plural(e.mentions, 'mention')}) · {e.path}"
            for e in context.entities
        )
    if context.themes:
        themes = ", ".join(f"#{tag} ({count})" for tag, count in context.themes)
        lines.append(f"## themes (tags of the main notes, summary)\n{themes}")
    if context.previews:
        lines.append("## key passages")
        lines.extend(passage_block(hit) for hit in context.previews)
    if not context.main_files:
        lines.append("Nothing matches this topic; try other words.")
    lines.append(f"next: {_quick_next(context)}")
    return "\n".join(lines)


def within_budget(context: QuickContext, render: Callable[[QuickContext], str]) -> QuickContext:
    """The overview cut until `render` of it fits its budget: the key passages go first,
    then the least mentioned entities and themes, then the main notes after the first, and
    last the first note's gist and tags (the fuzzer found 325 tokens under a budget of 100)."""
    while estimate_tokens(render(context)) > context.max_tokens:
        if context.previews:
            context = replace(context, previews=context.previews[:-1])
        elif context.entities:
            context = replace(context, entities=context.entities[:-1])
        elif context.themes:
            context = replace(context, themes=context.themes[:-1])
        elif len(context.main_files) > 1:
            context = replace(context, main_files=context.main_files[:-1])
        elif context.main_files and (context.main_files[0].gist or context.main_files[0].tags):
            first = replace(context.main_files[0], gist="", tags=())
            context = replace(context, main_files=(first,))
        else:
            break
    return context


def quick_context_data(context: QuickContext) -> dict[str, Any]:
    return {
        "topic": clip(context.topic, QUERY_ECHO_CHARS),
        "source": context.source,
        "passages_found": context.passages_found,
        "files_found": context.files_found,
        "main_files": [
            {
                "path": f.path,
                "title": f.title,
                "summary": f.gist,
                "tags": list(f.tags),
                "tokens": f.tokens,
            }
            for f in context.main_files
        ],
        "entities": [
            {"path": e.path, "name": e.name, "kind": e.kind, "mentions": e.mentions}
            for e in context.entities
        ],
        "themes": [{"tag": tag, "count": count} for tag, count in context.themes],
        "key_passages": [passage_data(hit, False) for hit in context.previews],
        "next": _quick_next(context),
    }
