"""A note as lines that keep their own line endings, so an edit touches only its span.

Each line keeps the break it had (`\\n`, `\\r\\n`, or none for a last line without one);
lines an edit adds get the note's newline. Joining the lines gives the note back byte for
byte, which is what lets the corpus check that nothing outside the span changed.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

# markdown-it counts "\r\n", a lone "\r" and "\n" as one break each; so do we, so that line
# numbers here are the parser's.
_LINE_RE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_BLANK_RE = re.compile(r"[ \t]*")
_LIST_ITEM_RE = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]")
_TABLE_ROW_RE = re.compile(r"[ \t]*\|")


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    ending: str  # "\n", "\r\n", "\r" or "" (a last line without a break)


def split_lines(text: str) -> list[Line]:
    lines: list[Line] = []
    for match in _LINE_RE.finditer(text):
        if match.start() == len(text) and not match.group(0):
            break
        lines.append(Line(match.group(1), match.group(2)))
    return lines


def join_lines(lines: Sequence[Line]) -> str:
    return "".join(line.text + line.ending for line in lines)


def newline_of(text: str) -> str:
    """The note's newline: its first line break, `\\n` when it has none."""
    match = re.search(r"\r\n|\r|\n", text)
    return match.group(0) if match else "\n"


def is_blank(text: str) -> bool:
    return _BLANK_RE.fullmatch(text) is not None


def is_list_item(text: str) -> bool:
    return _LIST_ITEM_RE.match(text) is not None


def is_table_row(text: str) -> bool:
    return _TABLE_ROW_RE.match(text) is not None


def continues(before: str, after: str) -> bool:
    """True when `after` goes right below `before` with no blank line: a list or a table
    carries on."""
    return (is_list_item(before) and is_list_item(after)) or (
        is_table_row(before) and is_table_row(after)
    )


def content_lines(content: str) -> list[str]:
    """Content as the lines to add: leading blank lines and trailing breaks and blank lines
    dropped (docs/editing.md, "Content")."""
    texts = [line.text for line in split_lines(content)]
    while texts and is_blank(texts[0]):
        texts.pop(0)
    while texts and is_blank(texts[-1]):
        texts.pop()
    return texts


def insert(lines: list[Line], at: int, texts: Sequence[str], newline: str) -> None:
    """Insert lines with the note's newline at index `at`. At the very end of a note whose
    last line has no break, the old last line gets one and the new last line goes without,
    so the note still ends as it did."""
    if not texts:
        return
    added = [Line(text, newline) for text in texts]
    if at == len(lines) and lines and lines[-1].ending == "":
        lines[-1] = Line(lines[-1].text, newline)
        added[-1] = Line(added[-1].text, "")
    lines[at:at] = added


def replace(lines: list[Line], start: int, end: int, texts: Sequence[str], newline: str) -> None:
    """Replace lines [start, end) with `texts`; a replaced last line without a break leaves
    the new last line without one."""
    at_end_without_break = end == len(lines) and end > start and lines[-1].ending == ""
    added = [Line(text, newline) for text in texts]
    if at_end_without_break:
        if added:
            added[-1] = Line(added[-1].text, "")
        elif start > 0:
            # Removing the note's last lines: the line above becomes the last, without a break.
            lines[start - 1] = Line(lines[start - 1].text, "")
    lines[start:end] = added
