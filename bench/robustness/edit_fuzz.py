"""Differential fuzz of the edit engine: random notes in the shapes people write, random
edits, and an oracle that is markdown-it's own parse, not the engine's target code.

    python -m bench.robustness.edit_fuzz [--cases 10000] [--seed 25] [--out bench/out]

Prints the counts (cases, edits made, refusals, failures, by operation and target kind)
and writes them, with every failure's note, edit and reason, to
``<out>/edit_fuzz.json``. tests/test_edit_fuzz.py runs a short deterministic slice.

A note is generated as blocks whose lines the generator knows: frontmatter (comments, an
anchor), headings (ATX and setext, names holding ``#``, ``::``, ``->``, `` > ``), and under
them paragraphs, bullet, ordered and task lists nested with tabs or spaces (items on two
lines, lazy lines, ids on items), fences of both kinds (with a ``#`` line and a blank line
inside), indented code, ``$$`` math and ``%%`` comments (with a heading inside), callouts
with nested quotes and lists, tables (with an id row or a standalone id), HTML blocks and
comments, rules, standalone ids; with LF, CRLF or mixed line endings, sometimes a byte
order mark, sometimes no final newline, sometimes a ``%%`` or a fence never closed at the
end. An edit is every operation on every target kind: a section by its path (quoted
where a name holds `` > ``) or a unique end of it, a block id, a frontmatter key, exact
text, a heading to create.

The oracle, after each edit (apply_edit, the pure engine):

* every block of the note the edit did not target keeps its bytes, its kind and its
  place in lists and quotes: markdown-it (commonmark and tables, nothing of this
  project's) parses the note before and after into leaf blocks (paragraphs, headings,
  code, HTML, rules, table rows), each with the list items and quotes around it; the
  untargeted ones must all be found after, in order, identical;
* the content is there, between the blocks the operation puts it between, and visible:
  not inside a fence, indented code or HTML block, and after an even number of ``%%``
  and ``$$`` outside code;
* the byte order mark stays first and the note ends with a line break iff it did;
* frontmatter edits leave the body byte-identical and every other key's value as it
  was, and the key reads back (PyYAML) as the value meant; replace_text is exactly
  ``str.replace``;
* a refusal is a failure unless the edit had to be refused (content placed after a
  ``%%`` or fence never closed would be hidden);
* before each heading or block edit, its target read (as vault_read_note returns it)
  and sent back with ``replace`` leaves the note byte for byte (issue 34's GetPut, on
  these notes' shapes too).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from obsidian_mcp.editing.lines import split_lines
from obsidian_mcp.editing.operations import EditRequest, Operation, apply_edit
from obsidian_mcp.editing.targets import (
    EditRefused,
    NoteStructure,
    TargetUnresolved,
    resolve_target,
)

logger = logging.getLogger("bench.robustness.edit_fuzz")

BOM = "\ufeff"
# Cases between progress lines of a long run.
_PROGRESS_EVERY = 1000
# Failures kept whole in the JSON (the rest are counted).
_KEPT_FAILURES = 50

_ORACLE = MarkdownIt("commonmark").enable("table")
# Words for generated text (the NATO alphabet: no word is markdown).
_WORDS = tuple(
    re.findall(
        r"\w+",
        "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
        "november oscar papa quebec romeo sierra tango uniform victor whiskey xray",
    )
)
_HEADINGS = (
    "Plans",
    "Notes",
    "Log",
    "C# basics",
    "std::vector",
    "a -> b",
    "A > B",
    "**Bold** idea",
    "Q&A",
    "#tagged",
    'Say "hi"',
    "Tasks",
    "Setup",
    "Ideas",
)
_NEW_HEADINGS = ("C# more", "x::y", "p -> q", "M > N", "Fresh", "Later on", "#new")


# -- the generated note -------------------------------------------------------------


@dataclass
class Section:
    path: tuple[str, ...]
    level: int
    heading_line: int
    body_line: int
    end_line: int = -1  # the next heading of the same or a higher level


@dataclass
class Named:
    """What a block id names: lines [first, end) (a list item with its nested items; a
    table, list or quote and its standalone id line)."""

    first: int
    end: int


@dataclass
class Note:
    lines: list[str] = field(default_factory=list[str])
    newline: str = "\n"
    mixed: bool = False
    bom: bool = False
    final_break: bool = True
    frontmatter: list[str] | None = None
    sections: list[Section] = field(default_factory=list[Section])
    ids: dict[str, Named] = field(default_factory=dict[str, Named])
    tokens: list[str] = field(default_factory=list[str])  # unique words, for replace_text
    # The first line of a %% comment or fence never closed at the end, else None.
    unclosed_from: int | None = None
    indented_code: set[int] = field(default_factory=set[int])  # first lines of such blocks

    def text(self) -> str:
        lines = [*(self.frontmatter or []), *self.lines]
        out: list[str] = []
        for index, line in enumerate(lines):
            last = index == len(lines) - 1
            newline = self.newline if not self.mixed or index % 3 == 0 else "\n"
            out.append(line + ("" if last and not self.final_break else newline))
        return (BOM if self.bom else "") + "".join(out)

    @property
    def offset(self) -> int:
        """Lines before the body (the frontmatter's)."""
        return len(self.frontmatter or [])


class _Ids:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._count = 0

    def new(self) -> str:
        self._count += 1
        return f"id{self._count}{self._rng.choice('abcxyz')}"


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(count))


