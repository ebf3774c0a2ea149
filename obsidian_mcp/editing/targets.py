"""Find what a read or an edit names in the note's own structure, or refuse with the
candidates; and check that an edit leaves every block it did not name reading as before.

One resolver serves both tools, and a target is a lens (docs/editing.md, "Read and edit
agree"): `target_view` is the span a read of the target returns and the span `replace`
of it changes, so writing back what was read changes nothing, and reading after a write
gives what was written.

Everything comes from the project's markdown parse (markdown-it's block tokens with their
line maps, plus Obsidian's `%%` comments and `$$` math): headings in code, quotes,
callouts, comments or the frontmatter are never targets, setext headings are, a list
item is the item with its nested items and lazy lines. Everything is returned as line
indices into `lines.split_lines` of the same text.
"""

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from obsidian_mcp.editing.lines import Line, join_lines, split_lines
from obsidian_mcp.errors import VaultError
from obsidian_mcp.limits import excerpt
from obsidian_mcp.text.markdown import (
    BYTE_ORDER_MARK,
    Block,
    ParsedNote,
    Section,
    heading_matcher,
    heading_reference,
    parse_structure,
)

# How many headings a refusal lists; a long note's outline is what vault_peek_file is for.
_LISTED_HEADINGS = 15
_BLOCK_ID_RE = re.compile(r"\^[A-Za-z0-9-]+")
# A heading as a refusal lists it ("Notes (line 40)") is a target too: the line number
# picks one of several headings that share a path.
_LINE_LABEL_RE = re.compile(r"(.*\S)\s+\(line ([0-9]+)\)\s*")
# A callout's first line inside its quote: `[!type]`, a fold sign, an optional title.
# Obsidian's syntax, not paragraph text, though markdown-it reads it into the paragraph
# that follows it.
CALLOUT_HEADER_RE = re.compile(r"\[![^\]\n]*\][+-]?")
# Blocks that hold other blocks; the rest are leaves (a table's rows are its leaves).
_CONTAINERS = frozenset({"list", "item", "quote", "table"})
_KIND_NAMES = {
    "paragraph": "paragraph",
    "heading": "heading",
    "code": "code block",
    "math": "math block",
    "comment": "%% comment",
    "html": "HTML block",
    "rule": "rule",
    "row": "table row",
    "table": "table",
    "list": "list",
    "item": "list item",
    "quote": "quote",
    "definition": "link or footnote definition",
}
_UNCLOSED_NAMES = {"code": "```", "math": "$$", "comment": "%%"}
# Content whose blocks read as nothing alone starts with a `---` block: a note's
# frontmatter (its properties), which only the start of a note can hold.
_ALONE_AS_FRONTMATTER = (
    "frontmatter: a --- block is a note's properties at its start only; use set for a property"
)


class EditRefused(VaultError):
    """An edit that was not made, with what to do instead."""


class TargetUnresolved(VaultError):
    """A heading or block id that names no target, or several; the message lists the
    candidates and says nothing of writing (a read and an edit both raise it)."""


@dataclass(frozen=True, slots=True)
class HeadingTarget:
    path: tuple[str, ...]  # the headings' own text, outermost first
    level: int
    heading_line: int
    body_line: int  # first line after the heading line(s)
    end_line: int  # the next heading of the same or a higher level, or len(lines)
    # The section's blocks (its subsections' included): where the first starts and the
    # last ends; both `body_line` for a section with none. Blank lines after the last
    # block separate the section from the next heading and are not its text.
    first_block_line: int
    content_end: int

    def label(self) -> str:
        return f"{heading_reference(self.path)} (line {self.heading_line + 1})"

    @property
    def reference(self) -> str:
        return heading_reference(self.path)


@dataclass(frozen=True, slots=True)
class BlockTarget:
    block_id: str  # without "^"
    kind: str  # the named block's: "item", "paragraph", "table", "quote", ...
    first_line: int
    end_line: int  # exclusive: a list item's nested items and the id line included
    id_line: int  # the line that carries the id
    # "^id" alone on the block's last line (below a table or a quote, after a blank line
    # or not): the line stays as it is when the block is replaced.
    id_alone: bool
    # What the block's lines start with that is not the block's own: the indentation of
    # a nested list item, the "> " of the quote around it. Content written there gets it.
    prefix: str
    # Lines at the block's start that are its container's syntax, not its text: a
    # callout's `> [!note] Title` line, which markdown-it reads into the paragraph below
    # it. A read starts after them and `replace` keeps them.
    kept_head: int = 0

    def label(self) -> str:
        return f"^{self.block_id} (line {self.id_line + 1})"

    @property
    def reference(self) -> str:
        return "^" + self.block_id


