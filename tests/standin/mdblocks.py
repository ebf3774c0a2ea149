"""Top-level block tokens as the ``marked`` lexer produces them, for the PATCH model.

markdown-patch finds headings and ``^block`` references by running ``marked``'s lexer
over the note and walking the *top-level* tokens (markdown-patch ``src/map.ts``
``getHeadingPositions``, ``src/model.ts`` ``findHeadings``), so where a heading starts
and ends, and whether a ``# line`` is a heading at all (not inside a fence, a list
item, an HTML block, a blockquote), is whatever ``marked`` says. This module re-states
``marked``'s block grammar (``Lexer.blockTokens`` and the ``space``, ``code``,
``fences``, ``heading``, ``hr``, ``blockquote``, ``list``, ``html``, ``def``,
``table``, ``lheading`` and ``paragraph`` tokenizers) for two versions:

* ``14`` = marked 14.1.4, bundled with markdown-patch 0.2.2 (plugin 3.0-3.3);
* ``17`` = marked 17.0.4, bundled with markdown-patch 0.4.x, 1.x and 2.0 (plugin 3.4+).

Only what the PATCH model reads is kept: each top-level token's ``type`` and ``raw``
(the consumed source, so offsets can be accumulated as upstream does), a heading's
``depth`` and ``text``, and a list's item ``raw`` strings. Inline tokens and list-item
children are not produced. The regular expressions are ``marked``'s own (as its
``Lexer.rules.block.gfm`` prints them), rewritten for Python: ``$`` becomes ``\\Z``
(a JavaScript ``$`` without the ``m`` flag never matches before a final newline) and
``\\d`` becomes ``[0-9]``. Quirks are kept on purpose: a link definition right after a
paragraph is glued to it with an extra newline, and marked 14 drops a standalone
definition from the token list, so offsets accumulated after one drift, as they do
upstream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# JavaScript's String.prototype.trim whitespace (WhiteSpace + LineTerminator + BOM).
JS_WS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    return text.strip(JS_WS)


def js_trim_start(text: str) -> str:
    return text.lstrip(JS_WS)


def js_trim_end(text: str) -> str:
    return text.rstrip(JS_WS)


def _rtrim(text: str, char: str) -> str:
    """marked's ``rtrim(str, c)``: drop trailing ``c`` characters."""
    end = len(text)
    while end and text[end - 1] == char:
        end -= 1
    return text[:end]


