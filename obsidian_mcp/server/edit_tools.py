"""Edit tools: change part of a note, and undo an edit. The work is in `obsidian_mcp.editing`."""

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import Field

from obsidian_mcp.editing.operations import EditRequest, Operation
from obsidian_mcp.editing.service import Receipt, UnknownEdit
from obsidian_mcp.limits import MAX_ID_CHARS, MAX_PATH_CHARS
from obsidian_mcp.server.app import AppState, VaultServices
from obsidian_mcp.server.common import (
    OutputFormat,
    VaultName,
    app_state,
    refuse_if_another_vault_holds,
    to_json,
    vault_call,
)

# Destructive: replace, delete and replace_text remove the user's text (undo can bring it
# back, but the hint is about the call). Not idempotent: appending twice adds twice.
EDIT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
# Bigger than any section an agent should write in one call, far below what would strain
# a note: a whole long note is about 60,000 characters.
MAX_EDIT_CHARS = 200_000
# A frontmatter key, a heading path, a block id or the text to replace.
MAX_TARGET_CHARS = 20_000


def format_receipt(receipt: Receipt) -> str:
    facts = [
        f"{receipt.operation} at {receipt.target}",
        f"{receipt.chars_before:,} → {receipt.chars_after:,} chars",
        f"version {receipt.version}",
    ]
    if receipt.edit_id:
        facts.append(f"edit_id {receipt.edit_id}")
    if receipt.dry_run:
        head = "Dry run, nothing written: "
    elif receipt.edit_id is None:
        head = "Nothing changed: "
    else:
        head = "Edited "
    lines = [head + receipt.path + " · " + " · ".join(facts)]
    if receipt.note:
        lines.append(receipt.note)
    lines += receipt.diff
    return "\n".join(lines)


def register_edit_tools(mcp: MCPServer[AppState]) -> None:
    @mcp.tool(annotations=EDIT, structured_output=False)
    async def vault_edit_note(
        path: Annotated[str, Field(max_length=MAX_PATH_CHARS, description="Vault path.")],
        operation: Operation,
        ctx: Context[AppState],
        target: Annotated[
            str | None,
            Field(
                max_length=MAX_TARGET_CHARS,
                description="Heading path 'A > B' ('\"A > B\"': one heading) or ^blockid; "
                "key for set/delete; exact text for replace_text.",
            ),
        ] = None,
        content: Annotated[
            str | None,
            Field(max_length=MAX_EDIT_CHARS, description="New text, or set's value."),
        ] = None,
        version: Annotated[
            str | None,
            Field(max_length=MAX_ID_CHARS, description="From your read; refused if stale."),
        ] = None,
        expected_count: Annotated[
            int | None, Field(ge=1, le=10_000, description="replace_text matches (default 1).")
        ] = None,
        create_target: Annotated[bool, Field(description="Add a missing heading.")] = False,
        dry_run: Annotated[bool, Field(description="Only show the receipt.")] = False,
        force: Annotated[bool, Field(description="Even if the user is typing.")] = False,
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """Change a note's section, block, frontmatter key or exact text, or create a note;
        replies with a receipt (diff, version, edit_id). replace takes a target as read
        (heading line included) or its body."""
        request = EditRequest(operation, target, content, expected_count, create_target)
        async with vault_call(ctx, vault, path) as call:
            receipt = await call.services.editor.edit(
                call.path, request, version=version, dry_run=dry_run, force=force
            )
        receipt = call.shown(receipt)
        return to_json(receipt) if format == "json" else format_receipt(receipt)

    @mcp.tool(annotations=EDIT, structured_output=False)
    async def vault_undo_edit(
        edit_id: Annotated[
            str, Field(min_length=1, max_length=MAX_ID_CHARS, description="From a receipt.")
        ],
        ctx: Context[AppState],
        format: OutputFormat = "markdown",
        vault: VaultName = None,
    ) -> str:
        """Undo an edit; refused if the text it wrote has changed."""
        # With several vaults a receipt's edit_id names its vault, as its path does.
        async with vault_call(ctx, vault, edit_id) as call:
            try:
                receipt = call.shown(await call.services.editor.undo(call.path))
            except UnknownEdit:

                async def holds(services: VaultServices) -> bool:
                    return services.editor.holds(call.path)

                await refuse_if_another_vault_holds(
                    app_state(ctx), call, "edit", holds, "vault_undo_edit(edit_id='{}')"
                )
                raise
        return to_json(receipt) if format == "json" else format_receipt(receipt)
