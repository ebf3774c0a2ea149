# pyright: strict
"""What an agent needs to know about one Obsidian note, read from its markdown.

All offsets are character offsets into the note content as given (CRLF files included).
Code (fenced and indented blocks, inline code spans) and ``$$`` math never yield links,
tags or block ids. Headings are markdown-it's top-level ATX and setext headings; a ``#``
line inside a code block, quote, list, ``%%`` comment or ``$$`` math is not a section
boundary. A byte order mark at the start is not part of the text: the frontmatter and the
first heading are read after it (offsets still count it).
"""

import posixpath
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast
from urllib.parse import unquote

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.token import Token

from obsidian_mcp.text.snippets import sentence_spans, truncate_at_word


@dataclass(frozen=True, slots=True)
class WikiLink:
    """A ``[[target#heading|alias]]``, ``[[target#^block]]``, ``![[embed]]`` or markdown
    link to a local ``.md`` file; `start`/`end` span the whole link in the content."""

    target: str  # as written ("" for same-note links); markdown links percent-decoded
    heading: str | None
    block: str | None
    alias: str | None
    embed: bool
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and its text. The preamble (text before the first heading) is a section
    with heading None, level 0 and path (), present only when it holds any text.
    `end` is the next heading of any level; `subtree_end` the next of the same or a
    higher level, so ``content[start:subtree_end]`` includes the subsections."""

    heading: str | None
    level: int
    path: tuple[str, ...]
    start: int
    body_start: int
    end: int
    # For the preamble (level 0) this equals `end`: headings are not nested under it.
    subtree_end: int


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A top-level markdown block, trailing whitespace excluded."""

    start: int
    end: int
    section_index: int  # into ParsedNote.sections
    kind: str  # "paragraph" | "list" | "quote" (callouts too) | "table" | "code" | "other"


@dataclass(frozen=True, slots=True)
class ParsedNote:
    """See `parse_note`."""

    path: str
    content: str
    frontmatter: dict[str, object]
    frontmatter_error: str | None
    body_start: int
    title: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    sections: tuple[Section, ...]
    paragraphs: tuple[Paragraph, ...]
    links: tuple[WikiLink, ...]
    block_ids: dict[str, int]


BYTE_ORDER_MARK = "\ufeff"
_COMMENT = "%%"
_MATH = "$$"


def _obsidian_block(delimiter: str, token_type: str) -> Callable[..., bool]:
    """A markdown-it block rule for Obsidian's own blocks, whose lines are not markdown: a
    line starting with `delimiter` opens one, the next line holding it closes it (or the
    same line, with nothing after). `%%` comments ignore indentation and, never closed,
    hide the rest of the note (as in Obsidian); `$$` math closes on a line ending with
    `$$`, ends with its list item as a fence does, and is not math unless closed (so a
    line such as "$$$ pricey" stays text)."""
    is_comment = delimiter == _COMMENT

    def closes(text: str) -> bool:
        return delimiter in text if is_comment else text.rstrip().endswith(delimiter)

    def rule(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
        if state.is_code_block(start_line):
            return False
        start = state.bMarks[start_line] + state.tShift[start_line]
        line_end = state.eMarks[start_line]
        if not state.src.startswith(delimiter, start, line_end):
            return False
        rest = state.src[start + len(delimiter) : line_end]
        closed = True
        if delimiter in rest:
            # Closed on its own line: a block only with nothing after (else inline, in text).
            if rest[rest.index(delimiter) + len(delimiter) :].strip():
                return False
            last = start_line
        else:
            last = start_line + 1
            while last < end_line:
                text = state.src[state.bMarks[last] : state.eMarks[last]]
                indented_out = (
                    state.bMarks[last] + state.tShift[last] < state.eMarks[last]
                    and state.sCount[last] < state.blkIndent
                )
                if indented_out and not is_comment:
                    break
                if closes(text):
                    break
                last += 1
            if last >= end_line or not closes(state.src[state.bMarks[last] : state.eMarks[last]]):
                if not is_comment:
                    return False
                closed, last = False, last - 1
        if silent:
            return True
        state.line = last + 1
        token = state.push(token_type, "", 0)
        token.markup = delimiter
        token.map = [start_line, state.line]
        token.meta = {"closed": closed}
        return True

    return rule


def _markdown_parser() -> MarkdownIt:
    # Only the block structure is needed, so the inline pass (the slow half) is skipped.
    # Obsidian's blocks start where a block can start: a "%%" or "$$" line right below a
    # paragraph line carries the paragraph on, as CommonMark reads any such line (a
    # comment opened there is still hidden: `_BlockReader.hide_comment_runs`).
    parser = MarkdownIt("commonmark").enable("table").disable("inline")
    for delimiter, token_type in ((_COMMENT, "comment"), (_MATH, "math")):
        rule = _obsidian_block(delimiter, token_type)
        parser.block.ruler.before("fence", f"obsidian_{token_type}", rule)
    return parser


_MARKDOWN = _markdown_parser()

_BLOCK_KINDS = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "table_open": "table",
    "fence": "code",
    "code_block": "code",
    "html_block": "other",
    "hr": "rule",
    "comment": "comment",
    "math": "math",
}
# Blocks whose lines are not markdown: never scanned for links, tags or block ids.
_CODE_BLOCKS = frozenset({"fence", "code_block", "math"})

