"""Search tools: ranked passages for a question, exact matches, a note's neighbourhood,
and a topic overview. Thin: arguments in, `obsidian_mcp.retrieval` does the work."""

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from obsidian_mcp.limits import MAX_PATH_CHARS, MAX_QUERY_CHARS, MAX_QUERY_WORDS
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
    OutputFormat,
    app_state,
    to_json,
    tool_errors,
)


def json_quick_context(context: QuickContext) -> str:
    return to_json(quick_context_data(context))


Folder = Annotated[
    str,
    Field(
        max_length=MAX_PATH_CHARS,
        description="Search only this folder and its subfolders, e.g. 'Characters' "
        "(default '': the whole vault). vault_tree shows the folders. At most "
        f"{MAX_PATH_CHARS:,} characters.",
    ),
]
MaxTokens = Annotated[
    int | None,
    Field(
        ge=100,
        le=20_000,
        description="Token budget of the reply, 100 to 20,000 (tokens ~ characters / 4); "
        "default: the "
        "server's budget, 1,000 unless configured. Passages that do not fit are named in "
        "the footer with the call that gets them.",
    ),
]
Concise = Annotated[
    bool,
    Field(description="true: paths, titles and scores only, no text (cheapest)."),
]


def _retriever(ctx: Context[AppState]) -> Retriever:
    return app_state(ctx).require().retriever


def _render_search(result: SearchResult, *, format: str, concise: bool) -> str:
    if format == "json":
        return to_json(search_data(result, concise=concise))
    return format_search(result, concise=concise)


def _progress(ctx: Context[AppState]) -> ProgressCallback:
    # A cold first query indexes the vault; the client sees how far it got.
    async def report(done: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(done, total, message)

    return report


def register_search_tools(mcp: MCPServer[AppState]) -> None:
    @mcp.tool(
        title="Answer a question from the vault", annotations=READ_ONLY, structured_output=False
    )
    async def vault_semantic_query(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="The question or topic in plain words, e.g. 'what is Mira "
                "afraid of'. Write it as you would ask a person; no search syntax. At most "
                f"{MAX_QUERY_CHARS:,} characters.",
            ),
        ],
        ctx: Context[AppState],
        limit: Annotated[
            int, Field(ge=1, le=50, description="Most passages to return, 1 to 50 (default 5).")
        ] = 5,
        include_context: Annotated[
            bool,
            Field(
                description="Head each file's passages with its one-line gist and tags "
                "(default true); false saves a few tokens per file."
            ),
        ] = True,
        folder: Folder = "",
        max_tokens: MaxTokens = None,
        concise: Concise = False,
        format: OutputFormat = "markdown",
    ) -> str:
        """THE default tool for any question about the vault's content: returns the few
        passages that answer it (verbatim, cut at sentence boundaries), grouped by note,
        each with its heading, Obsidian link and score, within a token budget.

        Ranking fuses meaning (the server's local passage index; Smart Connections while
        that index is being built) with keywords; the first line says which sources
        ranked it ('lexical-fallback' means keywords only).
        Start here. If the answer is cut or missing, follow the footer: a larger limit,
        or vault_read_note(path, heading) for the whole section. For exact names or
        quotes use vault_smart_search; for an overview of a topic, vault_quick_context.
        """
        with tool_errors():
            result = await _retriever(ctx).semantic_query(
                query,
                limit=limit,
                folder=folder,
                max_tokens=max_tokens,
                include_context=include_context,
                progress=_progress(ctx),
            )
        return _render_search(result, format=format, concise=concise)

    @mcp.tool(title="Find exact words or phrases", annotations=READ_ONLY, structured_output=False)
    async def vault_smart_search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="Exact terms, all of which must occur; put phrases in double "
                "quotes: '\"sluice keys\" Tomas'. Case does not matter. At most "
                f"{MAX_QUERY_WORDS} words and {MAX_QUERY_CHARS:,} characters.",
            ),
        ],
        ctx: Context[AppState],
        limit: Annotated[
            int,
            Field(ge=1, le=100, description="Most snippets to return, 1 to 100 (default 10)."),
        ] = 10,
        snippet_length: Annotated[
            int,
            Field(
                ge=40,
                le=2000,
                description="Most characters per snippet, 40 to 2,000 (default 200).",
            ),
        ] = 200,
        folder: Folder = "",
        max_tokens: MaxTokens = None,
        concise: Concise = False,
        format: OutputFormat = "markdown",
    ) -> str:
        """Keyword precision: every note containing all the exact terms or "quoted
        phrases", each match as a snippet cut at sentence or word boundaries, grouped by
        note with its match count. Notes named after a term rank first.

        Use for names, quotes, code terms or tags, when you know the words. For a question
        in your own words use vault_semantic_query instead; to see only where a term is
        concentrated, vault_search_map.
        """
        with tool_errors():
            result = await _retriever(ctx).smart_search(
                query,
                limit=limit,
                snippet_length=snippet_length,
                folder=folder,
                max_tokens=max_tokens,
                progress=_progress(ctx),
            )
        return _render_search(result, format=format, concise=concise)

    @mcp.tool(
        title="A note's links, backlinks and similar notes",
        annotations=READ_ONLY,
        structured_output=False,
    )
    async def vault_find_related(
        path: Annotated[
            str,
            Field(
                max_length=MAX_PATH_CHARS,
                description="Vault path of the note, e.g. 'Characters/Rook.md' (as search "
                "results give it; the .md may be left off). At most "
                f"{MAX_PATH_CHARS:,} characters.",
            ),
        ],
        ctx: Context[AppState],
        limit: Annotated[
            int,
            Field(ge=1, le=50, description="Most notes per list, 1 to 50 (default 5)."),
        ] = 5,
        concise: Concise = False,
        format: OutputFormat = "markdown",
    ) -> str:
        """A note's neighbourhood: the notes it links to (a link to a missing note shows
        with no path), the notes linking to it, and similar notes not linked yet, each
        with why (the sentence holding the link, shared tags and links, or the passage).

        Use after a search found a central note, to explore what connects to it. It reads
        no note text beyond those reasons; read a neighbour with vault_read_note.
        """
        with tool_errors():
            related = await find_related(
                _retriever(ctx), path, limit=limit, progress=_progress(ctx)
            )
        if format == "json":
            return to_json(related_data(related, concise=concise))
        return format_related(related, concise=concise)

    @mcp.tool(title="Overview of a topic", annotations=READ_ONLY, structured_output=False)
    async def vault_quick_context(
        topic: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="A person, place, event or idea, e.g. 'the Drowning of Caddow "
                f"Reach'. At most {MAX_QUERY_CHARS:,} characters.",
            ),
        ],
        ctx: Context[AppState],
        max_tokens: MaxTokens = None,
        format: OutputFormat = "markdown",
    ) -> str:
        """A short recon report on a topic before deeper work: the main notes about it
        (with one-line gists), the people, places and things they link to, the themes
        (tags) running through them, up to three key passages, and the next call.

        Extractive: lines marked 'summary' are counts and gists this server derived;
        'passage' is verbatim note text. To answer a specific question, use
        vault_semantic_query instead.
        """
        with tool_errors():
            context = await quick_context(
                _retriever(ctx), topic, max_tokens=max_tokens, progress=_progress(ctx)
            )
        if format == "json":
            return to_json(quick_context_data(within_budget(context, json_quick_context)))
        return format_quick_context(within_budget(context, format_quick_context))