class Generator:
    """One random note (`note`) from a seed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.note = Note()
        self.ids = _Ids(rng)
        self._previous = "start"

    def _add(self, text: str) -> int:
        self.note.lines.append(text)
        return len(self.note.lines) - 1

    def _blank(self) -> None:
        if self.note.lines and self.note.lines[-1] != "":
            self._add("")

    def _token(self) -> str:
        token = f"tok{len(self.note.tokens)}q"
        self.note.tokens.append(token)
        return token

    def _line(self, count: int = 4) -> str:
        rng = self.rng
        text = _words(rng, count)
        roll = rng.random()
        if roll < 0.1:
            text += f" `code {rng.choice(_WORDS)}`"
        elif roll < 0.18:
            text += f" %%aside {rng.choice(_WORDS)}%%"
        elif roll < 0.3:
            text += " " + self._token()
        return text

    # -- blocks ----------------------------------------------------------------------

    def paragraph(self) -> None:
        first = len(self.note.lines)
        for _ in range(self.rng.randint(1, 3)):
            self._add(self._line())
        if self.rng.random() < 0.4:
            block_id = self.ids.new()
            self.note.lines[-1] += f" ^{block_id}"
            self.note.ids[block_id] = Named(first, len(self.note.lines))

    def list_block(self) -> None:
        rng = self.rng
        if self._previous == "list":
            # Two lists with one blank line between are one list in markdown.
            self.paragraph()
            self._add("")
        ordered = rng.random() < 0.3
        marker = rng.choice(["-", "*", "+"]) if not ordered else rng.choice([".", ")"])
        unit = rng.choice(["\t", "  ", "    "])
        if ordered and unit == "  ":
            unit = "   "
        task = not ordered and rng.random() < 0.4
        self._items(marker, ordered, unit, task, indent="", depth=0)
        if rng.random() < 0.15 and self.note.lines:
            # "^id" alone after a blank line names the whole list.
            first = self._list_start
            self._add("")
            block_id = self.ids.new()
            self._add(f"^{block_id}")
            self.note.ids[block_id] = Named(first, len(self.note.lines))

    def _items(
        self, marker: str, ordered: bool, unit: str, task: bool, indent: str, depth: int
    ) -> None:
        rng = self.rng
        if depth == 0:
            self._list_start = len(self.note.lines)
        for number in range(1, rng.randint(1, 4) + 1):
            bullet = f"{number}{marker}" if ordered else marker
            box = rng.choice(["[ ] ", "[x] "]) if task else ""
            first = self._add(f"{indent}{bullet} {box}{self._line(3)}")
            shape = rng.random()
            if shape < 0.15:
                self._add(indent + " " * (len(bullet) + 1) + self._line(3))  # continuation
            elif shape < 0.22:
                self._add(self._line(2))  # a lazy line
            block_id = self.ids.new() if rng.random() < 0.3 else None
            if block_id is not None:
                self.note.lines[-1] += f" ^{block_id}"
            if depth < 3 and rng.random() < 0.35:
                self._items(marker, ordered, unit, task, indent + unit, depth + 1)
            if block_id is not None:
                self.note.ids[block_id] = Named(first, len(self.note.lines))

    def fence(self) -> None:
        rng = self.rng
        fence = rng.choice(["```", "~~~", "````"])
        self._add(fence + rng.choice(["", "python", "sh"]))
        self._add("# not a heading")
        if fence == "````":
            self._add("```")
        self._add(_words(rng, 3))
        self._add("")
        self._add("code ^notanid")
        self._add(fence)

    def indented_code(self) -> None:
        if self._previous == "list":
            self.paragraph()
            self._add("")
        self.note.indented_code.add(self._add("    indented code"))
        self._add("    # not a heading")

    def math(self) -> None:
        self._add("$$")
        self._add("x = y + 1")
        self._add("")
        self._add("# not a heading")
        self._add("$$")

    def comment(self) -> None:
        self._add("%%")
        self._add("## Hidden heading")
        self._add("")
        self._add("hidden ^hiddenid")
        self._add("%%")

    def quote(self) -> None:
        rng = self.rng
        first = len(self.note.lines)
        if rng.random() < 0.6:
            self._add(f"> [!{rng.choice(['note', 'todo', 'quote'])}] {_words(rng, 2)}")
        self._add("> " + self._line(3))
        if rng.random() < 0.3:
            self._add("> > " + _words(rng, 3))
        if rng.random() < 0.4:
            item_first = self._add("> - " + _words(rng, 2))
            block_id = self.ids.new()
            self.note.lines[-1] += f" ^{block_id}"
            self.note.ids[block_id] = Named(item_first, item_first + 1)
            self._add("> - " + _words(rng, 2))
        elif rng.random() < 0.4:
            block_id = self.ids.new()
            self.note.lines[-1] += f" ^{block_id}"
            self.note.ids[block_id] = Named(first, len(self.note.lines))

    def table(self) -> None:
        rng = self.rng
        first = self._add("| name | value |")
        self._add(rng.choice(["|---|---|", "|:-----|-----:|"]))
        for _ in range(rng.randint(1, 3)):
            self._add(f"| {rng.choice(_WORDS)} | {rng.randint(1, 99)} |")
        roll = rng.random()
        if roll < 0.2:
            block_id = self.ids.new()
            self._add(f"^{block_id}")  # directly below: a row, naming the table
            self.note.ids[block_id] = Named(first, len(self.note.lines))
        elif roll < 0.4:
            block_id = self.ids.new()
            self._add("")
            self._add(f"^{block_id}")
            self.note.ids[block_id] = Named(first, len(self.note.lines))

    def html(self) -> None:
        if self.rng.random() < 0.5:
            self._add('<div class="box">')
            self._add(_words(self.rng, 3))
            self._add("</div>")
        else:
            self._add("<!--")
            self._add("## hidden in html")
            self._add("")
            self._add("-->")

    def rule(self) -> None:
        self._add(self.rng.choice(["***", "___", "- - -"]))

    _KINDS = (
        ("paragraph", 30),
        ("list_block", 25),
        ("fence", 6),
        ("indented_code", 3),
        ("math", 4),
        ("comment", 5),
        ("quote", 8),
        ("table", 7),
        ("html", 4),
        ("rule", 3),
    )

    def block(self) -> None:
        names = [name for name, _ in self._KINDS]
        weights = [weight for _, weight in self._KINDS]
        kind = self.rng.choices(names, weights)[0]
        self._blank()
        if self.rng.random() < 0.1 and self.note.lines:
            self._add("")  # two blank lines now and then
        getattr(self, kind)()
        self._previous = "list" if kind == "list_block" else kind

    # -- the note --------------------------------------------------------------------

    def heading(self, level: int, path: tuple[str, ...]) -> None:
        self._blank()
        name = path[-1]
        setext = level <= 2 and self.rng.random() < 0.2 and not name.startswith("#")
        first = len(self.note.lines)
        if setext:
            self._add(name)
            self._add("=" * 3 if level == 1 else "-" * 3)
        else:
            self._add("#" * level + " " + name)
        self.note.sections.append(Section(path, level, first, len(self.note.lines)))
        self._previous = "heading"

    def generate(self) -> Note:
        rng = self.rng
        note = self.note
        note.newline = "\r\n" if rng.random() < 0.25 else "\n"
        note.mixed = note.newline == "\r\n" and rng.random() < 0.3
        note.bom = rng.random() < 0.1
        note.final_break = rng.random() < 0.8
        if rng.random() < 0.4:
            note.frontmatter = self._frontmatter()
        for _ in range(rng.randint(0, 1)):
            self.block()
        stack: list[tuple[int, str]] = []
        for _ in range(rng.randint(1, 6)):
            level = rng.randint(1, 3)
            while stack and stack[-1][0] >= level:
                stack.pop()
            name = rng.choice(_HEADINGS)
            stack.append((level, name))
            self.heading(level, tuple(n for _, n in stack))
            for _ in range(rng.randint(0, 4)):
                self.block()
        if rng.random() < 0.06:
            self._blank()
            note.unclosed_from = len(note.lines)
            self._add(rng.choice(["%%", "```"]))
            self._add("never closed " + _words(rng, 2))
        while note.lines and note.lines[-1] == "":
            note.lines.pop()
        self._finish_sections()
        self._shift_to_note_lines()
        return note

    def _frontmatter(self) -> list[str]:
        return [
            "---",
            "title: Old title",
            "# a comment line",
            "status: draft # workflow state",
            "tags:",
            "  - work",
            "  - fuzz",
            "base: &b shared",
            "other: *b",
            "---",
        ]

    def _finish_sections(self) -> None:
        sections = self.note.sections
        for index, section in enumerate(sections):
            section.end_line = next(
                (s.heading_line for s in sections[index + 1 :] if s.level <= section.level),
                len(self.note.lines),
            )

    def _shift_to_note_lines(self) -> None:
        """Line numbers counted from the note's first line (the frontmatter's)."""
        shift = self.note.offset
        for section in self.note.sections:
            section.heading_line += shift
            section.body_line += shift
            section.end_line += shift
        for named in self.note.ids.values():
            named.first += shift
            named.end += shift
        self.note.indented_code = {line + shift for line in self.note.indented_code}
        if self.note.unclosed_from is not None:
            self.note.unclosed_from += shift


# -- the edit ------------------------------------------------------------------------


@dataclass
class Edit:
    request: EditRequest
    kind: str  # "heading", "block", "frontmatter", "text", "create"
    # Lines the edit may change (replace); None: it only adds.
    region: tuple[int, int] | None = None
    # The content must lie after line `after_line` (exclusive end of a block) and before
    # line `before_line` of the note before the edit; None: no bound.
    after_line: int | None = None
    before_line: int | None = None
    content_lines: list[str] = field(default_factory=list[str])
    must_refuse: bool = False
    # A list placed right above indented code takes the code in, whatever blank lines
    # separate them (CommonMark): a refusal is right, an edit must still pass the checks.
    may_refuse: bool = False
    expected_value: Any = None  # set: what the key reads back as


def _quoted(name: str) -> str:
    """A heading name as docs/editing.md says to write it in a path (written here from the
    documentation, not with the engine's function)."""
    if re.search(r'^[\s"#]|\s$|(?:^|\s)>(?:\s|$)', name):
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return name


def _reference(path: Sequence[str]) -> str:
    return " > ".join(_quoted(name) for name in path)


def _plain(name: str) -> str:
    return " ".join(re.sub(r"\*\*|__|[*_]", "", name).split()).casefold()


_CONTENTS = (
    "paragraph",
    "two paragraphs",
    "bullet items",
    "task items",
    "ordered items",
    "nested items",
    "fence",
    "comment",
    "math",
    "quote",
    "table rows",
    "rule",
    "subheading",
)


def _content(rng: random.Random, kind: str) -> list[str]:
    words = _words(rng, 4)
    return {
        "paragraph": [f"New {words}."],
        "two paragraphs": [f"New {words}.", "", f"Second {_words(rng, 3)}."],
        "bullet items": [f"- new {words}", f"- newer {_words(rng, 2)}"],
        "task items": [f"- [ ] new {words}"],
        "ordered items": [f"1. new {words}", f"2. newer {_words(rng, 2)}"],
        "nested items": [f"- new {words}", f"\t- child {_words(rng, 2)}"],
        "fence": ["```", f"# new code {words}", "", "```"],
        "comment": ["%%", f"new hidden {words}", "%%"],
        "math": ["$$", f"new = {rng.randint(1, 9)}", "$$"],
        "quote": [f"> new quote {words}"],
        "table rows": [f"| new {rng.choice(_WORDS)} | {rng.randint(1, 99)} |"],
        "rule": ["***"],
        "subheading": [f"#### New sub {words}", f"New under it {_words(rng, 2)}."],
    }[kind]


def _after_unclosed(note: Note, line: int) -> bool:
    return note.unclosed_from is not None and line > note.unclosed_from


def choose_edit(rng: random.Random, note: Note) -> Edit | None:
    kinds = ["heading"] * 5 + ["block"] * 4 + ["frontmatter", "text", "create"]
    kind = rng.choice(kinds)
    if kind == "heading":
        return _heading_edit(rng, note)
    if kind == "block":
        return _block_edit(rng, note)
    if kind == "frontmatter":
        return _frontmatter_edit(rng, note)
    if kind == "text":
        return _text_edit(rng, note)
    return _create_edit(rng, note)


def _content_request(rng: random.Random) -> tuple[str, list[str]]:
    lines = _content(rng, rng.choice(_CONTENTS))
    return "\n".join(lines), lines


def _unique_reference(note: Note, section: Section, rng: random.Random) -> str | None:
    paths = [tuple(map(_plain, s.path)) for s in note.sections]
    mine = tuple(map(_plain, section.path))
    if paths.count(mine) != 1:
        return None
    if rng.random() < 0.3:
        # A unique end of the path: "Child" for "Parent > Child".
        for length in range(1, len(mine)):
            tail = mine[-length:]
            if [p[-length:] for p in paths if len(p) >= length].count(tail) == 1 and mine not in [
                p[-length:] for p in paths if p != mine
            ]:
                return _reference(section.path[-length:])
    return _reference(section.path)


def _section_leaves_end(note: Note, section: Section) -> int:
    """One past the last non-blank body line of the section (the heading's last line when
    the body is empty)."""
    end = section.end_line
    while end > section.body_line and _line(note, end - 1) == "":
        end -= 1
    return end


def _line(note: Note, index: int) -> str:
    lines = [*(note.frontmatter or []), *note.lines]
    return lines[index]


def _heading_edit(rng: random.Random, note: Note) -> Edit | None:
    if not note.sections:
        return None
    section = rng.choice(note.sections)
    reference = _unique_reference(note, section, rng)
    if reference is None:
        return None
    operation: Operation = rng.choice(["append", "prepend", "replace"])
    content, lines = _content_request(rng)
    last = _section_leaves_end(note, section)
    body_first = next(
        (i for i in range(section.body_line, section.end_line) if _line(note, i) != ""),
        None,
    )
    edit = Edit(EditRequest(operation, reference, content), "heading", content_lines=lines)
    if operation == "append" or (operation == "prepend" and body_first is None):
        edit.after_line, edit.before_line = last, section.end_line
        edit.must_refuse = _after_unclosed(note, last)
        if operation == "append" and _continues_own_block(lines):
            # List items continue the section's own last list, table rows its last table
            # (docs/editing.md): somewhere in the section, not necessarily at its end, so
            # before a fence or %% never closed at its end, where it is seen.
            edit.after_line = section.body_line
            edit.may_refuse, edit.must_refuse = edit.must_refuse, False
    elif operation == "prepend":
        edit.after_line, edit.before_line = section.body_line, body_first
    else:
        edit.region = (section.body_line, section.end_line)
        edit.after_line, edit.before_line = section.body_line, section.end_line
        # A section ending in a fence or %% never closed runs to the end of the note:
        # replacing it would delete all that (docs/editing.md).
        edit.must_refuse = (
            note.unclosed_from is not None
            and section.body_line <= note.unclosed_from < section.end_line
        )
        # Content that starts with a heading of the section's level is the section with
        # its heading line (renamed); one above it would end the section: refused.
        hashes = len(lines[0]) - len(lines[0].lstrip("#"))
        if 0 < hashes <= section.level and lines[0][hashes : hashes + 1] == " ":
            edit.region = (section.heading_line, section.end_line)
            edit.after_line = section.heading_line
            edit.must_refuse = edit.must_refuse or hashes < section.level
    return edit


def _block_edit(rng: random.Random, note: Note) -> Edit | None:
    if not note.ids:
        return None
    block_id = rng.choice(sorted(note.ids))
    named = note.ids[block_id]
    operation: Operation = rng.choice(["append", "prepend", "replace"])
    content, lines = _content_request(rng)
    edit = Edit(EditRequest(operation, "^" + block_id, content), "block", content_lines=lines)
    if operation == "append":
        edit.after_line = edit.before_line = named.end
        edit.must_refuse = _after_unclosed(note, named.end)
        if _line(note, named.first).lstrip(" \t>").startswith("|") and _continues_own_block(
            [line.lstrip(" \t>") for line in lines]
        ):
            # Rows appended to a table go inside it, above its id line.
            edit.after_line = named.first
    elif operation == "prepend":
        edit.after_line = edit.before_line = named.first
    else:
        edit.region = (named.first, named.end)
        edit.after_line, edit.before_line = named.first, named.end
        # A list item (its id on its own text, not alone below a list) stays an item:
        # content without a marker gets the item's. Content already at the item's place
        # (starting with its indentation and quote markers) is read without them.
        own = _line(note, named.first)
        prefix = re.match(r"[ \t>]*", own).group()  # type: ignore[union-attr]
        marker = _ITEM_MARKER.match(own, len(prefix))
        alone = _line(note, named.end - 1).strip(" \t>") == "^" + block_id
        first = lines[0][len(prefix) :] if prefix and lines[0].startswith(prefix) else lines[0]
        if marker and not alone and lines and not _ITEM_MARKER.match(first):
            edit.content_lines = [marker.group() + first, *lines[1:]]
            # The item's id ends its own text: content that starts otherwise has none.
            # (A task's box makes any line text.)
            edit.must_refuse = "[" not in marker.group() and first.startswith(
                ("```", "$$", "%%", ">", "#", "***")
            )
    return edit


def _continues_own_block(lines: list[str]) -> bool:
    """Content that `append` puts after a section's own last list or table, if any."""
    return bool(lines) and (
        _ITEM_MARKER.match(lines[0]) is not None or all(line.startswith("|") for line in lines)
    )


_ITEM_MARKER = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]+\[.\])?(?:[ \t]+|$)")


