"""Set or delete one frontmatter field, leaving every other line of the YAML as it was.

ruamel.yaml parses the block and says on which line each top-level key starts; only that
key's lines are replaced, with the key and its new value as ruamel.yaml writes them. The
other fields keep their order, quoting, comments and blank lines byte for byte, which a
whole-block rewrite (the plugin's PATCH: `yaml.stringify`) cannot give.
"""

import io
import re
from typing import Any, Literal, cast

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from obsidian_mcp.editing.lines import (
    Line,
    insert,
    is_blank,
    join_lines,
    newline_of,
    replace,
    split_lines,
)
from obsidian_mcp.editing.targets import EditRefused, NoteStructure
from obsidian_mcp.limits import excerpt

_SEQUENCE_ITEM_RE = re.compile(r"( *)- ")
_OWNED_LINE_RE = re.compile(r"[ \t]|-(?:[ \t]|$)")
# Long values stay on one line: YAML's default folds at 80 columns, which would rewrap a
# user's summary.
_NO_FOLDING = 1 << 16
# Sequences under a key, when the note has none to copy: "key:\n  - item".
_DEFAULT_SEQUENCE_OFFSET = 2


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


def _frontmatter_span(structure: NoteStructure, lines: list[Line]) -> tuple[int, int] | None:
    """(first YAML line, closing `---` line) or None without frontmatter."""
    if structure.note.body_start == 0:
        return None
    closing = structure.body_line - 1
    if closing >= len(lines) or lines[closing].text.rstrip() != "---":
        closing = len(lines) - 1
    return 1, closing


def _owned_lines(lines: list[Line], key_line: int, end: int) -> int:
    """One past the last line of the key starting at `key_line`: its indented and `- `
    lines, and blank lines between them (a block scalar's), not blank lines after."""
    last = key_line
    for index in range(key_line + 1, end):
        text = lines[index].text
        if is_blank(text):
            continue
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


def _key_line(loaded: object, key: object) -> int:
    """The line a top-level key starts on, within the YAML text."""
    mapping: Any = loaded
    position: tuple[int, int] = mapping.lc.key(key)
    return position[0]


def _block_style(value: object, within: frozenset[int] = frozenset()) -> None:
    """Lists and mappings as Obsidian's properties editor writes them: one item a line,
    also when the agent wrote `[a, b]` to fit a value on one line. A value that contains
    itself (YAML anchors: `&a [*a]`) cannot be written as a property and is refused."""
    if isinstance(value, CommentedMap | CommentedSeq):
        if id(value) in within:
            raise EditRefused(
                "The content is a YAML value that contains itself (an anchor used inside "
                "itself); nothing was written. Give the value without anchors."
            )
        within = within | {id(value)}
        styled: Any = value
        styled.fa.set_block_style()
        children: list[object] = list(
            styled.values() if isinstance(value, CommentedMap) else styled
        )
        for child in children:
            _block_style(child, within)


def _key_lines(key: str, value_text: str, offset: int) -> list[str]:
    yaml = _round_trip()
    yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    mapping = CommentedMap()
    value = _load(value_text, "The content") if value_text.strip() else None
    _block_style(value)
    mapping[key] = value
    out = io.StringIO()
    yaml.dump(mapping, out)
    return out.getvalue().rstrip("\n").split("\n")


def edit(
    text: str, operation: Literal["set", "delete"], key: str, content: str | None
) -> tuple[str, str]:
    """The note's new text and a label of what changed."""
    key = key.strip()
    lines = split_lines(text)
    newline = newline_of(text)
    structure = NoteStructure.of("", lines)
    span = _frontmatter_span(structure, lines)
    if span is None and lines and lines[0].text.rstrip() == "---":
        raise EditRefused(
            "The note starts with '---' but its frontmatter is never closed by a '---' line, "
            "so Obsidian does not read it as frontmatter; nothing was written. Close it first "
            "(replace_text can add the line)."
        )
    if span is None:
        if operation == "delete":
            raise EditRefused(
                f"The note has no frontmatter, so no frontmatter key {key!r} to delete; nothing "
                "was written."
            )
        insert(
            lines,
            0,
            ["---", *_key_lines(key, content or "", _DEFAULT_SEQUENCE_OFFSET), "---"],
            newline,
        )
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
    starts = {str(k): start + _key_line(loaded, k) for k in mapping}
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
        replace(lines, at, end, [], newline)
    else:
        offset = _sequence_offset(lines, start, closing)
        replace(lines, at, end, _key_lines(key, content or "", offset), newline)
    changed = join_lines(lines)
    _check_other_fields(changed, key, before)
    verb = "deleted" if operation == "delete" else ("set" if present else "added")
    return changed, f"frontmatter {key!r} ({verb})"


def _check_other_fields(changed: str, key: str, before: dict[str, object]) -> None:
    """The edit must leave the other fields' values as they were; refuse otherwise (a
    value written in a way that swallows the next line, say)."""
    lines = split_lines(changed)
    span = _frontmatter_span(NoteStructure.of("", lines), lines)
    after: dict[str, object] = {}
    if span is not None:
        start, closing = span
        after = _values(
            _load(
                "".join(line.text + "\n" for line in lines[start:closing]),
                "The changed frontmatter",
            )
        )
    before = {k: v for k, v in before.items() if k != key}
    after.pop(key, None)
    if before != after:
        raise EditRefused(
            f"Setting {key!r} would change other frontmatter fields; nothing was written. "
            "Quote the value, e.g. content='\"text: with colon\"'."
        )
