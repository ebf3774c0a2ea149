"""The changed span of an edit, and the short diff a receipt shows of it."""

from dataclasses import dataclass

from obsidian_mcp.editing.lines import split_lines

# A receipt's diff shows at most this many lines (about what a handover section update
# takes); longer changes show their head and tail and say how many lines were left out.
DIFF_LINES = 20
# And each line at most this long: a receipt is read in full by the model, and a long
# paragraph changed is already known to the agent that wrote it.
DIFF_LINE_CHARS = 300
_CONTEXT_CHARS = 40


@dataclass(frozen=True, slots=True)
class Span:
    """Where two texts differ: `old[start:old_end]` became `new[start:new_end]`."""

    start: int
    old_end: int
    new_end: int


def _common_length(a: str, b: str) -> int:
    """How many characters `a` and `b` share at their start, found by halving (slices are
    compared in C: a 1 MB note costs microseconds, not a Python loop over every
    character)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def changed_span(old: str, new: str) -> Span:
    start = _common_length(old, new)
    tail = _common_length(old[start:][::-1], new[start:][::-1])
    return Span(start, len(old) - tail, len(new) - tail)


def context_around(text: str, start: int, end: int) -> tuple[str, str]:
    """The text just before and just after a span, to find it again after other edits."""
    return text[max(0, start - _CONTEXT_CHARS) : start], text[end : end + _CONTEXT_CHARS]


def _shortened(line: str) -> str:
    if len(line) <= DIFF_LINE_CHARS:
        return line
    return f"{line[:DIFF_LINE_CHARS]}… ({len(line) - DIFF_LINE_CHARS:,} more characters)"


def _line_start(text: str, at: int) -> int:
    """Where the line holding offset `at` starts."""
    while at > 0 and text[at - 1] not in "\r\n":
        at -= 1
    return at


def _previous_line_start(text: str, start: int) -> int:
    """Where the line before the one starting at `start` starts (0 for the first)."""
    if start == 0:
        return 0
    at = start - 1
    if text[at] == "\n" and at > 0 and text[at - 1] == "\r":
        at -= 1
    return _line_start(text, at)


def _breaks(text: str, end: int) -> int:
    """How many line breaks `text[:end]` holds (a CRLF is one)."""
    return text.count("\n", 0, end) + text.count("\r", 0, end) - text.count("\r\n", 0, end)


def _after_lines(text: str, at: int, count: int) -> int:
    """Where the `count`-th line after the one holding `at` ends (its break included)."""
    for _ in range(count):
        found = [i for i in (text.find("\n", at), text.find("\r", at)) if i >= 0]
        if not found:
            return len(text)
        at = min(found) + 1
        if text[at - 1] == "\r" and text.startswith("\n", at):
            at += 1
    return at


def diff_lines(old: str, new: str) -> list[str]:
    """`-` lines removed, `+` lines added (blank ones too), ` ` one line of context either
    side, headed by the first changed line's number; at most DIFF_LINES lines, the middle
    elided with a count. Lines are compared by their text: a line that only gained the
    line break it lacked at the end of the note is not shown as changed. Only the lines
    around the changed span are split (a 1 MB note's lines would take longer than the
    edit)."""
    span = changed_span(old, new)
    head = _previous_line_start(old, _line_start(old, span.start))
    keep = len(old) - _after_lines(old, span.old_end, 2)
    return _diff_of_lines(
        old[head : len(old) - keep], new[head : len(new) - keep], _breaks(old, head)
    )


def _diff_of_lines(old: str, new: str, first_line: int) -> list[str]:
    before = [line.text for line in split_lines(old)]
    after = [line.text for line in split_lines(new)]
    same_head = 0
    while same_head < min(len(before), len(after)) and before[same_head] == after[same_head]:
        same_head += 1
    same_tail = 0
    while (
        same_tail < min(len(before), len(after)) - same_head
        and before[-1 - same_tail] == after[-1 - same_tail]
    ):
        same_tail += 1
    removed = before[same_head : len(before) - same_tail]
    added = after[same_head : len(after) - same_tail]
    if not removed and not added:
        return []
    lines = [f"@@ line {first_line + same_head + 1} @@"]
    if same_head > 0:
        lines.append(_shortened(" " + before[same_head - 1]))
    body = [f"-{line}" for line in removed] + [f"+{line}" for line in added]
    if len(body) > DIFF_LINES:
        keep = DIFF_LINES // 2
        body = [*body[:keep], f"… {len(body) - 2 * keep} more changed lines", *body[-keep:]]
    lines += [_shortened(line) for line in body]
    if same_tail > 0 and after[len(after) - same_tail].strip():
        lines.append(_shortened(" " + after[len(after) - same_tail]))
    return lines