_VALUES: tuple[tuple[str, Any], ...] = (
    ("Issue #42 fixed", "Issue #42 fixed"),
    ("[[Other]]", "[[Other]]"),
    ("[[A]], [[B]]", ["[[A]]", "[[B]]"]),
    ("- x\n- y", ["x", "y"]),
    ("done", "done"),
    ("3", 3),
    ("true", True),
    ("Plan: phase two", "Plan: phase two"),
    ("@ann", "@ann"),
    ("yes", "yes"),
    ("line one\nline two", "line one\nline two"),
    ("[a, b]", ["a", "b"]),
)


def _frontmatter_edit(rng: random.Random, note: Note) -> Edit:
    key = rng.choice(["title", "status", "tags", "owner", "new key"])
    if note.frontmatter is not None and key in ("title", "status", "tags") and rng.random() < 0.3:
        return Edit(EditRequest("delete", key), "frontmatter")
    content, value = rng.choice(_VALUES)
    return Edit(EditRequest("set", key, content), "frontmatter", expected_value=value)


def _text_edit(rng: random.Random, note: Note) -> Edit | None:
    if not note.tokens:
        return None
    token = rng.choice(note.tokens)
    return Edit(EditRequest("replace_text", token, token.upper() + " new"), "text")


def _create_edit(rng: random.Random, note: Note) -> Edit | None:
    name = rng.choice(_NEW_HEADINGS)
    if any(_plain(name) in map(_plain, s.path) for s in note.sections):
        return None
    content, lines = _content_request(rng)
    parent = rng.choice(note.sections) if note.sections and rng.random() < 0.6 else None
    if parent is not None:
        reference = _unique_reference(note, parent, rng)
        if reference is None:
            return None
        path = f"{reference} > {_quoted(name)}"
        end = _section_leaves_end(note, parent)
        before_line = parent.end_line
    else:
        path = _quoted(name)
        end = len(note.lines) + note.offset
        before_line = None
    edit = Edit(
        EditRequest("append", path, content, create_target=True),
        "create",
        after_line=end,
        before_line=before_line,
        content_lines=[name, *lines],
    )
    edit.must_refuse = _after_unclosed(note, end)
    return edit


