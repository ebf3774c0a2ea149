"""Apply one edit to a note's text: plain text in, plain text out, no I/O.

Every rule here is written down in docs/editing.md and pinned by tests/edit_corpus/.
Targets come from the note's markdown structure (`targets`); where the content goes
next to other text, it is placed the way the rules say and then checked by parsing the
result: every block the edit did not name must read as before, and the content as it
reads alone. Where the rules' way would not, one blank line more is tried; where nothing
works, the edit is refused.
"""

import difflib
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal, get_args

from obsidian_mcp.editing import frontmatter
from obsidian_mcp.editing.lines import (
    Line,
    content_lines,
    is_blank,
    join_lines,
    newline_of,
    splice,
    split_lines,
)
from obsidian_mcp.editing.targets import (
    CALLOUT_HEADER_RE,
    BlockTarget,
    EditRefused,
    HeadingTarget,
    NoteStructure,
    Splice,
    TargetUnresolved,
    changed_around,
    heading_matches,
    leaves,
    resolve_block,
    resolve_heading,
    structure_of,
    target_view,
    window_structures,
)
from obsidian_mcp.limits import excerpt
from obsidian_mcp.text.markdown import (
    BYTE_ORDER_MARK,
    Block,
    heading_reference,
    parse_structure,
    split_heading_reference,
)

Operation = Literal["append", "prepend", "replace", "set", "delete", "replace_text", "create"]
OPERATIONS: tuple[str, ...] = get_args(Operation)
_SECTION_OPERATIONS = ("append", "prepend", "replace")
# A new heading goes one level below its parent, and never deeper than markdown allows.
_DEEPEST_HEADING = 6
# What no note's text holds: a NUL makes the file binary to every reader (this server's
# included), and a lone surrogate cannot be written as UTF-8 at all.
_NOT_TEXT_RE = re.compile(r"[\x00\ud800-\udfff]")
_TABLE_ROW_RE = re.compile(r"[ \t]*\|")
# A list item's marker as it starts the item's line: bullet or number, a task's box.
_ITEM_MARKER_RE = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]+\[.\])?(?:[ \t]+|$)")
# A block id ending a line, as content may carry one.
_LINE_ID_RE = re.compile(r"(?:^|[ \t>]|(?<=\]\]))\^([A-Za-z0-9-]+)[ \t]*$")
# A block id alone on its line (below a table, as its last row).
_ID_ALONE_RE = re.compile(r"[ \t>]*\^[A-Za-z0-9-]+[ \t]*")
# An ATX heading's opening hashes.
_ATX_RE = re.compile(r"[ ]{0,3}(#{1,6})(?:[ \t]|$)")
_UNCLOSED = {"code": "a code block (```)", "math": "a $$ math block", "comment": "a %% comment"}


@dataclass(frozen=True, slots=True)
class EditRequest:
    operation: Operation
    target: str | None = None
    content: str | None = None
    expected_count: int | None = None
    create_target: bool = False


@dataclass(frozen=True, slots=True)
class Applied:
    text: str
    target: str  # what was edited, for the receipt: "Sessions > Session 12 (line 40)"


def apply_edit(path: str, text: str, request: EditRequest) -> Applied:
    """The note's new text after `request`, or EditRefused saying why nothing changes. A
    byte order mark stays first and is never part of what the edit sees."""
    _refuse_what_is_not_text(request)
    _refuse_a_cut_read(request)
    operation = request.operation
    if operation == "create":
        raise EditRefused(
            f"A note already exists at {path!r}; create never overwrites one. "
            "Edit it with another operation, or create under a new path."
        )
    mark = BYTE_ORDER_MARK if text.startswith(BYTE_ORDER_MARK) else ""
    applied = _apply(path, text[len(mark) :], request)
    return Applied(mark + applied.text, applied.target)


def _apply(path: str, text: str, request: EditRequest) -> Applied:
    operation = request.operation
    _refuse_missing_content(request)
    if operation == "replace_text":
        return _replace_text(path, text, request)
    target = _required_target(request)
    if operation in ("set", "delete"):
        return Applied(*frontmatter.edit(text, operation, target, request.content))
    try:
        if target.lstrip().startswith("^"):
            return _edit_block(path, text, request, target)
        return _edit_section(path, text, request, target)
    except TargetUnresolved as exc:
        create = (
            " Or pass create_target=true to add the heading."
            if "has no heading" in str(exc) and operation in _SECTION_OPERATIONS
            else ""
        )
        raise EditRefused(f"{exc}{create} Nothing was written.") from None


