"""Apply one edit to a note's text: plain text in, plain text out, no I/O.

Every rule here is written down in docs/editing.md and pinned by tests/edit_corpus/.
"""

import difflib
from dataclasses import dataclass
from typing import Literal, get_args

from obsidian_mcp.editing import frontmatter
from obsidian_mcp.editing.lines import (
    Line,
    content_lines,
    continues,
    insert,
    is_blank,
    is_list_item,
    join_lines,
    newline_of,
    replace,
    split_lines,
)
from obsidian_mcp.editing.targets import (
    BlockTarget,
    EditRefused,
    HeadingTarget,
    NoteStructure,
    heading_matches,
    resolve_block,
    resolve_heading,
)
from obsidian_mcp.limits import excerpt
from obsidian_mcp.text.markdown import split_heading_reference

Operation = Literal["append", "prepend", "replace", "set", "delete", "replace_text", "create"]
OPERATIONS: tuple[str, ...] = get_args(Operation)
_SECTION_OPERATIONS = ("append", "prepend", "replace")
_HEADING_SEPARATOR = " > "
# A new heading goes one level below its parent, and never deeper than markdown allows.
_DEEPEST_HEADING = 6


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
    """The note's new text after `request`, or EditRefused saying why nothing changes."""
    operation = request.operation
    if operation == "create":
        raise EditRefused(
            f"A note already exists at {path!r}; create never overwrites one. "
            "Edit it with another operation, or create under a new path."
        )
    if operation == "replace_text":
        return _replace_text(text, request)
    target = _required_target(request)
    if operation in ("set", "delete"):
        return Applied(*frontmatter.edit(text, operation, target, request.content))
    if target.lstrip().startswith("^"):
        return _edit_block(path, text, request, target)
    return _edit_section(path, text, request, target)


def created_text(request: EditRequest) -> str:
    """The text of a note `create` makes: the content, ending with one line break."""
    content = request.content or ""
    if not content.strip():
        raise EditRefused("create needs content: the note's text. Nothing was written.")
    return content.rstrip("\r\n") + "\n"


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


# -- sections ---------------------------------------------------------------------------


def _last_text_line(lines: list[Line], target: HeadingTarget) -> int:
    """The section's last non-blank line: the heading's own when the body is empty."""
    last = target.body_line - 1
    for index in range(target.body_line, target.end_line):
        if not is_blank(lines[index].text):
            last = index
    return last


def _append_after(
    lines: list[Line], last: int, texts: list[str], newline: str, *, after_heading: bool
) -> None:
    """Add `texts` below line `last`: directly below a heading or where a list or table
    carries on, else after one blank line."""
    direct = after_heading or continues(lines[last].text, texts[0])
    insert(lines, last + 1, texts if direct else ["", *texts], newline)


def _edit_section(path: str, text: str, request: EditRequest, reference: str) -> Applied:
    if request.operation not in _SECTION_OPERATIONS:
        raise EditRefused(_wrong_operation(request.operation, "a heading"))
    lines = split_lines(text)
    newline = newline_of(text)
    texts = _lines_to_add(request)
    structure = NoteStructure.of(path, lines)
    if request.create_target and not heading_matches(structure, reference):
        target = _create_heading(path, lines, structure, reference, newline)
    else:
        target = resolve_heading(structure, reference)
    last = _last_text_line(lines, target)
    heading_last = target.body_line - 1
    if request.operation == "append":
        _append_after(lines, last, texts, newline, after_heading=last == heading_last)
    elif request.operation == "prepend":
        first = next(
            (i for i in range(target.body_line, target.end_line) if not is_blank(lines[i].text)),
            None,
        )
        if first is None:
            _append_after(lines, last, texts, newline, after_heading=True)
        else:
            direct = is_list_item(texts[-1]) and is_list_item(lines[first].text)
            insert(lines, first, texts if direct else [*texts, ""], newline)
    else:
        replace(lines, target.body_line, last + 1, texts, newline)
    return Applied(join_lines(lines), target.label())


