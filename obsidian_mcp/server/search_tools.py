"""Search tools: ranked passages for a question, exact matches, a note's neighbourhood,
and a topic overview. Thin: arguments in, `obsidian_mcp.retrieval` does the work."""

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from obsidian_mcp.limits import MAX_PATH_CHARS, MAX_QUERY_CHARS
from obsidian_mcp.retrieval.across import (
    answer_relevance,
    answers_across,
    merged_quick_context,
    merged_search,
    shown_hits,
)
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
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.common import (
    READ_ONLY,
    MaxTokens,
    OutputFormat,
    Searched,
    VaultName,
    search_every_vault,
    to_json,
    vault_call,
)
from obsidian_mcp.usage.facts import returned


def json_quick_context(context: QuickContext) -> str:
    return to_json(quick_context_data(context))


Folder = Annotated[str, Field(max_length=MAX_PATH_CHARS, description="Only under this folder.")]
Concise = Annotated[bool, Field(description="Paths and scores only.")]


async def _relevance(
    query: str, searched: Searched[SearchResult] | Searched[QuickContext]
) -> dict[str, float] | None:
    """How near in meaning each vault's answer is (`across.answer_relevance`); None for one."""
    if len(searched.found) < 2:
        return None
    answers = [
        (
            call.name,
            call.services.retriever,
            shown_hits(found) if isinstance(found, SearchResult) else found.previews,
        )
        for call, found in searched.found
    ]
    return await answer_relevance(query, answers)


async def _render_search(
    query: str, searched: Searched[SearchResult], *, format: str, concise: bool
) -> str:
    return _render_merged(searched, await _relevance(query, searched), format, concise)


def _render_merged(
    searched: Searched[SearchResult],
    relevance: dict[str, float] | None,
    format: str,
    concise: bool,
) -> str:
    result = merged_search(
        [(call.name, call.shown(found)) for call, found in searched.found],
        relevance,
        concise=concise,
    )
    returned(result)
    if format == "json":
        return searched.notes + to_json(search_data(result, concise=concise))
    return searched.notes + format_search(result, concise=concise)


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
        vault: VaultName = None,
    ) -> str:
        """Default for any question: the passages that answer it, verbatim, grouped by note
        with heading, link and score."""
        searched = await search_every_vault(
            ctx,
            vault,
            folder,
            lambda call: call.services.retriever.offered_passages(
                query, limit=limit, folder=call.path, progress=_progress(ctx)
            ),
        )
        results, relevance = await answers_across(
            [(call.name, call.services.retriever, found) for call, found in searched.found],
            limit=limit,
            max_tokens=max_tokens,
            include_context=include_context,
            concise=concise,
        )
        answered = Searched(
            [(call, result) for (call, _), result in zip(searched.found, results, strict=True)],
            searched.failures,
        )
        return _render_merged(answered, relevance, format, concise)

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
        vault: VaultName = None,
    ) -> str:
        """Exact words or quoted phrases (names, code terms): each note holding all, its
        matches as snippets, with counts."""
        searched = await search_every_vault(
            ctx,
            vault,
            folder,
            lambda call: call.services.retriever.smart_search(
                query,
                limit=limit,
                snippet_length=snippet_length,
                folder=call.path,
                max_tokens=max_tokens,
                concise=concise,
            ),
        )
        return await _render_search(query, searched, format=format, concise=concise)

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
        vault: VaultName = None,
    ) -> str:
        """A note's links, backlinks and similar unlinked notes, each with why."""
        async with vault_call(ctx, vault, path) as call:
            related = await find_related(
                call.services.retriever, call.path, limit=limit, progress=_progress(ctx)
            )
        related = call.shown(related)
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
        vault: VaultName = None,
    ) -> str:
        """A topic's overview before deeper work: main notes with gists, links, themes, key
        passages."""
        searched = await search_every_vault(
            ctx,
            vault,
            "",
            lambda call: quick_context(
                call.services.retriever, topic, max_tokens=max_tokens, progress=_progress(ctx)
            ),
        )
        context = merged_quick_context(
            [(call.name, call.shown(found)) for call, found in searched.found],
            await _relevance(topic, searched),
        )
        render = json_quick_context if format == "json" else format_quick_context
        shown = within_budget(context, render)
        returned(shown)
        if format == "json":
            return searched.notes + to_json(quick_context_data(shown))
        return searched.notes + format_quick_context(shown)
