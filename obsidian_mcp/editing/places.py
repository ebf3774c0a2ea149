"""Where an edit put its text, so that undo takes it back only from there.

A place is the section that holds the edit's text in the note the edit wrote: its heading
as a label (`Log > Today (line 12)`, `targets.HeadingTarget.label`), "" for the text
before the first heading (the frontmatter included), `WHOLE_NOTE` for text that reaches
across the note's top-level sections. Undo looks for the edit's text in that
section of the note as it is now, found again by its path (the nearest to the line it had
when headings of one path repeat; a heading the user retyped, by its line): text the user
moved within it stays undoable, and the same words pasted into another section are never
taken (issue 34).
"""

import re

from obsidian_mcp.editing.targets import heading_matches, structure_of

_LABEL_RE = re.compile(r"(.*) \(line ([0-9]+)\)")


# The place of an edit whose text reaches across the note's top-level sections.
WHOLE_NOTE = "*"


def place_of(path: str, text: str, start: int, end: int) -> str:
    """The place of the text at [start, end) of `text`: the innermost section holding all
    of it."""
    structure = structure_of(path, text)
    first = structure.line_of(start)
    last = structure.line_of(end - 1) if end > start else first
    headings = structure.headings()
    holding = [h for h in headings if h.heading_line <= first and last < h.end_line]
    heading = max(holding, key=lambda h: h.heading_line, default=None)
    if heading is not None:
        return heading.label()
    return "" if not headings or last < headings[0].heading_line else WHOLE_NOTE


def region_of(path: str, text: str, place: str) -> tuple[int, int] | None:
    """Where `place` is in `text` now, as character offsets; None when no section of its
    path is left and no heading stands where it stood (renamed and moved, or removed)."""
    if place == WHOLE_NOTE:
        return 0, len(text)
    structure = structure_of(path, text)
    headings = structure.headings()
    if not place:
        end = structure.line_starts[headings[0].heading_line] if headings else len(text)
        return 0, end
    label = _LABEL_RE.fullmatch(place)
    reference, line = (label.group(1), int(label.group(2)) - 1) if label else (place, 0)
    # Of its path exactly, the nearest to where it was; else (its heading, or one above
    # it, retyped by the user) the section whose heading stands on the line it stood on;
    # else the nearest that the path still names.
    found = heading_matches(structure, reference)
    candidates = (
        [h for h in found if h.reference == reference]
        or [h for h in headings if h.heading_line == line]
        or found
    )
    if not candidates:
        return None
    heading = min(candidates, key=lambda h: abs(h.heading_line - line))
    start = structure.line_starts[heading.heading_line]
    end = (
        structure.line_starts[heading.end_line]
        if heading.end_line < len(structure.lines)
        else len(text)
    )
    return start, end
