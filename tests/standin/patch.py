"""``PATCH /vault/{path}``: the plugin's partial edit, per version, quirks included.

Upstream: coddingtonbear/obsidian-local-rest-api (LRA) and coddingtonbear/markdown-patch
(MP). Which MP a plugin bundles (from LRA's ``package-lock.json`` at each tag):

=============  ===========  ======  ========================================================
plugin         MP           marked  what differs here
=============  ===========  ======  ========================================================
3.0-3.3        0.2.2        14      text ops splice verbatim; block ids need a space before ^
3.4.x          0.4.0        17      block regex ``[^\\S\\r\\n]*\\^id``
3.5.0-3.6.0    0.4.3        17      replace/append keep a section's trailing blank line
3.6.1-3.6.2    0.4.4/0.4.5  17      and an append to the last section drops trailing blanks
4.x, 5.x "v1"  1.0/1.1      17      Reject-If-Content-Preexists (skips replace), Target-Scope
5.x default    2.0.0        17      JSON instruction; library-owned whitespace; ifMatch
=============  ===========  ======  ========================================================

(0.4.5, locked by 3.6.2, is not in the stored MP history; it is taken to be 0.4.4.)

The 1.x header format (MP ``src/map.ts`` ``getDocumentMap``, ``src/patch.ts``
``applyPatch``, 0.2.2 to 1.1):

* Headings come from marked's top-level tokens (:mod:`.mdblocks`). A heading's address is
  the texts of its ancestors joined with ``\\x1f`` (``map.ts`` ~L81-92 at 0.2.2), so a nested
  heading needs the full path from the top level; the map is a plain object, so a
  duplicate path keeps the **last** occurrence (``positions[path] = …`` ~L95). Its
  content runs from one past the trimmed heading line to the next heading of the same or
  a higher level, found with ``indexOf`` (~L45-60).
* ``Create-Target-If-Missing`` walks the target path from the top, keeps the longest
  prefix that exists and appends the rest as headings of level 1, 2, … *counting matched
  path elements*, at the end of that prefix's content (``addTargetHeading``); a bare
  nested name matches nothing and adds a new top-level heading at the end of the note.
* 3.x (MP < 1.0): unless ``Apply-If-Content-Preexists: true``, a text body whose trimmed
  text occurs in the target section is refused *before* the operation (``patch.ts``
  ~L485 at 0.2.2, ~L586 at 0.4.4), so it blocks ``replace`` too, and an empty body
  always "preexists".
* Any frontmatter operation parses the YAML, changes one key and writes the whole block
  back with ``yaml.stringify`` (``regenerateDocumentWithFrontmatter``): comments and
  quoting are lost, a ``text/markdown`` body is a string (``count: "5"``).
* Errors: ``PatchFailed`` → 400/40080 with the reason appended; anything else thrown
  inside the handler's ``try`` (bad YAML, an impossible merge) → 500 with the message,
  or 400/40005 for unparseable frontmatter from 4.1.5 (LRA ``d97f43b``).

The 2.0 JSON instruction (MP 2.0 ``src/engine.ts`` ``patch``, ``src/model.ts``
``buildModel``, ``src/text.ts``, ``src/engine/create.ts``, ``src/engine/frontmatter.ts``,
``src/engine/structural.ts``; LRA ``_vaultPatchMdp2``/``_respondMdp2`` ~L1131-1370):
the instruction is validated (400/40081), then the model is built (unparseable
frontmatter → 400/40005), then ``ifMatch`` is compared with the first 6 hex characters
of the note's sha256 (412) *before* the target is resolved (404). Headings are matched by
their ancestor path (the first of duplicate siblings; later ones have a marker-suffixed
address). Content is canonicalised (leading blank lines and trailing whitespace dropped,
one final newline), ``#`` levels in it are rebased under the target, and the library
inserts the blank line that keeps an insert a separate block.

Every version: ``await vault.read`` → compute → ``await adapter.write`` /
``vault.modify`` with no lock (``vaultOperations.ts`` ``patchFileSection`` ~L511-550):
a read, a pause of ``write_yield_ms`` (``vault._yield``), then Node's truncating write.
Two overlapping PATCHes to different headings therefore keep only one change.

Not emulated (raises :class:`NotEmulated`, answered 501 by the server): table rows
(``application/json`` bodies on heading/block targets, a 2.0 ``value`` on a block),
``Target-Scope``/``scope`` other than ``content``, ``within``, ``destination``,
raw-content mode (URL targeting, ``Markdown-Patch-Version: 2`` headers), a block id
anywhere but at the end of a top-level paragraph or a one-line top-level list item,
isolated ``^id`` lines, CRLF notes, 1.x bodies that are neither text nor JSON, a
frontmatter that PyYAML cannot read but ``yaml`` can (a tab inside a plain scalar), and
2.0 addresses carrying the duplicate-heading marker.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import urllib.parse
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from . import yamljs
from .jsstring import dumps
from .markdown import frontmatter_end
from .mdblocks import Token, js_trim, js_trim_end, js_trim_start, lex
from .vault import Vault, _yield
from .versions import parse_version

TEXT_MARKDOWN = "text/markdown"
APPLICATION_JSON = "application/json"
PATCH_INSTRUCTION = "application/vnd.olrapi.patch-instruction+json"
HTML_UTF8 = "text/html; charset=utf-8"  # express ``res.send(string)``
MARKDOWN_UTF8 = "text/markdown; charset=utf-8"
V1_SUNSET = 'true; sunset-version="6.0"'
V2_HEADING_SUNSET = 'true; sunset-version="4.0"'
V2_HEADING_LINK = (
    "<https://github.com/coddingtonbear/obsidian-local-rest-api/wiki/"
    'Changes-to-PATCH-requests-between-versions-2.0-and-3.0>; rel="alternate"'
)


class NotEmulated(Exception):
    """A case outside the modelled subset; the server answers its 501."""


class PatchFailed(Exception):
    """MP 1.x ``PatchFailed``: ``reason`` is a ``PatchFailureReason`` value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FrontmatterError(Exception):
    """The note's frontmatter is not YAML ``yaml`` v2 accepts."""


class InternalError(Exception):
    """A JavaScript exception inside the handler's ``try``: 500 with its message."""


# MP 2.0 engine errors (``src/instructions.ts``) and their LRA statuses (_respondMdp2).
class EngineError(Exception):
    status = 400
    code = 40080


class InvalidInstruction(EngineError):
    code = 40081


class TargetNotFound(EngineError):
    status, code = 404, 0


class PreconditionFailed(EngineError):
    status, code = 412, 0


class ContentPreexists(EngineError):
    status, code = 409, 0


# --- canned messages (LRA src/constants.ts ERROR_CODE_MESSAGES, per version) ----------