def created_text(request: EditRequest) -> str:
    """The text of a note `create` makes: the content, ending with one line break."""
    _refuse_what_is_not_text(request)
    content = request.content or ""
    if not content.strip():
        raise EditRefused("create needs content: the note's text. Nothing was written.")
    # One newline throughout: the content's first (CRLF content makes a CRLF note).
    newline = newline_of(content)
    return _with_newline(content.rstrip("\r\n"), newline) + newline


# The line vault_read_note ends a cut read with: content holding it is a read sent back.
_CUT_MARKER_RE = re.compile(
    r"^\[cut at char [0-9,]+ of [0-9,]+; continue with vault_read_note\(", re.MULTILINE
)


def _refuse_a_cut_read(request: EditRequest) -> None:
    if request.content is not None and _CUT_MARKER_RE.search(request.content):
        raise EditRefused(
            "The content holds the line a cut read ends with ('[cut at char ...'): it is a "
            "part of the target, not all of it, and written as the whole it would delete "
            "the rest. Nothing was written. Send the changed part without that line, with "
            "the version that read handed out (it names the window, so replace changes "
            "those characters only)."
        )


def _refuse_what_is_not_text(request: EditRequest) -> None:
    for name, value in (("content", request.content), ("target", request.target)):
        found = _NOT_TEXT_RE.search(value or "")
        if found:
            what = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
            raise EditRefused(
                f"The {name} holds {what} (at character {found.start() + 1}), which no "
                "text note can hold: the note would become unreadable as text. Nothing was "
                f"written. Send the {name} without it."
            )


# What replace, replace_text and set write when the content is "": a missing content is
# refused, not read as "" (a client that sent the word null, parsed on the way as JSON
# null, would otherwise delete the text it meant to write: issue 25).
_EMPTY_CONTENT_MEANS = {
    "replace": 'the new text (content "" empties the section body or the block)',
    "replace_text": 'the text to put in its place (content "" deletes the target text)',
    "set": 'the value (content "" for an empty value)',
}


def _refuse_missing_content(request: EditRequest) -> None:
    means = _EMPTY_CONTENT_MEANS.get(request.operation)
    if means is not None and request.content is None:
        raise EditRefused(
            f"{request.operation} needs content: {means}. No content was received, so "
            "nothing was written."
        )


def _required_target(request: EditRequest) -> str:
    if request.target is None or not request.target.strip():
        needs = {
            "set": "the frontmatter key",
            "delete": "the frontmatter key",
        }.get(request.operation, "a heading path ('Sessions > Session 12') or a block id ('^abc1')")
        raise EditRefused(f"{request.operation} needs target: {needs}. Nothing was written.")
    return request.target


def _lines_to_add(request: EditRequest) -> list[str]:
    texts = content_lines(request.content or "")
    if not texts and request.operation != "replace":
        raise EditRefused(
            f"The content to {request.operation} is empty; nothing was written. Pass the "
            "text to add as content."
        )
    return texts


@dataclass(frozen=True, slots=True)
class _Content:
    """The lines to add and how they read alone."""

    texts: list[str]
    blocks: tuple[Block, ...]

    @classmethod
    def of(cls, texts: list[str], prefix: str = "") -> "_Content":
        """`texts` as they are to be written; `prefix` what each starts with there (a
        nested item's indentation), which is not the content's own."""
        blocks = parse_structure("", _alone(texts, prefix))[1]
        if blocks and not blocks[-1].closed:
            raise EditRefused(
                f"The content opens {_UNCLOSED[blocks[-1].kind]} at its line "
                f"{blocks[-1].first_line + 1} and never closes it, so the rest of the note "
                "would read as part of it. Nothing was written. Close it in the content."
            )
        return cls(texts, blocks)

    def starts_as(self, kind: str) -> bool:
        return bool(self.blocks) and self.blocks[0].kind == kind

    def ends_as(self, kind: str) -> bool:
        return bool(self.blocks) and self.blocks[-1].kind == kind

    @property
    def table_rows(self) -> bool:
        return bool(self.texts) and all(_TABLE_ROW_RE.match(text) for text in self.texts)


def _alone(texts: list[str], prefix: str) -> str:
    """The lines as they read without the place's prefix (its blank line: without it)."""
    blank = prefix.rstrip()
    return "\n".join(
        "" if prefix and text == blank else text.removeprefix(prefix) for text in texts
    )