# markdown-it counts "\r\n", a lone "\r" and "\n" as one line break each.
_LINE_BREAK_RE = re.compile(r"\r\n?|\n")
_NOT_LINE_BREAK_RE = re.compile(r"[^\r\n]")
# `---` alone on the first line and on a later one (spaces after it allowed), whatever the
# line breaks: CRLF, LF, or the lone CR of old Mac files.
_FRONTMATTER_OPEN_RE = re.compile(r"---[ \t]*(?:\r\n?|\n)")
_FRONTMATTER_CLOSE_RE = re.compile(r"(?:(?<=\n)|(?<=\r))---[ \t]*(?:\r\n?|\n|\Z)")
# A backtick run, then the shortest text up to a run of the same length; a blank line
# ends the paragraph and so the chance to close. Possessive chunks keep unclosed runs
# linear.
_INLINE_CODE_RE = re.compile(
    r"(?<!`)(`+)(?!`)((?:[^`\n]++|\n(?![ \t]*+(?:\r?\n|\Z))|`++)+?)(?<!`)\1(?!`)"
)
_WIKILINK_RE = re.compile(r"(!?)\[\[([^\[\]\n]*)\]\]")
_MARKDOWN_LINK_RE = re.compile(
    r"(!?)\[([^\[\]\n]*)\]\(\s*(?:<([^<>\n]+)>|([^()\s]+))(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)"
)
_URL_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# Obsidian's tag alphabet: anything but whitespace and punctuation, keeping _ - /.
_TAG_RE = re.compile(r"(?<!\S)#([^\s!-,.:-@\[-^`{-~\u2000-\u206f\u3000-\u303f]+)")
_BLOCK_ID_RE = re.compile(r"(?:^|[ \t])\^([A-Za-z0-9-]+)[ \t]*$", re.MULTILINE)
_STANDALONE_BLOCK_ID_RE = re.compile(r"\^([A-Za-z0-9-]+)")
_NOT_ONLY_DIGITS_RE = re.compile(r"\D")
_TAG_SPLIT_RE = re.compile(r"[,\s]+")
_TAGS_KEY_RE = re.compile(r"tags?", re.IGNORECASE)
_ALIASES_KEY_RE = re.compile(r"alias(?:es)?", re.IGNORECASE)

_HEADING_LINE_RE = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$", re.M)
_QUOTE_MARKER_RE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)
_CALLOUT_MARKER_RE = re.compile(r"^\[![^\]\n]*\][+-]?[ \t]*", re.MULTILINE)
_TRAILING_BLOCK_ID_RE = re.compile(r"(?:^|[ \t]+)\^[A-Za-z0-9-]+[ \t]*$", re.MULTILINE)
_MARKDOWN_LINK_TEXT_RE = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_EMPHASIS_RES = (
    re.compile(r"(\*{1,3})(?=\S)(.+?)(?<=\S)\1"),
    # Intraword underscores (snake_case) are not emphasis.
    re.compile(r"(?<!\w)(_{1,3})(?=\S)(.+?)(?<=\S)\1(?!\w)"),
    re.compile(r"(==|~~)(?=\S)(.+?)(?<=\S)\1"),
)

_SUMMARY_KEYS = ("summary", "description", "gist")
# Words of letters, except labels such as "Next:" or "Up::" that introduce a link.
_OWN_WORD_RE = re.compile(r"[^\W\d_]+(?![\w:])")
_DECORATION_RE = re.compile(
    rf"{_WIKILINK_RE.pattern}|{_MARKDOWN_LINK_TEXT_RE.pattern}|{_TAG_RE.pattern}"
)
# A paragraph with links or tags must have this many words of its own to be prose, so
# "Related: [[A]], [[B]]", "Prev: [[A]] · Next: [[B]]" or "see #x #y" is not a gist.
_MIN_WORDS_BESIDE_LINKS = 3
# Heading paths (split_heading_reference): " > " separates; a heading in double quotes is
# taken whole, with \" and \\ escaped inside.
_PATH_SEPARATOR_RE = re.compile(r"\s+>\s+")
_QUOTED_HEADING_RE = re.compile(r'"((?:[^"\\]|\\.)*)"(?=\s+>\s|\s*$)', re.DOTALL)
_QUOTE_ESCAPE_RE = re.compile(r'\\(["\\])')
# What a heading's text needs quotes for: a leading '"' or '#', a '>' standing alone.
_NEEDS_QUOTES_RE = re.compile(r'^[\s"#]|\s$|(?:^|\s)>(?:\s|$)')
# The separators references used before quoting, still read by find_section when nothing
# else matches: "A::B", "A>B", and "#" glued to a name ("A#B", as in links; "Plans #draft"
# keeps its tag).
_LOOSE_SEPARATOR_RE = re.compile(r"\s*(?:>|::)\s*|(?<=\S)#")
# A backslash escape of ASCII punctuation, which markdown shows without the backslash.
_ESCAPED_PUNCTUATION_RE = re.compile(r"\\([!-/:-@\[-`{-~])")