# -- the oracle ------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    kind: str
    first: int
    end: int
    text: tuple[str, ...]
    within: tuple[tuple[str, str], ...]


_LEAF_OPEN = {"paragraph_open", "heading_open", "tr_open"}
_LEAF_SELF = {"fence", "code_block", "html_block", "hr"}
_CONTAINERS = {
    "bullet_list_open",
    "ordered_list_open",
    "list_item_open",
    "blockquote_open",
    "table_open",
}


def _split(text: str) -> list[tuple[str, str]]:
    """Lines with their breaks ("\r\n", "\r", "\n" or "" for a last line without one)."""
    found: list[tuple[str, str]] = []
    position = 0
    for match in re.finditer(r"\r\n|\r|\n", text):
        found.append((text[position : match.start()], match.group()))
        position = match.end()
    if position < len(text):
        found.append((text[position:], ""))
    return found


def _body_start(text: str) -> int:
    """Lines before the body: the frontmatter's (read as Obsidian does, after a BOM)."""
    text = text.removeprefix(BOM)
    lines = _split(text)
    if not lines or lines[0][0] != "---":
        return 0
    for index in range(1, len(lines)):
        if lines[index][0].rstrip() == "---":
            return index + 1
    return 0


def leaves(text: str) -> tuple[list[Leaf], list[tuple[str, str]], list[tuple[int, int]]]:
    """The note's leaf blocks by markdown-it (lines counted from the note's first), its
    lines, and the line spans of code and HTML blocks."""
    plain = text.removeprefix(BOM)
    lines = _split(plain)
    start = _body_start(text)
    body = "".join(t + e for t, e in lines[start:])
    tokens: list[Token] = _ORACLE.parse(body)
    found: list[Leaf] = []
    code: list[tuple[int, int]] = []
    within: list[tuple[str, str]] = []
    skip = 0
    for token in tokens:
        if skip:
            skip += token.nesting
            continue
        if token.type in _CONTAINERS and token.map is not None:
            first_line = lines[token.map[0] + start][0]
            key = token.markup if "list" in token.type and "item" not in token.type else ""
            if token.type in ("list_item_open", "table_open"):
                key = first_line
            within.append((token.type, key))
            continue
        if token.nesting == -1 and token.type.replace("_close", "_open") in _CONTAINERS:
            within.pop()
            continue
        if token.map is None:
            continue
        first, end = token.map[0] + start, token.map[1] + start
        while end - 1 > first and not lines[end - 1][0].strip(" \t"):
            end -= 1
        if token.type in _LEAF_OPEN:
            skip = 1
        elif token.type not in _LEAF_SELF:
            continue
        if token.type in ("fence", "code_block", "html_block"):
            code.append((first, end))
        found.append(
            Leaf(
                token.type,
                first,
                end,
                tuple(t + e for t, e in lines[first:end]),
                tuple(within),
            )
        )
    return found, lines, code


