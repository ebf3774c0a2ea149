"""Find what an edit names in the note's own structure, or refuse with the candidates.

Headings come from the project's markdown parser (markdown-it), so headings in code
fences, blockquotes, callouts and the frontmatter are never targets, and setext headings
are. Everything is returned as line indices into `lines.split_lines` of the same text.
"""

import re
from bisect import bisect_right
from dataclasses import dataclass

from obsidian_mcp.editing.lines import Line, is_blank, is_list_item
from obsidian_mcp.errors import VaultError
from obsidian_mcp.limits import excerpt
from obsidian_mcp.text.markdown import (
    ParsedNote,
    Section,
    heading_reference_parts,
    normalise_heading,
    parse_note,
)

# How many headings a refusal lists; a long note's outline is what vault_peek_file is for.
_LISTED_HEADINGS = 15
_BLOCK_ID_RE = re.compile(r"\^[A-Za-z0-9-]+")


class EditRefused(VaultError):
    """An edit that was not made, with what to do instead."""


@dataclass(frozen=True, slots=True)
class HeadingTarget:
    path: tuple[str, ...]  # the headings' own text, outermost first
    level: int
    heading_line: int
    body_line: int  # first line after the heading line(s)
    end_line: int  # the next heading of the same or a higher level, or len(lines)

    def label(self) -> str:
        return f"{' > '.join(self.path)} (line {self.heading_line + 1})"


@dataclass(frozen=True, slots=True)
class BlockTarget:
    block_id: str  # without "^"
    first_line: int
    last_line: int  # inclusive: the line that carries the id
    standalone_id: bool  # "^id" alone on its line, naming the block above
    list_item: bool

    def label(self) -> str:
        return f"^{self.block_id} (line {self.last_line + 1})"


@dataclass(frozen=True, slots=True)
class NoteStructure:
    """What targets resolve against: the parsed note and its line starts."""

    note: ParsedNote
    line_starts: list[int]

    @classmethod
    def of(cls, path: str, lines: list[Line]) -> "NoteStructure":
        starts: list[int] = []
        offset = 0
        for line in lines:
            starts.append(offset)
            offset += len(line.text) + len(line.ending)
        text = "".join(line.text + line.ending for line in lines)
        return cls(parse_note(path, text), starts)

    def line_of(self, offset: int) -> int:
        """The line an offset falls in; the end of the text is one past the last line."""
        if offset >= len(self.note.content):
            return len(self.line_starts)
        return bisect_right(self.line_starts, offset) - 1

    @property
    def body_line(self) -> int:
        """The first line after the frontmatter."""
        return self.line_of(self.note.body_start)

    def headings(self) -> list[HeadingTarget]:
        return [self._target(s) for s in self.note.sections if s.heading is not None]

    def _target(self, section: Section) -> HeadingTarget:
        return HeadingTarget(
            path=section.path,
            level=section.level,
            heading_line=self.line_of(section.start),
            body_line=self.line_of(section.body_start),
            end_line=self.line_of(section.subtree_end),
        )

    def hidden_lines(self) -> set[int]:
        """Lines where nothing is a target: the frontmatter and code blocks."""
        hidden = set(range(self.body_line))
        for paragraph in self.note.paragraphs:
            if paragraph.kind == "code":
                hidden.update(
                    range(self.line_of(paragraph.start), self.line_of(paragraph.end - 1) + 1)
                )
        return hidden


def _outline(headings: list[HeadingTarget]) -> str:
    if not headings:
        return "The note has no headings."
    listed = "; ".join(h.label() for h in headings[:_LISTED_HEADINGS])
    more = len(headings) - _LISTED_HEADINGS
    return f"Its headings: {listed}" + (f"; and {more} more." if more > 0 else ".")


def heading_matches(structure: NoteStructure, reference: str) -> list[HeadingTarget]:
    """Headings a reference names: an exact full path wins; else every heading whose path
    ends with the reference's headings (a suffix)."""
    parts = heading_reference_parts(reference)
    if not parts:
        return []
    headings = structure.headings()
    normalised = [tuple(map(normalise_heading, h.path)) for h in headings]
    exact = [h for h, path in zip(headings, normalised, strict=True) if path == parts]
    if exact:
        return exact
    return [
        h
        for h, path in zip(headings, normalised, strict=True)
        if len(path) >= len(parts) and path[-len(parts) :] == parts
    ]


def resolve_heading(structure: NoteStructure, reference: str) -> HeadingTarget:
    matches = heading_matches(structure, reference)
    if len(matches) == 1:
        return matches[0]
    shown = excerpt(reference, 120)
    if matches:
        listed = "; ".join(h.label() for h in matches[:_LISTED_HEADINGS])
        raise EditRefused(
            f"The heading {shown} matches more than one section: {listed}. Nothing was "
            "written. Name one by its full path, e.g. target='Parent > Heading'."
        )
    raise EditRefused(
        f"The note has no heading {shown}; nothing was written. "
        f"{_outline(structure.headings())} Pass one of these as target, or "
        "create_target=true to add the heading."
    )


def resolve_block(structure: NoteStructure, lines: list[Line], reference: str) -> BlockTarget:
    block_id = reference.strip().removeprefix("^")
    if not _BLOCK_ID_RE.fullmatch("^" + block_id):
        raise EditRefused(
            f"{excerpt(reference, 60)} is not a block id: use '^' and letters, digits or "
            "'-', e.g. target='^abc123'."
        )
    ends_with_id = re.compile(rf"(?:^|[ \t])\^{re.escape(block_id)}[ \t]*$")
    hidden = structure.hidden_lines()
    found = [
        index
        for index, line in enumerate(lines)
        if index not in hidden and ends_with_id.search(line.text)
    ]
    if len(found) != 1:
        where = (
            f"{len(found)} lines carry it (lines {', '.join(str(i + 1) for i in found[:10])})"
            if found
            else "no line of the note ends with it"
        )
        raise EditRefused(
            f"There is no block ^{block_id} to edit: {where}; nothing was written. "
            "Call vault_read_note to see the note's block ids, or target a heading."
        )
    last = found[0]
    heading_lines = {h.heading_line for h in structure.headings()}
    standalone = lines[last].text.strip() == "^" + block_id
    if not standalone and is_list_item(lines[last].text):
        return BlockTarget(block_id, last, last, standalone_id=False, list_item=True)
    first = last
    if standalone:
        # Obsidian's way to name a table, list or quote: the id on its own line below it,
        # often after a blank line.
        while first - 1 >= structure.body_line and is_blank(lines[first - 1].text):
            first -= 1
    while (
        first - 1 >= structure.body_line
        and not is_blank(lines[first - 1].text)
        and first - 1 not in heading_lines
        and (standalone or not is_list_item(lines[first - 1].text))
    ):
        first -= 1
    return BlockTarget(block_id, first, last, standalone_id=standalone, list_item=False)
