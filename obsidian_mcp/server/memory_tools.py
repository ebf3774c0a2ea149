"""Memory tools (remember, recall, forget), the recent-memories resource, and the two
handover prompts. Arguments are parsed here; the work is in `obsidian_mcp.memory`."""

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from obsidian_mcp.limits import MAX_FILTER_TAGS, MAX_ID_CHARS, MAX_MOMENT_CHARS, MAX_QUERY_CHARS
from obsidian_mcp.memory.model import (
    MAX_CONTENT_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TYPE_CHARS,
)
from obsidian_mcp.memory.render import (
    format_memory,
    recall_data,
    render_overview,
    render_recall,
)
from obsidian_mcp.memory.store import MAX_RECALL_LIMIT
from obsidian_mcp.memory.timespec import TimeRange
from obsidian_mcp.server.app import AppState
from obsidian_mcp.server.common import (
    READ_ONLY,
    OutputFormat,
    app_state,
    resource_errors,
    to_json,
    tool_errors,
)

MEMORY_GUIDE = """\
Memory: at the start of a task, call vault_recall (by the tags of the people, projects or
topics involved, or a query) before you search the vault; it is the cheapest answer. When
you learn something worth keeping across sessions (a fact, a decision, a preference, an
event), save it with vault_remember: one idea per memory, 1-3 tags you will recall it by,
and, when it is not obvious, a context saying why it matters. Repeating a memory is
harmless (it is stored once). Retire a memory that became wrong with vault_forget(id),
then remember the correction."""

