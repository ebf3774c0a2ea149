"""Memory tools (remember, recall, forget), the recent-memories resource, and the two
handover prompts. Arguments are parsed here; the work is in `obsidian_mcp.memory`."""

from collections.abc import Sequence
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from obsidian_mcp.limits import MAX_FILTER_TAGS, MAX_ID_CHARS, MAX_MOMENT_CHARS, MAX_QUERY_CHARS
from obsidian_mcp.memory.model import (
    MAX_CONTENT_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_SCOPE_CHARS,
    MAX_SOURCE_CHARS,
    MAX_SUPERSEDES,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TYPE_CHARS,
)
from obsidian_mcp.memory.render import (
    format_memory,
    recall_data,
    render_forgotten,
    render_overview,
    render_recall,
    render_remembered,
)
from obsidian_mcp.memory.store import MAX_RECALL_LIMIT, UnknownMemoryId
from obsidian_mcp.memory.timespec import TimeRange
from obsidian_mcp.paths import note_name
from obsidian_mcp.qualified import qualify, split_qualified
from obsidian_mcp.server.app import AppState, VaultServices
from obsidian_mcp.server.common import (
    READ_ONLY,
    MaxTokens,
    OneOrMore,
    OutputFormat,
    VaultName,
    app_state,
    refuse_if_another_vault_holds,
    resource_errors,
    to_json,
    vault_call,
)
from obsidian_mcp.usage.facts import returned

# Writes one line to the agent's own memory file and never touches notes. Idempotent: the
# same content with the same tags is stored once, and a repeat returns the same id.
REMEMBER = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# Destructive: the memory can no longer be recalled and no tool brings it back (compaction
# later drops its line from this device's files). Idempotent: forgetting it again changes
# nothing.
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
        description="1-3 labels to recall it by; reuse known ones.",
    ),
    OneOrMore,
]
Kind = Annotated[
    str | None,
    Field(max_length=MAX_TYPE_CHARS, description="fact, decision, event or preference."),
]
Moment = Annotated[str | None, Field(max_length=MAX_MOMENT_CHARS)]
MemoryId = Annotated[str, Field(max_length=MAX_ID_CHARS)]


# Where the handover prompt writes when the vault has no handover note yet.
DEFAULT_HANDOVER = "Handover.md"


def handover_note(paths: Sequence[str]) -> str:
    """The vault's handover note: the one named "Handover", else the living one among
    several ("Handover (living)", edited in place while dated copies pile up), else the
    last by name (of dated ones, the newest); never a template. DEFAULT_HANDOVER when the
    vault has none."""
    found = [
        path
        for path in paths
        if "handover" in note_name(path).lower() and "template" not in path.lower()
    ]

    def rank(path: str) -> tuple[bool, bool, str]:
        name = note_name(path).lower()
        return (name == "handover", "living" in name, name)

    return max(found, key=rank, default=DEFAULT_HANDOVER)