def _same(old: Leaf, new: Leaf, old_last_line: int) -> bool:
    if (old.kind, old.within) != (new.kind, new.within) or len(old.text) != len(new.text):
        return False
    for index, (a, b) in enumerate(zip(old.text, new.text, strict=True)):
        if old.first + index == old_last_line and not re.search(r"[\r\n]$", a):
            # The note's last line without a break may gain one when text goes after it.
            b = b.rstrip("\r\n")
        if a != b:
            return False
    return True


def _hidden_marks(lines: list[tuple[str, str]], code: list[tuple[int, int]], upto: int) -> int:
    """'%%' and '$$' pairs open before line `upto`, outside code blocks and code spans."""
    open_marks = 0
    for mark in ("%%", "$$"):
        count = 0
        for index in range(upto):
            if any(first <= index < end for first, end in code):
                continue
            text = re.sub(r"`[^`]*`", "", lines[index][0])
            count += text.count(mark)
        open_marks += count % 2
    return open_marks


def check(before: str, edit: Edit, after: str) -> list[str]:
    """What the edit got wrong (nothing: an empty list)."""
    problems: list[str] = []
    if before.startswith(BOM) != after.startswith(BOM):
        problems.append("the byte order mark moved")
    if bool(re.search(r"[\r\n]$", before)) != bool(re.search(r"[\r\n]$", after)) and before:
        problems.append("the note's final line break changed")
    if edit.kind == "text":
        expected = before.replace(edit.request.target or "", edit.request.content or "")
        return problems + ([] if after == expected else ["replace_text did more than replace"])
    if edit.kind == "frontmatter":
        return problems + _check_frontmatter(before, edit, after)
    return problems + _check_blocks(before, edit, after)