# Writes one line to the agent's own memory file and never touches notes. Idempotent: the
# same content with the same tags is stored once, and a repeat returns the same id.
REMEMBER = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Destructive: the memory can no longer be recalled and no tool brings it back (compaction
# later erases it from the file). Idempotent: forgetting it again changes nothing.
FORGET = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

_RECENT_DEFAULT = 10
_PROMPT_MEMORIES = 15

Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
Tags = Annotated[
    list[Tag],
    Field(
        max_length=MAX_TAGS,
        description=f"1 to {MAX_TAGS} short labels you will recall this by: people, projects, "
        "places, topics, e.g. ['gale', 'ship']. Lower-cased; a leading '#' is dropped; no "
        f"spaces (write 'dark-forest'); at most {MAX_TAG_CHARS} characters each. Reuse tags "
        "you have used before.",
    ),
]
Kind = Annotated[
    str | None,
    Field(
        max_length=MAX_TYPE_CHARS,
        description="Optional kind, one word: fact, decision, event, preference (at most "
        f"{MAX_TYPE_CHARS} characters).",
    ),
]
Moment = Annotated[str | None, Field(max_length=MAX_MOMENT_CHARS)]


def register_memory_tools(mcp: MCPServer[AppState]) -> None:
    @mcp.tool(title="Remember something", annotations=REMEMBER, structured_output=False)
    async def vault_remember(
        content: Annotated[
            str,
            Field(
                max_length=MAX_CONTENT_CHARS,
                description=f"The thing to remember, self-contained, in a sentence or a short "
                f"paragraph (at most {MAX_CONTENT_CHARS:,} characters). Put long material "
                "in a note and pass its path as source."
            ),
        ],
        tags: Tags,
        ctx: Context[AppState],
        context: Annotated[
            str | None,
            Field(
                max_length=MAX_CONTEXT_CHARS,
                description="Optional: why it matters or when it applies, in a sentence (at "
                f"most {MAX_CONTEXT_CHARS:,} characters). Leave it out if it is obvious.",
            ),
        ] = None,
        type: Kind = None,
        source: Annotated[
            str | None,
            Field(
                max_length=MAX_SOURCE_CHARS,
                description="Optional vault path of the note this came from (at most "
                f"{MAX_SOURCE_CHARS:,} characters).",
            ),
        ] = None,
    ) -> str:
        """Save a memory that lasts across sessions: a fact, decision, preference or event
        worth knowing next time. Stored in the vault's memory file, never in notes.

        Returns the memory's id. The same content with the same tags is stored once; a
        repeat returns the existing id and writes nothing. Find memories again with
        vault_recall.
        """
        with tool_errors():
            result = await app_state(ctx).require().memory.remember(
                content, tags, context or "", type=type, source=source
            )
        memory = result.memory
        tag_list = ", ".join(repr(tag) for tag in memory.tags)
        if not result.created:
            return (
                f"Already remembered as {memory.id} (same content and tags); nothing written. "
                f"Recall with vault_recall(tags=[{tag_list}])."
            )
        return f"Remembered as {memory.id}. Recall with vault_recall(tags=[{tag_list}])."

    @mcp.tool(title="Recall memories", annotations=READ_ONLY, structured_output=False)
    async def vault_recall(
        ctx: Context[AppState],
        tags: Annotated[
            list[Tag] | None,
            Field(
                max_length=MAX_FILTER_TAGS,
                description="Memories with any of these tags (all of them with "
                f"match_all_tags=true), at most {MAX_FILTER_TAGS}. Omit to consider every "
                "memory.",
            ),
        ] = None,
        query: Annotated[
            str | None,
            Field(
                max_length=MAX_QUERY_CHARS,
                description="What you are looking for, in words or a short sentence: "
                "memories that share a word with it (content, context, tags) or are close "
                f"in meaning are returned, best first. At most {MAX_QUERY_CHARS:,} characters.",
            ),
        ] = None,
        time_range: Annotated[
            TimeRange,
            Field(
                description="today (since local midnight), week (last 7 days), month (last "
                "30 days) or all (default)."
            ),
        ] = "all",
        since: Annotated[
            Moment,
            Field(
                description="Only memories from this moment on: '2026-05-01', "
                "'2026-05-01T14:30', or an age such as '12h', '3d', '2w' (at most "
                f"{MAX_MOMENT_CHARS} characters)."
            ),
        ] = None,
        until: Annotated[
            Moment,
            Field(
                description="Only memories before this moment (a date includes that day); "
                f"same forms as since, at most {MAX_MOMENT_CHARS} characters."
            ),
        ] = None,
        type: Annotated[
            str | None,
            Field(
                max_length=MAX_TYPE_CHARS,
                description="Only memories of this kind, e.g. fact, decision, event (at most "
                f"{MAX_TYPE_CHARS} characters).",
            ),
        ] = None,
        limit: Annotated[
            int,
            Field(
                ge=1,
                le=MAX_RECALL_LIMIT,
                description=f"Most memories to return, 1 to {MAX_RECALL_LIMIT} (default 10).",
            ),
        ] = 10,
        match_all_tags: Annotated[
            bool, Field(description="Require every tag instead of any (default false).")
        ] = False,
        max_tokens: Annotated[
            int | None,
            Field(
                ge=100,
                le=20000,
                description="Token budget of the reply, 100 to 20,000 (default: the "
                "server's budget, about 1,000).",
            ),
        ] = None,
        format: OutputFormat = "markdown",
    ) -> str:
        """Recall what you saved with vault_remember in this or earlier sessions. Call it
        first, before searching the vault.

        Filter by tags, a query (ranked by words and meaning, ties by recency) and time;
        without a query the newest come first. The reply starts with a one-line summary, then
        compact entries with their age and id; it says what was left out. With nothing
        found it lists the known tags to try, or use vault_semantic_query on the notes.
        """
        state = app_state(ctx)
        with tool_errors():
            recall = await state.require().memory.recall(
                tags=tags or (),
                all_tags=match_all_tags,
                query=query or "",
                time_range=time_range,
                since=since,
                until=until,
                type=type,
                limit=limit,
            )
        budget = max_tokens or state.settings.max_tokens
        if format == "json":
            return to_json(recall_data(recall, budget))
        return render_recall(recall, budget)

    @mcp.tool(title="Forget a memory", annotations=FORGET, structured_output=False)
    async def vault_forget(
        id: Annotated[
            str,
            Field(
                max_length=MAX_ID_CHARS,
                description="The memory's id, as vault_remember or vault_recall gave it (at "
                f"most {MAX_ID_CHARS} characters).",
            ),
        ],
        ctx: Context[AppState],
    ) -> str:
        """Retire one memory that is wrong or no longer useful; it stops appearing in
        vault_recall. To correct a memory, forget it and remember the new version."""
        with tool_errors():
            memory_store = app_state(ctx).require().memory
            memory = await memory_store.forget(id)
        return "Forgot:\n" + format_memory(memory, memory_store.now())

    @mcp.resource(
        "obsidian://memory/recent{?limit}",
        name="recent-memories",
        title="Recent memories",
        description="The most recent memories (limit, default 10) and every known tag with "
        "its count; what to recall by.",
        mime_type="text/markdown",
    )
    async def recent_memories(ctx: Context[AppState], limit: int = _RECENT_DEFAULT) -> str:
        with resource_errors():
            memory_store = app_state(ctx).require().memory
            memories, tags = await memory_store.overview(max(1, min(limit, MAX_RECALL_LIMIT)))
            status = await memory_store.status()
        return render_overview(memories, tags, status, memory_store.now())

    @mcp.prompt(
        name="handover",
        title="Write the handover note",
        description="Turn recent memories and the current task into an update of a handover "
        "note, so the next session resumes where this one stopped.",
    )
    async def handover(
        ctx: Context[AppState],
        task: Annotated[str, Field(description="The task in progress and where it stands.")],
        note: Annotated[
            str, Field(description="Vault path of the handover note.")
        ] = "handover.md",
    ) -> str:
        memory_store = app_state(ctx).require().memory
        memories, _ = await memory_store.overview(_PROMPT_MEMORIES)
        now = memory_store.now()
        recent = "\n".join(format_memory(m, now) for m in memories) or "(no memories yet)"
        return f"""\
Update the handover note {note!r} so that the next session can resume this work without \
asking anything.

Current task: {task}

Recent memories (newest first):
{recent}

Steps:
1. Read the current note with vault_read_note(path={note!r}) if it exists.
2. Rewrite it with these sections: Goal; Done (with what was decided and why); In progress \
(the exact next step); Open questions; Pointers (note paths, memory ids, tags to recall). \
Keep it under 400 words; drop what is finished and no longer needed.
3. Save it with your file-writing tool. If you have none, append it with \
vault_scratch_append and say so.
4. For each decision or fact above that is not yet a memory, call vault_remember \
(tags: the project and topic; context: why it matters)."""

    @mcp.prompt(
        name="update-knowledge",
        title="Save what was learned",
        description="After a piece of work, distil what was learned into memories (and "
        "notes where it deserves more than a sentence).",
    )
    async def update_knowledge(
        ctx: Context[AppState],
        work: Annotated[str, Field(description="The piece of work just finished, in brief.")],
    ) -> str:
        memory_store = app_state(ctx).require().memory
        _, tags = await memory_store.overview(0)
        known = ", ".join(f"{tag} ({count})" for tag, count in tags[:30]) or "(none yet)"
        return f"""\
You just finished: {work}

Distil what was learned so that a later session does not have to rediscover it.
1. List the durable points: facts about the user, the vault or the project; decisions and \
their reasons; preferences; events that matter later. Skip what is temporary or already \
written in a note.
2. Check what is stored already: vault_recall with the relevant tags.
3. For each new point call vault_remember: one idea, self-contained; 1-3 tags (reuse known \
ones); context = why it matters; type = fact, decision, preference or event; source = the \
note path if it came from one.
4. A memory that is now wrong: vault_forget(id), then remember the correction.
5. Material longer than a paragraph belongs in a note; remember a one-line pointer to it.

Known tags: {known}"""
