"""Domain errors. Each message is written for the model: what went wrong, what to do next.

The server turns every `VaultError` into a `ToolError` unchanged, so the text here is
exactly what the agent reads. No message may contain the API key.
"""

import errno

from obsidian_mcp.limits import PATH_EXCERPT_CHARS, excerpt


def _path(path: str) -> str:
    return excerpt(path, PATH_EXCERPT_CHARS)


class VaultError(Exception):
    """A failure the agent can act on."""


class PathRefused(VaultError):
    """A path that would leave the vault, or is not a valid vault path."""


class NoteNotFound(VaultError):
    def __init__(self, path: str, suggestions: list[str] | None = None) -> None:
        self.path = path
        self.suggestions = suggestions or []
        hint = (
            "Closest existing paths: " + ", ".join(self.suggestions) + "."
            if self.suggestions
            else "Call vault_tree to see what exists, or vault_semantic_query to search."
        )
        super().__init__(f"No note at {_path(path)}. {hint}")


class IsAFolder(VaultError):
    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{_path(path)} is a folder, not a note. Call vault_tree(folder={_path(path)}) to "
            "list it, "
            "then read one of its notes."
        )


class NotText(VaultError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"{_path(path)} is a binary file (an attachment), not a note; it cannot be read as "
            "text."
        )


class NotReadable(VaultError):
    """A file the vault lists but no note can come from: a pipe, a socket, a device, or a
    file this process may not read. Searches skip it; reading it names why."""

    def __init__(self, path: str, why: str, fix: str) -> None:
        super().__init__(f"{path!r} cannot be read: {why}. Searches skip it; {fix}")


_NO_SPACE_WHY = {
    "ENOSPC": "the disk is full",
    "EDQUOT": "the disk quota is used up",
    "EFBIG": "the file would pass the size limit this process may write",
}


class OutOfSpace(VaultError):
    """A write the disk could not take whole (ENOSPC, EDQUOT, EFBIG); it was undone."""

    def __init__(self, path: str, code: str) -> None:
        super().__init__(
            f"Could not write {path!r}: {_NO_SPACE_WHY.get(code, 'no space')} ({code}). Nothing "
            "was stored and the file is as it was before; free space on the disk that holds "
            "the vault, then call again."
        )


class ObsidianUnreachable(VaultError):
    def __init__(self, url: str, detail: str) -> None:
        self.url = url
        self.detail = detail
        super().__init__(
            f"Obsidian's Local REST API did not answer at {url} ({detail}). Is Obsidian open "
            "and the Local REST API plugin enabled? Run `obsidian-mcp doctor` to check."
        )


class ObsidianConnectionLost(VaultError):
    """The request reached Obsidian but the connection broke before an answer."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(
            f"The connection to Obsidian's Local REST API at {url} broke before it answered "
            f"({detail}). Try the call again; if it keeps happening, restart Obsidian."
        )


class ObsidianTimeout(VaultError):
    def __init__(self, url: str, seconds: float) -> None:
        super().__init__(
            f"Obsidian's Local REST API at {url} gave no answer within {seconds:g} s. Obsidian "
            "may be busy or stuck; try again, or restart Obsidian if it keeps happening."
        )


class AuthRejected(VaultError):
    def __init__(self) -> None:
        super().__init__(
            "Obsidian rejected the API key. Copy the key from Obsidian > Settings > Local REST "
            "API and set OBSIDIAN_API_KEY to it."
        )


class CertificateUntrusted(VaultError):
    def __init__(self, url: str) -> None:
        super().__init__(
            f"The certificate of {url} is not trusted. Run `obsidian-mcp trust --url {url}` "
            "once: it shows the certificate's SHA-256 fingerprint and pins it (verification "
            "stays on; the plugin's certificate names 127.0.0.1 only, so a pin replaces the "
            "host name check)."
        )


class CertificatePinMismatch(VaultError):
    """The REST API presented another certificate than the one pinned for it."""

    def __init__(self, url: str, seen: str, fix: str) -> None:
        self.seen = seen
        super().__init__(
            f"The certificate of {url} is not the one pinned for it: it presented SHA-256 "
            f"{seen}. If Obsidian made a new certificate (the plugin does yearly, or when you "
            f"regenerate it), {fix}; if not, something else answers at that address, so "
            "nothing was sent to it."
        )


class UpstreamError(VaultError):
    """Obsidian answered with an error we have no better words for."""

    def __init__(self, url: str, status: int, message: str) -> None:
        self.status = status
        advice = (
            "Something failed inside Obsidian; try again, and if it persists, check the "
            "plugin in Obsidian (Ctrl+Shift+I shows its console)."
            if status >= 500
            else "The request was refused; check the arguments."
        )
        super().__init__(f"Obsidian at {url} answered HTTP {status}: {message}. {advice}")


class NotesChanging(VaultError):
    """The notes a call ranked were read again under it, attempt after attempt: something
    rewrites them faster than a call can rank them."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        super().__init__(
            f"The vault's notes changed while this call ranked them, {attempts} times in a "
            "row (something is rewriting them quickly: a sync or a script). Call again in a "
            "few seconds; nothing was written."
        )


class ConfigurationInvalid(VaultError):
    """The server started, but its settings (or one vault's) cannot work; every call on
    what they configure says so."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(
            f"The obsidian-mcp server is misconfigured: {problem} Fix that setting (in the "
            "environment your MCP client starts the server with, or in the vaults file it "
            "names), then restart the server; until then this vault's tools cannot work."
        )


class RestSettingsRefused(VaultError):
    """Settings that would send the API key where it does not belong (a key no header can
    carry, a pin switched off, unverified TLS to another machine): refused before any
    request, with the setting to change. The message never holds the key."""


class CertificateUnusable(VaultError):
    def __init__(self, cert: str, reason: str) -> None:
        super().__init__(
            f"OBSIDIAN_CERT={cert} cannot be used as a certificate ({reason}). Point it at "
            "the plugin's PEM file, or unset it and run `obsidian-mcp trust` to store the "
            "certificate."
        )


class InvalidArgument(VaultError):
    """An argument the model can correct."""


_OS_ADVICE = {
    errno.EACCES: "Make the file and its folder writable by this server, then try again.",
    errno.EPERM: "The file is protected (read-only or immutable, e.g. `chattr +i`); make it "
    "writable, then try again.",
    errno.EROFS: "The vault is on a read-only filesystem; mount it writable, then try again.",
    errno.ENOSPC: "The disk is full; free some space, then try again.",
    errno.EDQUOT: "The disk quota is used up; free some space, then try again.",
    errno.ENOTDIR: "A file stands where the path needs a folder; rename or move that file.",
    errno.EEXIST: "A file stands where the path needs a folder; rename or move that file.",
    errno.EISDIR: "A folder stands where the path needs a file; rename or move that folder.",
    errno.ENAMETOOLONG: "The path is too long for the filesystem; use a shorter one.",
}


class FileSystemFailure(VaultError):
    """The vault folder refused an operation; the message names the cause and the fix."""

    def __init__(self, path: str, doing: str, exc: OSError) -> None:
        self.errno = exc.errno
        reason = exc.strerror or type(exc).__name__
        advice = _OS_ADVICE.get(
            exc.errno or 0, "Check the file and its folder in the vault, then try again."
        )
        super().__init__(f"Could not {doing} {_path(path)} in the vault folder: {reason}. {advice}")