_MESSAGES: dict[int, str] = {
    40005: "Document frontmatter could not be parsed.",
    40010: "Incoming content must be text data and have an appropriate text/* Content-type "
    "header set (e.g. text/markdown).",
    40012: "Unknown or invalid Content-Type specified in Content-Type header.",
    40050: "Invalid 'Content-Insertion-Position' header value.",
    40051: "'Heading' header is required for identifying where to insert content.",
    40052: "No heading in specified file could be found matching the heading specified in "
    "'Heading' header.",
    40053: "No 'Target-Type' header was provided.",
    40056: "No 'Operation' header was provided.",
    40057: "The 'Operation' header you provided was invalid.",
    40080: "The patch you provided could not be applied to the target content.",
    40081: "The patch instruction you provided was malformed or outside the supported algebra.",
    40082: "The 'Markdown-Patch-Version' header you provided was invalid. Valid values are "
    "'1' (the deprecated header-driven format) and '2' (the default JSON-instruction format).",
    40084: "Header-based PATCH targeting is ambiguous between the two patch formats, so it "
    "requires an explicit 'Markdown-Patch-Version' header: send '1' for the deprecated 1.x "
    "header-driven format, or '2' for raw-content mode (instruction fields in headers — "
    "heading Targets as percent-encoded JSON arrays — with the raw payload as the request "
    "body). The 1.x-only Target-Delimiter and Trim-Target-Whitespace headers are never "
    "processed under version 2.",
    40510: "Request method is valid only for file paths, not directories.",
    42200: "Conflicting target specifications: supply the target via URL path elements, via "
    "Target-Type/Target headers, or (for PATCH) as an "
    "'application/vnd.olrapi.patch-instruction+json' instruction body — never more than one "
    "of these.",
}


def _message(code: int, v: tuple[int, int, int]) -> str:
    if v >= (6, 0, 0) and code in (40082, 40084):
        # The stand-in's wording: 6.x sources are not in the stored history (see _v5).
        return {
            40082: "The 'Markdown-Patch-Version' header you provided was invalid. The "
            "header-driven 1.x format was removed in 6.0; send a JSON instruction body.",
            40084: "Header-based PATCH targeting requires an explicit "
            "'Markdown-Patch-Version: 2' (raw-content mode); the header-driven 1.x format "
            "was removed in 6.0.",
        }[code]
    if code == 40054:
        if v >= (5, 0, 0):
            return (
                "The target type you specified was invalid. Valid target types are 'heading', "
                "'block', and 'frontmatter'."
            )
        return "The 'Target-Type' header you provided was invalid."
    if code == 40059:
        if v >= (5, 0, 0):
            return "The target scope you specified was invalid."
        return (
            "The 'Target-Scope' header you provided was invalid. Valid values are 'content', "
            "'marker', and 'markerAndContent'."
        )
    return _MESSAGES[code]


@dataclass
class Reply:
    """What the server sends: status, body bytes and extra headers."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def canned(
    v: tuple[int, int, int],
    *,
    code: int | None = None,
    status: int | None = None,
    detail: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """``returnCannedResponse``: canned text (+ ``"\\n" + detail``), status = code // 100."""
    if code is not None:
        lines, error_code = [_message(code, v)], code
        status = code // 100
    else:
        assert status is not None
        lines, error_code = [HTTPStatus(status).phrase], status * 100
    if detail:
        lines.append(detail)
    body = dumps({"message": "\n".join(lines), "errorCode": error_code})
    return Reply(
        status, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
    )