def _check_blocks(before: str, edit: Edit, after: str) -> list[str]:
    old, old_lines, _ = leaves(before)
    new, new_lines, code = leaves(after)
    last_line = len(old_lines) - 1
    region = edit.region
    kept = [
        leaf for leaf in old if region is None or leaf.end <= region[0] or leaf.first >= region[1]
    ]
    # Every block the edit did not target, in order, as it was: those above the edit
    # matched from the top, those below from the bottom (so content that repeats a block,
    # a second "***", is not taken for it).
    split = region[0] if region is not None else edit.after_line
    if split is None:
        split = edit.before_line if edit.before_line is not None else len(old_lines)
    above = [leaf for leaf in kept if leaf.end <= split]
    below = [leaf for leaf in kept if leaf.end > split]
    mapping: dict[int, Leaf] = {}
    position = 0
    for leaf in above:
        while position < len(new) and not _same(leaf, new[position], last_line):
            position += 1
        if position == len(new):
            return [f"the {leaf.kind} at line {leaf.first + 1} changed: {leaf.text!r}"]
        mapping[leaf.first] = new[position]
        position += 1
    lowest = position
    position = len(new) - 1
    for leaf in reversed(below):
        while position >= lowest and not _same(leaf, new[position], last_line):
            position -= 1
        if position < lowest:
            return [f"the {leaf.kind} at line {leaf.first + 1} changed: {leaf.text!r}"]
        mapping[leaf.first] = new[position]
        position -= 1
    # The content is there, between its neighbours, and visible.
    low = max(
        (
            mapping[k.first].end
            for k in kept
            if edit.after_line is not None and k.end <= edit.after_line
        ),
        default=0,
    )
    high = min(
        (
            mapping[k.first].first
            for k in kept
            if edit.before_line is not None and k.first >= edit.before_line
        ),
        default=len(new_lines),
    )
    wanted = [_bare(line) for line in edit.content_lines if line.strip()]
    at = _find(new_lines, wanted, low, high)
    if at is None:
        return [f"the content does not start between lines {low + 1} and {high} of the edited note"]
    if any(first <= at < end for first, end in code) and not _is_code_content(edit):
        return [f"the content at line {at + 1} is inside a code or HTML block"]
    if _hidden_marks(new_lines, code, at):
        return [f"the content at line {at + 1} is inside a %% comment or $$ math"]
    return []