def _create_heading(
    path: str, lines: list[Line], structure: NoteStructure, reference: str, newline: str
) -> HeadingTarget:
    """Add the missing headings of `reference` below its longest existing prefix; the
    new innermost heading is returned, resolved in the changed note."""
    wanted = split_heading_reference(reference)
    parent: HeadingTarget | None = None
    existing = 0
    for count in range(len(wanted) - 1, 0, -1):
        prefix = _HEADING_SEPARATOR.join(wanted[:count])
        if len(heading_matches(structure, prefix)) >= 1:
            parent = resolve_heading(structure, prefix)
            existing = count
            break
    level = parent.level + 1 if parent is not None else _top_level(structure)
    # Everything missing goes in at one place: the end of the parent's section, or of the
    # note, each heading one level below the one before.
    if parent is not None:
        at = _last_text_line(lines, parent) + 1
    else:
        at = max((i + 1 for i, line in enumerate(lines) if not is_blank(line.text)), default=0)
    added: list[str] = []
    for depth, name in enumerate(wanted[existing:]):
        added += ["", "#" * min(level + depth, _DEEPEST_HEADING) + " " + name]
    if at == 0:
        added = added[1:]
    insert(lines, at, added, newline)
    # Resolved again in the changed note: every line number after `at` has moved.
    return resolve_heading(NoteStructure.of(path, lines), _HEADING_SEPARATOR.join(wanted))


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
    lines = split_lines(text)
    newline = newline_of(text)
    texts = _lines_to_add(request)
    target = resolve_block(NoteStructure.of(path, lines), lines, reference)
    if request.operation == "replace":
        _replace_block(lines, target, texts, newline)
    elif request.operation == "append":
        last = target.last_line
        direct = target.list_item and is_list_item(texts[0])
        insert(lines, last + 1, texts if direct else ["", *texts], newline)
    else:
        direct = target.list_item and is_list_item(texts[-1])
        insert(lines, target.first_line, texts if direct else [*texts, ""], newline)
    return Applied(join_lines(lines), target.label())


def _replace_block(lines: list[Line], target: BlockTarget, texts: list[str], newline: str) -> None:
    marker = "^" + target.block_id
    if target.standalone_id:
        # The id stays on its own line below the new text.
        end = target.last_line
        while end > target.first_line and is_blank(lines[end - 1].text):
            end -= 1
        replace(lines, target.first_line, end, texts, newline)
        return
    if not texts:
        texts = [marker]
    elif not texts[-1].rstrip().endswith(marker):
        texts = [*texts[:-1], texts[-1] + " " + marker]
    replace(lines, target.first_line, target.last_line + 1, texts, newline)


def _wrong_operation(operation: str, what: str) -> str:
    return (
        f"{operation} does not apply to {what}: use append, prepend or replace on headings and "
        "blocks, set or delete on frontmatter keys, replace_text on text. Nothing was written."
    )


# -- text ------------------------------------------------------------------------------


def _with_newline(value: str, newline: str) -> str:
    return value.replace("\r\n", "\n").replace("\n", newline) if newline != "\n" else value


def _replace_text(text: str, request: EditRequest) -> Applied:
    if not request.target:
        raise EditRefused(
            "replace_text needs target: the exact text to replace. Nothing was written."
        )
    newline = newline_of(text)
    old = _with_newline(request.target, newline)
    new = _with_newline(request.content or "", newline)
    found = text.count(old)
    wanted = request.expected_count if request.expected_count is not None else 1
    if found == 0:
        closest = difflib.get_close_matches(
            old.splitlines()[0] if old.strip() else old,
            [line.text for line in split_lines(text)],
            n=1,
            cutoff=0.5,
        )
        hint = f" The closest line is {excerpt(closest[0], 120)}." if closest else ""
        raise EditRefused(
            f"The text {excerpt(request.target, 80)} was not found in the note; nothing was "
            f"written.{hint} Copy the text exactly from vault_read_note, whitespace included."
        )
    if found != wanted:
        how = (
            "pass expected_count with the number to replace them all, or a longer target "
            "that occurs once"
            if request.expected_count is None
            else "check the target, or pass expected_count with the number found"
        )
        raise EditRefused(
            f"The text {excerpt(request.target, 80)} matches {found} times, not {wanted}; "
            f"nothing was written: {how}."
        )
    first = text.index(old)
    line = text.count("\n", 0, first) + 1
    return Applied(
        text.replace(old, new),
        f"text at line {line}" + (f" and {found - 1} more" if found > 1 else ""),
    )
