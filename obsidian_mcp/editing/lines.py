"""A note as lines that keep their own line endings, so an edit touches only its span.

Each line keeps the break it had (`\\n`, `\\r\\n`, or none for a last line without one);
lines an edit adds get the note's newline. Joining the lines gives the note back byte for
byte, which is what lets the corpus check that nothing outside the span changed. What a
line *is* (a list item, a heading...) is never decided here: that is the parse's
(`targets.NoteStructure`).
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

# markdown-it counts "\r\n", a lone "\r" and "\n" as one break each; so do we, so that line
# numbers here are the parser's.
_LINE_RE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_BLANK_RE = re.compile(r"[ \t]*")


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


def content_lines(content: str) -> list[str]:
    """Content as the lines to add: leading blank lines and trailing breaks and blank lines
    dropped (docs/editing.md, "Content")."""
    texts = [line.text for line in split_lines(content)]
    while texts and is_blank(texts[0]):
        texts.pop(0)
    while texts and is_blank(texts[-1]):
        texts.pop()
    return texts


def splice(lines: list[Line], start: int, end: int, texts: Sequence[str], newline: str) -> None:
    """Replace lines [start, end) with `texts`, each ending with the note's newline. The
    note keeps how it ended: a note whose last line had no break still has none (the line
    that was last gets one when lines go after it, so no two lines are ever joined)."""
    ended_without_break = bool(lines) and lines[-1].ending == ""
    lines[start:end] = [Line(text, newline) for text in texts]
    for index, line in enumerate(lines[:-1]):
        if line.ending == "":
            lines[index] = Line(line.text, newline)
    if lines:
        last = lines[-1]
        lines[-1] = Line(last.text, "" if ended_without_break else last.ending or newline)
