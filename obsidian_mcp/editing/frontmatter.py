"""Set or delete one frontmatter field, leaving every other line of the YAML as it was.

ruamel.yaml parses the block and says on which line each top-level key starts; only that
key's lines are replaced, with the key and its new value as ruamel.yaml writes them. The
other fields keep their order, quoting, comments and blank lines byte for byte, which a
whole-block rewrite (the plugin's PATCH: `yaml.stringify`) cannot give.

What `set` writes is what the agent means, not what YAML would make of the content
(docs/editing.md, "Frontmatter"): `Issue #42 fixed` is that text (YAML would cut it at
the `#`), `[[Other]]` the link (YAML would read a nested list); lists, numbers, booleans
and dates are written as such.
"""

import datetime
import io
import re
from typing import Any, Literal, cast

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from obsidian_mcp.editing.lines import (
    Line,
    is_blank,
    join_lines,
    newline_of,
    splice,
    split_lines,
)
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.limits import excerpt
from obsidian_mcp.text.markdown import split_frontmatter

_SEQUENCE_ITEM_RE = re.compile(r"( *)- ")
_OWNED_LINE_RE = re.compile(r"[ \t]|-(?:[ \t]|$)")
# Long values stay on one line: YAML's default folds at 80 columns, which would rewrap a
# user's summary.
_NO_FOLDING = 1 << 16
# Sequences under a key, when the note has none to copy: "key:\n  - item".
_DEFAULT_SEQUENCE_OFFSET = 2
# Content that is a list: "- a" lines, or "[a, b]" on one line.
_BLOCK_ITEM_RE = re.compile(r"-(?:[ \t]+(.*))?")
_WIKILINK_RE = re.compile(r"!?\[\[[^\[\]\n]+\]\]")
_LINK_LIST_RE = re.compile(rf"{_WIKILINK_RE.pattern}(?:\s*,\s*{_WIKILINK_RE.pattern})+")
# Values YAML reads as something other than text, kept as they are when written plainly.
_TYPED_SCALARS = (bool, int, float, datetime.date)