def decode_uri_component(text: str) -> str:
    """JavaScript ``decodeURIComponent``; raises ``URIError("URI malformed")``."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise ValueError("URI malformed")
    try:
        return urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        raise ValueError("URI malformed") from exc


# --- engines ------------------------------------------------------------------------


@dataclass(frozen=True)
class Engine:
    """The markdown-patch 1.x-format engine a plugin version bundles."""

    name: str
    marked: int
    #: 0 = splice verbatim (0.2.2, 0.4.0); 1 = keep a section's trailing blank line
    #: (0.4.3); 2 = also drop trailing blank lines before appending to the last
    #: section (0.4.4 ``f1aaa5b``, and 1.x).
    whitespace: int
    #: 0.2.2's block regex ``(?:\\s+|^)\\^id\\s*$``; later ``[^\\S\\r\\n]*\\^id\\s*$``.
    old_block_regex: bool
    #: 1.x: ``rejectIfContentPreexists`` (not for replace) instead of ``apply…``.
    reject_flag: bool


def engine_for(v: tuple[int, int, int]) -> Engine:
    if v < (3, 4, 0):
        return Engine("0.2.2", 14, 0, True, False)
    if v < (3, 5, 0):
        return Engine("0.4.0", 17, 0, False, False)
    if v < (3, 6, 1):
        return Engine("0.4.3", 17, 1, False, False)
    if v < (4, 0, 0):
        return Engine("0.4.4", 17, 2, False, False)
    return Engine("1.x", 17, 2, False, True)


def _no_crlf(document: str) -> None:
    if "\r" in document:
        raise NotEmulated("PATCH on a note with CR line endings")


def _index_of(text: str, sub: str, start: int) -> int:
    """JavaScript ``indexOf``: a negative start counts from 0."""
    return text.find(sub, max(start, 0))


# --- blocks (the subset the model covers) -------------------------------------------

_OLD_BLOCK_REF = re.compile(r"(?:\s+|^)\^([a-zA-Z0-9_-]+)\s*\Z")
_NEW_BLOCK_REF = re.compile(r"[^\S\r\n]*\^([a-zA-Z0-9_-]+)\s*\Z")


@dataclass
class BlockRef:
    id: str
    content: tuple[int, int]
    marker: tuple[int, int]


def _tiles(tokens: list[Token]) -> list[tuple[Token, int]]:
    out: list[tuple[Token, int]] = []
    offset = 0
    for token in tokens:
        out.append((token, offset))
        offset += len(token.raw)
    return out


def _blocks(
    content: str,
    tokens: list[Token],
    offset: int,
    target: str,
    regex: re.Pattern[str],
    *,
    v2: bool,
    marked: int,
) -> list[BlockRef]:
    """Block references named ``target``, in document order, from top-level paragraphs
    and one-line top-level list items (MP ``getBlockPositions``/``findBlocks``, which
    walk every token: ``CAN_INCLUDE_BLOCK_REFERENCE`` = paragraph, list_item, table).
    Raises :class:`NotEmulated` when ``^target`` appears where upstream may see a block
    the model does not (tables, blockquotes, nested or multi-line list items, a ``^id``
    alone on its line, which binds to the block above)."""
    occurrences = [
        m.start() for m in re.finditer(r"\^" + re.escape(target) + r"(?![a-zA-Z0-9_-])", content)
    ]
    if not occurrences:
        return []
    found: list[BlockRef] = []
    covered: list[tuple[int, int]] = []
    previous = 0  # 1.x walks with indexOf from the previous token's start
    seen_quote = False
    for token, start in _tiles(tokens):
        end = start + len(token.raw)
        if content[start:end] != token.raw:
            raise NotEmulated("block reference in a note whose token offsets drift")
        # 0.2.2 sets its cursor to -1 after a blockquote's inner tokens (not found
        # verbatim), so the next search starts over from the top.
        floor = 0 if seen_quote and regex is _OLD_BLOCK_REF else previous
        previous = start
        seen_quote = seen_quote or token.type == "blockquote"
        if token.type in ("heading", "code", "html", "hr", "space", "def"):
            covered.append((start, end))  # never a block upstream
            continue
        candidates: list[tuple[int, str]] = []
        if token.type == "paragraph":
            candidates.append((start, token.raw))
        elif token.type == "list":
            # marked 17 re-types a loose list's item children as paragraphs, which then
            # match too (1.x: the later wins, without the bullet): not modelled.
            if marked >= 17 and any(re.search(r"\n[ \t]*\n", item) for item in token.items):
                continue
            item_start = start
            for item in token.items:
                if "\n" in js_trim_end(item):
                    item_start += len(item)
                    continue
                candidates.append((item_start, item))
                item_start += len(item)
        for cand_start, raw in candidates:
            covered.append((cand_start, cand_start + len(raw)))
            m = regex.search(raw)
            if not m or m.group(1) != target:
                floor = cand_start
                continue
            if not v2 and content.find(raw, floor) != cand_start:
                raise NotEmulated("a block whose text also occurs just before it")
            floor = cand_start
            content_end = cand_start + m.start()
            if content_end == cand_start:
                raise NotEmulated("an isolated ^block reference line")
            raw_end = cand_start + len(raw)
            if v2:
                marker_end = raw_end
                while marker_end > cand_start and content[marker_end - 1] == "\n":
                    marker_end -= 1
            else:
                marker_end = raw_end
                if content[marker_end - 1 : marker_end] != "\n" and (
                    content[marker_end : marker_end + 1] == "\n"
                ):
                    marker_end += 1
            found.append(
                BlockRef(
                    target,
                    (cand_start + offset, content_end + offset),
                    (content_end + offset, marker_end + offset),
                )
            )
    for occ in occurrences:
        if not any(a <= occ < b for a, b in covered):
            raise NotEmulated("a ^block reference outside top-level paragraphs and list items")
    return found


# --- the 1.x document map (MP map.ts getDocumentMap) ---------------------------------

_FRONTMATTER_V1 = re.compile(r"^---(?:\r\n|\r|\n)([\s\S]*?)(?:\r\n|\r|\n)---(?:\r\n|\r|\n|\Z)")


@dataclass
class Span:
    start: int
    end: int


@dataclass
class HeadingPos:
    content: Span
    marker: Span
    level: int


@dataclass
class MapV1:
    headings: dict[str, HeadingPos]
    content: str
    tokens: list[Token]
    frontmatter: Any
    content_offset: int
    line_ending: str


def _parse_yaml(text: str) -> Any:
    try:
        return yamljs.load(text)
    except yamljs.YamlUnsupported as exc:
        raise NotEmulated("frontmatter only the JavaScript YAML parser reads (a tab)") from exc
    except yamljs.YamlError as exc:
        raise FrontmatterError(str(exc)) from exc


def build_map_v1(document: str, engine: Engine) -> MapV1:
    _no_crlf(document)
    m = _FRONTMATTER_V1.match(document)
    if m:
        offset = len(m.group(0))
        frontmatter = _parse_yaml(js_trim(m.group(1)))
        content = document[offset:]
    else:
        offset, frontmatter, content = 0, {}, document
    tokens = lex(content, engine.marked)
    positions: dict[str, HeadingPos] = {
        "": HeadingPos(Span(offset, len(content) + offset), Span(0, 0), 0)
    }
    stack: list[tuple[str, HeadingPos]] = []
    current = 0
    for index, token in enumerate(tokens):
        if token.type != "heading":
            continue
        trimmed = js_trim(token.raw)
        start_heading = _index_of(content, trimmed, current)
        end_heading = start_heading + len(trimmed) + 1
        end_content: int | None = None
        for later in tokens[index + 1 :]:
            if later.type == "heading" and later.depth <= token.depth:
                end_content = _index_of(content, js_trim(later.raw), end_heading)
                break
        if end_content is None:
            end_content = len(content)
        pos = HeadingPos(
            Span(end_heading + offset, end_content + offset),
            Span(start_heading + offset, end_heading + offset),
            token.depth,
        )
        path = js_trim(token.text)
        while stack and stack[-1][1].level >= token.depth:
            stack.pop()
        if stack:
            parent_path, parent = stack[-1]
            parent.content.end = end_content + offset
            path = f"{parent_path}\x1f{path}"
        positions[path] = pos
        stack.append((path, pos))
        current = end_heading
    line_ending = "\r\n" if "\r\n" in document else "\n"
    return MapV1(positions, content, tokens, frontmatter, offset, line_ending)


# --- the 1.x operations (MP patch.ts) ------------------------------------------------


@dataclass
class InstructionV1:
    operation: str
    target_type: str
    target: Any  # list[str] for headings, else str
    content_type: str | None
    content: Any
    create_if_missing: bool = False
    apply_if_preexists: bool = False  # MP < 1.0
    reject_if_preexists: bool = False  # MP 1.x
    trim_whitespace: bool = False


def _replace_text(doc: str, content: str, target: Span, engine: Engine) -> str:
    if engine.whitespace == 0:
        return doc[: target.start] + content + doc[target.end :]
    suffix = doc[target.end :]
    le = "\r\n" if suffix.startswith("\r\n") else "\n"
    single_leading = suffix.startswith(le) and not suffix.startswith(le + le)
    doc_le = "\r\n" if "\r\n" in doc else "\n"
    had_blank = (
        len(suffix) > 0
        and not suffix.startswith(doc_le)
        and target.end >= len(doc_le) * 2
        and doc[target.end - len(doc_le) * 2 : target.end] == doc_le + doc_le
    )
    if single_leading and not content.endswith("\n") and not content.endswith("\r\n"):
        content += le
    elif had_blank and not content.endswith(doc_le + doc_le):
        content += doc_le if content.endswith(doc_le) else doc_le + doc_le
    return doc[: target.start] + content + suffix


def _prepend_text(doc: str, content: str, target: Span, trim: bool) -> str:
    rest = doc[target.start :]
    return doc[: target.start] + content + (js_trim_start(rest) if trim else rest)


def _append_text(doc: str, content: str, target: Span, trim: bool, engine: Engine) -> str:
    if engine.whitespace == 0:
        head = doc[: target.end]
        return (js_trim_end(head) if trim else head) + content + doc[target.end :]
    suffix = doc[target.end :]
    le = "\r\n" if "\r\n" in doc else "\n"
    had_blank = (
        not trim
        and len(suffix) > 0
        and not suffix.startswith(le)
        and target.end >= len(le) * 2
        and doc[target.end - len(le) * 2 : target.end] == le + le
    )
    if had_blank and not content.endswith(le + le):
        content += le if content.endswith(le) else le + le
    if trim or engine.whitespace == 1:
        head = doc[: target.end]
        return (js_trim_end(head) if trim else head) + content + suffix
    insertion_end = target.end
    if not suffix:
        while (
            insertion_end >= len(le) * 2
            and doc[insertion_end - len(le) * 2 : insertion_end] == le + le
        ):
            insertion_end -= len(le)
    return doc[:insertion_end] + content + suffix


def _add_target_heading(doc: str, instr: InstructionV1, m: MapV1) -> str:
    elements: list[str] = []
    best = m.headings[""]
    for element in instr.target or []:
        match = m.headings.get("\x1f".join([*elements, element]))
        if match is None:
            break
        elements.append(element)
        best = match
    le = m.line_ending
    final = ""
    if doc[best.content.end - len(le) : best.content.end] != le:
        final += le
    levels = len(elements)
    for part in (instr.target or [])[len(elements) :]:
        levels += 1
        final += "#" * levels + " " + part + le
    final += instr.content
    return doc[: best.content.end] + final + doc[best.content.end :]


def _js_typeof(value: Any) -> str:
    if value is None or isinstance(value, dict | list):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _appendable(value: Any) -> bool:
    return isinstance(value, str | dict | list) and not isinstance(value, bool)


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, list) and isinstance(b, list):
        return [*a, *b]
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **b}
    if isinstance(a, str) and isinstance(b, str):
        return a + b
    raise InternalError(
        "Cannot merge objects of different types or unsupported types: "
        f"{_js_typeof(a)} and {_js_typeof(b)}"
    )


def _js_spread(value: Any) -> dict[str, Any]:
    """``{...value}`` for what ``yaml.parse`` can return."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return {str(i): item for i, item in enumerate(value)}
    if isinstance(value, str):
        return {str(i): ch for i, ch in enumerate(value)}
    return {}


