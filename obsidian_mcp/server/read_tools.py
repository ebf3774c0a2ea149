"""Read tools: read a note, peek at its outline, the tree, the match map, the scratch note."""

from datetime import UTC, datetime
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from obsidian_mcp import reading
from obsidian_mcp.limits import (
    MAX_HEADING_CHARS,
    MAX_NOTE_OFFSET,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    MAX_QUERY_WORDS,
)
from obsidian_mcp.paths import note_name
from obsidian_mcp.reading import (
    MAX_SCRATCH_CHARS,
    FolderNode,
    NoteOutline,
    NoteWindow,
    SearchMap,
)
from obsidian_mcp.retrieval.across import merged_map
from obsidian_mcp.retrieval.render import echo, echo_argument
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.common import (
    APPEND_ONLY,
    READ_ONLY,
    OutputFormat,
    VaultName,
    app_state,
    results_of,
    search_every_vault,
    to_json,
    vault_call,
)
from obsidian_mcp.text.wording import plural
from obsidian_mcp.usage.facts import returned

NotePath = Annotated[
    str,
    Field(max_length=MAX_PATH_CHARS, description="Vault path; .md optional."),
]
# Folders listed per level before the rest are summarised; keeps a big vault's tree cheap.
_TREE_ITEMS_PER_FOLDER = 12
# Note names that introduce their folder, besides the folder's own name.
_INDEX_STEMS = frozenset({"index", "_index", "readme", "home", "overview", "moc"})


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_window(window: NoteWindow) -> str:
    tags = f" · tags: {', '.join(window.tags)}" if window.tags else ""
    modified = f" · modified {window.modified}" if window.modified else ""
    header = (
        f"{window.path} · [[{note_name(window.path)}]] · {window.note_tokens:,} tokens"
        f"{tags}{modified}"
    )
    scope = f"section: {window.section} · " if window.section else ""
    # A PDF's text is the server's extraction, not the file: said so, and nothing to edit.
    origin = window.extracted or f"version {window.version}"
    lines = [
        header,
        f"{scope}chars {window.offset:,}-{window.end:,} of {window.total_chars:,} · {origin}",
        "",
    ]
    lines.append(window.text)
    if window.next_offset is not None:
        heading = f", heading={_quote(window.section)}" if window.section else ""
        lines.append("")
        lines.append(
            f"[cut at char {window.end:,} of {window.total_chars:,}; continue with "
            f"vault_read_note(path={_quote(window.path)}{heading}, offset={window.next_offset})]"
        )
    return "\n".join(lines)


def format_outline(outline: NoteOutline) -> str:
    facts = [f"{outline.tokens:,} tokens"]
    if outline.tags:
        facts.append("tags: " + ", ".join(outline.tags))
    if outline.aliases:
        facts.append("aliases: " + ", ".join(outline.aliases))
    if outline.extracted:
        facts.append(outline.extracted)
    else:
        facts.append(f"{plural(outline.links, 'link')} ({outline.unresolved_links:,} unresolved)")
        facts.append(f"version {outline.version}")
    lines = [f"# {outline.title} ({outline.path})", " · ".join(facts)]
    if outline.frontmatter_error:
        lines.append(f"frontmatter could not be parsed: {outline.frontmatter_error}")
    elif outline.frontmatter_keys:
        lines.append("frontmatter: " + ", ".join(outline.frontmatter_keys))
    if outline.gist:
        lines.append(f"gist (summary): {outline.gist}")
    if outline.extracted:
        lines.append(f"next: vault_read_note(path={_quote(outline.path)}) reads its text")
        return "\n".join(lines)
    if outline.outline:
        lines.append("outline (tokens to read each section with its subsections):")
        lines.extend(
            f"{'  ' * (entry.level - 1)}- {entry.heading} ({entry.tokens:,})"
            for entry in outline.outline
        )
    else:
        lines.append("no headings")
    lines.append(f"next: vault_read_note(path={_quote(outline.path)}, heading=<a heading above>)")
    return "\n".join(lines)


def _is_index_note(folder: str, path: str) -> bool:
    """The note that introduces its folder: `Sessions/Session Index.md`, `Lore/Lore.md`."""
    stem = path.rpartition("/")[2].removesuffix(".md").lower()
    name = folder.rpartition("/")[2].lower()
    return stem == name or stem in _INDEX_STEMS or stem.endswith((" index", " moc"))


def _shown_count(total: int) -> int:
    # A "… 1 more" line costs what the item itself costs: show it instead.
    return total if total <= _TREE_ITEMS_PER_FOLDER + 1 else _TREE_ITEMS_PER_FOLDER