def _py(source: str, flags: int = 0) -> re.Pattern[str]:
    """Compile a JavaScript regex source: ``$`` → ``\\Z``; ``\\d`` and ``\\w`` to their
    ASCII classes (JavaScript's are ASCII-only, Python's are not)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(source):
        ch = source[i]
        if ch == "\\" and i + 1 < len(source):
            nxt = source[i + 1]
            if nxt == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif nxt == "w":  # JavaScript's \w is ASCII-only
                out.append("A-Za-z0-9_" if in_class else "[A-Za-z0-9_]")
            else:
                out.append(ch + nxt)
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if source[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if source[i + 1 : i + 2] == "]":  # a literal ] first in a class
                out.append("\\]")
                i += 1
        elif ch == "$":
            out.append(r"\Z")
        else:
            out.append(ch)
        i += 1
    return re.compile("".join(out), flags)


# --- the grammar (marked's Lexer.rules.block.gfm, per version) ---------------------

_HR = r"^ {0,3}((?:-[\t ]*){3,}|(?:_[ \t]*){3,}|(?:\*[ \t]*){3,})(?:\n+|$)"
_TAG = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd"
    "|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset"
    "|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|meta|nav"
    "|noframes|ol|optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th"
    "|thead|title|tr|track|ul"
)
_HR_IN = r" {0,3}((?:-[\t ]*){3,}|(?:_[ \t]*){3,}|(?:\*[ \t]*){3,})(?:\n+|$)"
_FENCE_IN = r" {0,3}(?:`{3,}(?=[^`\n]*\n)|~{3,})[^\n]*\n"
_HTML_IN = r"<\/?(?:" + _TAG + r")(?: +|\n|\/?>)|<(?:script|pre|style|textarea|!--)"


def _list_in(version: int) -> str:
    # marked 17 lets "1." or "-" interrupt a paragraph only when followed by a space
    # or a tab; marked 14 only by a space.
    return r" {0,3}(?:[*+-]|1[.)])" + ("[ \\t]" if version >= 17 else " ")


def _table(version: int) -> str:
    return (
        r"^ *([^\n ].*)\n {0,3}((?:\| *)?:?-+:? *(?:\| *:?-+:? *)*(?:\| *)?)"
        r"(?:\n((?:(?! *\n|"
        + _HR_IN
        + r"| {0,3}#{1,6}(?:\s|$)| {0,3}>|(?: {4}| {0,3}\t)[^\n]|"
        + _FENCE_IN
        + "|"
        + _list_in(version)
        + "|"
        + _HTML_IN
        + r").*(?:\n|$))*)\n*|$)"
    )


def _paragraph(version: int, gfm: bool) -> str:
    table = "|" + _table(version)[1:] if gfm else ""
    return (
        r"^([^\n]+(?:\n(?!"
        + _HR_IN
        + r"| {0,3}#{1,6}(?:\s|$)| {0,3}>|"
        + _FENCE_IN
        + "|"
        + _list_in(version)
        + "|"
        + _HTML_IN
        + table
        + r"| +\n)[^\n]+)*)"
    )


def _lheading(version: int) -> str:
    bull = r" {0,3}(?:[*+-]|[0-9]{1,9}[.)]) " if version >= 17 else r"(?:[*+-]|[0-9]{1,9}[.)]) "
    stop = bull + r"|(?: {4}| {0,3}\t)| {0,3}(?:`{3,}|~{3,})| {0,3}>| {0,3}#{1,6}| {0,3}<[^\n>]+>\n"
    if version >= 17:
        stop += r"| {0,3}\|?(?:[:\- ]*\|)+[\:\- ]*\n"
    return r"^(?!" + stop + r")((?:.|\n(?!\s*?\n|" + stop + r"))+?)\n {0,3}(=+|-+) *(?:\n+|$)"


def _def(version: int) -> str:
    escape = r"\\[\s\S]" if version >= 17 else r"\\."
    return (
        r"^ {0,3}\[((?!\s*\])(?:" + escape + r"|[^\[\]\\])+)\]: *(?:\n[ \t]*)?([^<\s][^\s]*|<.*?>)"
        r"(?:(?: +(?:\n[ \t]*)?| *\n[ \t]*)((?:\"(?:\\\"?|[^\"\\])*\"|'[^'\n]*(?:\n[^'\n]+)*\n?'"
        r"|\([^()]*\))))? *(?:\n+|$)"
    )


_HTML = (
    r"^ {0,3}(?:<(script|pre|style|textarea)[\s>][\s\S]*?(?:<\/\1>[^\n]*\n+|$)"
    r"|<!--(?:-?>|[\s\S]*?(?:-->|$))[^\n]*(\n+|$)|<\?[\s\S]*?(?:\?>\n*|$)"
    r"|<![A-Z][\s\S]*?(?:>\n*|$)|<!\[CDATA\[[\s\S]*?(?:\]\]>\n*|$)"
    r"|<\/?(" + _TAG + r")(?: +|\n|\/?>)[\s\S]*?(?:(?:\n[ \t]*)+\n|$)"
    r"|<(?!script|pre|style|textarea)([a-z][\w-]*)(?: +[a-zA-Z:_][\w.:-]*(?: *= *\"[^\"\n]*\""
    r"| *= *'[^'\n]*'| *= *[^\s\"'=<>`]+)?)*? */?>(?=[ \t]*(?:\n|$))[\s\S]*?(?:(?:\n[ \t]*)+\n|$)"
    r"|<\/(?!script|pre|style|textarea)[a-z][\w-]*\s*>(?=[ \t]*(?:\n|$))"
    r"[\s\S]*?(?:(?:\n[ \t]*)+\n|$))"
)


@dataclass(frozen=True)
class Grammar:
    space: re.Pattern[str]
    code: re.Pattern[str]
    fences: re.Pattern[str]
    heading: re.Pattern[str]
    hr: re.Pattern[str]
    blockquote: re.Pattern[str]
    list: re.Pattern[str]
    html: re.Pattern[str]
    definition: re.Pattern[str]
    table: re.Pattern[str]
    lheading: re.Pattern[str]
    paragraph: re.Pattern[str]


def _grammar(version: int) -> Grammar:
    # The blockquote rule embeds the *non*-GFM paragraph (no table interruption).
    blockquote = r"^( {0,3}> ?(" + _paragraph(version, gfm=False)[1:] + r"|[^\n]*)(?:\n|$))+"
    return Grammar(
        space=_py(r"^(?:[ \t]*(?:\n|$))+"),
        code=_py(r"^((?: {4}| {0,3}\t)[^\n]+(?:\n(?:[ \t]*(?:\n|$))*)?)+"),
        fences=_py(
            r"^ {0,3}(`{3,}(?=[^`\n]*(?:\n|$))|~{3,})([^\n]*)(?:\n|$)(?:|([\s\S]*?)(?:\n|$))"
            r"(?: {0,3}\1[~`]* *(?=\n|$)|$)"
        ),
        heading=_py(r"^ {0,3}(#{1,6})(?=\s|$)(.*)(?:\n+|$)"),
        hr=_py(_HR),
        blockquote=_py(blockquote),
        list=_py(r"^( {0,3}(?:[*+-]|\d{1,9}[.)]))([ \t][^\n]+?)?(?:\n|$)"),
        html=_py(_HTML, re.IGNORECASE),
        definition=_py(_def(version)),
        table=_py(_table(version)),
        lheading=_py(_lheading(version)),
        paragraph=_py(_paragraph(version, gfm=True)),
    )


_GRAMMARS = {14: _grammar(14), 17: _grammar(17)}


@dataclass
class Token:
    type: str
    raw: str
    depth: int = 0
    text: str = ""
    #: For ``list`` tokens: each item's raw (they tile the list's raw).
    items: list[str] = field(default_factory=list)


def _split_cells_count(row: str) -> int:
    """How many cells marked's ``splitCells`` finds in a table row."""
    marked: list[str] = []
    for i, ch in enumerate(row):
        if ch == "|":
            slashes = 0
            j = i - 1
            while j >= 0 and row[j] == "\\":
                slashes += 1
                j -= 1
            marked.append("|" if slashes % 2 else " |")
        else:
            marked.append(ch)
    cells = "".join(marked).split(" |")
    if not js_trim(cells[0]):
        cells.pop(0)
    if cells and not js_trim(cells[-1]):
        cells.pop()
    return len(cells)


