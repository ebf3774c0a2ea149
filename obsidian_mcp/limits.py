"""Limits on what a tool accepts, and the short excerpt a reply may quote of what it got.

Every argument is bounded so that no call can make the server work or answer without
limit: a 2 MB topic or a 20,000-word query once took minutes and answered megabytes.
The tools' input schemas state these limits (maxLength, maxItems, maximum), which the
model reads; the descriptions do not repeat them.
"""

import unicodedata

# A question, topic or search: real queries measured in fixtures/questions.jsonl are under
# 200 characters; five times that leaves room for a pasted sentence or two.
MAX_QUERY_CHARS = 1000
# Exact-word searches cost one scan of every note per word (about 2.6 ms per word on the
# 10,000-note bench vault); 32 words keeps the worst case under a tenth of a second.
MAX_QUERY_WORDS = 32
# A vault path: Obsidian's own paths stay far below this; Linux refuses more than 4,096
# bytes anyway, and one name more than 255 bytes on every common filesystem.
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
# Where a cut read continues: 100 million characters is far beyond any note a vault holds.
MAX_NOTE_OFFSET = 100_000_000
# A heading name or path inside a note, e.g. 'Backstory > Childhood'.
MAX_HEADING_CHARS = 500
# Tags and types of a recall filter, and the memory id.
MAX_FILTER_TAGS = 20
MAX_ID_CHARS = 64
# since/until: '2026-05-01T14:30:00+02:00' is 25 characters.
MAX_MOMENT_CHARS = 40

# How much of a rejected argument a reply quotes back: enough to recognise it. A path
# gets more, since the model compares it with the paths it was shown.
EXCERPT_CHARS = 40
PATH_EXCERPT_CHARS = 160
# How much of a query a result quotes back in its header and hints: a 1,000-character
# query echoed three times would take a 100-token budget on its own.
QUERY_ECHO_CHARS = 100


def _visible(char: str) -> str:
    # Control, format and surrogate code points are shown escaped: a lone surrogate in a
    # reply cannot even be encoded for the wire, and RTL marks would reorder the message.
    if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn"):
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def excerpt(value: object, chars: int = EXCERPT_CHARS) -> str:
    """A short, printable rendering of an argument for an error message."""
    if isinstance(value, str):
        shown = "".join(_visible(c) for c in value[:chars])
        more = f"… ({len(value):,} characters)" if len(value) > chars else ""
        return f"'{shown}'{more}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= EXCERPT_CHARS else f"a number of {len(text):,} digits"
    if isinstance(value, list):
        count = len(value)  # pyright: ignore[reportUnknownArgumentType]
        return f"a list of {count:,} item{'' if count == 1 else 's'}"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def clip(text: str, chars: int) -> str:
    """`text` cut to `chars` characters, marked with an ellipsis when cut."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def lone_surrogate_at(text: str) -> int | None:
    """Where `text` holds half of a UTF-16 surrogate pair, which no UTF-8 text can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None
