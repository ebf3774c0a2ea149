"""The changed span of an edit, and the short diff a receipt shows of it."""

from dataclasses import dataclass

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


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The span widened to whole lines (without the last line's break)."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", max(start, end - 1))
    return first, len(text) if last < 0 else last


def diff_lines(old: str, new: str, span: Span) -> list[str]:
    """`-` lines removed, `+` lines added, ` ` one line of context either side, headed by
    the line number; at most DIFF_LINES lines, the middle elided with a count."""
    old_first, old_last = _line_bounds(old, span.start, span.old_end)
    new_first, new_last = _line_bounds(new, span.start, span.new_end)
    # A line changed part way shows whole, before and after; an insertion or removal of
    # whole lines shows only those lines.
    removed = (
        old[old_first:old_last].splitlines()
        if span.old_end > span.start or old_first < span.start
        else []
    )
    added = (
        new[new_first:new_last].splitlines()
        if span.new_end > span.start or new_first < span.start
        else []
    )
    if not removed and not added:
        return []
    line_number = old.count("\n", 0, old_first) + 1
    before = old.rfind("\n", 0, max(old_first - 1, 0))
    context_before = old[before + 1 : old_first - 1] if old_first > 0 else None
    lines = [f"@@ line {line_number} @@"]
    if context_before is not None:
        lines.append(_shortened(" " + context_before.rstrip("\r")))
    body = [f"-{line.rstrip(chr(13))}" for line in removed] + [
        f"+{line.rstrip(chr(13))}" for line in added
    ]
    if len(body) > DIFF_LINES:
        keep = DIFF_LINES // 2
        body = [*body[:keep], f"… {len(body) - 2 * keep} more changed lines", *body[-keep:]]
    lines += [_shortened(line) for line in body]
    after_end = new.find("\n", new_last + 1)
    context_after = new[new_last + 1 : len(new) if after_end < 0 else after_end]
    if new_last < len(new) and context_after.strip():
        lines.append(_shortened(" " + context_after.rstrip("\r")))
    return lines