def _tree_lines(node: FolderNode, depth: int, indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    folders = sorted(node.folders.values(), key=lambda f: f.name.lower())
    shown_folders = _shown_count(len(folders))
    for child in folders[:shown_folders]:
        counts = plural(child.note_count, "note")
        if child.attachment_count:
            counts += ", " + plural(child.attachment_count, "attachment")
        if not child.note_count and not child.attachment_count and not child.folders:
            counts = "empty"
        lines.append(f"{pad}{child.name}/ ({counts})")
        if depth > 1:
            _tree_lines(child, depth - 1, indent + 1, lines)
    if len(folders) > shown_folders:
        lines.append(f"{pad}… {plural(len(folders) - shown_folders, 'more folder')}")
    # The folder's index note first, so folding never hides the note that explains it.
    files = sorted(
        node.notes + node.attachments,
        key=lambda path: (not _is_index_note(node.path, path), path.lower()),
    )
    shown_files = _shown_count(len(files))
    lines.extend(f"{pad}{path.rpartition('/')[2]}" for path in files[:shown_files])
    if len(files) > shown_files:
        lines.append(f"{pad}… {plural(len(files) - shown_files, 'more file')}")


def format_tree(node: FolderNode, depth: int) -> str:
    where = node.path + "/" if node.path else "vault root"
    lines = [
        f"{where}: {plural(node.note_count, 'note')}, {plural(node.folder_count, 'folder')}, "
        f"{plural(node.attachment_count, 'attachment')} (to depth {depth})"
    ]
    _tree_lines(node, depth, 0, lines)
    return "\n".join(lines)


def tree_data(node: FolderNode, depth: int) -> dict[str, object]:
    data: dict[str, object] = {
        "path": node.path,
        "notes": node.note_count,
        "attachments": node.attachment_count,
        "folders": node.folder_count,
    }
    if depth > 0:
        data["children"] = [
            tree_data(child, depth - 1)
            for child in sorted(node.folders.values(), key=lambda f: f.name.lower())
        ]
        data["files"] = sorted(node.notes + node.attachments, key=str.lower)
    return data


def format_search_map(result: SearchMap) -> str:
    # Said without "in the vault": the map may be of every vault the server serves.
    where = f" in {result.folder}/" if result.folder else ""
    if not result.rows:
        return (
            f"No note{where} contains every word of {echo(result.query)}. Try fewer or "
            "other words, or vault_semantic_query for meaning rather than exact words."
        )
    lines = [
        f"{plural(result.total_matches, 'match', 'matches')} of {echo(result.query)} in "
        f"{plural(result.total_files, 'file')}{where}:"
    ]
    for row in result.rows:
        name = row.path + "/" if row.is_folder else row.path
        files = f" in {plural(row.files, 'file')}" if row.is_folder else ""
        lines.append(f"- {name}: {plural(row.matches, 'match', 'matches')}{files}")
    top = result.rows[0]
    step = (
        f"vault_search_map(query={echo_argument(result.query)}, folder={_quote(top.path)})"
        if top.is_folder
        else f"vault_peek_file(path={_quote(top.path)})"
    )
    lines.append(f"next: {step}, or vault_smart_search for the matching passages")
    return "\n".join(lines)


def register_read_tools(mcp: MCPServer[AppState]) -> None:
    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_read_note(
        path: NotePath,
        ctx: Context[AppState],
        heading: Annotated[
            str | None,
            Field(
                max_length=MAX_HEADING_CHARS,
                description="This section ('A > B') or block ('^id'), as replace takes it.",
            ),
        ] = None,
        offset: Annotated[
            int,
            Field(ge=0, le=MAX_NOTE_OFFSET, description="Where a cut read continues."),
        ] = 0,
        max_chars: Annotated[
            int | None,
            Field(ge=200, le=100_000, description="Most characters (default 6,000)."),
        ] = None,
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """A note's text verbatim: whole, a section (heading) or from an offset. A cut
        read's version names its window, for replace."""
        async with vault_call(ctx, vault, path) as call:
            window = await reading.read_note_window(
                call.services.vault,
                call.path,
                heading=heading,
                offset=offset,
                max_chars=max_chars or app_state(ctx).settings.read_max_chars,
            )
        window = call.shown(window)
        returned(window)
        return to_json(window) if format == "json" else format_window(window)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_peek_file(
        path: NotePath,
        ctx: Context[AppState],
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """A note's outline, no text: title, tags, size, frontmatter keys, gist, headings with
        their tokens."""
        async with vault_call(ctx, vault, path) as call:
            services = call.services
            outline = call.shown(
                await reading.peek_note(services.vault, call.path, services.retriever.link_resolver)
            )
        returned(outline)
        return to_json(outline) if format == "json" else format_outline(outline)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_tree(
        ctx: Context[AppState],
        folder: Annotated[
            str,
            Field(max_length=MAX_PATH_CHARS, description="Start here; '' is the root."),
        ] = "",
        depth: Annotated[int, Field(ge=1, le=6, description="Levels shown.")] = 2,
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """Folders with note counts, and notes, to a depth; no note text."""
        async with vault_call(ctx, vault, folder) as call:
            node = call.shown(await reading.vault_tree(call.services.vault, call.path))
        return to_json(tree_data(node, depth)) if format == "json" else format_tree(node, depth)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_search_map(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description=f"Words that must all occur (at most {MAX_QUERY_WORDS}).",
            ),
        ],
        ctx: Context[AppState],
        folder: Annotated[
            str,
            Field(max_length=MAX_PATH_CHARS, description="Count under this folder."),
        ] = "",
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """Where exact words cluster: match counts per folder and file, no text."""
        searched = await search_every_vault(
            ctx,
            vault,
            folder,
            lambda call: reading.search_map(call.services.retriever.text_hits, query, call.path),
        )
        result = merged_map(results_of(searched.found))
        returned(result)
        return searched.notes + (to_json(result) if format == "json" else format_search_map(result))

    @mcp.tool(annotations=APPEND_ONLY, structured_output=False)
    async def vault_scratch_append(
        text: Annotated[
            str,
            Field(min_length=1, max_length=MAX_SCRATCH_CHARS, description="Markdown to append."),
        ],
        ctx: Context[AppState],
        vault: VaultName = None,
    ) -> str:
        """Append a timestamped entry to your scratch note, a notepad the user can read."""
        scratch = app_state(ctx).settings.scratch_path
        async with vault_call(ctx, vault) as call:
            path = await reading.append_scratch(
                call.services.vault, scratch, text, datetime.now(UTC)
            )
        return f"Appended to {call.shown_path(path)}."