def _is_code_content(edit: Edit) -> bool:
    return bool(edit.content_lines) and edit.content_lines[0].startswith(("```", "    "))


def _bare(text: str) -> str:
    """A line without the indentation, quote markers and block id placing adds."""
    text = re.sub(r"^[ \t>]*", "", text)
    return re.sub(r"\s*\^[A-Za-z0-9-]+\s*$", "", text).rstrip()


def _find(lines: list[tuple[str, str]], wanted: list[str], low: int, high: int) -> int | None:
    """The first line in [low, high) where the content's non-blank lines start, in order
    (blank and bare '>' lines between them allowed)."""
    texts = [_bare(text) for text, _ in lines]
    for start in range(low, min(high, len(lines))):
        index = start
        for want in wanted:
            while index < len(lines) and not texts[index] and index > start:
                index += 1
            if index >= len(lines) or not _matches(texts[index], want):
                break
            index += 1
        else:
            return start if wanted else None
    return None


def _matches(line: str, want: str) -> bool:
    if line == want:
        return True
    # A created heading: its name under '#'s.
    return re.fullmatch(r"#{1,6} " + re.escape(want), line) is not None


def _check_frontmatter(before: str, edit: Edit, after: str) -> list[str]:
    old_start, new_start = _body_start(before), _body_start(after)
    old_lines = _split(before.removeprefix(BOM))
    new_lines = _split(after.removeprefix(BOM))
    old_body = "".join(t + e for t, e in old_lines[old_start:])
    new_body = "".join(t + e for t, e in new_lines[new_start:])
    if old_body.rstrip("\r\n") != new_body.rstrip("\r\n"):
        return ["the body changed"]
    old_values = _yaml(old_lines[1 : old_start - 1]) if old_start else {}
    new_values = _yaml(new_lines[1 : new_start - 1]) if new_start else {}
    key = (edit.request.target or "").strip()
    if edit.request.operation == "delete":
        if key in new_values:
            return [f"{key!r} is still there"]
    elif new_values.get(key) != edit.expected_value:
        return [f"{key!r} reads back as {new_values.get(key)!r}, not {edit.expected_value!r}"]
    old_values.pop(key, None)
    new_values.pop(key, None)
    return [] if old_values == new_values else ["other frontmatter values changed"]