def _frontmatter_block(frontmatter: dict[str, Any], le: str) -> str:
    if not frontmatter:
        return ""
    raw = "---\n" + js_trim_end(yamljs.stringify(frontmatter)) + "\n---\n"
    return raw if le == "\n" else raw.replace("\n", le)


def apply_v1(document: str, instr: InstructionV1, engine: Engine) -> str:
    """MP ``applyPatch`` (0.2.2 … 1.1) for the modelled subset."""
    m = build_map_v1(document, engine)
    if instr.target_type == "frontmatter":
        if m.frontmatter is None:  # `---\n\n---`: yaml.parse("") is null
            raise InternalError(f"Cannot read properties of null (reading '{instr.target}')")
        return _apply_frontmatter_v1(document, instr, m)
    span: Span | None
    if instr.target_type == "heading":
        pos = m.headings.get("\x1f".join(instr.target))
        span = pos.content if pos else None
    else:
        regex = _OLD_BLOCK_REF if engine.old_block_regex else _NEW_BLOCK_REF
        refs = _blocks(
            m.content,
            m.tokens,
            m.content_offset,
            instr.target,
            regex,
            v2=False,
            marked=engine.marked,
        )
        span = Span(*refs[-1].content) if refs else None  # positions[name] = …: last wins
    content = instr.content
    if span is None:
        if not instr.create_if_missing:
            raise PatchFailed("invalid-target")
        if not isinstance(content, str):
            raise NotEmulated("creating a target from a non-text body")
        if instr.target_type == "heading":
            return _add_target_heading(document, instr, m)
        le = m.line_ending
        return document + le + content + le + le + "^" + instr.target  # addTargetBlock
    if isinstance(content, str):
        section = document[span.start : span.end]
        if engine.reject_flag:
            if (
                instr.operation != "replace"
                and instr.reject_if_preexists
                and js_trim(content) in section
            ):
                raise PatchFailed("content-already-preexists-in-target")
        elif not instr.apply_if_preexists and js_trim(content) in section:
            raise PatchFailed("content-already-preexists-in-target")
    content_type = instr.content_type or TEXT_MARKDOWN
    if content_type == APPLICATION_JSON:
        raise NotEmulated("table rows (application/json) on a heading or block")
    if content_type != TEXT_MARKDOWN:
        raise NotEmulated(f"PATCH with Content-Type {content_type!r} before 3.6.1")
    if not isinstance(content, str):
        raise NotEmulated("a non-text body spliced as text")
    if instr.operation == "append":
        return _append_text(document, content, span, instr.trim_whitespace, engine)
    if instr.operation == "prepend":
        return _prepend_text(document, content, span, instr.trim_whitespace)
    return _replace_text(document, content, span, engine)


def _apply_frontmatter_v1(document: str, instr: InstructionV1, m: MapV1) -> str:
    frontmatter = _js_spread(m.frontmatter)
    key, content = instr.target, instr.content
    if key not in frontmatter:
        if not instr.create_if_missing:
            raise PatchFailed("invalid-target")
        if isinstance(content, list):
            frontmatter[key] = []
        elif isinstance(content, str):
            frontmatter[key] = ""
        elif isinstance(content, dict):
            frontmatter[key] = {}
    if instr.operation in ("append", "prepend"):
        if not _appendable(content):
            raise PatchFailed("content-not-mergeable")
        current = frontmatter.get(key)
        if key not in frontmatter:
            raise InternalError(
                "Cannot merge objects of different types or unsupported types: "
                f"{'undefined' if instr.operation == 'append' else _js_typeof(content)} and "
                f"{_js_typeof(content) if instr.operation == 'append' else 'undefined'}"
            )
        frontmatter[key] = (
            _merge(current, content) if instr.operation == "append" else _merge(content, current)
        )
    else:
        frontmatter[key] = content
    return _frontmatter_block(frontmatter, m.line_ending) + document[m.content_offset :]


# --- the pre-3.0 "v2" Heading header (LRA 3.x-4.0.0 _vaultPatchV2) --------------------


def apply_heading_v2(
    document: str, heading: list[str], insert: bool, above_newline: bool, body: str
) -> str | None:
    """``findHeadingBoundary`` over Obsidian's heading cache (modelled with marked's
    top-level headings) and ``getSplicePosition`` (LRA ``src/utils.ts``). The path is
    matched against the *end* of the current heading stack, which is kept per level
    with holes, so ``A::C`` never matches when a level is skipped between them."""
    _no_crlf(document)
    fm_end = frontmatter_end(document)
    first_line = document[:fm_end].count("\n")
    headings: list[tuple[int, str, int, int]] = []  # level, text, start line, end line
    for token, start in _tiles(lex(document[fm_end:], 17)):
        if token.type == "heading":
            marker = js_trim_end(token.raw)
            start_line = first_line + document[fm_end : fm_end + start].count("\n")
            headings.append(
                (token.depth, js_trim(token.text), start_line, start_line + marker.count("\n"))
            )
    wanted = list(reversed(heading))
    cursor: list[str | None] = []
    position: tuple[int, int | None] | None = None
    for index, (level, text, _start, end_line) in enumerate(headings):
        while len(cursor) <= level:
            cursor.append(None)
        cursor[level] = text
        del cursor[level + 1 :]
        reversed_cursor = list(reversed(cursor))
        if all(
            i < len(reversed_cursor) and reversed_cursor[i] == el for i, el in enumerate(wanted)
        ):
            end = next((h[2] for h in headings[index + 1 :] if h[0] <= level), None)
            position = (end_line, end)
            break
    if position is None:
        return None
    lines = document.split("\n")
    start_line, end_line = position
    if insert:
        at = start_line + 1
    else:
        at = len(lines) if end_line is None else end_line
        if above_newline:
            while at > 0 and lines[at - 1] == "":
                at -= 1
    lines.insert(at, body)
    return "\n".join(lines)


# --- markdown-patch 2.0 -------------------------------------------------------------

_FRONTMATTER_V2 = re.compile(
    r"^---(?:\r\n|\r|\n)(?:---(?:\r\n|\r|\n|\Z)|([\s\S]*?)(?:\r\n|\r|\n)---(?:\r\n|\r|\n|\Z))"
)
_LEADING_BLANKS = re.compile(r"^(?:[^\S\r\n]*(?:\r\n|\r|\n))+")
_TRAILING_WS = re.compile(r"\s+\Z")


@dataclass
class Section:
    heading: tuple[str, int] | None
    marker: Span | None
    body: Span
    gap: Span
    parent: Section | None = None
    children: list[Section] = field(default_factory=list)
    #: headingPath with later duplicate siblings made unaddressable (their real
    #: address carries MP's reserved marker suffix, which this model does not mint).
    address: tuple[object, ...] = ()


@dataclass
class ModelV2:
    version: str
    root: Section
    sections: list[Section]
    content: str
    tokens: list[Token]
    content_offset: int
    frontmatter: list[tuple[str, Any]]
    frontmatter_block: Span | None


