"""Version tokens: what a read hands out and an edit brings back to prove it is current.

A token is a hash of the note's text, so the folder and every plugin version give the same
token for the same note, and no state is needed to check one. Texts recently read or
written are kept for a while, so a refused edit can say what changed in its section.
"""

import hashlib
import re
from collections import OrderedDict

# 48 bits: two different texts of one note share a token about once in 10^14 pairs; the
# plugin's 24-bit `versionOf` (5.x) is short enough to collide in a long-lived vault.
_TOKEN_HEX = 12
# Texts kept for "what changed" messages: a few hundred kilobytes in the usual session.
_RECENT_TEXTS = 64
_RECENT_CHARS = 4_000_000


def version_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_TOKEN_HEX]


def window_version(token: str, start: int, end: int) -> str:
    """The version a cut read of a target hands out: the note's token and the window's
    characters within the target's text. An edit carrying it replaces that window only."""
    return f"{token}@{start}-{end}"


def split_version(value: str) -> tuple[str, tuple[int, int] | None]:
    """A version as an edit brings it back: the note's token, and the window a cut read
    named (None for a whole read). A malformed window is left on the token, which then
    fails `is_version_token` and is refused as such."""
    token, sep, window = value.strip().partition("@")
    found = re.fullmatch(r"([0-9]+)-([0-9]+)", window) if sep else None
    if found is None or int(found.group(1)) > int(found.group(2)):
        return value.strip(), None
    return token, (int(found.group(1)), int(found.group(2)))


def is_version_token(value: str) -> bool:
    """Whether `value` has the form `version_of` gives (not whether any text has it)."""
    return re.fullmatch(rf"[0-9a-f]{{{_TOKEN_HEX}}}", value) is not None


class RecentTexts:
    """Texts by version, the most recent kept within a count and a size."""

    def __init__(self, count: int = _RECENT_TEXTS, chars: int = _RECENT_CHARS) -> None:
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._count = count
        self._chars = chars
        self._held = 0

    def saw(self, text: str) -> str:
        """Keep `text`; its version."""
        version = version_of(text)
        if version in self._texts:
            self._texts.move_to_end(version)
            return version
        self._texts[version] = text
        self._held += len(text)
        while self._texts and (len(self._texts) > self._count or self._held > self._chars):
            _, dropped = self._texts.popitem(last=False)
            self._held -= len(dropped)
        return version

    def get(self, version: str) -> str | None:
        return self._texts.get(version)
