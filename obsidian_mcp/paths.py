"""Vault-relative paths, checked before any I/O.

A path the model gives is refused when it could leave the vault in any spelling: absolute,
a drive letter, a `..` segment written plainly, percent-encoded or with backslashes, or a
NUL byte. Symlinks are checked by the folder source, which is the only one that sees them.
"""

import re
from urllib.parse import unquote

from obsidian_mcp.errors import PathRefused
from obsidian_mcp.limits import MAX_NAME_BYTES, MAX_PATH_CHARS, excerpt

_DRIVE = re.compile(r"^[A-Za-z]:")
_EXAMPLE = "Give a path relative to the vault root, like 'Characters/Mira.md'."


def _segments(path: str) -> list[str]:
    return [s for s in path.replace("\\", "/").split("/") if s not in ("", ".")]


def normalize_vault_path(raw: str, *, folder: bool = False) -> str:
    """Return `raw` as a clean vault-relative POSIX path, or raise `PathRefused`.

    With `folder=True` the vault root ("" or "/") is allowed and a trailing slash is dropped.
    """
    # Checked first and in constant time: every later step is linear in the length, and
    # the filesystem's own resolution of a very deep path is quadratic.
    if len(raw) > MAX_PATH_CHARS:
        raise PathRefused(
            f"The path {excerpt(raw)} is longer than {MAX_PATH_CHARS:,} characters; no vault "
            f"note has such a path. {_EXAMPLE}"
        )
    if "\x00" in raw:
        raise PathRefused(f"The path {excerpt(raw)} contains a NUL byte. {_EXAMPLE}")
    stripped = raw.strip()
    if folder and stripped in ("", "/", "."):
        return ""
    # Every spelling the REST plugin or a filesystem might decode is checked, not only
    # the literal one: "%2e%2e/" is ".." to a server that percent-decodes.
    spellings = {stripped, unquote(stripped), unquote(unquote(stripped))}
    for spelling in spellings:
        if "\x00" in spelling:
            raise PathRefused(f"The path {excerpt(raw)} contains an encoded NUL byte. {_EXAMPLE}")
        unified = spelling.replace("\\", "/")
        if unified.startswith("/") or _DRIVE.match(unified):
            raise PathRefused(f"The path {excerpt(raw)} is absolute. {_EXAMPLE}")
        if ".." in _segments(unified):
            raise PathRefused(f"The path {excerpt(raw)} leaves the vault ('..'). {_EXAMPLE}")
    parts = _segments(stripped)
    if not parts:
        raise PathRefused(f"The path {excerpt(raw)} is empty. {_EXAMPLE}")
    for part in parts:
        if len(part.encode("utf-8", errors="surrogatepass")) > MAX_NAME_BYTES:
            raise PathRefused(
                f"The name {excerpt(part)} in the path is longer than {MAX_NAME_BYTES} bytes, "
                f"more than a file name can be. {_EXAMPLE}"
            )
    return "/".join(parts)


def parent_folder(path: str) -> str:
    return path.rpartition("/")[0]


# Between a vault's name and a path in it, as replies show paths with several vaults.
VAULT_SEPARATOR = ":"


class ShownPath(str):
    """A vault path as a reply shows it with several vaults, its vault's name first
    (`lore:10:30 standup.md`), that still knows the path in its vault: a note's name may
    hold a colon (Obsidian refuses one, but a note synced from elsewhere can have it), so
    the text alone cannot tell where a vault's name ends."""

    vault: str
    in_vault: str

    def __new__(cls, vault: str, path: str) -> "ShownPath":
        shown = super().__new__(cls, f"{vault}{VAULT_SEPARATOR}{path}")
        shown.vault, shown.in_vault = vault, path
        return shown

    def __reduce__(self) -> tuple[type["ShownPath"], tuple[str, str]]:
        # How copies are made (`dataclasses.asdict` deep-copies every value).
        return ShownPath, (self.vault, self.in_vault)


def note_name(path: str) -> str:
    """The name Obsidian shows: the basename without a `.md` extension (of the path in its
    vault, for a path shown with its vault's name)."""
    base = (path.in_vault if isinstance(path, ShownPath) else path).rpartition("/")[2]
    return base[:-3] if base.lower().endswith(".md") else base


def is_markdown(path: str) -> bool:
    return path.lower().endswith(".md")


def is_hidden(path: str) -> bool:
    """Dot-folders and dot-files (.obsidian, .smart-env, .trash) are not the vault's notes."""
    return any(part.startswith(".") for part in path.split("/"))