Target = HeadingTarget | BlockTarget


@dataclass(frozen=True, slots=True)
class NoteStructure:
    """What targets resolve against: the parsed note, its blocks and its lines."""

    note: ParsedNote
    blocks: tuple[Block, ...]
    lines: tuple[Line, ...]
    line_starts: list[int]
    block_starts: list[int]  # each top-level block's first line, in order

    @classmethod
    def of(cls, path: str, lines: Sequence[Line]) -> "NoteStructure":
        starts: list[int] = []
        offset = 0
        for line in lines:
            starts.append(offset)
            offset += len(line.text) + len(line.ending)
        note, blocks = parse_structure(path, join_lines(lines))
        return cls(note, blocks, tuple(lines), starts, [block.first_line for block in blocks])

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
        body_line = self.line_of(section.body_start)
        end_line = self.line_of(section.subtree_end)
        blocks = self._blocks_between(body_line, end_line)
        return HeadingTarget(
            path=section.path,
            level=section.level,
            heading_line=self.line_of(section.start),
            body_line=body_line,
            end_line=end_line,
            first_block_line=blocks[0].first_line if blocks else body_line,
            content_end=blocks[-1].end_line if blocks else body_line,
        )

    def _blocks_between(self, first: int, end: int) -> Sequence[Block]:
        starts = self.block_starts
        return self.blocks[bisect_left(starts, first) : bisect_left(starts, end)]

    def body_blocks(self, target: HeadingTarget) -> list[Block]:
        """The top-level blocks of a section's body, subsections' headings and text too."""
        return list(self._blocks_between(target.body_line, target.end_line))

    def view(self, target: Target) -> tuple[int, int]:
        """`target_view`'s span as character offsets into the note's text: where a read of
        the target starts and ends (its last line's break not included)."""
        first, end = target_view(target)
        if end <= first:
            start = self.line_starts[first] if first < len(self.lines) else len(self.note.content)
            return start, start
        last = self.lines[end - 1]
        start = self.line_starts[first]
        if first == 0 and self.note.content.startswith(BYTE_ORDER_MARK):
            start += len(BYTE_ORDER_MARK)  # not text: never read, never written
        return start, self.line_starts[end - 1] + len(last.text)

    def text_of(self, target: Target) -> str:
        """What a read of the target returns, whole."""
        start, end = self.view(target)
        return self.note.content[start:end]


def _outline(headings: list[HeadingTarget]) -> str:
    if not headings:
        return "The note has no headings."
    listed = "; ".join(h.label() for h in headings[:_LISTED_HEADINGS])
    more = len(headings) - _LISTED_HEADINGS
    return f"Its headings: {listed}" + (f"; and {more} more." if more > 0 else ".")


@lru_cache(maxsize=16)
def structure_of(path: str, text: str) -> NoteStructure:
    """The note's structure, parsed once per text: the read that handed out a version and
    the edit that brings it back share one parse (a 1 MB note takes over a second)."""
    return NoteStructure.of(path, split_lines(text))


def window_structures(
    before: NoteStructure, edited: Sequence[Line], splice: "Splice"
) -> tuple[NoteStructure, NoteStructure, "Splice", int]:
    """The structures `changed_around` compares, parsed over a window of whole top-level
    blocks around the splice (one more block on each side than it touches, which must
    read the same before and after), with the splice and the window's first line; the
    whole note where a window cannot be trusted: a block never closed, or a window that
    starts with a line the parse could take for frontmatter. An edit touches its blocks'
    neighbours at most: what the window holds decides what the whole note would."""

    def whole() -> tuple[NoteStructure, NoteStructure, Splice, int]:
        return before, NoteStructure.of(before.note.path, edited), splice, 0

    blocks, starts = before.blocks, before.block_starts
    if not blocks or any(not block.closed for block in blocks):
        return whole()
    first = max(bisect_right(starts, splice.start) - 2, 0)
    last = min(bisect_left(starts, splice.old_end) + 1, len(blocks) - 1)
    start = max(blocks[first].first_line, before.body_line)
    end = blocks[last].end_line if last >= first else len(before.lines)
    end = max(end, splice.old_end)
    if start == 0 or before.lines[start].text.lstrip("\ufeff").startswith("---"):
        return whole()
    shift = splice.new_end - splice.old_end
    window_before = NoteStructure.of(before.note.path, before.lines[start:end])
    window_after = NoteStructure.of(before.note.path, edited[start : end + shift])
    same = [(b.first_line - start, b.end_line - start, b.kind) for b in blocks[first : last + 1]]
    read = [(b.first_line, b.end_line, b.kind) for b in window_before.blocks]
    if read != same or any(not block.closed for block in window_after.blocks):
        return whole()
    moved = Splice(splice.start - start, splice.old_end - start, splice.new_end - start)
    return window_before, window_after, moved, start