def _yaml(lines: list[tuple[str, str]]) -> dict[str, Any]:
    loaded = yaml.safe_load("".join(t + "\n" for t, _ in lines))
    return dict(loaded) if isinstance(loaded, dict) else {}


# -- the run -----------------------------------------------------------------------------


@dataclass
class FuzzResult:
    cases: int = 0
    edited: int = 0
    refused: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    by_operation: Counter[str] = field(default_factory=Counter[str])
    by_target: Counter[str] = field(default_factory=Counter[str])
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "edited": self.edited,
            "refused (as they must be)": self.refused,
            "failures": len(self.failures),
            "by operation": dict(sorted(self.by_operation.items())),
            "by target": dict(sorted(self.by_target.items())),
            "seconds": round(self.seconds, 1),
        }


def _list_over_code(note: Note, edit: Edit) -> bool:
    """Whether the edit puts a list right above indented code (blank lines between)."""
    lines = [*(note.frontmatter or []), *note.lines]
    content = [line for line in edit.content_lines if line.strip()]
    if not content or not re.match(r"\s*(?:[-*+]|\d+[.)])\s", content[-1]):
        return False
    at = edit.before_line if edit.region is None else edit.region[1]
    if at is None:
        return False
    while at < len(lines) and not lines[at].strip():
        at += 1
    return at in note.indented_code


def _round_trip(text: str, target: str) -> str | None:
    """What went wrong sending the target's text back as a read returns it (issue 34's
    GetPut), on the fuzz's note: None when the note stays byte for byte."""
    structure = NoteStructure.of("fuzz.md", split_lines(text.removeprefix("\ufeff")))
    try:
        read = structure.text_of(resolve_target(structure, target))
    except TargetUnresolved as unresolved:
        return f"round trip: the read refused {target!r}: {unresolved}"
    try:
        back = apply_edit("fuzz.md", text, EditRequest("replace", target, read)).text
    except EditRefused as refused:
        return f"round trip: the read's text sent back was refused: {refused}"
    return None if back == text else "round trip: the read's text sent back changed the note"


def one_case(seed: int) -> tuple[str, Edit, str | None, list[str]]:
    """The note, the edit, the edited text (None when refused) and what went wrong."""
    rng = random.Random(seed)
    while True:
        note = Generator(rng).generate()
        edit = choose_edit(rng, note)
        if edit is not None:
            break
    before = note.text()
    edit.may_refuse = edit.may_refuse or _list_over_code(note, edit)
    if edit.kind in ("heading", "block"):
        round_trip = _round_trip(before, edit.request.target or "")
        if round_trip:
            return before, edit, None, [round_trip]
    try:
        after = apply_edit("fuzz.md", before, edit.request).text
    except EditRefused as refused:
        if edit.must_refuse or edit.may_refuse:
            return before, edit, None, []
        return before, edit, None, [f"refused: {refused}"]
    except Exception as error:  # the oracle reports a crash as a failure, with its note
        return before, edit, None, [f"crashed: {type(error).__name__}: {error}"]
    problems = check(before, edit, after)
    if edit.must_refuse and not problems:
        problems = ["made an edit that had to be refused (its content would be hidden)"]
    return before, edit, after, problems


def run(cases: int, seed: int) -> FuzzResult:
    result = FuzzResult()
    started = time.perf_counter()
    for index in range(cases):
        before, edit, after, problems = one_case(seed * 1_000_003 + index)
        result.cases += 1
        result.by_operation[edit.request.operation] += 1
        result.by_target[edit.kind] += 1
        if after is None and not problems:
            result.refused += 1
        elif after is not None and not problems:
            result.edited += 1
        if problems:
            if len(result.failures) < _KEPT_FAILURES:
                result.failures.append(
                    {
                        "case": seed * 1_000_003 + index,
                        "request": dataclasses.asdict(edit.request),
                        "before": before,
                        "after": after,
                        "problems": problems,
                    }
                )
            else:
                result.failures.append({"case": seed * 1_000_003 + index})
        if (index + 1) % _PROGRESS_EVERY == 0:
            logger.info("%d cases, %d failures", index + 1, len(result.failures))
    result.seconds = time.perf_counter() - started
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="python -m bench.robustness.edit_fuzz", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    result = run(args.cases, args.seed)
    summary = result.summary()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "edit_fuzz.json").write_text(
        json.dumps({**summary, "failures": result.failures}, indent=1, ensure_ascii=False),
        encoding="utf-8",
    )
    logger.info("%s", json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