def _place(
    structure: NoteStructure,
    span: tuple[int, int],
    texts: list[str],
    *,
    lead: bool,
    trail: bool,
    prefix: str = "",
    keeps: int = 0,
) -> list[Line]:
    """The note with lines [start, end) replaced by `texts`: after one blank line where
    `lead` (and the line above is not blank already), before one where `trail`. If the
    result would change a block around the edit, or read the content otherwise than
    alone, a blank line more is tried on either side; refused if that cannot help.
    `prefix`: what the texts' lines start with in place (a nested item's indentation, a
    quote's "> "); the place's blank line is its blank part (">" inside a quote).
    `keeps`: how many lines after `end` belong with the new text though they stay as they
    are (a block's own id line), so they are checked as part of it."""
    start, end = span
    lines = list(structure.lines)
    newline = newline_of(join_lines(lines))
    blank = prefix.rstrip()
    kept = [line.text for line in lines[end : end + keeps]]
    alone = _alone([*texts, *kept], prefix)
    content_kinds = [leaf.kind for leaf in leaves(parse_structure("", alone)[1])]
    problem = ""
    tried: list[tuple[bool, bool]] = []
    for lead_blank, trail_blank in ((lead, trail), (True, trail), (lead, True), (True, True)):
        if (lead_blank, trail_blank) in tried:
            continue
        tried.append((lead_blank, trail_blank))
        # Right under the frontmatter needs no blank line: its `---` already separates.
        above = (
            lead_blank
            and start > structure.body_line
            and not _separates(lines[start - 1].text, blank)
        )
        below = trail_blank and end < len(lines) and not _separates(lines[end].text, blank)
        placed = [*([blank] if above else []), *texts, *([blank] if below else [])]
        edited = list(lines)
        splice(edited, start, end, placed, newline)
        before, after, moved, first_line = window_structures(
            structure, edited, Splice(start, end + keeps, start + len(placed) + keeps)
        )
        found = changed_around(before, after, moved, content_kinds, first_line)
        if found is None:
            return edited
        problem = found
    raise EditRefused(f"Nothing was written: placed there, {problem}.")


def _separates(text: str, blank: str) -> bool:
    """True for a blank line (or, inside a quote, a line of only '>')."""
    return is_blank(text) or (bool(blank) and not text.strip(" \t>"))


def _continues(block: Block, content: _Content) -> bool:
    """True where the content goes right below `block`: a list or a table carries on."""
    return (block.kind == "list" and content.starts_as("list")) or (
        block.kind == "table" and content.table_rows
    )


# -- sections ---------------------------------------------------------------------------


def _edit_section(path: str, text: str, request: EditRequest, reference: str) -> Applied:
    if request.operation not in _SECTION_OPERATIONS:
        raise EditRefused(_wrong_operation(request.operation, "a heading"))
    texts = _lines_to_add(request)
    structure = structure_of(path, text)
    if request.create_target and not heading_matches(structure, reference):
        structure, target = _create_heading(path, structure, reference)
    else:
        target = resolve_heading(structure, reference)
        if request.operation == "replace" and _as_read(structure, target, texts):
            return Applied(text, target.label())
    content = _Content.of(texts)
    blocks = structure.body_blocks(target)
    if request.operation == "replace":
        span = _section_span(structure, target, content)
        _refuse_taken_ids(structure, span, texts)
        lines = _place(structure, span, texts, lead=False, trail=False)
        if blocks and not blocks[-1].closed and lines != list(structure.lines):
            raise EditRefused(
                f"The section ends in {_UNCLOSED[blocks[-1].kind]} opened at line "
                f"{blocks[-1].first_line + 1} and never closed: it runs to the end of the "
                "note, so replacing the section would delete everything after it too. "
                "Nothing was written. Close that block first (replace_text can add the "
                "closing line), then replace the section."
            )
    elif request.operation == "prepend" and blocks:
        first = blocks[0].first_line
        trail = not (content.ends_as("list") and blocks[0].kind == "list")
        lines = _place(structure, (first, first), texts, lead=False, trail=trail)
    elif blocks:
        at, continues = _append_at(structure, blocks, content)
        lines = _place(structure, (at, at), texts, lead=not continues, trail=False)
    else:
        # An empty body: the content goes right below the heading, the blank lines that
        # separated it from the next one stay after the content.
        at = target.body_line
        lines = _place(structure, (at, at), texts, lead=False, trail=False)
    if request.operation != "replace":
        _refuse_taken_ids(structure, (0, 0), texts)
    return Applied(join_lines(lines), target.label())