# libyaml's parser when PyYAML was built with it (the wheels are): reading the frontmatter
# of 1,000 generated notes took 0.51 s of a 3.1 s index build with the Python parser
# (cProfile); the C one parses the same YAML into the same values.
# (Type checkers see the Python one; both have the same interface.)
if TYPE_CHECKING or not yaml.__with_libyaml__:  # noqa: SIM108 (an if keeps one type)
    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = yaml.CSafeLoader


class _FrontmatterLoader(_SafeLoader):
    """SafeLoader that leaves timestamps as strings, as Obsidian does: ``2024-05-01``
    stays text (JSON-friendly), and an impossible date is not an error."""


_FrontmatterLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
}


def _load_frontmatter(block: str) -> tuple[dict[str, object], str | None]:
    try:
        data: object = yaml.load(block, Loader=_FrontmatterLoader)
    except yaml.MarkedYAMLError as error:
        # The YAML starts on the note's second line.
        where = f" at line {error.problem_mark.line + 2}" if error.problem_mark else ""
        return {}, f"invalid YAML frontmatter: {error.problem or error}{where}"
    # Vault files are untrusted input and PyYAML's constructors can raise more than
    # YAMLError (ValueError, OverflowError, RecursionError...); a note must still parse.
    except Exception as error:
        return {}, f"invalid YAML frontmatter: {error}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"frontmatter is a YAML {type(data).__name__}, not a mapping"
    return {str(key): value for key, value in cast("dict[object, object]", data).items()}, None


def split_frontmatter(content: str) -> tuple[str | None, int]:
    """The YAML text of the frontmatter block (None without one) and where the body starts
    (after a byte order mark, which Obsidian does not show either)."""
    text_start = 1 if content.startswith(BYTE_ORDER_MARK) else 0
    opening = _FRONTMATTER_OPEN_RE.match(content, text_start)
    if opening is None:
        return None, text_start
    yaml_start = opening.end()
    closing = _FRONTMATTER_CLOSE_RE.search(content, yaml_start)
    if closing is None:
        return None, text_start
    return content[yaml_start : closing.start()], closing.end()