def _split_gap(content: str, start: int, end: int) -> int:
    visible = end
    while visible > start and content[visible - 1] in "\r\n":
        visible -= 1
    if visible == start:
        return start
    return visible + 1 if content[visible : visible + 1] == "\n" else visible


def build_model_v2(document: str) -> ModelV2:
    """MP 2.0 ``buildModel``: sections with body and library-owned trailing gap."""
    _no_crlf(document)
    m = _FRONTMATTER_V2.match(document)
    if m:
        offset, fm_text = len(m.group(0)), m.group(1) or ""
    else:
        offset, fm_text = 0, None
    content = document[offset:]
    tokens = lex(content, 17)
    spans: list[tuple[str, int, int, int]] = []  # text, level, marker start, marker end
    for token, start in _tiles(tokens):
        if token.type == "heading":
            end = start + len(js_trim_end(token.raw))
            if content[end : end + 1] == "\n":
                end += 1
            spans.append((js_trim(token.text), token.depth, start, end))
    root_end = spans[0][2] if spans else len(content)
    root_split = _split_gap(content, 0, root_end)
    root = Section(
        None, None, Span(offset, offset + root_split), Span(offset + root_split, offset + root_end)
    )
    stack = [root]
    sections: list[Section] = []
    for index, (text, level, marker_start, marker_end) in enumerate(spans):
        body_end = spans[index + 1][2] if index + 1 < len(spans) else len(content)
        split = _split_gap(content, marker_end, body_end)
        node = Section(
            (text, level),
            Span(offset + marker_start, offset + marker_end),
            Span(offset + marker_end, offset + split),
            Span(offset + split, offset + body_end),
        )
        while len(stack) > 1 and stack[-1].heading is not None and stack[-1].heading[1] >= level:
            stack.pop()
        parent = stack[-1]
        node.parent = parent
        duplicate = any(
            sibling.heading is not None and sibling.heading[0] == text
            for sibling in parent.children
        )
        node.address = (*parent.address, object() if duplicate else text)
        parent.children.append(node)
        stack.append(node)
        sections.append(node)
    entries: list[tuple[str, Any]] = []
    block: Span | None = None
    if fm_text is not None:
        block = Span(0, offset)
        try:
            parsed = yamljs.load(fm_text)
        except yamljs.YamlUnsupported as exc:
            raise NotEmulated("frontmatter only the JavaScript YAML parser reads (a tab)") from exc
        except yamljs.YamlError as exc:
            raise FrontmatterError(f"Could not parse document frontmatter: {exc}") from exc
        if isinstance(parsed, dict):
            entries = list(parsed.items())
    version = hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    return ModelV2(version, root, sections, content, tokens, offset, entries, block)


def _last_descendant(section: Section) -> Section:
    while section.children:
        section = section.children[-1]
    return section


def _content_range(section: Section) -> Span:
    """``headingContentRange``: below the heading line to the end of the subtree's
    visible text (its last descendant's trailing gap excluded)."""
    return Span(section.body.start, _last_descendant(section).gap.start)


def _subtree_end(section: Section) -> int:
    return _last_descendant(section).gap.end


def _resolve_heading(model: ModelV2, target: list[str] | None) -> Section | None:
    if not target:
        return model.root
    wanted = tuple(target)
    return next((s for s in model.sections if s.address == wanted), None)


def _to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def rebase_headings(value: str, baseline: int) -> tuple[str, list[dict[str, str]]]:
    """MP 2.0 ``levels.ts`` ``rebaseHeadings``: add ``baseline`` to every top-level ATX
    heading's ``#`` run (setext headings and fenced ``#`` lines are left alone)."""
    normalized = _to_lf(value)
    if baseline == 0:
        return normalized, []
    out: list[str] = []
    warnings: list[dict[str, str]] = []
    last = 0
    for token, offset in _tiles(lex(normalized, 17)):
        if token.type != "heading":
            continue
        m = re.match(r"([ \t]{0,3})(#+)", token.raw)
        if not m:
            continue
        level = len(m.group(2)) + baseline
        hash_start = offset + len(m.group(1))
        out.append(normalized[last:hash_start] + "#" * level)
        last = hash_start + len(m.group(2))
        if level > 6:
            warnings.append(
                {
                    "code": "heading-depth-overflow",
                    "message": f'Heading "{js_trim(token.text)}" resolves to level {level}, '
                    "beyond Markdown's maximum of 6; it will not be structurally addressable.",
                }
            )
    out.append(normalized[last:])
    return "".join(out), warnings


def _fragment(value: str, baseline: int) -> tuple[str, list[dict[str, str]]]:
    """``sectionFragment``: rebase, then ``canonicalFragment`` (leading blank lines and
    trailing whitespace dropped, one final newline)."""
    rebased, warnings = rebase_headings(value, baseline)
    text = _TRAILING_WS.sub("", _LEADING_BLANKS.sub("", rebased, count=1))
    return (text + "\n" if text else ""), warnings


def _eols_before(doc: str, at: int) -> int:
    count, i = 0, at
    while count < 2 and i > 0 and doc[i - 1] in "\r\n":
        i -= 2 if doc[i - 1] == "\n" and doc[i - 2 : i - 1] == "\r" else 1
        count += 1
    return count


def _block_edit(
    doc: str, at: Span, text: str, pad_before: bool, pad_after: bool
) -> tuple[Span, str]:
    """``blockEdit`` + ``ownedGaps``: the blank lines the library owes on the padded
    sides, a line start on the others. (``lineStartGap`` is not in the stored MP
    sources; it is taken from ``blockEdit``'s comment: one newline when the joint is
    not at a line start.)"""
    if not text:
        return at, text
    if pad_before:
        before = "" if at.start == 0 else "\n" * max(0, 2 - _eols_before(doc, at.start))
    else:
        before = "" if at.start == 0 or doc[at.start - 1] in "\r\n" else "\n"
    after = ""
    if pad_after and not (at.end == len(doc) or doc[at.end] in "\r\n"):
        after = "\n"
    return at, before + text + after


def _splice(doc: str, span: Span, text: str) -> str:
    return doc[: span.start] + text + doc[span.end :]


@dataclass
class Result:
    document: str
    warnings: list[dict[str, str]] = field(default_factory=list)


def _heading_content(doc: str, section: Section, op: str, value: str | None) -> Result:
    rng = _content_range(section)
    if op == "delete":  # structural.ts: delete @ content empties the subtree body
        return Result(_splice(doc, rng, ""))
    assert value is not None
    text, warnings = _fragment(value, section.heading[1] if section.heading else 0)
    empty = rng.start == rng.end
    body_start = rng.start
    if text:
        leading = _LEADING_BLANKS.match(doc[rng.start : rng.end])
        body_start += len(leading.group(0)) if leading else 0
    if op == "replace":
        return Result(_splice(doc, Span(body_start, rng.end), text), warnings)
    if op == "prepend":
        span, out = _block_edit(doc, Span(body_start, body_start), text, False, not empty)
    else:
        span, out = _block_edit(doc, Span(rng.end, rng.end), text, not empty, False)
    return Result(_splice(doc, span, out), warnings)


