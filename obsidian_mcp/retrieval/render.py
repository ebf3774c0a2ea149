# pyright: strict
"""Search results as compact markdown for a model to read, or as the same data in JSON.

Every passage is labelled: `passage` for verbatim note text, `summary` for text this
server derived (a file's gist), so nothing generated passes for a quote.
"""

import json
from typing import Any

from obsidian_mcp.limits import QUERY_ECHO_CHARS, clip
from obsidian_mcp.paths import note_name
from obsidian_mcp.retrieval.cutting import PassageHit
from obsidian_mcp.retrieval.packing import FileContext, FileGroup, SearchResult
from obsidian_mcp.text.markdown import heading_reference
from obsidian_mcp.text.snippets import ELLIPSIS
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.text.wording import plural

# What each source is, in words; a response names every source that answered.
SOURCE_LABELS = {
    "smart-search": "Smart Connections via /search/smart",
    "custom-route": "custom route",
    "smart-env": "stored Smart Connections vectors (the query embedded by the local model)",
    "smart-env-prf": "stored Smart Connections vectors (expanded from the best keyword hits)",
    "local-index": "the server's local passage index",
    "lexical-fallback": "lexical-fallback: keywords only, no semantic source answered",
    "exact": "exact terms, case-insensitive",
}
# Sources that rank by meaning; their labels read "semantic: A + B, fused with keywords".
_SEMANTIC = frozenset({"smart-search", "custom-route", "smart-env", "smart-env-prf", "local-index"})


def quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def echo(query: str) -> str:
    """A query as a reply quotes it: whole when short, else its start and its length."""
    if len(query) <= QUERY_ECHO_CHARS:
        return quote(query)
    return quote(query[:QUERY_ECHO_CHARS]) + f"… ({len(query):,} characters)"


def echo_argument(query: str) -> str:
    """A query as a suggested call passes it: whole when short; a long one is the model's
    own and is not worth repeating."""
    return quote(query) if len(query) <= QUERY_ECHO_CHARS else "<the same query>"


def obsidian_link(path: str, section: tuple[str, ...]) -> str:
    """The link Obsidian opens at the section, its heading path as the breadcrumb:
    `[[Note#Heading#Subheading]]` is Obsidian's own syntax for a heading under another."""
    return "[[" + "#".join([note_name(path), *section]) + "]]"


def read_call(path: str, section: tuple[str, ...]) -> str:
    heading = f", heading={quote(heading_reference(section))}" if section else ""
    return f"vault_read_note(path={quote(path)}{heading})"


def group_header(context: FileContext, matches: int | None = None) -> str:
    facts = [f"## {context.path}"]
    if context.title != note_name(context.path):
        facts[0] += f" ({context.title})"
    if matches is not None:
        facts.append(plural(matches, "match", "matches"))
    facts.append(f"{context.tokens:,} tokens")
    if context.replaced:
        facts.append(context.replaced)
    facts.extend(f"{key} {day}" for key, day in context.dates)
    if context.tags:
        facts.append(" ".join("#" + tag for tag in context.tags))
    lines = [" · ".join(facts)]
    if context.gist:
        lines.append(f"summary: {context.gist}")
    return "\n".join(lines)


def passage_block(hit: PassageHit) -> str:
    # The link carries the breadcrumb; written out beside it as well, it cost a reply of
    # five passages about 40 tokens (python -m bench.retrieval.vaults, issue 20).
    head = f"### {obsidian_link(hit.path, hit.section)} · score {hit.score:.2f} · passage"
    text = (ELLIPSIS if hit.cut_before else "") + hit.text + (ELLIPSIS if hit.cut_after else "")
    return head + "\n" + text


def passage_cost(hit: PassageHit) -> int:
    return estimate_tokens(passage_block(hit)) + 1


def group_cost(context: FileContext) -> int:
    # The widest header a group can get (with a match count), plus its line break.
    return estimate_tokens(group_header(context, 10**6)) + 1


def _concise_section(hit: PassageHit) -> str:
    return " > ".join(hit.section) or "(top)"


def concise_line(group: FileGroup) -> str:
    """A group as concise=true shows it: path, title, best score, match count, sections."""
    count = f" · {plural(group.matches, 'match', 'matches')}" if group.matches is not None else ""
    sections = "; ".join(dict.fromkeys(_concise_section(hit) for hit in group.passages))
    return (
        f"- {group.context.path} ({group.context.title}) · score {group.score:.2f}{count} · "
        f"{sections}"
    )


def concise_passage_cost(hit: PassageHit) -> int:
    return estimate_tokens(_concise_section(hit) + "; ")


def concise_group_cost(context: FileContext) -> int:
    # Its line without sections, at its widest (a match count), plus its line break.
    return estimate_tokens(concise_line(FileGroup(context, (), 10**6))) + 1


def _continuation(result: SearchResult) -> str:
    args = [f"query={echo_argument(result.query)}", f"limit={result.limit * 2}"]
    if result.folder:
        args.append(f"folder={quote(result.folder)}")
    return f"{result.tool}({', '.join(args)})"


def next_calls(result: SearchResult) -> list[str]:
    """The calls that continue this search: more of it, and the best section with more to
    read than the reply shows (`packing.next_read`)."""
    calls: list[str] = []
    if result.total_passages > result.shown:
        calls.append(_continuation(result))
    if result.read_next is not None:
        calls.append(read_call(result.read_next.path, result.read_next.section))
    return calls