def _blank_out(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with the given spans replaced by spaces, keeping line breaks and length."""
    pieces: list[str] = []
    position = 0
    for start, end in sorted(spans):
        if start < position:
            continue
        pieces.append(text[position:start])
        pieces.append(_NOT_LINE_BREAK_RE.sub(" ", text[start:end]))
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _parse_wikilink_inner(inner: str) -> tuple[str, str | None, str | None, str | None]:
    """(target, heading, block, alias) of the text between ``[[`` and ``]]``."""
    reference, has_alias, alias = inner.partition("|")
    # Inside tables the alias pipe is written "\|".
    target, *fragments = reference.rstrip("\\").split("#")
    heading: str | None = None
    block: str | None = None
    for fragment in (f.strip() for f in fragments):
        if fragment.startswith("^"):
            block = fragment[1:] or None
        elif fragment:
            heading = fragment
    return target.strip(), heading, block, (alias.strip() or None) if has_alias else None


def _wikilinks(masked: str, body_start: int) -> Iterable[WikiLink]:
    for match in _WIKILINK_RE.finditer(masked, body_start):
        if not match.group(2).strip():
            continue
        target, heading, block, alias = _parse_wikilink_inner(match.group(2))
        yield WikiLink(
            target, heading, block, alias, bool(match.group(1)), match.start(), match.end()
        )


def _note_links(masked: str, body_start: int) -> Iterable[WikiLink]:
    """Markdown links to local notes, ``[text](Some%20Note.md#Heading)``."""
    for match in _MARKDOWN_LINK_RE.finditer(masked, body_start):
        destination = match.group(3) or match.group(4)
        if _URL_SCHEME_RE.match(destination):
            continue
        path, _, fragment = destination.partition("#")
        if not path.lower().endswith(".md"):
            continue
        fragment = unquote(fragment).strip()
        is_block = fragment.startswith("^")
        yield WikiLink(
            target=unquote(path),
            heading=None if is_block else fragment or None,
            block=(fragment[1:] or None) if is_block else None,
            alias=match.group(2).strip() or None,
            embed=bool(match.group(1)),
            start=match.start(),
            end=match.end(),
        )


def _is_tag(name: str) -> bool:
    return _NOT_ONLY_DIGITS_RE.search(name) is not None


def _frontmatter_strings(frontmatter: dict[str, object], key_re: re.Pattern[str]) -> list[str]:
    found: list[str] = []
    for key, value in frontmatter.items():
        if not key_re.fullmatch(key):
            continue
        items = cast("list[object]", value) if isinstance(value, list) else [value]
        found.extend(item for item in items if isinstance(item, str))
    return found


def _dedupe(values: Iterable[str]) -> tuple[str, ...]:
    """Non-empty values, first spelling kept, duplicates dropped ignoring case."""
    seen: dict[str, str] = {}
    for value in values:
        if value:
            seen.setdefault(value.casefold(), value)
    return tuple(seen.values())


def _frontmatter_tags(frontmatter: dict[str, object]) -> list[str]:
    return [
        tag
        for item in _frontmatter_strings(frontmatter, _TAGS_KEY_RE)
        for tag in (part.lstrip("#") for part in _TAG_SPLIT_RE.split(item))
        if tag and _is_tag(tag)
    ]


def _frontmatter_aliases(frontmatter: dict[str, object]) -> list[str]:
    # A plain string holds comma-separated aliases, as Obsidian's older format had it.
    return [
        alias.strip()
        for item in _frontmatter_strings(frontmatter, _ALIASES_KEY_RE)
        for alias in item.split(",")
    ]


def _line_offsets(content: str, body_start: int) -> list[int]:
    offsets = [body_start]
    offsets.extend(match.end() for match in _LINE_BREAK_RE.finditer(content, body_start))
    return offsets


def _rstrip_end(content: str, start: int, end: int) -> int:
    while end > start and content[end - 1].isspace():
        end -= 1
    return end


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    text: str
    start: int
    body_start: int


def _sections(content: str, body_start: int, headings: Sequence[_Heading]) -> list[Section]:
    preamble_end = headings[0].start if headings else len(content)
    sections: list[Section] = []
    if content[body_start:preamble_end].strip():
        sections.append(Section(None, 0, (), body_start, body_start, preamble_end, preamble_end))
    subtree_ends = [len(content)] * len(headings)
    open_headings: list[int] = []
    paths: list[tuple[str, ...]] = []
    for index, heading in enumerate(headings):
        while open_headings and headings[open_headings[-1]].level >= heading.level:
            subtree_ends[open_headings.pop()] = heading.start
        paths.append((*(headings[i].text for i in open_headings), heading.text))
        open_headings.append(index)
    for index, heading in enumerate(headings):
        end = headings[index + 1].start if index + 1 < len(headings) else len(content)
        sections.append(
            Section(
                heading.text,
                heading.level,
                paths[index],
                heading.start,
                heading.body_start,
                end,
                subtree_ends[index],
            )
        )
    return sections


@dataclass(frozen=True, slots=True)
class Block:
    """A markdown block as whole lines of the note: `first_line` up to `end_line`
    (exclusive; blank lines after a block are not its own), and the blocks inside it: a
    list's items, an item's or a quote's blocks, a table's rows.

    kind: "paragraph", "heading", "code" (fenced or indented), "math", "comment" (``%%``,
    also a comment opened inside a block and closed blocks later), "html", "rule",
    "table", "row", "list", "item", "quote" (callouts too) or "definition" (a link or
    footnote definition, which markdown-it keeps for itself). `markup`: a list's marker
    ("-", "*", "+", "." or ")"), a heading's "#", "=" or "-". `closed`: False for a
    fence, ``$$`` or ``%%`` block that is never closed and so runs to the end of what holds
    it."""

    kind: str
    first_line: int
    end_line: int
    children: tuple["Block", ...] = ()
    markup: str = ""
    closed: bool = True


_CONTAINER_KINDS = {
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "list_item_open": "item",
    "blockquote_open": "quote",
    "table_open": "table",
}
# Opened and closed like containers, read as one block: their inner tokens are inline.
_LEAF_OPENERS = {"paragraph_open": "paragraph", "heading_open": "heading", "tr_open": "row"}
_LEAF_TOKENS = {
    "fence": "code",
    "code_block": "code",
    "math": "math",
    "comment": "comment",
    "html_block": "html",
    "hr": "rule",
}
# Blocks whose lines are not markdown.
_OPAQUE_KINDS = frozenset({"code", "math", "comment", "html"})
# Top-level blocks a note's text is cut into for passages and gists (a rule holds no text).
_PARAGRAPH_KINDS = {
    "paragraph": "paragraph",
    "list": "list",
    "quote": "quote",
    "table": "table",
    "code": "code",
    "html": "other",
    "comment": "comment",
    "math": "math",
}


@dataclass(slots=True)
class _OpenBlock:
    kind: str
    first_line: int
    end_line: int
    markup: str
    children: list[Block] = field(default_factory=list[Block])


class _BlockReader:
    """markdown-it's tokens as a tree of Blocks with the note's own line numbers."""

    def __init__(self, content: str, line_offsets: list[int], first_line: int) -> None:
        self._content = content
        self._offsets = line_offsets
        self._first_line = first_line

    def line_text(self, line: int) -> str:
        index = line - self._first_line
        end = self._offsets[index + 1] if index + 1 < len(self._offsets) else len(self._content)
        return self._content[self._offsets[index] : end].rstrip("\r\n")

    def _content_end(self, first: int, end: int) -> int:
        """`end` with the block's trailing blank lines left out."""
        while end - 1 > first and not self.line_text(end - 1).strip(" \t"):
            end -= 1
        return end

    def _fence_closed(self, token: Token, first: int, end: int) -> bool:
        closing = self.line_text(end - 1).lstrip(" \t>").rstrip()
        marker = token.markup[:1]
        return (
            end - first >= 2
            and len(closing) >= len(token.markup)
            and closing == marker * len(closing)
        )

    def offset_of(self, line: int) -> int:
        index = line - self._first_line
        return self._offsets[index] if index < len(self._offsets) else len(self._content)

    def hide_comment_runs(self, blocks: list[Block], masked: str) -> list[Block]:
        """A `%%` opened inside a block and closed blocks later (past a blank line) hides
        everything between, as Obsidian reads it: those blocks become one comment block
        (never closed: to the end of the note)."""
        merged: list[Block] = []
        index = 0
        while index < len(blocks):
            block = blocks[index]
            index += 1
            if block.kind in _OPAQUE_KINDS or not self._count_comment_marks(block, masked) % 2:
                merged.append(block)
                continue
            last, closed = blocks[-1], False
            while index < len(blocks):
                last = blocks[index]
                index += 1
                if self._count_comment_marks(last, masked):
                    closed = True
                    break
            merged.append(Block("comment", block.first_line, last.end_line, closed=closed))
        return merged

    def with_definitions(self, blocks: list[Block]) -> list[Block]:
        """`blocks` and, between them, each run of lines no block covers: link reference
        definitions (`[ref]: https://...`, and a footnote definition markdown-it reads as
        one, `[^src]: Britannica`) make no markdown-it token. As "definition" blocks they
        belong to their section like any block (an edit of the section covers them, a
        block id can end one)."""
        covered = {line for block in blocks for line in range(block.first_line, block.end_line)}
        found: list[Block] = []
        run: int | None = None
        end = self._first_line + len(self._offsets)
        for line in range(self._first_line, end + 1):
            text = self.line_text(line) if line < end else ""
            if line in covered or not text.strip():
                if run is not None:
                    found.append(Block("definition", run, line))
                    run = None
            elif run is None:
                run = line
        return sorted([*blocks, *found], key=lambda block: block.first_line) if found else blocks

    def _count_comment_marks(self, block: Block, masked: str) -> int:
        return masked.count(
            _COMMENT, self.offset_of(block.first_line), self.offset_of(block.end_line)
        )

    def read(self, tokens: Sequence[Token]) -> tuple[list[Block], dict[int, tuple[int, str]]]:
        """The top-level blocks, and each top-level heading's level and text by its first
        line."""
        root = _OpenBlock("root", 0, 0, "")
        stack = [root]
        heading_texts: dict[int, tuple[int, str]] = {}
        index = 0
        while index < len(tokens):
            token = tokens[index]
            index += 1
            if token.nesting == -1:
                if token.type in ("thead_close", "tbody_close"):
                    continue
                done = stack.pop()
                stack[-1].children.append(
                    Block(
                        done.kind,
                        done.first_line,
                        done.end_line,
                        tuple(done.children),
                        done.markup,
                    )
                )
                continue
            if token.map is None:
                continue
            first = token.map[0] + self._first_line
            end = self._content_end(first, token.map[1] + self._first_line)
            if token.type in _CONTAINER_KINDS:
                markup = token.markup if token.type == "bullet_list_open" else ""
                if token.type == "ordered_list_open":
                    markup = tokens[index].markup[-1:]  # the first item's "." or ")"
                stack.append(_OpenBlock(_CONTAINER_KINDS[token.type], first, end, markup))
            elif token.type in _LEAF_OPENERS:
                kind = _LEAF_OPENERS[token.type]
                if kind == "heading" and token.level == 0:
                    text = " ".join(tokens[index].content.split())
                    heading_texts[first] = (int(token.tag[1]), text)
                stack[-1].children.append(Block(kind, first, end, markup=token.markup[:1]))
                depth = 1
                while depth:  # past the inline tokens to the matching close
                    depth += tokens[index].nesting
                    index += 1
            elif token.type in _LEAF_TOKENS:
                closed = (
                    self._fence_closed(token, first, end)
                    if token.type == "fence"
                    else bool(token.meta.get("closed", True))
                )
                stack[-1].children.append(
                    Block(_LEAF_TOKENS[token.type], first, end, closed=closed, markup=token.markup)
                )
        return root.children, heading_texts


def parse_note(path: str, content: str) -> ParsedNote:
    """Parse a note once into everything the tools ask about. Never raises on bad input.

    * `frontmatter`: the leading ``---`` block's YAML mapping with timestamps left as
      text; ``{}`` with `frontmatter_error` set when it is malformed or not a mapping.
    * `title`: frontmatter ``title``, else the first H1 as plain text, else the file stem.
    * `aliases`: frontmatter ``aliases``/``alias`` (a list, or a comma-separated string).
    * `tags`: frontmatter ``tags``/``tag`` (a list, or a comma/space-separated string),
      then inline ``#tags`` (after whitespace or at a line start, at least one non-digit);
      no ``#``, first spelling kept, duplicates ignoring case dropped.
    * `links`: body wikilinks, embeds and markdown links to ``.md`` files, in order.
    * `block_ids`: ``^id`` at a block's line end -> that block's start offset; a ``^id``
      alone after a block (how tables and quotes get ids) names that block.
    """
    return parse_structure(path, content)[0]


def parse_structure(path: str, content: str) -> tuple[ParsedNote, tuple[Block, ...]]:
    """`parse_note`, and the note's top-level blocks (with the blocks inside them) from
    the same parse, by line number (`\r\n`, `\r` and `\n` each end a line)."""
    yaml_text, body_start = split_frontmatter(content)
    frontmatter, frontmatter_error = (
        _load_frontmatter(yaml_text) if yaml_text is not None else ({}, None)
    )
    body_line = len(_LINE_BREAK_RE.findall(content, 0, body_start))
    reader = _BlockReader(content, _line_offsets(content, body_start), body_line)
    tokens = _MARKDOWN.parse(content[body_start:])
    # Frontmatter, code and math: never scanned for links, tags or block ids.
    hidden_spans: list[tuple[int, int]] = [(0, body_start)]
    hidden_spans.extend(
        (reader.offset_of(token.map[0] + body_line), reader.offset_of(token.map[1] + body_line))
        for token in tokens
        if token.map is not None and token.type in _CODE_BLOCKS
    )
    without_blocks = _blank_out(content, hidden_spans)
    inline_code = (match.span() for match in _INLINE_CODE_RE.finditer(without_blocks, body_start))
    masked = _blank_out(without_blocks, inline_code)

    top_level, heading_texts = reader.read(tokens)
    blocks = reader.with_definitions(reader.hide_comment_runs(top_level, masked))
    headings: list[_Heading] = []
    kept: list[tuple[int, int, str]] = []
    for block in blocks:
        start = reader.offset_of(block.first_line)
        if block.kind == "heading":
            level, text = heading_texts[block.first_line]
            headings.append(_Heading(level, text, start, reader.offset_of(block.end_line)))
        elif block.kind in _PARAGRAPH_KINDS:
            end = _rstrip_end(content, start, reader.offset_of(block.end_line))
            # Unicode spaces (U+00A0...) make a paragraph for markdown-it but hold no text.
            if end > start:
                kept.append((start, end, _PARAGRAPH_KINDS[block.kind]))

    sections = _sections(content, body_start, headings)
    section_starts = [section.start for section in sections]
    paragraphs: list[Paragraph] = []
    block_ids: dict[str, int] = {}
    for start, end, kind in kept:
        standalone_id = _STANDALONE_BLOCK_ID_RE.fullmatch(masked, start, end)
        if standalone_id and paragraphs:
            # "^id" on its own line names the block before it (how tables get ids).
            block_ids.setdefault(standalone_id.group(1), paragraphs[-1].start)
            continue
        paragraphs.append(Paragraph(start, end, bisect_right(section_starts, start) - 1, kind))
        if kind not in ("code", "math", "comment"):
            for block_id in _BLOCK_ID_RE.finditer(masked, start, end):
                block_ids.setdefault(block_id.group(1), start)

    links = sorted(
        [*_wikilinks(masked, body_start), *_note_links(masked, body_start)],
        key=lambda link: link.start,
    )
    inline_tags = (
        match.group(1) for match in _TAG_RE.finditer(masked, body_start) if _is_tag(match.group(1))
    )
    note = ParsedNote(
        path=path,
        content=content,
        frontmatter=frontmatter,
        frontmatter_error=frontmatter_error,
        body_start=body_start,
        title=_title(path, frontmatter, sections),
        aliases=_dedupe(_frontmatter_aliases(frontmatter)),
        tags=_dedupe([*_frontmatter_tags(frontmatter), *inline_tags]),
        sections=tuple(sections),
        paragraphs=tuple(paragraphs),
        links=tuple(links),
        block_ids=block_ids,
    )
    return note, tuple(blocks)


def _title(path: str, frontmatter: dict[str, object], sections: Sequence[Section]) -> str:
    title = frontmatter.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    for section in sections:
        if section.level == 1 and section.heading:
            return " ".join(plain_text(section.heading).split())
    name = posixpath.basename(path)
    return name[:-3] if name.lower().endswith(".md") else name


# Characters two spellings of one heading differ by without a reader seeing it: the emoji
# presentation selector (U+FE0F, "⚠️" beside "⚠"), direction marks and zero-width joiners.
_INVISIBLE_RE = re.compile("[\ufe0e\ufe0f\u200b-\u200f\u2060\ufeff]")


def normalise_heading(text: str) -> str:
    """A heading as references are compared: plain text in one Unicode form (NFC, as
    macOS's NFD names are not), invisible marks and backslash escapes ("1\\. Intro")
    dropped, single spaces, case folded."""
    plain = unicodedata.normalize("NFC", _INVISIBLE_RE.sub("", plain_text(text)))
    return " ".join(_ESCAPED_PUNCTUATION_RE.sub(r"\1", plain).split()).casefold()


def split_heading_reference(reference: str) -> list[str]:
    """A heading path split into its headings, outermost first: ``Sessions > Session 12``.
    Only ``>`` with space on both sides separates, and a heading in double quotes is taken
    whole (``"A > B"``, with ``\\"`` and ``\\\\`` inside), so every heading can be named
    (`heading_reference` writes a path in this form). Leading ``#`` (``## Bob``, ``#Bob`` as
    in a link) are not part of the name."""
    text = reference.strip()
    if not text.startswith('"'):
        text = text.lstrip("#").lstrip()
    parts: list[str] = []
    position = 0
    while position < len(text):
        quoted = _QUOTED_HEADING_RE.match(text, position)
        if quoted:
            parts.append(_QUOTE_ESCAPE_RE.sub(r"\1", quoted.group(1)))
            after = quoted.end()
        else:
            separator = _PATH_SEPARATOR_RE.search(text, position)
            after = separator.start() if separator else len(text)
            parts.append(text[position:after].strip())
        separator = _PATH_SEPARATOR_RE.match(text, after)
        position = separator.end() if separator else len(text)
    return [part for part in parts if part]


def heading_reference(path: Sequence[str]) -> str:
    """A heading path as `split_heading_reference` reads it back: the headings joined by
    " > ", each in double quotes where its text would otherwise be misread."""
    return " > ".join(
        '"' + heading.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if _NEEDS_QUOTES_RE.search(heading)
        else heading
        for heading in path
    )


def heading_reference_parts(reference: str) -> tuple[str, ...]:
    """The headings of a reference, normalised for comparing."""
    return _normalised_parts(split_heading_reference(reference))


def _normalised_parts(parts: Iterable[str]) -> tuple[str, ...]:
    return tuple(part for part in map(normalise_heading, parts) if part)


def _is_subsequence(wanted: Sequence[str], within: Sequence[str]) -> bool:
    remaining = iter(within)
    return all(part in remaining for part in wanted)


def heading_matcher(reference: str) -> Callable[[Sequence[str]], int | None]:
    """How well each heading path matches a heading reference, lower is better, None for
    no match. The tiers, in order: the full path exactly (compared case-insensitively,
    markdown and extra whitespace ignored, `normalise_heading`); the heading is the last
    part and its ancestors include the other parts in order (``"Alice > Childhood"`` finds
    ``Characters > Alice > Backstory > Childhood``, a suffix included); the heading is the
    whole reference taken literally (an unquoted ``Q&A > Misc``); then the same two with
    the looser separators older references and links use (``A::B``, ``A#B``, ``A>B``).
    Reading and editing resolve a heading with this one rule (`editing.targets`)."""
    bare = reference.strip().lstrip("#")
    literal = normalise_heading(bare)
    parts = heading_reference_parts(reference)
    loose = _normalised_parts(_LOOSE_SEPARATOR_RE.split(bare))

    def tier(path: Sequence[str]) -> int | None:
        if not literal:
            return None
        return _match_tier(tuple(map(normalise_heading, path)), parts, literal, loose)

    return tier


def find_section(note: ParsedNote, heading: str) -> Section | None:
    """The section a heading reference names (`heading_matcher`), the first in document
    order within the best tier; None when none matches. For mapping a passage back to
    its section; a tool that names a heading resolves it with `editing.targets`, which
    refuses a reference that matches several."""
    tier_of = heading_matcher(heading)
    headed = [section for section in note.sections if section.heading is not None]
    ranked = [
        (tier, index)
        for index, section in enumerate(headed)
        if (tier := tier_of(section.path)) is not None
    ]
    return headed[min(ranked)[1]] if ranked else None


def _match_tier(
    path: tuple[str, ...], parts: tuple[str, ...], literal: str, loose: tuple[str, ...]
) -> int | None:
    """How well a normalised heading path matches a reference; lower is better."""
    if path == parts:
        return 0
    if parts and path[-1] == parts[-1] and _is_subsequence(parts[:-1], path[:-1]):
        return 1
    if path[-1] == literal:
        return 2
    if path == loose:
        return 3
    if loose and path[-1] == loose[-1] and _is_subsequence(loose[:-1], path[:-1]):
        return 4
    return None


def _linked_name(target: str) -> str:
    """What a link target names: no `#heading` part, forward slashes, from the vault's root."""
    return target.partition("#")[0].strip().replace("\\", "/").lstrip("/")


def file_name(path: str) -> str:
    """A file's name as links are matched to it: lowercased, with its extension."""
    return posixpath.basename(path.lower())


def linked_file_names(target: str, from_path: str) -> tuple[str, ...]:
    """Every `file_name` a path that `LinkResolver.resolve(target, from_path)` returns may
    have, short of the linking note itself: a note's backlinks are looked for only among the
    links naming its file (`links.LinkGraph.backlinks`). The name looked up by name, and
    those of the exact and the relative path, each with and without ".md"."""
    name = _linked_name(target).lower()
    if "/" not in name and name not in (".", ".."):  # a bare name: the relative path ends in it
        return name, name + ".md"
    relative = posixpath.normpath(posixpath.join(posixpath.dirname(from_path.lower()), name))
    spellings = (name, name + ".md", relative, relative + ".md")
    return tuple(posixpath.basename(spelling) for spelling in spellings)


class LinkResolver:
    """Link targets to vault paths, as Obsidian resolves them, over one list of paths,
    indexed once: a vault's every link is resolved in linear time.

    ``""`` (a same-note link) is the linking note. Otherwise, in order: the exact vault
    path, with or without ``.md`` (case-sensitive first, then ignoring case); the path
    relative to the linking note's folder; then any file whose path ends with the target
    (so a bare note name, with or without ``.md``, or an attachment's file name), ignoring
    case, preferring the linking note's folder, then the fewest folders, then the shortest
    path, then the first alphabetically. A ``#heading`` part of the target is ignored.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self._exact = frozenset(paths)
        self._by_lower: dict[str, str] = {}
        # Lowercased file name (and, for notes, the name without ".md") -> paths.
        self._by_name: dict[str, list[str]] = {}
        for path in sorted(self._exact):
            self._by_lower.setdefault(path.lower(), path)
            name = file_name(path)
            self._by_name.setdefault(name, []).append(path)
            if name.endswith(".md"):
                self._by_name.setdefault(name[:-3], []).append(path)

    def _lookup(self, candidate: str) -> str | None:
        spellings = (candidate, candidate + ".md")
        for spelling in spellings:
            if spelling in self._exact:
                return spelling
        for spelling in spellings:
            found = self._by_lower.get(spelling.lower())
            if found is not None:
                return found
        return None

    def resolve(self, target: str, from_path: str) -> str | None:
        """The vault path `target`, linked from `from_path`, points to, or None."""
        name = _linked_name(target)
        if not name:
            return from_path
        folder = posixpath.dirname(from_path)
        for candidate in (name, posixpath.normpath(posixpath.join(folder, name))):
            found = self._lookup(candidate)
            if found is not None:
                return found
        wanted = name.lower()
        suffix = "/" + wanted

        def ends_with_name(path: str) -> bool:
            lowered = path.lower()
            forms = (lowered, lowered[:-3]) if lowered.endswith(".md") else (lowered,)
            return any(form == wanted or form.endswith(suffix) for form in forms)

        same_name = self._by_name.get(posixpath.basename(wanted), ())
        candidates = [path for path in same_name if ends_with_name(path)]
        if not candidates:
            return None
        return min(
            candidates,
            key=lambda path: (posixpath.dirname(path) != folder, path.count("/"), len(path), path),
        )


def _wikilink_display(match: re.Match[str]) -> str:
    target, heading, block, alias = _parse_wikilink_inner(match.group(2))
    if alias:
        return alias
    if target and heading:
        return f"{target} > {heading}"
    return target or heading or block or ""


def _plain_inline(markdown: str) -> str:
    text = _WIKILINK_RE.sub(_wikilink_display, markdown)
    text = _MARKDOWN_LINK_TEXT_RE.sub(r"\1", text)
    for emphasis in _EMPHASIS_RES:
        text = emphasis.sub(r"\2", text)
    return text


def plain_text(markdown: str) -> str:
    """`markdown` as a reader sees it: wikilinks as their alias (or target), markdown
    links as their text, no emphasis, highlight or strikethrough markers, no heading
    hashes, quote or callout markers, backticks or block ids; inline code is kept
    verbatim. Line breaks, list markers and tags are kept."""
    text = _HEADING_LINE_RE.sub(r"\1", markdown)
    text = _QUOTE_MARKER_RE.sub("", text)
    text = _CALLOUT_MARKER_RE.sub("", text)
    text = _TRAILING_BLOCK_ID_RE.sub("", text)
    pieces: list[str] = []
    position = 0
    for code in _INLINE_CODE_RE.finditer(text):
        pieces += [_plain_inline(text[position : code.start()]), code.group(2)]
        position = code.end()
    pieces.append(_plain_inline(text[position:]))
    return "".join(pieces)


def _is_prose(markdown: str) -> bool:
    own_words = _OWN_WORD_RE.findall(_DECORATION_RE.sub(" ", markdown))
    decorated = _DECORATION_RE.search(markdown) is not None
    return len(own_words) >= (_MIN_WORDS_BESIDE_LINKS if decorated else 1)


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    spans = sentence_spans(flat)
    return flat[spans[0][0] : spans[0][1]] if spans else ""


def gist(note: ParsedNote, max_chars: int = 160) -> str:
    """One sentence saying what the note is about; "" when nothing qualifies.

    The frontmatter ``summary``, ``description`` or ``gist`` if set, else the first
    sentence of the first prose paragraph (not a heading, list, quote or callout, table,
    code, or a line of links, embeds or tags), as plain text. Longer than `max_chars`,
    it is cut at a word boundary and ``…`` appended (so up to ``max_chars + 1`` long).
    """
    for key in _SUMMARY_KEYS:
        summary = note.frontmatter.get(key)
        if isinstance(summary, str) and summary.strip():
            return truncate_at_word(" ".join(plain_text(summary).split()), max_chars)
    for paragraph in note.paragraphs:
        text = note.content[paragraph.start : paragraph.end]
        if paragraph.kind == "paragraph" and _is_prose(text):
            return truncate_at_word(_first_sentence(plain_text(text)), max_chars)
    return ""