def _create_heading(doc: str, model: ModelV2, path: list[str], value: str) -> Result:
    """``engine/create.ts`` ``createHeading``: the missing tail of the path as a chain of
    headings below the deepest existing ancestor, at the end of its subtree."""
    ancestor, matched = model.root, 0
    for length in range(len(path) - 1, 0, -1):
        found = _resolve_heading(model, path[:length])
        if found is not None:
            ancestor, matched = found, length
            break
    level = ancestor.heading[1] if ancestor.heading else 0
    parts: list[str] = []
    warnings: list[dict[str, str]] = []
    for segment in path[matched:]:
        level += 1
        if level > 6:
            warnings.append(
                {
                    "code": "heading-depth-overflow",
                    "message": f'Created heading "{segment}" resolves to level {level}, beyond '
                    "Markdown's maximum of 6; it will not be structurally addressable.",
                }
            )
        parts.append("#" * level + " " + segment + "\n")
    body, more = _fragment(value, level)
    if body:
        parts.append(body)
    at = _subtree_end(ancestor)
    return Result(_splice(doc, Span(at, at), "".join(parts)), warnings + more)


def _serialize_pairs(pairs: list[tuple[str, Any]]) -> str:
    obj: dict[str, Any] = dict(pairs)  # a later duplicate key overwrites, as in JS
    if not pairs:
        return ""
    return "---\n" + js_trim_end(yamljs.stringify(obj)) + "\n---\n"


def _frontmatter_v2(doc: str, model: ModelV2, ins: dict[str, Any]) -> Result:
    """``engine/frontmatter.ts`` ``patchFrontmatter`` for the content scope."""
    pairs = list(model.frontmatter)
    key, op = ins["target"], ins["operation"]
    index = next((i for i, (k, _v) in enumerate(pairs) if k == key), -1)
    if index == -1:
        if not (ins.get("createTargetIfMissing") and op != "delete"):
            raise TargetNotFound(f'frontmatter key "{key}" was not found')
        value = ins.get("value")
        pairs.append(
            (key, [] if isinstance(value, list) else {} if isinstance(value, dict) else "")
        )
        index = len(pairs) - 1
    if op == "delete":
        pairs[index] = (key, None)
    elif op == "replace":
        pairs[index] = (key, ins["value"])
    else:
        value, current = ins["value"], pairs[index][1]
        if not _appendable(value) or not _appendable(current):
            raise EngineError(f'frontmatter key "{key}" cannot be merged with the given value')
        try:
            merged = _merge(current, value) if op == "append" else _merge(value, current)
        except InternalError as exc:
            raise EngineError(
                "frontmatter values are not mergeable (need two lists, two dicts, or two strings)"
            ) from exc
        pairs[index] = (key, merged)
    block = model.frontmatter_block or Span(0, 0)
    return Result(_splice(doc, block, _serialize_pairs(pairs)))


def apply_v2(document: str, ins: dict[str, Any]) -> Result:
    """MP 2.0 ``patch`` for content-scope cells (instruction already validated)."""
    model = build_model_v2(document)
    if "ifMatch" in ins and ins["ifMatch"] != model.version:
        raise PreconditionFailed(
            f"ifMatch precondition failed: expected version {ins['ifMatch']}, "
            f"document is at {model.version}"
        )
    kind, op, target = ins["targetType"], ins["operation"], ins["target"]
    create = bool(ins.get("createTargetIfMissing"))
    if kind == "heading":
        if any(
            ord(ch) > 0xFFFF and unicodedata.category(ch) in ("Cf", "Co", "Cn")
            for part in target or []
            for ch in part
        ):
            raise NotEmulated("a duplicate heading's marker-suffixed address")
        section = _resolve_heading(model, target)
        if section is None:
            if create:
                if op == "delete":
                    raise TargetNotFound("cannot create a heading for a delete or move instruction")
                return _create_heading(document, model, target, ins["content"])
            raise TargetNotFound(
                "could not resolve heading target "
                + json.dumps(target, ensure_ascii=False, separators=(",", ":"))
            )
        _reject_if_preexists(document, ins, _content_range(section), section)
        return _heading_content(document, section, op, ins.get("content"))
    if kind == "block":
        refs = _blocks(
            model.content,
            model.tokens,
            model.content_offset,
            target,
            _NEW_BLOCK_REF,
            v2=True,
            marked=17,
        )
        if not refs:
            if create:
                if op == "delete":
                    raise EngineError(
                        "createTargetIfMissing for blocks supports content-scope writes only"
                    )
                le, sep = "\n", ""
                if document:
                    sep = (
                        ""
                        if document.endswith(le + le)
                        else le
                        if document.endswith(le)
                        else le + le
                    )
                text = sep + _to_lf(ins["content"]) + " ^" + target + le
                return Result(document + text)
            raise TargetNotFound(
                "could not resolve block target " + json.dumps(target, ensure_ascii=False)
            )
        ref = refs[0]  # a later duplicate id is addressed with a marker suffix
        span = Span(*ref.content)
        _reject_if_preexists(document, ins, span, None)
        if op == "delete":
            return Result(_splice(document, span, ""))
        value = _to_lf(ins["content"])
        if op == "replace":
            return Result(_splice(document, span, value))
        at = span.start if op == "prepend" else span.end
        return Result(_splice(document, Span(at, at), value))
    if not any(k == target for k, _v in model.frontmatter) and not create:
        raise TargetNotFound(
            "could not resolve frontmatter target " + json.dumps(target, ensure_ascii=False)
        )
    return _frontmatter_v2(document, model, ins)


def _reject_if_preexists(
    doc: str, ins: dict[str, Any], span: Span, section: Section | None
) -> None:
    content = ins.get("content")
    if not (
        ins.get("rejectIfContentPreexists")
        and ins["operation"] in ("prepend", "append")
        and isinstance(content, str)
        and js_trim(content)
    ):
        return
    probe = content
    if section is not None:
        probe, _w = rebase_headings(content, section.heading[1] if section.heading else 0)
    if js_trim(probe) in doc[span.start : span.end]:
        raise ContentPreexists(f"the target already contains the content to {ins['operation']}")


# --- 2.0 instruction validation (MP src/schema.ts, zod) ------------------------------

_TARGET_TYPES = ("heading", "block", "frontmatter")
_OPERATIONS = ("replace", "prepend", "append", "delete")
_SCOPES = ("content", "marker", "markerAndContent", "parent")
_VALID_CELLS = {
    "heading": {
        "content": _OPERATIONS,
        "marker": _OPERATIONS,
        "markerAndContent": _OPERATIONS,
        "parent": ("replace",),
    },
    "block": {
        "content": _OPERATIONS,
        "marker": ("replace", "delete"),
        "markerAndContent": _OPERATIONS,
        "parent": (),
    },
    "frontmatter": {
        "content": _OPERATIONS,
        "marker": ("replace",),
        "markerAndContent": _OPERATIONS,
        "parent": (),
    },
}


def _zod_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _enum_issue(name: str, value: Any, options: tuple[str, ...]) -> str | None:
    expected = " | ".join(f"'{o}'" for o in options)
    if name not in value:
        return f"{name}: Required"
    got = value[name]
    if not isinstance(got, str):
        return f"{name}: Expected {expected}, received {_zod_type(got)}"
    if got not in options:
        return f"{name}: Invalid enum value. Expected {expected}, received '{got}'"
    return None