def _round_trip() -> Any:
    """ruamel.yaml's round-trip loader and dumper (typed loosely by the library, so kept
    as Any at this one boundary)."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = _NO_FOLDING
    return yaml


def _load(text: str, what: str) -> Any:
    try:
        return _round_trip().load(text)
    except (YAMLError, ValueError) as error:
        raise EditRefused(
            f"{what} is not valid YAML ({excerpt(str(error).splitlines()[0], 120)}); nothing "
            "was written."
        ) from error


def _values(mapping: object) -> dict[str, object]:
    """Plain values for comparing two loads of the frontmatter."""
    if not isinstance(mapping, dict):
        return {}
    return {str(k): repr(v) for k, v in cast("dict[object, object]", mapping).items()}


def _frontmatter_span(text: str) -> tuple[int, int] | None:
    """(first YAML line, closing `---` line) or None without frontmatter."""
    yaml_text, body_start = split_frontmatter(text)
    if yaml_text is None:
        return None
    before_body = split_lines(text[:body_start])
    closing = len(before_body) - 1
    return 1, closing


def _owned_lines(lines: list[Line], key_line: int, end: int) -> int:
    """One past the last line of the key starting at `key_line`: its indented and `- `
    lines, and blank lines between them (a block scalar's), not blank lines after."""
    last = key_line
    for index in range(key_line + 1, end):
        text = lines[index].text
        if is_blank(text) or text.startswith("#"):
            continue  # a comment line among the value's lines does not end them
        if not _OWNED_LINE_RE.match(text):
            break
        last = index
    return last + 1


def _sequence_offset(lines: list[Line], start: int, end: int) -> int:
    for index in range(start + 1, end):
        match = _SEQUENCE_ITEM_RE.match(lines[index].text)
        if match and lines[index - 1].text.rstrip().endswith(":"):
            return len(match.group(1))
    return _DEFAULT_SEQUENCE_OFFSET


def _key_line(loaded: object, key: object) -> int | None:
    """The line a top-level key starts on, within the YAML text; None for a key that has
    no line of its own (one a `<<:` merge key brings in)."""
    mapping: Any = loaded
    try:
        position: tuple[int, int] = mapping.lc.key(key)
    except KeyError:
        return None
    return position[0]


# -- what the content means --------------------------------------------------------------


def value_of(content: str) -> object:
    """The value `set` writes for `content` (docs/editing.md, "Frontmatter"): a list for
    "- a" lines, "[a, b]" or links separated by commas; a number, true/false or a date
    as YAML reads them; nothing for empty content, "null" or "~"; a quoted string without
    its quotes; anything else the text itself, exactly."""
    text = content.strip()
    if not text:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    items = [_BLOCK_ITEM_RE.fullmatch(line) for line in lines]
    if all(items) and any(item and item.group(1) for item in items):
        return _sequence([_scalar((item.group(1) or "") if item else "") for item in items])
    if _LINK_LIST_RE.fullmatch(text):
        return _sequence([_text(link.group()) for link in _WIKILINK_RE.finditer(text)])
    if text.startswith(("[", "{")) and not _WIKILINK_RE.fullmatch(text):
        return _flow_value(text)
    return _scalar(text)


def _balanced(text: str) -> bool:
    """Whether every bracket and brace the text opens, it closes (outside quotes, roughly:
    what tells a list left unfinished from text that starts with a bracket)."""
    depth = 0
    for char in text:
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _sequence(values: list[object]) -> CommentedSeq:
    sequence = CommentedSeq(values)
    styled: Any = sequence
    styled.fa.set_block_style()  # one item a line, as Obsidian's properties editor writes
    return sequence


def _flow_value(text: str) -> object:
    """`[a, b]` as a list of values; refused when it is not YAML (a bracket left open):
    the agent meant a list and did not write one."""
    try:
        loaded = _round_trip().load(text)
    except (YAMLError, ValueError) as error:
        if _balanced(text):
            return _text(text)  # text that starts with a bracket: "[Draft] My essay"
        raise EditRefused(
            f"The content starts with {text[0]!r} like a YAML list or mapping but is not "
            f"valid YAML: it is never closed ({excerpt(str(error).splitlines()[0], 120)}); "
            "nothing was written. Close it (e.g. '[a, b]'), or put text in quotes."
        ) from error
    if isinstance(loaded, CommentedSeq) and all(
        not isinstance(item, list | dict) for item in cast("list[object]", loaded)
    ):
        return _sequence([_scalar(_plain_dump(item)) for item in cast("list[object]", loaded)])
    return _text(text)  # a mapping or nested lists: not a property value, so text


def _plain_dump(value: object) -> str:
    """An item of a flow list as it was written (quotes kept), to read by `_scalar`."""
    return _dump_value(value).strip()


def _scalar(text: str) -> object:
    if not text or text in ("null", "~"):
        return None
    quoted = text[0] == text[-1] and text[0] in "'\"" and len(text) > 1
    try:
        loaded: object = _round_trip().load(text)
    except (YAMLError, ValueError):
        return _text(text)
    if quoted and isinstance(loaded, str):
        return _text(str(loaded))
    # A number, boolean or date YAML reads from the whole text (no comment cut off).
    if "#" not in text and _is_typed(loaded) and _plain_dump(loaded) == text:
        return loaded
    return _text(text)


def _is_typed(value: object) -> bool:
    return isinstance(value, _TYPED_SCALARS)


def _text(text: str) -> str:
    """Text as a value that reads back as exactly that text, in YAML 1.1 (this server's
    reader) and 1.2 alike: plain where it can be, else in double quotes as Obsidian writes
    links; on several lines, a literal block."""
    if "\n" in text or "\r" in text:
        return LiteralScalarString(text.replace("\r\n", "\n").replace("\r", "\n"))
    written = _dump_value(text).strip()
    if written[:1] in "'\"" or _read_back(written) != text:
        return DoubleQuotedScalarString(text)
    return text


def _read_back(written: str) -> object:
    try:
        return pyyaml.safe_load(written)
    except pyyaml.YAMLError:
        return None


def _dump_value(value: object) -> str:
    out = io.StringIO()
    _round_trip().dump({"v": value}, out)
    return out.getvalue()[len("v:") :]


def _key_lines(key: object, value: object, offset: int) -> list[str]:
    yaml = _round_trip()
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    mapping = CommentedMap()
    mapping[key] = value
    out = io.StringIO()
    yaml.dump(mapping, out)
    return out.getvalue().rstrip("\n").split("\n")


def _trailing_comment(text: str) -> str:
    """A YAML comment at the end of a line (with the spaces before it), or "": a `#`
    after a space, outside quotes ('' and \\" are quotes inside quotes)."""
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if (quote == "'" and text.startswith("''", index)) or (quote == '"' and char == "\\"):
            index += 1  # an escaped quote, or the character after a backslash
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and (index == 0 or text[index - 1] in " \t:[{,"):
            quote = char
        elif char == "#" and index > 0 and text[index - 1] in " \t":
            return text[len(text[:index].rstrip(" \t")) :]
        index += 1
    return ""


# -- the edit --------------------------------------------------------------------------


def edit(
    text: str, operation: Literal["set", "delete"], key: str, content: str | None
) -> tuple[str, str]:
    """The note's new text and a label of what changed. Only the frontmatter's lines are
    split and read: the body, which can be a megabyte, is carried over as it is."""
    yaml_text, body_start = split_frontmatter(text)
    first_line = split_lines(text[:100])[:1]
    if yaml_text is None and first_line and first_line[0].text.rstrip(" \t") == "---":
        raise EditRefused(
            "The note starts with '---' but its frontmatter is never closed by a '---' line, "
            "so Obsidian does not read it as frontmatter; nothing was written. Close it first "
            "(replace_text can add the line)."
        )
    head = text[:body_start] if yaml_text is not None else ""
    changed, label = _edit_head(head, newline_of(text), operation, key.strip(), content)
    return changed + text[len(head) :], label


def _edit_head(
    text: str, newline: str, operation: Literal["set", "delete"], key: str, content: str | None
) -> tuple[str, str]:
    """`edit` on the note's frontmatter block alone (`text`: "" for a note without one)."""
    lines = split_lines(text)
    span = _frontmatter_span(text)
    value = value_of(content or "") if operation == "set" else None
    if span is None:
        if operation == "delete":
            raise EditRefused(
                f"The note has no frontmatter, so no frontmatter key {key!r} to delete; nothing "
                "was written."
            )
        new = ["---", *_key_lines(key, value, _DEFAULT_SEQUENCE_OFFSET), "---"]
        splice(lines, 0, 0, new, newline)
        return join_lines(lines), f"frontmatter {key!r} (new frontmatter)"
    start, closing = span
    yaml_text = "".join(line.text + "\n" for line in lines[start:closing])
    loaded = _load(yaml_text, "The note's frontmatter")
    mapping: dict[object, object] = {}
    if loaded is not None:
        if not isinstance(loaded, CommentedMap):
            raise EditRefused(
                "The note's frontmatter is not a list of key: value fields; nothing was "
                "written. Fix it in Obsidian first."
            )
        mapping = cast("dict[object, object]", loaded)
    lines_of = {k: _key_line(loaded, k) for k in mapping}
    starts = {str(k): start + line for k, line in lines_of.items() if line is not None}
    own_keys = {str(k): k for k, line in lines_of.items() if line is not None}
    key_starts = sorted(starts.values())
    present = key in starts
    if present:
        at = starts[key]
        following = [s for s in key_starts if s > at]
        end = _owned_lines(lines, at, following[0] if following else closing)
    elif operation == "delete":
        keys = ", ".join(str(k) for k in mapping) or "none"
        raise EditRefused(
            f"No frontmatter key {key!r} to delete (keys: {excerpt(keys, 200)}); nothing was "
            "written."
        )
    else:
        at = end = _owned_lines(lines, key_starts[-1], closing) if key_starts else start
    before = _values(mapping)
    if operation == "delete":
        splice(lines, at, end, [], newline)
    else:
        # The key as the note has it (2024 stays a number, not '2024').
        new = _key_lines(own_keys.get(key, key), value, _sequence_offset(lines, start, closing))
        if present:
            # A comment at the end of the key's line stays there, and comment lines among
            # its old value's lines stay below the new value: nobody's words are dropped.
            new[0] += _trailing_comment(lines[at].text)
            new += [line.text for line in lines[at + 1 : end] if line.text.lstrip().startswith("#")]
        splice(lines, at, end, new, newline)
    changed = join_lines(lines)
    _check_fields(changed, key, value, before)
    verb = "deleted" if operation == "delete" else ("set" if present else "added")
    return changed, f"frontmatter {key!r} ({verb})"


def _check_fields(changed: str, key: str, value: object, before: dict[str, object]) -> None:
    """The edit must leave the other fields' values as they were, and text must read back
    as that text; refuse otherwise (a value written in a way that swallows the next line,
    say)."""
    lines = split_lines(changed)
    span = _frontmatter_span(changed)
    after: dict[str, object] = {}
    if span is not None:
        start, closing = span
        try:
            after = _values(
                _round_trip().load("".join(line.text + "\n" for line in lines[start:closing]))
            )
        except (YAMLError, ValueError) as error:
            # An alias elsewhere whose anchor went with the old value, say.
            raise EditRefused(
                f"Setting {key!r} would change other frontmatter fields (the frontmatter would "
                f"no longer read: {excerpt(str(error).splitlines()[0], 120)}); nothing was "
                "written. Edit the frontmatter in Obsidian."
            ) from error
    before = {k: v for k, v in before.items() if k != key}
    written = after.pop(key, None)
    if isinstance(value, str) and written != repr(value):
        raise EditRefused(
            f"The text for {key!r} cannot be written so that it reads back the same; nothing "
            "was written. Send it without line breaks or unusual characters."
        )
    if before != after:
        raise EditRefused(
            f"Setting {key!r} would change other frontmatter fields; nothing was written. "
            "Quote the value, e.g. content='\"text: with colon\"'."
        )