def target_view(target: Target) -> tuple[int, int]:
    """The lines [first, end) a read of `target` returns and `replace` of it changes as a
    whole: a heading's line(s) and its section up to the end of its last block (the blank
    lines separating it from the next heading are not its text); a block's lines, its id
    line and a list item's nested items included, a callout's header line not."""
    if isinstance(target, HeadingTarget):
        return target.heading_line, max(target.content_end, target.body_line)
    return target.first_line + target.kept_head, target.end_line


def heading_matches(structure: NoteStructure, reference: str) -> list[HeadingTarget]:
    """The headings a reference names in its best tier (`markdown.heading_matcher`, the
    rule reads and edits share), several when it is ambiguous there; a heading as a
    refusal lists it, "Notes (line 40)", names the one at that line."""
    tier_of = heading_matcher(reference)
    ranked = [(tier, h) for h in structure.headings() if (tier := tier_of(h.path)) is not None]
    if ranked:
        best = min(tier for tier, _ in ranked)
        return [heading for tier, heading in ranked if tier == best]
    label = _LINE_LABEL_RE.fullmatch(reference)
    if label is None:
        return []
    line = int(label.group(2)) - 1
    return [h for h in heading_matches(structure, label.group(1)) if h.heading_line == line]


def resolve_heading(structure: NoteStructure, reference: str) -> HeadingTarget:
    matches = heading_matches(structure, reference)
    if len(matches) == 1:
        return matches[0]
    shown = excerpt(reference, 120)
    if matches:
        listed = "; ".join(h.label() for h in matches[:_LISTED_HEADINGS])
        raise TargetUnresolved(
            f"The heading {shown} matches more than one section: {listed}. Name one by its "
            "full path ('Parent > Heading'), or exactly as listed here, line number "
            "included, where they share a path."
        )
    raise TargetUnresolved(
        f"The note has no heading {shown}. {_outline(structure.headings())} Pass one of "
        "these (without the line number)."
    )


def resolve_target(structure: NoteStructure, reference: str) -> Target:
    """The heading or block a reference names (`^id` for a block); TargetUnresolved,
    with the candidates, when it names none or several."""
    if reference.lstrip().startswith("^"):
        return resolve_block(structure, reference)
    return resolve_heading(structure, reference)


# -- block ids --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Place:
    """A block with what holds it: its parents, outermost first, and its siblings."""

    block: Block
    parents: tuple[Block, ...]
    siblings: tuple[Block, ...]
    index: int


def _places(blocks: Sequence[Block], parents: tuple[Block, ...] = ()) -> Iterator[_Place]:
    for index, block in enumerate(blocks):
        yield _Place(block, parents, tuple(blocks), index)
        if block.kind in _CONTAINERS and block.kind != "table":
            yield from _places(block.children, (*parents, block))