def validate_v2(ins: dict[str, Any]) -> list[str]:
    """``InstructionInputSchema.safeParse`` issues, as ``path: message`` strings."""
    issues: list[str] = []
    issue = _enum_issue("targetType", ins, _TARGET_TYPES)
    if issue:
        issues.append(issue)
    target = ins.get("target", ...)
    if target is ... or not (
        target is None
        or isinstance(target, str)
        or (isinstance(target, list) and all(isinstance(t, str) for t in target))
    ):
        issues.append("target: Invalid input")
    issue = _enum_issue("operation", ins, _OPERATIONS)
    if issue:
        issues.append(issue)
    if "scope" in ins:
        issue = _enum_issue("scope", ins, _SCOPES)
        if issue:
            issues.append(issue)
    for name, kind in (
        ("content", str),
        ("ifMatch", str),
        ("createTargetIfMissing", bool),
        ("rejectIfContentPreexists", bool),
    ):
        if name in ins and not isinstance(ins[name], kind):
            expected = "string" if kind is str else "boolean"
            issues.append(f"{name}: Expected {expected}, received {_zod_type(ins[name])}")
    if issues:
        return issues
    kind, op, scope = ins["targetType"], ins["operation"], ins.get("scope", "content")
    if kind == "heading":
        if target is not None and not isinstance(target, list):
            issues.append(
                "target: a heading target must be an array of heading texts, or null for the "
                "document root"
            )
    elif not isinstance(target, str):
        issues.append(f"target: a {kind} target must be a string")
    elif kind == "block" and not re.fullmatch(r"[A-Za-z0-9_-]+", target):
        issues.append(
            "target: a block id may contain only letters, numbers, hyphens, and underscores"
        )
    if op not in _VALID_CELLS[kind][scope]:
        issues.append(f"operation: {op} @ {scope} is not a valid operation for a {kind} target")
        return issues
    if op == "delete":
        expected = ["none"]
    elif scope == "parent":
        expected = ["destination"]
    elif kind == "frontmatter":
        expected = ["content"] if scope == "marker" else ["value"]
    elif kind == "block" and scope == "content":
        expected = ["content", "value"]
    else:
        expected = ["content"]
    present = [c for c in ("content", "value", "destination") if c in ins]
    shown = " or ".join(f"`{c}`" for c in expected)
    if expected == ["none"]:
        issues += [f"{c}: a {op} carries no payload; remove `{c}`" for c in present]
    elif not present:
        issues.append(f"{expected[0]}: {op} @ {scope} on a {kind} target requires {shown}")
    elif len(present) > 1:
        issues += [
            f"{c}: {op} @ {scope} on a {kind} target carries its payload in exactly one of "
            f"{shown}, not both"
            for c in present
        ]
    elif present[0] not in expected:
        issues.append(
            f"{present[0]}: {op} @ {scope} on a {kind} target carries its payload in {shown}, "
            f"not `{present[0]}`"
        )
    return issues


# --- the request (LRA requestHandler.ts _vaultPatch, per version) --------------------


@dataclass
class PatchRequest:
    path: str
    headers: Any  # an email.message.Message: .get(name) is case-insensitive
    body_kind: str  # text | json | raw | none
    body: Any
    #: The whole-path segments were an existing file plus heading/block/frontmatter
    #: (5.x URL targeting), or a keyword segment with no file before it.
    url_target: bool = False
    url_keyword: bool = False