def _append_at(
    structure: NoteStructure, blocks: list[Block], content: _Content
) -> tuple[int, bool]:
    """Where `append` puts content in a section, and whether it continues the block
    there. List items continue the section's own last list, and table rows its own last
    table (above the table's id line), wherever they stand: real sections end with what
    is not their content (a rule and navigation links under a daily log, a comment, a
    subsection). Anything else goes after the section's last block, subsections
    included."""
    own: list[Block] = []
    for block in blocks:
        if block.kind == "heading":
            break
        own.append(block)
    kind = "list" if content.starts_as("list") else "table" if content.table_rows else None
    last = next((block for block in reversed(own) if block.kind == kind), None)
    if last is None:
        return blocks[-1].end_line, _continues(blocks[-1], content)
    end = last.end_line
    if kind == "table" and _ID_ALONE_RE.fullmatch(structure.lines[end - 1].text):
        end -= 1
    return end, True


def _as_read(
    structure: NoteStructure, target: HeadingTarget | BlockTarget, texts: list[str]
) -> bool:
    """Whether replace's content is the target's text as it stands (a read sent back
    unchanged, or a section's body without its heading line): then the note already reads
    so, byte for byte, line endings and all, whatever the target holds (a fence or a
    comment never closed, an id in code)."""
    first, end = target_view(target)
    lines = [line.text for line in structure.lines]
    if isinstance(target, HeadingTarget) and texts == lines[target.first_block_line : end]:
        return bool(texts)
    return texts == lines[first:end]


def _section_span(
    structure: NoteStructure, target: HeadingTarget, content: _Content
) -> tuple[int, int]:
    """The lines `replace` of a section changes. Content that starts with a heading of
    the section's level is the section as a read returns it, heading included: it
    replaces that whole span (a changed heading text renames the section). Any other
    content is the body: it replaces the section's blocks, the blank lines between the
    heading and its first block staying (they are how the note spaces its headings);
    empty content empties the body."""
    level = _heading_level(content)
    if level is not None and level <= target.level:
        if level < target.level:
            raise EditRefused(
                f"The content starts with a level-{level} heading, above this level-"
                f"{target.level} section: it would end the section and take in the text "
                "after it. Nothing was written. Start the content with the section's own "
                "heading (as vault_read_note returns it), or leave the heading out to "
                "replace the body."
            )
        return target_view(target)
    first = target.first_block_line if content.texts else target.body_line
    return first, target.content_end


def _heading_level(content: _Content) -> int | None:
    """The level of the heading the content starts with, if it starts with one."""
    if not content.starts_as("heading"):
        return None
    block = content.blocks[0]
    if block.markup != "#":
        return 1 if block.markup == "=" else 2
    atx = _ATX_RE.match(content.texts[block.first_line])
    return len(atx.group(1)) if atx else None


def _ids_in(texts: list[str]) -> set[str]:
    return {found.group(1).lower() for text in texts if (found := _LINE_ID_RE.search(text))}


def _refuse_taken_ids(structure: NoteStructure, span: tuple[int, int], texts: list[str]) -> None:
    """Refuse content carrying a block id another block of the note (outside the lines
    it replaces) already has: two blocks of one id, and links to it, name neither. Ids
    in code, math and comments are no ids (`ParsedNote.block_ids`)."""
    start, end = span
    real = {block_id.lower() for block_id in structure.note.block_ids}
    lines = structure.lines
    others = _ids_in([line.text for index, line in enumerate(lines) if not start <= index < end])
    taken = sorted(_ids_in(texts) & others & real)
    if taken:
        raise EditRefused(
            f"The content carries the block id ^{taken[0]}, which another block of the note "
            "already has; two blocks of one id would leave links to it ambiguous. Nothing "
            "was written. Give the content another id, or none."
        )