def _search_nonspace(text: str) -> int:
    """``text.search(/[^ ]/)``: index of the first non-space character, or -1."""
    for i, ch in enumerate(text):
        if ch != " ":
            return i
    return -1


def _expand_tabs(text: str, column: int) -> str:
    """marked 17's ``fe``: tabs to the next multiple of 4, counting from ``column``."""
    out: list[str] = []
    col = column
    for ch in text:
        if ch == "\t":
            width = 4 - col % 4
            out.append(" " * width)
            col += width
        else:
            out.append(ch)
            col += 1
    return "".join(out)


class Lexer:
    """``new marked.Lexer().lex(src)`` reduced to top-level block tokens."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.g = _GRAMMARS[version]
        self._links: set[str] = set()

    def lex(self, src: str) -> list[Token]:
        src = re.sub(r"\r\n|\r", "\n", src)
        return self.block_tokens(src, [])

    def block_tokens(self, src: str, tokens: list[Token], top: bool = True) -> list[Token]:
        """marked ``Lexer.blockTokens``; ``top`` false inside list items, where lines
        become ``text`` tokens instead of paragraphs."""
        g, v17 = self.g, self.version >= 17
        while src:
            m = g.space.match(src)
            if m and m.group(0):
                raw = m.group(0)
                src = src[len(raw) :]
                if len(raw) == 1 and tokens:
                    tokens[-1].raw += "\n"
                else:
                    tokens.append(Token("space", raw))
                continue
            m = g.code.match(src)
            if m:
                raw = m.group(0)
                src = src[len(raw) :]
                last = tokens[-1] if tokens else None
                if last is not None and last.type in ("paragraph", "text"):
                    joint = "" if v17 and last.raw.endswith("\n") else "\n"
                    last.raw += joint + raw
                else:
                    tokens.append(Token("code", raw))
                continue
            m = g.fences.match(src)
            if m:
                src = src[len(m.group(0)) :]
                tokens.append(Token("code", m.group(0)))
                continue
            m = g.heading.match(src)
            if m:
                src = src[len(m.group(0)) :]
                tokens.append(
                    Token("heading", m.group(0), depth=len(m.group(1)), text=_atx_text(m.group(2)))
                )
                continue
            m = g.hr.match(src)
            if m:
                raw = _rtrim(m.group(0), "\n")
                src = src[len(raw) :]
                tokens.append(Token("hr", raw))
                continue
            token = self.blockquote(src)
            if token is not None:
                src = src[len(token.raw) :]
                tokens.append(token)
                continue
            token = self.list(src)
            if token is not None:
                src = src[len(token.raw) :]
                tokens.append(token)
                continue
            m = g.html.match(src)
            if m:
                src = src[len(m.group(0)) :]
                tokens.append(Token("html", m.group(0)))
                continue
            m = g.definition.match(src)
            if m:
                raw = m.group(0)
                src = src[len(raw) :]
                last = tokens[-1] if tokens else None
                if last is not None and last.type in ("paragraph", "text"):
                    joint = "" if v17 and last.raw.endswith("\n") else "\n"
                    last.raw += joint + raw
                else:
                    tag = re.sub(r"\s+", " ", m.group(1).lower())
                    if tag not in self._links:
                        self._links.add(tag)
                        if v17:  # marked 14 keeps definitions out of the token list
                            tokens.append(Token("def", raw))
                continue
            m = g.table.match(src)
            if m and re.search(r"[:|]", m.group(2)):
                aligns = re.sub(r"^\||\| *\Z", "", m.group(2)).split("|")
                if _split_cells_count(m.group(1)) == len(aligns):
                    src = src[len(m.group(0)) :]
                    tokens.append(Token("table", m.group(0)))
                    continue
            m = g.lheading.match(src)
            if m:
                src = src[len(m.group(0)) :]
                depth = 1 if m.group(2)[0] == "=" else 2
                tokens.append(Token("heading", m.group(0), depth=depth, text=m.group(1)))
                continue
            m = g.paragraph.match(src) if top else None
            if m:
                src = src[len(m.group(0)) :]
                tokens.append(Token("paragraph", m.group(0)))
                continue
            m = re.match(r"[^\n]+", src)
            if m:
                raw = m.group(0)
                src = src[len(raw) :]
                last = tokens[-1] if tokens else None
                if last is not None and last.type == "text":
                    last.raw += ("" if v17 and last.raw.endswith("\n") else "\n") + raw
                else:
                    tokens.append(Token("text", raw))
                continue
            raise ValueError(f"marked: infinite loop on byte {ord(src[0])}")
        return tokens

    def blockquote(self, src: str) -> Token | None:
        m = self.g.blockquote.match(src)
        if not m:
            return None
        lines = _rtrim(m.group(0), "\n").split("\n")
        raw = ""
        inner: list[Token] = []
        while lines:
            in_quote = False
            current: list[str] = []
            i = 0
            while i < len(lines):
                if re.match(r" {0,3}>", lines[i]):
                    current.append(lines[i])
                    in_quote = True
                elif not in_quote:
                    current.append(lines[i])
                else:
                    break
                i += 1
            lines = lines[i:]
            current_raw = "\n".join(current)
            current_text = re.sub(r"\n {0,3}((?:=+|-+) *)(?=\n|\Z)", "\n    \\1", current_raw)
            current_text = re.sub(r"^ {0,3}>[ \t]?", "", current_text, flags=re.M)
            raw = f"{raw}\n{current_raw}" if raw else current_raw
            self.block_tokens(current_text, inner)
            if not lines:
                break
            last = inner[-1] if inner else None
            if last is None or last.type not in ("code", "blockquote", "list"):
                continue
            if last.type == "code":
                break
            new_text = last.raw + "\n" + "\n".join(lines)
            replacement = (
                self.blockquote(new_text) if last.type == "blockquote" else self.list(new_text)
            )
            assert replacement is not None
            inner[-1] = replacement
            raw = raw[: len(raw) - len(last.raw)] + replacement.raw
            if last.type == "blockquote":
                break
            lines = new_text[len(replacement.raw) :].split("\n")
        return Token("blockquote", raw)

    def list(self, src: str) -> Token | None:
        g, v17 = self.g, self.version >= 17
        m = g.list.match(src)
        if not m:
            return None
        bull = js_trim(m.group(1))
        ordered = len(bull) > 1
        bull_re = ("[0-9]{1,9}\\" + bull[-1]) if ordered else ("\\" + bull)
        item_re = re.compile(r"( {0,3}" + bull_re + r")((?:[\t ][^\n]*)?(?:\n|\Z))")
        items: list[str] = []
        texts: list[str] = []
        while src:
            end_early = False
            cap = item_re.match(src)
            if not cap or g.hr.match(src):
                break
            raw = cap.group(0)
            src = src[len(raw) :]
            first = cap.group(2).split("\n", 1)[0]
            if v17:
                line = _expand_tabs(first, len(cap.group(1)))
            else:
                line = re.sub(r"^\t+", lambda t: " " * (3 * len(t.group(0))), first)
            next_line = src.split("\n", 1)[0]
            blank = not js_trim(line)
            contents = ""
            if blank:
                indent = len(cap.group(1)) + 1
            else:
                indent = _search_nonspace(line if v17 else cap.group(2))
                indent = 1 if indent > 4 else indent
                contents = line[indent:]
                indent += len(cap.group(1))
            if blank and re.fullmatch(r"[ \t]*", next_line):
                raw += next_line + "\n"
                src = src[len(next_line) + 1 :]
                end_early = True
            if not end_early:
                lim = min(3, indent - 1)
                lim_s = f"{{0,{lim}}}"
                next_bullet = re.compile(
                    r" " + lim_s + r"(?:[*+-]|[0-9]{1,9}[.)])((?:[ \t][^\n]*)?(?:\n|\Z))"
                )
                hr_re = re.compile(
                    r" " + lim_s + r"((?:- *){3,}|(?:_ *){3,}|(?:\* *){3,})(?:\n+|\Z)"
                )
                fences_begin = re.compile(r" " + lim_s + r"(?:```|~~~)")
                heading_begin = re.compile(r" " + lim_s + r"#")
                html_begin = re.compile(r" " + lim_s + r"<(?:[a-z].*>|!--)", re.IGNORECASE)
                quote_begin = re.compile(r" " + lim_s + r">")
                while src:
                    raw_line = src.split("\n", 1)[0]
                    nl = raw_line
                    no_tabs = nl.replace("\t", "    ")
                    if (
                        fences_begin.match(nl)
                        or heading_begin.match(nl)
                        or html_begin.match(nl)
                        or (v17 and quote_begin.match(nl))
                        or next_bullet.match(nl)
                        or hr_re.match(nl)
                    ):
                        break
                    if not (_search_nonspace(no_tabs) >= indent or not js_trim(nl)):
                        if (
                            blank
                            or _search_nonspace(line.replace("\t", "    ")) >= 4
                            or fences_begin.match(line)
                            or heading_begin.match(line)
                            or hr_re.match(line)
                        ):
                            break
                        contents += "\n" + nl
                    else:
                        contents += "\n" + no_tabs[indent:]
                    if v17:
                        blank = not js_trim(nl)
                    elif not blank and not js_trim(nl):
                        blank = True
                    raw += raw_line + "\n"
                    src = src[len(raw_line) + 1 :]
                    line = no_tabs[indent:]
            if not v17:  # marked 14 drops a task box before lexing the item
                contents = re.sub(r"^\[[ xX]\] +", "", contents)
            items.append(raw)
            texts.append(contents)
        if not items:
            return None
        items[-1] = js_trim_end(items[-1])
        texts[-1] = js_trim_end(texts[-1])
        for text in texts:  # children only matter for the link definitions they register
            self.block_tokens(text, [], top=False)
        return Token("list", "".join(items), items=items)


def _atx_text(rest: str) -> str:
    """marked's ATX heading text: trimmed, closing ``#`` run removed after a space."""
    text = js_trim(rest)
    if text.endswith("#"):
        trimmed = _rtrim(text, "#")
        if not trimmed or trimmed.endswith(" "):
            text = js_trim(trimmed)
    return text


def lex(src: str, version: int) -> list[Token]:
    """Top-level tokens of ``src`` as marked ``version`` (14 or 17) lexes them."""
    return Lexer(version).lex(src)