class Patcher:
    """PATCH for one emulated plugin version over a vault."""

    def __init__(self, version: str, vault: Vault) -> None:
        self.v = parse_version(version)
        self.vault = vault
        self.engine = engine_for(self.v)

    # --- file access: getAbstractFileByPath, vault.read, adapter.write ------------

    def _exists(self, path: str) -> bool:
        if any(part.startswith(".") for part in path.split("/")):
            return False  # hidden paths are not in Obsidian's vault index
        return self.vault.stat(path) is not None

    def _read(self, path: str, yield_ms: float | None) -> str:
        data = self.vault.read_bytes(path) or b""
        _yield(yield_ms)  # the await on vault.read: other requests run here
        return data.decode("utf-8", errors="replace")

    def _write(self, path: str, text: str, yield_ms: float | None) -> None:
        self.vault.write(path, text.encode("utf-8"), yield_ms=yield_ms)

    # --- entry --------------------------------------------------------------------

    def handle(self, req: PatchRequest, yield_ms: float | None) -> Reply:
        v = self.v
        if req.url_keyword:  # 5.x vaultPatch: an unresolvable .../heading/... path
            return canned(v, status=404)
        if not req.path or req.path.endswith("/"):
            return canned(v, code=40510)
        if v >= (5, 0, 0):
            return self._v5(req, yield_ms)
        # 3.x/4.x never resolve URL targets on PATCH: such a path is simply no file.
        if v <= (4, 0, 0) and req.headers.get("Heading") and not req.headers.get("Target-Type"):
            return self._heading_v2(req, yield_ms)
        if v < (4, 0, 0):
            return self._v3(req, yield_ms)
        return self._v1(req, yield_ms, deprecation=False)

    # --- 3.x (_vaultPatchV3) --------------------------------------------------------

    def _v3(self, req: PatchRequest, yield_ms: float | None) -> Reply:
        v, h = self.v, req.headers
        operation, target_type = h.get("Operation"), h.get("Target-Type")
        raw = h.get("Target")
        if raw is None and v < (3, 4, 3):
            raw = "undefined"  # decodeURIComponent(undefined)
        raw_target = decode_uri_component(raw or "")  # throws: the request hangs
        delimiter = h.get("Target-Delimiter") or "::"
        target = raw_target.split(delimiter) if target_type == "heading" else raw_target
        if not self._exists(req.path):
            return canned(v, status=404)
        document = self._read(req.path, yield_ms)
        if not target_type:
            return canned(v, code=40053)
        if target_type not in _TARGET_TYPES:
            return canned(v, code=40054)
        if not operation:
            return canned(v, code=40056)
        if operation not in ("append", "prepend", "replace"):
            return canned(v, code=40057)
        content_type = h.get("Content-Type")
        if v >= (3, 6, 1) and content_type not in (TEXT_MARKDOWN, APPLICATION_JSON):
            return canned(v, code=40012)
        instr = InstructionV1(
            operation,
            target_type,
            target,
            content_type,
            self._content(req),
            create_if_missing=h.get("Create-Target-If-Missing") == "true",
            apply_if_preexists=h.get("Apply-If-Content-Preexists") == "true",
            trim_whitespace=h.get("Trim-Target-Whitespace") == "true",
        )
        return self._run_v1(req.path, document, instr, yield_ms, {})

    # --- 4.x and 5.x with Markdown-Patch-Version: 1 (_vaultPatch) -------------------

    def _v1(self, req: PatchRequest, yield_ms: float | None, *, deprecation: bool) -> Reply:
        v, h = self.v, req.headers
        extra = {"Deprecation": V1_SUNSET} if deprecation else {}
        operation, target_type = h.get("Operation"), h.get("Target-Type")
        raw_target = decode_uri_component(h.get("Target") or "")  # throws: 500 / hang
        scope = h.get("Target-Scope") or None
        if not target_type:
            return canned(v, code=40053, headers=extra)
        if target_type not in _TARGET_TYPES:
            return canned(v, code=40054, headers=extra)
        if not operation:
            return canned(v, code=40056, headers=extra)
        if operation not in ("append", "prepend", "replace"):
            return canned(v, code=40057, headers=extra)
        if scope and scope not in ("content", "marker", "markerAndContent"):
            detail = (
                "Valid values are 'content', 'marker', and 'markerAndContent'."
                if v >= (5, 0, 0)
                else None
            )
            return canned(v, code=40059, detail=detail, headers=extra)
        if v >= (5, 0, 0) and target_type == "frontmatter" and scope and scope != "content":
            return canned(v, code=40059, headers=extra)
        content_type = h.get("Content-Type")
        if content_type not in (TEXT_MARKDOWN, APPLICATION_JSON):
            return canned(v, code=40012, headers=extra)
        if not self._exists(req.path):
            return canned(v, status=404, headers=extra)
        if scope and scope != "content":
            raise NotEmulated(f"Target-Scope: {scope}")
        delimiter = h.get("Target-Delimiter") or "::"
        instr = InstructionV1(
            operation,
            target_type,
            raw_target.split(delimiter) if target_type == "heading" else raw_target,
            content_type,
            self._content(req),
            create_if_missing=h.get("Create-Target-If-Missing") == "true",
            reject_if_preexists=h.get("Reject-If-Content-Preexists") == "true",
            trim_whitespace=h.get("Trim-Target-Whitespace") == "true",
        )
        document = self._read(req.path, yield_ms)
        return self._run_v1(req.path, document, instr, yield_ms, extra)

    def _content(self, req: PatchRequest) -> Any:
        """``req.body`` after the plugin's parsers: text, parsed JSON, or ``{}``."""
        if req.body_kind == "raw":
            raise NotEmulated("a PATCH body that is neither text nor JSON")
        return req.body

    def _run_v1(
        self,
        path: str,
        document: str,
        instr: InstructionV1,
        yield_ms: float | None,
        extra: dict[str, str],
    ) -> Reply:
        v = self.v
        try:
            patched = apply_v1(document, instr, self.engine)
        except PatchFailed as exc:
            return canned(v, code=40080, detail=exc.reason, headers=extra)
        except FrontmatterError as exc:
            if v >= (4, 1, 5):
                return canned(v, code=40005, detail=str(exc), headers=extra)
            return canned(v, status=500, detail=str(exc), headers=extra)
        except InternalError as exc:
            return canned(v, status=500, detail=str(exc), headers=extra)
        self._write(path, patched, yield_ms)
        return Reply(200, patched.encode("utf-8"), {"Content-Type": HTML_UTF8, **extra})

    # --- the "v2" Heading header (_vaultPatchV2, 3.x-4.0.0) -------------------------

    def _heading_v2(self, req: PatchRequest, yield_ms: float | None) -> Reply:
        v, h = self.v, req.headers
        boundary = h.get("Heading-Boundary") or "::"
        heading = [part for part in (h.get("Heading") or "").split(boundary) if part]
        position = h.get("Content-Insertion-Position")
        if position not in (None, "beginning", "end"):
            return canned(v, code=40050)
        if req.body_kind != "text":
            return canned(v, code=40010)
        ignore = h.get("Content-Insertion-Ignore-Newline")
        above_newline = isinstance(ignore, str) and ignore.lower() == "true"
        if not heading:
            return canned(v, code=40051)
        if not self._exists(req.path):
            return canned(v, status=404)
        # The metadata cache is consulted before the read; the model reads first.
        current = self.vault.read_text(req.path)
        if apply_heading_v2(current, heading, position == "beginning", above_newline, "") is None:
            return canned(v, code=40052)
        document = self._read(req.path, yield_ms)
        patched = apply_heading_v2(
            document, heading, position == "beginning", above_newline, str(req.body)
        )
        if patched is None:
            return canned(v, code=40052)
        self._write(req.path, patched, yield_ms)
        return Reply(
            200,
            patched.encode("utf-8"),
            {"Content-Type": HTML_UTF8, "Deprecation": V2_HEADING_SUNSET, "Link": V2_HEADING_LINK},
        )

    # --- 5.x and 6.x ----------------------------------------------------------------

    def _v5(self, req: PatchRequest, yield_ms: float | None) -> Reply:
        v, h = self.v, req.headers
        raw_version = h.get("Markdown-Patch-Version")
        if raw_version is not None and raw_version not in ("1", "2"):
            return canned(v, code=40082)
        header_targeting = bool(h.get("Target-Type") or h.get("Target"))
        media = (h.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        instruction_body = media == PATCH_INSTRUCTION
        if (req.url_target and header_targeting) or (
            instruction_body and (req.url_target or header_targeting)
        ):
            return canned(v, code=42200)
        if raw_version == "1":
            if v >= (6, 0, 0):
                # 6.0 removed the 1.x header format (reference "Update, November 2026";
                # announced by LRA 5.x docs/patch.md "removed in 6.0"). The stored
                # upstream sources stop before 6.0 (a post-5.1 constants.ts still calls
                # 1.x "deprecated"), so the exact refusal is unverified: the stand-in
                # answers 400/40082, the error 5.x gives any version but 1 and 2, with a
                # message of its own; header targeting without a version stays 40084.
                return canned(v, code=40082)
            if req.url_target:
                return canned(
                    v,
                    code=40082,
                    detail="URL path-element targeting is a markdown-patch 2.0 feature; drop "
                    "the 'Markdown-Patch-Version: 1' header, or use the deprecated 1.x "
                    "Target-Type/Target headers instead.",
                )
            return self._v1(req, yield_ms, deprecation=True)
        if req.url_target:
            raise NotEmulated("raw-content mode (URL path-element targeting)")
        if header_targeting:
            if raw_version != "2":
                return canned(v, code=40084)
            raise NotEmulated(
                "raw-content mode (Target-Type/Target with Markdown-Patch-Version: 2)"
            )
        # A binary body is a Buffer: an object, which then fails the schema like {}.
        body = {} if req.body_kind == "raw" else req.body
        if not isinstance(body, dict):
            return canned(
                v,
                code=40081,
                detail="A PATCH expects a JSON instruction object as the request body (send "
                "Content-Type: application/json or application/vnd.olrapi.patch-instruction+json). "
                "For raw-content mode, target via URL path elements or Target-Type/Target headers "
                "with 'Markdown-Patch-Version: 2'. To use the deprecated 1.x header-driven format, "
                "set the 'Markdown-Patch-Version: 1' header.",
            )
        return self._mdp2(req.path, body, yield_ms)

    def _mdp2(self, path: str, ins: dict[str, Any], yield_ms: float | None) -> Reply:
        v = self.v
        for unsupported in ("within", "destination"):
            if unsupported in ins:
                raise NotEmulated(f"2.0 instruction field {unsupported!r}")
        issues = validate_v2(ins)
        if issues:
            return canned(v, code=40081, detail="; ".join(issues))
        if not self._exists(path):
            return canned(v, status=404)
        scope = ins.get("scope", "content")
        if scope != "content":
            raise NotEmulated(f"2.0 scope {scope!r}")
        if ins["targetType"] == "block" and "value" in ins:
            raise NotEmulated("table rows (a 2.0 `value` on a block)")
        document = self._read(path, yield_ms)
        try:
            result = apply_v2(document, ins)
        except FrontmatterError as exc:
            return canned(v, code=40005, detail=str(exc))
        except EngineError as exc:
            if exc.code:
                return canned(v, code=exc.code, detail=str(exc))
            return canned(v, status=exc.status, detail=str(exc))
        self._write(path, result.document, yield_ms)
        headers = {"Content-Type": MARKDOWN_UTF8}
        if result.warnings:
            headers["Markdown-Patch-Warnings"] = urllib.parse.quote(
                json.dumps(result.warnings, ensure_ascii=False, separators=(",", ":")),
                safe="-_.!~*'()",
            )
        return Reply(200, result.document.encode("utf-8"), headers)