def _create_heading(
    path: str, structure: NoteStructure, reference: str
) -> tuple[NoteStructure, HeadingTarget]:
    """Add the missing headings of `reference` below its longest existing prefix: the
    changed note, and its new innermost heading."""
    wanted = split_heading_reference(reference)
    if any("\n" in name or "\r" in name for name in wanted):
        raise EditRefused(
            "A heading is one line: the target holds a line break. Nothing was written."
        )
    parent: HeadingTarget | None = None
    existing = 0
    for count in range(len(wanted) - 1, 0, -1):
        prefix = heading_reference(wanted[:count])
        if heading_matches(structure, prefix):
            parent = resolve_heading(structure, prefix)
            existing = count
            break
    level = parent.level + 1 if parent is not None else _top_level(structure)
    # Everything missing goes in at one place: the end of the parent's section, or of the
    # note, each heading one level below the one before.
    if parent is not None:
        blocks = structure.body_blocks(parent)
        at = blocks[-1].end_line if blocks else parent.body_line
    else:
        at = structure.blocks[-1].end_line if structure.blocks else structure.body_line
    added: list[str] = []
    for depth, name in enumerate(wanted[existing:]):
        added += ["", "#" * min(level + depth, _DEEPEST_HEADING) + " " + name]
    lines = _place(structure, (at, at), added[1:], lead=True, trail=True)
    created = NoteStructure.of(path, lines)
    full = heading_reference(wanted)
    if len(heading_matches(created, full)) != 1:
        raise EditRefused(
            f"The heading {excerpt(wanted[-1], 120)} cannot be written as a markdown heading "
            "that reads back the same (a trailing '#', say); nothing was written. Choose "
            "another heading text."
        )
    return created, resolve_heading(created, full)


def _top_level(structure: NoteStructure) -> int:
    """The level of the note's highest heading other than a lone `#` title, else 2."""
    levels = [h.level for h in structure.headings()]
    if levels.count(1) == 1:
        levels.remove(1)
    return min(levels, default=2)


# -- blocks ----------------------------------------------------------------------------


def _edit_block(path: str, text: str, request: EditRequest, reference: str) -> Applied:
    if request.operation not in _SECTION_OPERATIONS:
        raise EditRefused(_wrong_operation(request.operation, "a block id"))
    texts = _lines_to_add(request)
    structure = structure_of(path, text)
    target = resolve_block(structure, reference)
    if request.operation == "replace" and _as_read(structure, target, texts):
        return Applied(text, target.label())
    content = _Content.of(_at_level(texts, target.prefix), target.prefix)
    if request.operation == "replace":
        content = _Content.of(_in_place(structure, target, content.texts), target.prefix)
        _refuse_an_item_without_text(target, content)
        _refuse_taken_ids(structure, (target.first_line, target.end_line), content.texts)
        lines = _replace_block(structure, target, content)
    else:
        _refuse_taken_ids(structure, (0, 0), content.texts)
        # Next to a list item, list content continues the list; rows appended to a table
        # continue it, above its id line where the id stands alone; anything else is set
        # apart.
        item = target.kind == "item"
        at = target.end_line if request.operation == "append" else target.first_line
        lead = not (item and content.starts_as("list"))
        trail = not (item and content.ends_as("list"))
        if request.operation == "append" and target.kind == "table" and content.table_rows:
            at = target.id_line if target.id_alone else target.end_line
            lead = trail = False
        if request.operation == "prepend" and target.kept_head:
            # Under a callout's header line, which stays first: the header, the content,
            # a blank quote line, then the paragraph as it was.
            own = [line.text for line in structure.lines[target.first_line : target.end_line]]
            head, rest = own[: target.kept_head], own[target.kept_head :]
            texts = [*head, *content.texts, target.prefix.rstrip(), *rest]
            span = (target.first_line, target.end_line)
            lines = _place(structure, span, texts, lead=False, trail=False, prefix=target.prefix)
            return Applied(join_lines(lines), target.label())
        lines = _place(
            structure, (at, at), content.texts, lead=lead, trail=trail, prefix=target.prefix
        )
    return Applied(join_lines(lines), target.label())


def _at_level(texts: list[str], prefix: str) -> list[str]:
    """Content written where a nested item or a quote's text stands gets the same
    indentation and quote markers, unless it already starts with them."""
    if not prefix or not texts or texts[0].startswith(prefix):
        return texts
    return [prefix + text if text.strip() else prefix.rstrip() for text in texts]


