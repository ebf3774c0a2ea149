# pyright: strict
"""Search results as compact markdown for a model to read, or as the same data in JSON.

Every passage is labelled: `passage` for verbatim note text, `summary` for text this
server derived (a file's gist), so nothing generated passes for a quote.
"""

import json
from typing import Any

from obsidian_mcp.paths import note_name
from obsidian_mcp.retrieval.packing import FileContext, FileGroup, PassageHit, SearchResult
from obsidian_mcp.text.snippets import ELLIPSIS
from obsidian_mcp.text.tokens import estimate_tokens

SOURCE_LABELS = {
    "smart-search": "semantic: Smart Connections via /search/smart, fused with keywords",
    "custom-route": "semantic: custom route, fused with keywords",
    "smart-env-prf": "semantic: stored Smart Connections vectors (expanded from the best "
    "keyword hits), fused with keywords",
    "local-index": "semantic: the server's local passage index, fused with keywords",
    "lexical-fallback": "lexical-fallback: keywords only, no semantic source answered",
    "exact": "exact terms, case-insensitive",
}


def quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def obsidian_link(path: str, section: tuple[str, ...]) -> str:
    name = note_name(path)
    return f"[[{name}#{section[-1]}]]" if section else f"[[{name}]]"


def read_call(path: str, section: tuple[str, ...]) -> str:
    heading = f", heading={quote(' > '.join(section))}" if section else ""
    return f"vault_read_note(path={quote(path)}{heading})"


def group_header(context: FileContext, matches: int | None = None) -> str:
    facts = [f"## {context.path}"]
    if context.title != note_name(context.path):
        facts[0] += f" ({context.title})"
    if matches is not None:
        facts.append(f"{matches} matches")
    facts.append(f"{context.tokens:,} tokens")
    if context.tags:
        facts.append(" ".join("#" + tag for tag in context.tags))
    lines = [" · ".join(facts)]
    if context.gist:
        lines.append(f"summary: {context.gist}")
    return "\n".join(lines)


def passage_block(hit: PassageHit) -> str:
    facts = [f"### {obsidian_link(hit.path, hit.section)}"]
    if len(hit.section) > 1:
        facts.append(" > ".join(hit.section))
    facts.append(f"score {hit.score:.2f}")
    facts.append("passage")
    text = (ELLIPSIS if hit.cut_before else "") + hit.text + (ELLIPSIS if hit.cut_after else "")
    return " · ".join(facts) + "\n" + text


def passage_cost(hit: PassageHit) -> int:
    return estimate_tokens(passage_block(hit)) + 1


def group_cost(context: FileContext) -> int:
    # The widest header a group can get (with a match count), plus its line break.
    return estimate_tokens(group_header(context, 10**6)) + 1


def _continuation(result: SearchResult) -> str:
    args = [f"query={quote(result.query)}", f"limit={result.limit * 2}"]
    if result.folder:
        args.append(f"folder={quote(result.folder)}")
    return f"{result.tool}({', '.join(args)})"


def next_calls(result: SearchResult) -> list[str]:
    """The calls that continue this search: more of it, and the best section in full."""
    calls: list[str] = []
    if result.total_passages > result.shown:
        calls.append(_continuation(result))
    best = next((g.passages[0] for g in result.groups if g.passages), None)
    if best is not None:
        calls.append(read_call(best.path, best.section))
    return calls


def _unit(result: SearchResult) -> str:
    return "matches" if result.source == "exact" else "passages"


def footer(result: SearchResult) -> str:
    files = len(result.groups)
    lines = [
        f"showing {result.shown} of {result.total_passages} {_unit(result)} in "
        f"{result.total_files} files ({files} shown)"
    ]
    if result.over_budget:
        names = ", ".join(
            f"{hit.path}" + (f" > {' > '.join(hit.section)}" if hit.section else "")
            for hit in result.over_budget
        )
        lines.append(
            f"left out to stay within max_tokens={result.max_tokens}: {names}; "
            f"call again with max_tokens={result.max_tokens * 2}, or "
            f"{read_call(result.over_budget[0].path, result.over_budget[0].section)}"
        )
    calls = next_calls(result)
    if calls:
        lines.append("next: " + " or ".join(calls))
    return "\n".join(lines)


def _empty(result: SearchResult) -> str:
    where = f" in {result.folder}/" if result.folder else ""
    if result.source == "exact":
        return (
            f"No note{where} contains every term of {quote(result.query)}. Try fewer terms, "
            "or vault_semantic_query to search by meaning."
        )
    return (
        f"Nothing{where} matches {quote(result.query)}. Try other words, a wider folder, or "
        "vault_tree to see what the vault holds."
    )


def source_text(source: str) -> str:
    """The sources that answered, in words ("smart-search+local-index": both)."""
    return " + ".join(SOURCE_LABELS.get(part, part) for part in source.split("+"))


def _first_line(result: SearchResult) -> str:
    label = source_text(result.source)
    line = f"{quote(result.query)} · {label}"
    if result.folder:
        line += f" · folder {result.folder}/"
    if result.source_note:
        line += f" ({result.source_note})"
    return line


def frame_tokens(result: SearchResult) -> int:
    """What the response costs besides its file groups: first line, rule and footer."""
    return estimate_tokens("\n".join([_first_line(result), "---", footer(result)])) + 2


def format_search(result: SearchResult, *, concise: bool = False) -> str:
    if not result.groups:
        return _first_line(result) + "\n" + _empty(result)
    lines = [_first_line(result)]
    for group in result.groups:
        if concise:
            sections = "; ".join(" > ".join(h.section) or "(top)" for h in group.passages)
            count = f" · {group.matches} matches" if group.matches is not None else ""
            lines.append(
                f"- {group.context.path} ({group.context.title}) · score "
                f"{group.passages[0].score:.2f}{count} · {sections}"
            )
            continue
        lines.append(group_header(group.context, group.matches))
        lines.extend(passage_block(hit) for hit in group.passages)
    lines.append("---")
    lines.append(footer(result))
    return "\n".join(lines)


def passage_data(hit: PassageHit, concise: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "link": obsidian_link(hit.path, hit.section),
        "section": list(hit.section),
        "score": hit.score,
    }
    if not concise:
        data.update(
            label="passage",
            text=hit.text,
            cut_before=hit.cut_before,
            cut_after=hit.cut_after,
            start=hit.start,
            end=hit.end,
        )
    return data


def _group_data(group: FileGroup, concise: bool) -> dict[str, Any]:
    context = group.context
    data: dict[str, Any] = {"path": context.path, "title": context.title}
    if group.matches is not None:
        data["matches"] = group.matches
    if not concise:
        data.update(tokens=context.tokens, tags=list(context.tags))
        if context.gist:
            data["summary"] = context.gist
    data["passages"] = [passage_data(hit, concise) for hit in group.passages]
    return data


def search_data(result: SearchResult, *, concise: bool = False) -> dict[str, Any]:
    return {
        "query": result.query,
        "folder": result.folder,
        "source": result.source,
        "source_note": result.source_note,
        "shown": result.shown,
        "total_passages": result.total_passages,
        "total_files": result.total_files,
        "groups": [_group_data(group, concise) for group in result.groups],
        "left_out_for_budget": [
            {"path": hit.path, "section": list(hit.section)} for hit in result.over_budget
        ],
        "next": next_calls(result),
    }