def register_memory_tools(mcp: MCPServer[AppState]) -> None:
    @mcp.tool(annotations=REMEMBER, structured_output=False)
    async def vault_remember(
        content: Annotated[
            str,
            Field(
                max_length=MAX_CONTENT_CHARS,
                description="One self-contained idea.",
            ),
        ],
        tags: Tags,
        ctx: Context[AppState],
        context: Annotated[
            str | None,
            Field(
                max_length=MAX_CONTEXT_CHARS,
                description="Why it matters, if not obvious.",
            ),
        ] = None,
        type: Kind = None,
        source: Annotated[
            str | None,
            Field(max_length=MAX_SOURCE_CHARS, description="The note it came from."),
        ] = None,
        supersedes: Annotated[
            list[MemoryId] | None,
            Field(max_length=MAX_SUPERSEDES, description="Ids this fact replaces."),
            OneOrMore,
        ] = None,
        scope: Annotated[
            str | None,
            Field(max_length=MAX_SCOPE_CHARS, description="Who alone knows it (a character)."),
        ] = None,
        occurred: Annotated[
            str | None,
            Field(
                max_length=MAX_MOMENT_CHARS,
                description="When, if not today ('yesterday', a date).",
            ),
        ] = None,
        vault: VaultName = None,
    ) -> str:
        """Save a fact, decision, preference or event for later sessions (a changed fact:
        the old id as supersedes). Returns its id and the closest memories."""
        async with vault_call(ctx, vault) as call:
            memory = call.services.memory
            result = await memory.remember(
                content,
                tags,
                context or "",
                type=type,
                source=source,
                supersedes=supersedes or (),
                scope=scope,
                occurred=occurred,
            )
        return call.memory_calls(render_remembered(result, memory.now()))

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    async def vault_recall(
        ctx: Context[AppState],
        tags: Annotated[
            list[Tag] | None,
            Field(
                max_length=MAX_FILTER_TAGS,
                description="Any of these.",
            ),
            OneOrMore,
        ] = None,
        query: Annotated[
            str | None,
            Field(
                max_length=MAX_QUERY_CHARS,
                description="Ranks by words and meaning.",
            ),
        ] = None,
        # "week" and "month" are the last 7 and 30 days, as a model reads them.
        time_range: TimeRange = "all",
        since: Annotated[
            Moment,
            Field(description="A date or an age, '3d'."),
        ] = None,
        until: Annotated[
            Moment,
            Field(description="Before; same forms as since."),
        ] = None,
        type: Annotated[
            str | None,
            Field(max_length=MAX_TYPE_CHARS, description="Only this kind."),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT, description="Most memories.")] = 10,
        match_all_tags: Annotated[bool, Field(description="All tags, not any.")] = False,
        scope: Annotated[
            str | None,
            Field(max_length=MAX_SCOPE_CHARS, description="Its own and shared."),
        ] = None,
        include_superseded: Annotated[bool, Field(description="Replaced facts too.")] = False,
        max_tokens: MaxTokens = None,
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """Memories from vault_remember by tags, query, time or scope; best first, else
        newest. Says first when none match."""
        state = app_state(ctx)
        async with vault_call(ctx, vault) as call:
            recall = await call.services.memory.recall(
                tags=tags or (),
                all_tags=match_all_tags,
                query=query or "",
                time_range=time_range,
                since=since,
                until=until,
                type=type,
                limit=limit,
                scope=scope,
                include_superseded=include_superseded,
            )
        returned(recall)
        budget = max_tokens or state.settings.max_tokens
        if format == "json":
            return to_json(recall_data(recall, budget))
        return call.memory_calls(render_recall(recall, budget))

    @mcp.tool(annotations=FORGET, structured_output=False)
    async def vault_forget(
        id: Annotated[
            str,
            Field(max_length=MAX_ID_CHARS, description="The id vault_recall shows."),
        ],
        ctx: Context[AppState],
        vault: VaultName = None,
    ) -> str:
        """Retire a wrong memory (a changed fact: remember it anew with supersedes)."""
        # With several vaults an id reads back as `vault:id` too, as a path does.
        async with vault_call(ctx, vault, id) as call:
            memory_store = call.services.memory
            try:
                forgotten = await memory_store.forget(call.path)
            except UnknownMemoryId:
                wanted = call.path.strip().lower()

                async def holds(services: VaultServices) -> bool:
                    return await services.memory.knows_id(wanted)

                await refuse_if_another_vault_holds(
                    app_state(ctx), call, "memory", holds, "vault_forget(id='{}')"
                )
                raise
        short_ids = await memory_store.short_ids([forgotten.id])
        return render_forgotten(forgotten, memory_store.now(), short_ids)

    @mcp.resource(
        "obsidian://memory/recent{?limit,vault}",
        name="recent-memories",
        title="Recent memories",
        description="The most recent memories (limit, default 10) and every known tag with "
        "its count; what to recall by. With several vaults, vault names whose (default: "
        "the default vault's).",
        mime_type="text/markdown",
    )
    async def recent_memories(
        ctx: Context[AppState], limit: int = _RECENT_DEFAULT, vault: str | None = None
    ) -> str:
        with resource_errors():
            memory_store = app_state(ctx).require(vault or None).memory
            memories, tags = await memory_store.overview(max(1, min(limit, MAX_RECALL_LIMIT)))
            status = await memory_store.status()
            short_ids = await memory_store.short_ids(m.id for m in memories)
        return render_overview(memories, tags, status, memory_store.now(), short_ids)

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
            str | None,
            Field(description="Vault path of the handover note (default: the vault's own)."),
        ] = None,
        vault: Annotated[
            str | None, Field(description="With several vaults: the note's vault.")
        ] = None,
    ) -> str:
        state = app_state(ctx)
        # A note named with its vault (`journal:Home.md`) is that vault's, as in every tool.
        named, bare = split_qualified(note or "", [v.name for v in state.vaults])
        vault = named or vault
        services = state.require(vault)
        memory_store = services.memory
        memories, _ = await memory_store.overview(_PROMPT_MEMORIES)
        now = memory_store.now()
        short_ids = await memory_store.short_ids(m.id for m in memories)
        recent = (
            "\n".join(format_memory(m, now, short_ids=short_ids) for m in memories)
            or "(no memories yet)"
        )
        path = bare or handover_note(list(await services.vault.note_stats()))
        served = state.served(vault).name
        if state.several:
            path = qualify(served, path)
        remember = f"vault_remember(vault={served!r}, ...)" if state.several else "vault_remember"
        return f"""\
Update the handover note {path!r} so that the next session can resume this work without \
asking anything.

Current task: {task}

Recent memories (newest first):
{recent}

Steps:
1. Read the current note with vault_read_note(path={path!r}); its reply gives the version.
2. Rewrite it with these sections: Goal; Done (with what was decided and why); In progress \
(the exact next step); Open questions; Pointers (note paths, memory ids, tags to recall). \
Keep it under 400 words; drop what is finished and no longer needed.
3. Save it with vault_edit_note(path={path!r}, ...): each changed section with \
operation="replace", target=<its heading>, content=<its new text>, version=<from the read> \
(create_target=true adds a missing section). If the note does not exist, \
operation="create" with the whole text.
4. For each decision or fact above that is not yet a memory, call {remember} \
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
        vault: Annotated[
            str | None,
            Field(description="With several vaults: whose memories (default: the default vault)."),
        ] = None,
    ) -> str:
        state = app_state(ctx)
        memory_store = state.require(vault).memory
        _, tags = await memory_store.overview(0)
        where = f" with vault={state.served(vault).name!r}" if state.several else ""
        known = ", ".join(f"{tag} ({count})" for tag, count in tags[:30]) or "(none yet)"
        return f"""\
You just finished: {work}

Distil what was learned so that a later session does not have to rediscover it.
1. List the durable points: facts about the user, the vault or the project; decisions and \
their reasons; preferences; events that matter later. Skip what is temporary or already \
written in a note.
2. Check what is stored already: vault_recall{where} with the relevant tags.
3. For each new point call vault_remember{where}: one idea, self-contained; 1-3 tags (reuse known \
ones); context = why it matters; type = fact, decision, preference or event; source = the \
note path if it came from one.
4. A memory that is now wrong: vault_forget(id), then remember the correction.
5. Material longer than a paragraph belongs in a note; remember a one-line pointer to it.

Known tags: {known}"""
