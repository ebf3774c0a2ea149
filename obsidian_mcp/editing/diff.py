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


def changed_span(old: str, new: str) -> Span:
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    tail = 0
    while tail < limit - start and old[len(old) - 1 - tail] == new[len(new) - 1 - tail]:
        tail += 1
    return Span(start, len(old) - tail, len(new) - tail)


def context_around(text: str, start: int, end: int) -> tuple[str, str]:
    """The text just before and just after a span, to find it again after other edits."""
    return text[max(0, start - _CONTEXT_CHARS) : start], text[end : end + _CONTEXT_CHARS]


def _shortened(line: str) -> str:
    if len(line) <= DIFF_LINE_CHARS:
        return line
    return f"{line[:DIFF_LINE_CHARS]}… ({len(line) - DIFF_LINE_CHARS:,} more characters)"


def diff_lines(old: str, new: str) -> list[str]:
    """`-` lines removed, `+` lines added (blank ones too), ` ` one line of context either
    side, headed by the first changed line's number; at most DIFF_LINES lines, the middle
    elided with a count. Lines are compared by their text: a line that only gained the
    line break it lacked at the end of the note is not shown as changed."""
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
    lines = [f"@@ line {same_head + 1} @@"]
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