def resolve_block(structure: NoteStructure, reference: str) -> BlockTarget:
    block_id = reference.strip().removeprefix("^")
    if not _BLOCK_ID_RE.fullmatch("^" + block_id):
        raise TargetUnresolved(
            f"{excerpt(reference, 60)} is not a block id: use '^' and letters, digits or "
            "'-', e.g. target='^abc123'."
        )
    # After a space, a quote marker, or glued to an embed or a link (`![[img.png]]^id`,
    # which Obsidian reads as the embed's id).
    ends_with_id = re.compile(rf"(?:^|[ \t>]|(?<=\]\]))\^{re.escape(block_id)}[ \t]*$", re.I)
    lines = structure.lines
    found = [
        place
        for place in _places(structure.blocks)
        if place.block.kind in ("paragraph", "table", "definition")
        and ends_with_id.search(lines[place.block.end_line - 1].text)
    ]
    if len(found) != 1:
        where = (
            f"{len(found)} blocks carry it (lines "
            f"{', '.join(str(p.block.end_line) for p in found[:10])})"
            if found
            else "no block of the note ends with it"
        )
        known = ", ".join("^" + key for key in list(structure.note.block_ids)[:20])
        raise TargetUnresolved(
            f"There is no single block ^{block_id}: {where}. Its block ids: "
            f"{known or 'the note has none'}. Name one of these, or a heading."
        )
    spelled = re.search(r"\^([A-Za-z0-9-]+)[ \t]*$", lines[found[0].block.end_line - 1].text)
    return _named_block(structure, found[0], spelled.group(1) if spelled else block_id)


def _named_block(structure: NoteStructure, place: _Place, block_id: str) -> BlockTarget:
    """The block an id names (Obsidian's rules): alone in a paragraph, the block before it
    (not a heading: headings are named by their text);
    at the end of a list item's own text, the item with its nested items; at the end of a
    quote's (a callout's) last line, the quote; else the paragraph or table it ends."""
    carrier = place.block
    id_line = carrier.end_line - 1
    id_alone = structure.lines[id_line].text.strip(" \t>").lower() == "^" + block_id.lower()
    named, parents = carrier, place.parents
    above = place.siblings[place.index - 1] if place.index > 0 else None
    if id_alone and carrier.first_line == id_line and above and above.kind != "heading":
        named = above
    elif parents and parents[-1].kind == "item" and parents[-1].children[0] is carrier:
        named, parents = parents[-1], parents[:-1]
        # A list item's id can sit on its own (lazy) line, with nested items below it.
        id_alone = id_alone and named.end_line == carrier.end_line
    else:
        while parents and parents[-1].kind == "quote" and parents[-1].end_line == named.end_line:
            named, parents = parents[-1], parents[:-1]
    quotes = sum(1 for parent in parents if parent.kind == "quote")
    prefix = _prefix(structure.lines[named.first_line].text, quotes) if parents else ""
    head = structure.lines[named.first_line].text.removeprefix(prefix)
    # A paragraph that starts on its callout's header line: the header is the callout's.
    kept_head = int(
        named.kind == "paragraph"
        and bool(parents)
        and parents[-1].kind == "quote"
        and parents[-1].first_line == named.first_line
        and named.end_line - named.first_line > 1
        and CALLOUT_HEADER_RE.match(head) is not None
    )
    return BlockTarget(
        block_id=block_id,
        kind=named.kind,
        first_line=named.first_line,
        end_line=max(named.end_line, carrier.end_line),
        id_line=id_line,
        id_alone=id_alone,
        prefix=prefix,
        kept_head=kept_head,
    )


def _prefix(text: str, quotes: int) -> str:
    """The leading spaces, tabs and the first `quotes` '>' of a line: what the containers
    around a block put before its text."""
    end = 0
    seen = 0
    while end < len(text) and text[end] in " \t>":
        if text[end] == ">":
            if seen == quotes:
                break
            seen += 1
        end += 1
    return text[:end]


# -- the blocks around an edit ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leaf:
    """A block that holds no other blocks (a table's row is one), and where it stands."""

    kind: str
    first_line: int
    end_line: int
    # The containers around it, outermost first: a list by its marker, an item or a table
    # by its first line, a quote.
    within: tuple[tuple[str, str | int], ...]


def leaves(blocks: Sequence[Block], within: tuple[tuple[str, str | int], ...] = ()) -> list[Leaf]:
    """The blocks inside `blocks` that hold no other blocks, in order."""
    found: list[Leaf] = []
    for block in blocks:
        if block.kind in _CONTAINERS and block.children:
            key: str | int = block.markup if block.kind == "list" else block.first_line
            found += leaves(block.children, (*within, (block.kind, key)))
        else:
            found.append(Leaf(block.kind, block.first_line, block.end_line, within))
    return found