def _in_place(structure: NoteStructure, target: BlockTarget, texts: list[str]) -> list[str]:
    """Content for a block as it must stand there: a list item's text without a marker
    gets the item's (an item stays an item, in its list); a quote's text without `>`
    gets the quote's frame, its callout header line kept."""
    own = structure.lines[target.first_line].text
    if target.kind == "item":
        marker = _ITEM_MARKER_RE.match(own, len(target.prefix))
        if marker is None or (texts and _ITEM_MARKER_RE.match(texts[0], len(target.prefix))):
            return texts
        if not texts:  # the item stays, empty but for its id
            return [target.prefix + marker.group() + "^" + target.block_id]
        indent = target.prefix + " " * len(marker.group())
        first = target.prefix + marker.group() + texts[0].removeprefix(target.prefix)
        rest = [indent + t.removeprefix(target.prefix) if t.strip(" \t>") else t for t in texts[1:]]
        return [first, *rest]
    if (
        target.kind == "quote"
        and texts
        and not texts[0][len(target.prefix) :].lstrip().startswith(">")
    ):
        frame_match = re.match(r"[ \t]*>[ \t]?", own[len(target.prefix) :])
        frame = target.prefix + (frame_match.group() if frame_match else "> ")
        framed = [
            frame + t.removeprefix(target.prefix) if t.strip() else frame.rstrip() for t in texts
        ]
        header = own if CALLOUT_HEADER_RE.match(own[len(frame) :]) else None
        return [header, *framed] if header is not None else framed
    return texts


def _refuse_an_item_without_text(target: BlockTarget, content: _Content) -> None:
    """A list item's id ends the item's own text, its first paragraph: content whose item
    starts with a code block, math, a comment, a quote or a heading has no such line, and
    its id would name that block instead of the item."""
    if target.kind != "item" or not content.blocks:
        return
    items = content.blocks[0].children if content.starts_as("list") else ()
    first = items[0].children[0] if items and items[0].children else None
    if not items or (first is not None and first.kind != "paragraph"):
        kind = first.kind if first is not None else content.blocks[0].kind
        raise EditRefused(
            f"^{target.block_id} names a list item, and an item's id ends its own text; the "
            f"content's item starts with a {kind} block instead, which would take the "
            "id from the item. Nothing was written. Start the item with a line of text (the "
            "block can follow on the next lines, indented)."
        )


def _replace_block(structure: NoteStructure, target: BlockTarget, content: _Content) -> list[Line]:
    head = [
        line.text
        for line in structure.lines[target.first_line : target.first_line + target.kept_head]
    ]
    if not target.id_alone or _carries_id_line(content.texts):
        # The whole block as a read returns it; an id alone on its line is sent back too.
        texts = content.texts if target.id_alone else _with_id(content.texts, content, target)
        span = (target.first_line, target.end_line)
        return _place(
            structure, span, [*head, *texts], lead=False, trail=False, prefix=target.prefix
        )
    # The id keeps its own line below the new text (and the blank lines before it).
    end = target.id_line
    blank = target.prefix.rstrip()
    while end > target.first_line and _separates(structure.lines[end - 1].text, blank):
        end -= 1
    return _place(
        structure,
        (target.first_line, end),
        [*head, *content.texts],
        lead=False,
        trail=False,
        prefix=target.prefix,
        keeps=target.id_line + 1 - end,
    )


def _carries_id_line(texts: list[str]) -> bool:
    """Whether content ends with a block id alone on its line, as a read of a block whose
    id stands alone returns it."""
    # Its own id, or another one there: the id renamed where it stood.
    return bool(texts) and _ID_ALONE_RE.fullmatch(texts[-1]) is not None


def _with_id(texts: list[str], content: _Content, target: BlockTarget) -> list[str]:
    """The content with the block's id: where it already carries it, as it is; else at the
    end of its first paragraph for a list item (the item's own text), of its last
    otherwise; after content that does not end in text, on a line of its own."""
    marker = "^" + target.block_id
    carries = re.compile(rf"(?:^|[ \t]|(?<=\]\])){re.escape(marker)}[ \t]*$", re.IGNORECASE)
    if any(carries.search(text) for text in texts):
        return texts
    if not texts:
        return [target.prefix + marker]
    own = leaves(content.blocks)
    leaf = (own[0] if target.kind == "item" else own[-1]) if own else None
    if leaf is None or leaf.kind not in ("paragraph", "row", "definition"):
        return [*texts, target.prefix.rstrip(), target.prefix + marker]
    line = leaf.end_line - 1
    if _LINE_ID_RE.search(texts[line]):
        return texts  # the id changed where it stands: a rename, made as written
    return [*texts[:line], texts[line] + " " + marker, *texts[line + 1 :]]


