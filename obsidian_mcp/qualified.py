# pyright: strict
"""Vault-qualified paths, `lore:Characters/Mira.md`: with several vaults, every path a reply
shows names its vault, so the agent reads it back with any note tool exactly as shown (an
edit's id too, for vault_undo_edit).

The vault's name, a colon, then the path in that vault. A colon cannot be part of an
Obsidian note's name (Obsidian refuses it, as Windows does), so a configured vault's name
before the first colon always means the vault; anything else is a path of the vault the
call names (or of the default vault).
"""

from collections.abc import Collection
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar, cast

from obsidian_mcp.editing.journal import EDIT_ID
from obsidian_mcp.editing.service import Receipt
from obsidian_mcp.paths import VAULT_SEPARATOR, ShownPath
from obsidian_mcp.reading import FolderNode, MapRow, NoteOutline, NoteWindow
from obsidian_mcp.retrieval.cutting import PassageHit
from obsidian_mcp.retrieval.packing import FileContext, SearchResult
from obsidian_mcp.retrieval.quick_context import Entity
from obsidian_mcp.retrieval.related import Neighbour, Related
from obsidian_mcp.vault_set import name_key

SEPARATOR = VAULT_SEPARATOR

T = TypeVar("T")

# The fields of each result type that hold vault paths (a path, None, or a list of paths),
# or an id that only its vault knows (an edit's, for vault_undo_edit). Other fields are
# walked for results inside them; `OutlineEntry.path` is a heading path.
_PATH_FIELDS: dict[type, tuple[str, ...]] = {
    PassageHit: ("path",),
    FileContext: ("path",),
    Neighbour: ("path",),
    Related: ("path",),
    Entity: ("path",),
    NoteWindow: ("path",),
    NoteOutline: ("path",),
    MapRow: ("path",),
    Receipt: ("path", "edit_id"),
    FolderNode: ("path", "notes", "attachments"),
    # The folder a search covered, as its continuation names it: `journal:Daily`, and
    # `journal:` for the whole of one vault, so a suggested call searches where this did.
    SearchResult: ("folder",),
}
# Text fields that may name edits by id (`undo of e-1a2b3c4d`): each id in them is shown
# with its vault, as the receipt's own edit_id is.
_ID_TEXT_FIELDS: dict[type, tuple[str, ...]] = {Receipt: ("target", "note")}


def qualify(vault: str, path: str) -> str:
    return ShownPath(vault, path)


def split_qualified(value: str, names: Collection[str]) -> tuple[str | None, str]:
    """(the vault a qualified path names, the path in it); (None, value) when it names no
    configured vault. Names are compared ignoring case, as the `vault` argument is."""
    head, separator, rest = value.partition(SEPARATOR)
    if separator:
        wanted = name_key(head)
        for name in names:
            if name_key(name) == wanted:
                return name, rest
    return None, value


def with_edit_ids_qualified(vault: str, text: str) -> str:
    """`text` with every edit id in it named with its vault (`work:e-1a2b3c4d`), so an id a
    message mentions reads back as shown."""
    return EDIT_ID.sub(lambda found: qualify(vault, found[0]), text)


def _qualified_value(vault: str, value: object) -> object:
    if isinstance(value, str):
        return qualify(vault, value)
    if isinstance(value, list):
        return [qualify(vault, str(item)) for item in cast(list[object], value)]
    return value  # None: a link to no note


def qualified(result: T, vault: str) -> T:
    """`result` (a tool's domain result) with every vault path in it qualified by `vault`."""
    return cast(T, _walk(result, vault))


def _walk(value: Any, vault: str) -> Any:
    if isinstance(value, tuple):
        return tuple(_walk(item, vault) for item in cast(tuple[Any, ...], value))
    if isinstance(value, list):
        return [_walk(item, vault) for item in cast(list[Any], value)]
    if isinstance(value, dict):
        return {key: _walk(item, vault) for key, item in cast(dict[Any, Any], value).items()}
    if not is_dataclass(value) or isinstance(value, type):
        return value
    paths = _PATH_FIELDS.get(type(value), ())
    id_texts = _ID_TEXT_FIELDS.get(type(value), ())
    changes = {
        field.name: (
            _qualified_value(vault, getattr(value, field.name))
            if field.name in paths
            else with_edit_ids_qualified(vault, getattr(value, field.name))
            if field.name in id_texts
            else _walk(getattr(value, field.name), vault)
        )
        for field in fields(value)
    }
    return replace(value, **changes)