def _units(result: SearchResult, count: int) -> str:
    if result.source == "exact":
        return plural(count, "match", "matches")
    return plural(count, "passage")


def footer(result: SearchResult) -> str:
    # Passages first, as the reader counts them; then the files they came from.
    lines = [
        f"showing {result.shown} of {_units(result, result.total_passages)}, from "
        f"{len(result.groups)} of {plural(result.total_files, 'file')}"
    ]
    if result.over_budget:
        # The best passage left out, as the call that reads it; naming the next ones too
        # cost about 40 tokens a reply (the JSON lists them).
        first = result.over_budget[0]
        lines.append(
            f"left out to stay within max_tokens={result.max_tokens}, the best: "
            f"{read_call(first.path, first.section)}; or call again with "
            f"max_tokens={result.max_tokens * 2}"
        )
    calls = next_calls(result)
    if calls:
        lines.append("next: " + " or ".join(calls))
    return "\n".join(lines)


def _empty(result: SearchResult) -> str:
    where = f" in {result.folder}/" if result.folder else ""
    if result.source == "exact":
        return (
            f"No note{where} contains every term of {echo(result.query)}. Try fewer terms, "
            "or vault_semantic_query to search by meaning."
        )
    return (
        f"Nothing{where} matches {echo(result.query)}. Try other words, a wider folder, or "
        "vault_tree to see what the vault holds."
    )


def source_text(source: str) -> str:
    """The sources that answered, in words ("smart-search+local-index": both)."""
    parts = source.split("+")
    if all(part in _SEMANTIC for part in parts):
        names = " + ".join(SOURCE_LABELS[part] for part in parts)
        return f"semantic: {names}, fused with keywords"
    return " + ".join(SOURCE_LABELS.get(part, part) for part in parts)


def _first_line(result: SearchResult) -> str:
    label = source_text(result.source)
    line = f"{echo(result.query)} · {label}"
    # A whole vault of several ("lore:") is in every path shown already.
    if result.folder and not result.folder.endswith(":"):
        line += f" · folder {result.folder}/"
    if result.source_note:
        line += f" ({result.source_note})"
    return line


def weak_match_line(result: SearchResult) -> str:
    """What a reply says when even its best passage is only weakly about the question:
    the scores are relative to that passage, so it reads 1.00 all the same."""
    strength = result.strength
    if strength is None:
        return ""
    if strength.measure == "meaning":
        why = f"nothing here is close in meaning (best similarity {strength.value:.2f})"
    else:
        why = f"no passage holds its words (best {strength.value:.0%} of their weight)"
    return (
        f"weak match: {why}; the nearest passages follow, likely no answer: say so, or try "
        "other words or vault_smart_search for exact names."
    )


def _head(result: SearchResult) -> list[str]:
    return [_first_line(result), *([weak_match_line(result)] if result.weak else [])]


def frame_tokens(result: SearchResult) -> int:
    """What the response costs besides its file groups: first lines, rule and footer."""
    return estimate_tokens("\n".join([*_head(result), "---", footer(result)])) + 2


def format_search(result: SearchResult, *, concise: bool = False) -> str:
    if not result.groups:
        if result.over_budget:  # passages matched, but not even one fits max_tokens
            return "\n".join([_first_line(result), "---", footer(result)])
        return _first_line(result) + "\n" + _empty(result)
    lines = _head(result)
    for group in result.groups:
        if concise:
            lines.append(concise_line(group))
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
        if context.dates:
            data["dates"] = dict(context.dates)
        if context.replaced:
            data["replaced"] = context.replaced
        if context.gist:
            data["summary"] = context.gist
    data["passages"] = [passage_data(hit, concise) for hit in group.passages]
    return data


def _json_tokens(data: dict[str, Any]) -> int:
    return estimate_tokens(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def search_data(result: SearchResult, *, concise: bool = False) -> dict[str, Any]:
    groups = [_group_data(group, concise) for group in result.groups]
    left_out: list[dict[str, Any]] = [
        {"path": hit.path, "section": list(hit.section)} for hit in result.over_budget
    ]
    data: dict[str, Any] = {
        "query": clip(result.query, QUERY_ECHO_CHARS),
        "folder": result.folder,
        "source": result.source,
        "source_note": result.source_note,
        "weak_match": result.weak,
        "shown": result.shown,
        "total_passages": result.total_passages,
        "total_files": result.total_files,
        "groups": groups,
        "left_out_for_budget": left_out,
        "next": next_calls(result),
    }
    if result.strength is not None:
        data["match_strength"] = {
            "measure": result.strength.measure,
            "value": round(result.strength.value, 2),
        }
    # The packing measured the markdown; JSON spends more per passage (keys, escapes). The
    # passages that push it past the budget join the left-out list, the last first, and
    # the first always stays (the fuzzer found 15 passages at 1.5x a 573-token budget).
    while _json_tokens(data) > result.max_tokens and data["shown"] > 1:
        last = groups[-1]
        passage = last["passages"].pop()
        left_out.insert(0, {"path": last["path"], "section": passage["section"]})
        if not last["passages"]:
            groups.pop()
        data["shown"] -= 1
    return data