def _wrong_operation(operation: str, what: str) -> str:
    return (
        f"{operation} does not apply to {what}: use append, prepend or replace on headings and "
        "blocks, set or delete on frontmatter keys, replace_text on text. Nothing was written."
    )


# -- text ------------------------------------------------------------------------------


def _with_newline(value: str, newline: str) -> str:
    """Every line break of `value` as `newline`."""
    return re.sub(r"\r\n|\r|\n", lambda _: newline, value)


def _spellings(target: str, text: str) -> str:
    """The target as the note spells it: as given, else in the Unicode form the note uses
    (a macOS name or a pasted accent: é as one code point or as e and a combining mark)."""
    for form in ("NFC", "NFD"):
        spelled = unicodedata.normalize(form, target)
        if spelled != target and spelled in text:
            return spelled
    return target


def _matches(text: str, target: str) -> list[re.Match[str]]:
    """Where `target` stands in `text`, literally but for line breaks: each of its breaks
    matches any break (a note with mixed endings holds `b\\nc` as `b\\r\\nc` too)."""
    lines = re.split(r"\r\n|\r|\n", _spellings(target, text))
    return list(re.finditer(r"(?:\r\n|\r|\n)".join(map(re.escape, lines)), text))


def _first_unclosed(structure: NoteStructure) -> int | None:
    """Where the first fence or `%%` comment that is never closed starts (a character
    offset), if any: from there to the end of the note is code or hidden."""
    found = next((block for block in structure.blocks if not block.closed), None)
    return None if found is None else structure.line_starts[found.first_line]


def _replace_text(path: str, text: str, request: EditRequest) -> Applied:
    if not request.target:
        raise EditRefused(
            "replace_text needs target: the exact text to replace. Nothing was written."
        )
    found = _matches(text, request.target)
    wanted = request.expected_count if request.expected_count is not None else 1
    if not found:
        closest = difflib.get_close_matches(
            request.target.splitlines()[0] if request.target.strip() else request.target,
            [line.text for line in split_lines(text)],
            n=1,
            cutoff=0.5,
        )
        hint = f" The closest line is {excerpt(closest[0], 120)}." if closest else ""
        raise EditRefused(
            f"The text {excerpt(request.target, 80)} was not found in the note; nothing was "
            f"written.{hint} Copy the text exactly from vault_read_note, whitespace included."
        )
    if len(found) != wanted:
        how = (
            "pass expected_count with the number to replace them all, or a longer target "
            "that occurs once"
            if request.expected_count is None
            else "check the target, or pass expected_count with the number found"
        )
        raise EditRefused(
            f"The text {excerpt(request.target, 80)} matches {len(found)} times, not "
            f"{wanted}; nothing was written: {how}."
        )
    pieces: list[str] = []
    position = 0
    for match in found:
        # The content's line breaks as the replaced text had them, else the note's.
        breaks = re.search(r"\r\n|\r|\n", match.group())
        newline = breaks.group() if breaks else newline_of(text)
        pieces += [text[position : match.start()], _with_newline(request.content or "", newline)]
        position = match.end()
    edited = "".join([*pieces, text[position:]])
    _refuse_hiding_the_rest(path, text, edited, found, [len(p) for p in pieces[1::2]])
    line = text.count("\n", 0, found[0].start()) + 1
    return Applied(
        edited,
        f"text at line {line}" + (f" and {len(found) - 1} more" if len(found) > 1 else ""),
    )


def _refuse_hiding_the_rest(
    path: str, text: str, edited: str, found: list[re.Match[str]], written: list[int]
) -> None:
    """Refuse a replace_text whose content opens a fence or a `%%` comment that nothing
    closes: what follows it would become code or hidden. A note that already holds one
    keeps it where it was (its start moved by the replacements before it)."""
    # The note's parse is the read's, kept; the edited text is parsed once.
    before = _first_unclosed(structure_of(path, text))
    after = _first_unclosed(NoteStructure.of(path, split_lines(edited)))
    if after is None:
        return
    if before is not None:
        shift = sum(
            length - (match.end() - match.start())
            for match, length in zip(found, written, strict=True)
            if match.end() <= before
        )
        if after >= before + shift:
            return
    raise EditRefused(
        "The content opens a code fence or a %% comment that nothing closes, so the rest of "
        "the note would become code or hidden. Nothing was written. Close it in the content."
    )
