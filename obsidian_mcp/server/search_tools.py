"""Search tools: ranked passages for a question, exact matches, a note's neighbourhood,
and a topic overview. Thin: arguments in, `obsidian_mcp.retrieval` does the work."""

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from obsidian_mcp.limits import MAX_PATH_CHARS, MAX_QUERY_CHARS
from obsidian_mcp.retrieval.corpus import ProgressCallback
from obsidian_mcp.retrieval.packing import SearchResult
from obsidian_mcp.retrieval.quick_context import QuickContext, quick_context
from obsidian_mcp.retrieval.related import find_related
from obsidian_mcp.retrieval.render import format_search, search_data
from obsidian_mcp.retrieval.render_topics import (
    format_quick_context,
    format_related,
    quick_context_data,
    related_data,
    within_budget,
)
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.common import (
    READ_ONLY,
    MaxTokens,
    OutputFormat,
    app_state,
    to_json,
    tool_errors,
)
from obsidian_mcp.usage.facts import returned


def json_quick_context(context: QuickContext) -> str:
    return to_json(quick_context_data(context))


Folder = Annotated[str, Field(max_length=MAX_PATH_CHARS, description="Only under this folder.")]
Concise = Annotated[bool, Field(description="Paths and scores only.")]


def _retriever(ctx: Context[AppState]) -> Retriever:
    return app_state(ctx).require().retriever


def _render_search(result: SearchResult, *, format: str, concise: bool) -> str:
    returned(result)
    if format == "json":
        return to_json(search_data(result, concise=concise))
    return format_search(result, concise=concise)


def _progress(ctx: Context[AppState]) -> ProgressCallback:
    # A cold first query indexes the vault; the client sees how far it got.
    async def report(done: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(done, total, message)

    return report


def register_search_tools(mcp: MCPServer[AppState]) -> None:
    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_semantic_query(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="The question, in plain words.",
            ),
        ],
        ctx: Context[AppState],
        limit: Annotated[int, Field(ge=1, le=50, description="Most passages.")] = 5,
        include_context: Annotated[bool, Field(description="Each note's gist and tags.")] = True,
        folder: Folder = "",
        max_tokens: MaxTokens = None,
        concise: Concise = False,
        format: OutputFormat = "markdown",
    ) -> str:
        """Default for any question: the passages that answer it, verbatim, grouped by note
        with heading, link and score."""
        with tool_errors():
            result = await _retriever(ctx).semantic_query(
                query,
                limit=limit,
                folder=folder,
                max_tokens=max_tokens,
                include_context=include_context,
                concise=concise,
                progress=_progress(ctx),
            )
        return _render_search(result, format=format, concise=concise)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_smart_search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description='All must occur; "quote phrases".',
            ),
        ],
        ctx: Context[AppState],
        limit: Annotated[int, Field(ge=1, le=100, description="Most snippets.")] = 10,
        snippet_length: Annotated[
            int, Field(ge=40, le=2000, description="Characters per snippet.")
        ] = 200,
        folder: Folder = "",
        max_tokens: MaxTokens = None,
        concise: Concise = False,
        format: OutputFormat = "markdown",
    ) -> str:
        """Exact words or quoted phrases (names, code terms): each note holding all, its
        matches as snippets, with counts."""
        with tool_errors():
            result = await _retriever(ctx).smart_search(
                query,
                limit=limit,
                snippet_length=snippet_length,
                folder=folder,
                max_tokens=max_tokens,
                concise=concise,
                progress=_progress(ctx),
            )
        return _render_search(result, format=format, concise=concise)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_find_related(
        path: Annotated[
            str,
            Field(
                max_length=MAX_PATH_CHARS,
                description="Vault path; .md optional.",
            ),
        ],
        ctx: Context[AppState],
        limit: Annotated[int, Field(ge=1, le=50, description="Most notes per list.")] = 5,
        concise: Concise = False,
        format: OutputFormat = "markdown",
    ) -> str:
        """A note's links, backlinks and similar unlinked notes, each with why."""
        with tool_errors():
            related = await find_related(
                _retriever(ctx), path, limit=limit, progress=_progress(ctx)
            )
        returned(related)
        if format == "json":
            return to_json(related_data(related, concise=concise))
        return format_related(related, concise=concise)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_quick_context(
        topic: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="A person, place, event or idea.",
            ),
        ],
        ctx: Context[AppState],
        max_tokens: MaxTokens = None,
        format: OutputFormat = "markdown",
    ) -> str:
        """A topic's overview before deeper work: main notes with gists, links, themes, key
        passages."""
        with tool_errors():
            context = await quick_context(
                _retriever(ctx), topic, max_tokens=max_tokens, progress=_progress(ctx)
            )
        render = json_quick_context if format == "json" else format_quick_context
        shown = within_budget(context, render)
        returned(shown)
        if format == "json":
            return to_json(quick_context_data(shown))
        return format_quick_context(shown)