@dataclass(frozen=True, slots=True)
class Splice:
    """Lines [start, old_end) of a note became lines [start, new_end) of the edited one."""

    start: int
    old_end: int
    new_end: int

    def moved(self, line: int) -> int | None:
        """Where an old line is in the edited note; None for a line the edit replaced."""
        if line < self.start:
            return line
        if line >= self.old_end:
            return line + self.new_end - self.old_end
        return None


def changed_around(
    before: NoteStructure,
    after: NoteStructure,
    splice: Splice,
    content_kinds: Sequence[str],
    first_line: int = 0,
) -> str | None:
    """What an edit would change outside its own lines, or None when nothing: every block
    it did not replace must keep its lines and kind in the same containers (a paragraph
    must not run on into the new text, a list must not take in a paragraph, a fence
    must not swallow it), and the new text must read as `content_kinds` (its blocks' kinds
    read alone, in order), not as part of a block around it."""
    new_leaves = {
        (leaf.first_line, leaf.end_line, leaf.kind, leaf.within) for leaf in leaves(after.blocks)
    }
    for leaf in leaves(before.blocks):
        inside = splice.start < splice.old_end and (
            splice.start <= leaf.first_line and leaf.end_line <= splice.old_end
        )
        if inside:
            continue
        if _moved_leaf(leaf, splice) not in new_leaves:
            return _broken(before, after, leaf, splice, first_line)
    placed = [
        leaf
        for leaf in leaves(after.blocks)
        if leaf.first_line < splice.new_end and leaf.end_line > splice.start
    ]
    for leaf in placed:
        if leaf.first_line < splice.start or leaf.end_line > splice.new_end:
            return (
                f"the new text would run into the {_KIND_NAMES[leaf.kind]} at line "
                f"{first_line + leaf.first_line + 1}"
            )
    kinds = [leaf.kind for leaf in placed]
    if kinds != list(content_kinds) and not _continues_table(kinds, content_kinds):
        return (
            "the new text would not read as written there (as "
            f"{', '.join(_KIND_NAMES[k] for k in kinds) or 'nothing'} instead of "
            f"{', '.join(_KIND_NAMES[k] for k in content_kinds) or _ALONE_AS_FRONTMATTER})"
        )
    return None


def _continues_table(kinds: Sequence[str], content_kinds: Sequence[str]) -> bool:
    """Table rows read alone are a paragraph; placed under a table they are its rows."""
    return list(content_kinds) == ["paragraph"] and bool(kinds) and set(kinds) == {"row"}


def _moved_leaf(leaf: Leaf, splice: Splice) -> tuple[int | None, int | None, str, object]:
    # A container whose first lines the edit replaced (a table with its id row kept) now
    # starts where the new text does.
    within = tuple(
        (kind, key if isinstance(key, str) else _or(splice.moved(key), splice.start))
        for kind, key in leaf.within
    )
    last = splice.moved(leaf.end_line - 1)
    return (
        splice.moved(leaf.first_line),
        None if last is None else last + 1,
        leaf.kind,
        within,
    )


def _or(line: int | None, default: int) -> int:
    return default if line is None else line


def _broken(
    before: NoteStructure, after: NoteStructure, leaf: Leaf, splice: Splice, first_line: int
) -> str:
    """Why a block around the edit would read differently, in words the agent can act on
    (line numbers counted from `first_line`, where the structures' window starts)."""
    for block in before.blocks:
        # Never closed, a fence, $$ or %% at the top level runs to the end of the note.
        if not block.closed and block.first_line < splice.start:
            return (
                f"it would go inside the {_KIND_NAMES[block.kind]} opened at line "
                f"{first_line + block.first_line + 1} and never closed, where it would not "
                f"read as text (close that block with a {_UNCLOSED_NAMES[block.kind]} line "
                "first)"
            )
    name = f"the {_KIND_NAMES[leaf.kind]} at line {first_line + leaf.first_line + 1}"
    first = splice.moved(leaf.first_line)
    now = next(
        (
            other
            for other in leaves(after.blocks)
            if first is not None and other.first_line <= first < other.end_line
        ),
        None,
    )
    if now is not None and now.kind != leaf.kind:
        within = " in a list item" if any(kind == "item" for kind, _ in now.within) else ""
        return f"{name} would become part of a {_KIND_NAMES[now.kind]}{within}"
    return (
        f"{name} would run on into the new text or change its place in a list or quote "
        "(content starting with indentation, '---', '===' or an HTML tag can do that): "
        "change the content's first or last line, or choose another target"
    )
