# pyright: strict
"""Excerpts of text around matches, cut where a reader would cut.

Budgets (``max_chars``) count source characters only; the ``…`` marking a cut is never
counted, so a result may exceed its budget by one ellipsis at each cut end. Every
function here raises ``ValueError`` for a budget below 1.

Words are runs of non-whitespace characters: a cut never splits one unless a single word
is longer than the whole budget.
"""

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
# Sentences longer than this are split into clauses at semicolons.
LONG_SENTENCE_CHARS = 320
_SEMICOLON_RE = re.compile(r";\s")

# A sentence ends at a run of terminators, optionally followed by closing quotes, brackets
# or emphasis markers, when whitespace or the end of the text comes next.
_TERMINATOR_RE = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019\u00bb)\]*_]*(?=\s|$)")
_NEXT_CHAR_RE = re.compile(r"\s*(\S)")
_WORD_BEFORE_RE = re.compile(r"([\w.]+)$")
# A period after these does not end a sentence; "etc." is absent because it so often does.
# Dotted letters (e.g., i.e., U.S.) and initials (J. R. R.) are recognised by shape.
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "cf", "al"})
# Lines that start a new markdown block even without a blank line before them.
_BLOCK_START_RE = re.compile(
    r"[ \t]*(?:[-*+][ \t]|\d{1,9}[.)][ \t]|#{1,6}(?:[ \t]|$)|>|\||```|~~~)"
)
# Lines that are a whole block by themselves, so the next line starts a new sentence.
_ONE_LINE_BLOCK_RE = re.compile(r"[ \t]*(?:#{1,6}(?:[ \t]|$)|\||```|~~~)")
_NON_SPACE_RE = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class Snippet:
    text: str
    start: int
    end: int
    cut_before: bool
    cut_after: bool


def _check_budget(max_chars: int) -> None:
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")


def _has_text(text: str, start: int, end: int) -> bool:
    return _NON_SPACE_RE.search(text, start, end) is not None


def _inside_word(text: str, pos: int) -> bool:
    """Whether `pos` falls between two non-whitespace characters."""
    return 0 < pos < len(text) and not text[pos - 1].isspace() and not text[pos].isspace()


def _in_oversized_word(text: str, pos: int, max_chars: int) -> bool:
    """Whether `pos` is inside a word too long for the budget, which may be cut."""
    return _word_end(text, pos) - _word_start(text, pos) > max_chars


def _word_start(text: str, pos: int) -> int:
    while pos > 0 and not text[pos - 1].isspace():
        pos -= 1
    return pos


def _word_end(text: str, pos: int) -> int:
    while pos < len(text) and not text[pos].isspace():
        pos += 1
    return pos


def _trim(
    text: str, start: int, end: int, keep_start: int = 0, keep_end: int = 0
) -> tuple[int, int]:
    """Shrink ``[start, end)`` past edge whitespace without uncovering ``[keep_start,
    keep_end)``; an empty keep span (the default) lets it shrink freely."""
    if keep_end <= keep_start:
        keep_start, keep_end = end, start
    while start < keep_start and text[start].isspace():
        start += 1
    while end > max(keep_end, start) and text[end - 1].isspace():
        end -= 1
    return start, end


def _word_cut_end(text: str, start: int, limit: int) -> int:
    """The end of the longest run of whole words in ``text[start:limit]``."""
    end = _word_start(text, limit) if _inside_word(text, limit) else limit
    if end <= start:
        end = limit  # a single word longer than the budget: cutting it is the only option
    return _trim(text, start, end)[1]


def truncate_at_word(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its longest whole-word prefix within
    `max_chars` followed by ``…``."""
    _check_budget(max_chars)
    if len(text) <= max_chars:
        return text
    return text[: _word_cut_end(text, 0, max_chars)] + ELLIPSIS


def _is_abbreviation(text: str, terminator_start: int) -> bool:
    word = _WORD_BEFORE_RE.search(text, max(0, terminator_start - 8), terminator_start)
    if word is None:
        return False
    token = word.group(1)
    letters = token.split(".")
    is_dotted_letters = len(letters) > 1 and all(len(letter) == 1 for letter in letters)
    is_initial = len(token) == 1 and token.isupper()
    return token.lower() in _ABBREVIATIONS or is_dotted_letters or is_initial


def _terminator_cuts(text: str) -> list[int]:
    cuts: list[int] = []
    for match in _TERMINATOR_RE.finditer(text):
        following = _NEXT_CHAR_RE.match(text, match.end())
        # A lowercase continuation means the terminator was inside the sentence: an
        # ellipsis pause, or dialogue such as '"Go!" she said.'
        if following is not None and following.group(1).islower():
            continue
        if match.group(0) == "." and _is_abbreviation(text, match.start()):
            continue
        cuts.append(match.end())
    return cuts


def _line_cuts(text: str) -> list[int]:
    cuts: list[int] = []
    previous_line = ""
    line_start = 0
    for line in text.split("\n"):
        if line_start and (
            not line.strip()
            or not previous_line.strip()
            or _BLOCK_START_RE.match(line)
            or _ONE_LINE_BLOCK_RE.match(previous_line)
        ):
            cuts.append(line_start - 1)
        previous_line = line
        line_start += len(line) + 1
    return cuts


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The sentences of `text` as ``(start, end)`` spans, in order, trimmed of whitespace.

    A sentence ends at ``.``, ``!``, ``?`` or ``…`` (plus closing quotes and brackets)
    unless a lowercase word follows (ellipsis pauses, ``"Go!" she said``) or the period
    ends a common abbreviation or an initial. Blank lines, headings, table rows and the
    start of each list item, quote line or code fence always end a sentence. Every
    non-whitespace character of `text` lies in exactly one span.
    """
    spans: list[tuple[int, int]] = []
    previous_cut = 0
    for cut in [*sorted({*_terminator_cuts(text), *_line_cuts(text)}), len(text)]:
        start, end = _trim(text, previous_cut, cut)
        if start < end:
            spans.extend(_clauses(text, start, end))
        previous_cut = cut
    return spans


def _clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """A sentence longer than LONG_SENTENCE_CHARS as its clauses, split after each
    semicolon: such a sentence is a chain of statements, and no passage could otherwise
    show one of them without cutting mid-sentence."""
    if end - start <= LONG_SENTENCE_CHARS:
        return [(start, end)]
    clauses: list[tuple[int, int]] = []
    clause_start = start
    for match in _SEMICOLON_RE.finditer(text, start, end):
        clause_end = _trim(text, clause_start, match.end())
        if clause_end[0] < clause_end[1]:
            clauses.append(clause_end)
        clause_start = match.end()
    last = _trim(text, clause_start, end)
    if last[0] < last[1]:
        clauses.append(last)
    return clauses


def cut_to_sentences(text: str, max_chars: int) -> tuple[str, bool]:
    """The longest run of whole sentences from the start of `text` that fits `max_chars`,
    and whether anything was left out.

    Leading and trailing whitespace is dropped. When even the first sentence does not
    fit, it is cut at a word boundary and ``…`` appended, so the result is at most
    ``max_chars + 1`` characters long; otherwise it is at most ``max_chars``.
    """
    _check_budget(max_chars)
    sentences = sentence_spans(text)
    if not sentences:
        return "", False
    first_start = sentences[0][0]
    fitting_end: int | None = None
    for _, end in sentences:
        if end - first_start > max_chars:
            break
        fitting_end = end
    if fitting_end is None:
        cut_end = _word_cut_end(text, first_start, first_start + max_chars)
        return text[first_start:cut_end] + ELLIPSIS, True
    return text[first_start:fitting_end], fitting_end < sentences[-1][1]


def merge_spans(spans: Sequence[tuple[int, int]], gap: int = 0) -> list[tuple[int, int]]:
    """The union of `spans` as sorted, disjoint spans; spans closer than or exactly `gap`
    characters apart are joined too (so with ``gap=0`` touching spans merge).

    Empty spans cover nothing and are dropped; a reversed span is a ``ValueError``.
    """
    if gap < 0:
        raise ValueError(f"gap must not be negative, got {gap}")
    for start, end in spans:
        if end < start:
            raise ValueError(f"span ({start}, {end}) ends before it starts")
    merged: list[tuple[int, int]] = []
    for start, end in sorted(span for span in spans if span[1] > span[0]):
        if merged and start <= merged[-1][1] + gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _make_snippet(text: str, start: int, end: int) -> Snippet:
    # Only omitted words count as a cut: whitespace-only margins need no ellipsis.
    cut_before = _has_text(text, 0, start)
    cut_after = _has_text(text, end, len(text))
    excerpt = (ELLIPSIS if cut_before else "") + text[start:end] + (ELLIPSIS if cut_after else "")
    return Snippet(excerpt, start, end, cut_before, cut_after)


def _clamp(text: str, start: int, end: int) -> tuple[int, int]:
    start = min(max(start, 0), len(text))
    return start, min(max(end, start), len(text))


def _truncated_match_window(text: str, start: int, end: int, max_chars: int) -> tuple[int, int]:
    start, end = _trim(text, start, end)
    if end - start <= max_chars:
        return start, end
    return start, _word_cut_end(text, start, start + max_chars)


def _window(
    text: str,
    sentences: Sequence[tuple[int, int]],
    match_start: int,
    match_end: int,
    max_chars: int,
) -> tuple[int, int]:
    """The span of the snippet for one match; see `snippet_around` for the guarantees."""
    if match_end - match_start > max_chars:
        return _truncated_match_window(text, match_start, match_end, max_chars)
    core_start = _word_start(text, match_start) if _inside_word(text, match_start) else match_start
    core_end = _word_end(text, match_end) if _inside_word(text, match_end) else match_end
    if core_end - core_start > max_chars:
        # The word holding the match is longer than the budget: cut inside it.
        core_start, core_end = match_start, match_end

    starts = [span[0] for span in sentences]
    ends = [span[1] for span in sentences]
    # Sentences first..last overlap the core; when it sits in the whitespace between two
    # sentences, first == last + 1 and those two are its neighbours.
    first = bisect_right(ends, core_start)
    last = bisect_left(starts, core_end) - 1
    if first <= last:
        sentence_start = min(core_start, starts[first])
        sentence_end = max(core_end, ends[last])
    else:
        sentence_start, sentence_end = core_start, core_end

    if sentence_end - sentence_start <= max_chars:
        start, end = sentence_start, sentence_end
        before, after = first - 1, last + 1
        grew = True
        while grew:
            grew = False
            if after < len(sentences) and sentences[after][1] - start <= max_chars:
                end = sentences[after][1]
                after += 1
                grew = True
            if before >= 0 and end - sentences[before][0] <= max_chars:
                start = sentences[before][0]
                before -= 1
                grew = True
    else:
        spare = max_chars - (core_end - core_start)
        left = spare // 2
        right = spare - left
        # Prefer starting (or ending) at the sentence's own boundary when it is in reach.
        if core_start - sentence_start <= left:
            start, end = sentence_start, sentence_start + max_chars
        elif sentence_end - core_end <= right:
            start, end = sentence_end - max_chars, sentence_end
        else:
            start, end = core_start - left, core_end + right
        if start < 0:
            start, end = 0, end - start
        if end > len(text):
            start, end = max(0, start - (end - len(text))), len(text)
        if _inside_word(text, start) and not _in_oversized_word(text, start, max_chars):
            start = min(_word_end(text, start), core_start)
        if _inside_word(text, end) and not _in_oversized_word(text, end, max_chars):
            end = max(_word_start(text, end), core_end)
    return _trim(text, start, end, match_start, match_end)


def snippet_around(text: str, match_start: int, match_end: int, max_chars: int) -> Snippet:
    """An excerpt of `text` around ``text[match_start:match_end]``.

    The excerpt is the sentence(s) holding the match, grown by whole neighbouring
    sentences while they fit; if the sentence is too long, a window of whole words
    around the match, starting or ending at the sentence boundary when that is in reach.

    Guarantees, with ``match_start``/``match_end`` first clamped into the text:

    * ``snippet.end - snippet.start <= max_chars`` and so
      ``len(snippet.text) <= max_chars + 2`` (the two ellipses);
    * ``snippet.text`` is ``text[start:end]`` with ``…`` before it exactly when
      ``cut_before`` (non-whitespace text precedes it) and after it exactly when
      ``cut_after``;
    * a non-empty match at most `max_chars` long lies wholly inside the span; if it is
      longer, the span is its longest whole-word prefix within `max_chars` (leading
      whitespace skipped), cut mid-word only when its first word alone is too long;
    * the span neither starts nor ends with whitespace unless the match itself does
      there; it splits a word only where the match does or a word exceeds the budget.

    An empty match is a position: the snippet is the text around it, trimmed of edge
    whitespace even if that leaves the position just outside.
    """
    _check_budget(max_chars)
    match_start, match_end = _clamp(text, match_start, match_end)
    start, end = _window(text, sentence_spans(text), match_start, match_end, max_chars)
    return _make_snippet(text, start, end)


def _group_matches(matches: Sequence[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Spans each covering consecutive matches (sorted by start) that fit in one budget."""
    groups: list[tuple[int, int]] = []
    for start, end in matches:
        if groups and max(groups[-1][1], end) - groups[-1][0] <= max_chars:
            groups[-1] = (groups[-1][0], max(groups[-1][1], end))
        else:
            groups.append((start, end))
    return groups


def _split_point(text: str, low: int, high: int) -> int:
    """A whitespace position in ``[low, high]`` nearest their middle, else the middle."""
    middle = (low + high) // 2
    for distance in range(high - low + 1):
        for pos in (middle - distance, middle + distance):
            if low <= pos <= high and pos < len(text) and text[pos].isspace():
                return pos
    return middle


def snippets_for_matches(
    text: str, matches: Sequence[tuple[int, int]], max_chars: int
) -> list[Snippet]:
    """One snippet per group of nearby matches, in text order.

    Matches whose combined span fits in `max_chars` share a snippet (built as by
    `snippet_around` for that span); otherwise they get separate snippets, and where
    two snippets' context would overlap they are cut apart between their matches, so
    each snippet holds its own matches, no text is shown twice, and every span is at
    most `max_chars`. Only matches that themselves overlap across two groups (possible
    when a match is longer than the budget) can leave two snippets overlapping.
    """
    _check_budget(max_chars)
    ordered = sorted({_clamp(text, start, end) for start, end in matches})
    if not ordered:
        return []
    sentences = sentence_spans(text)
    groups = _group_matches(ordered, max_chars)
    windows = [_window(text, sentences, start, end, max_chars) for start, end in groups]
    for index in range(len(windows) - 1):
        (start, end), (next_start, next_end) = windows[index], windows[index + 1]
        keep_until = min(groups[index][1], end)
        keep_from = groups[index + 1][0]
        if end > next_start and keep_until <= keep_from:
            cut = _split_point(text, keep_until, keep_from)
            windows[index] = _trim(text, start, min(end, cut), groups[index][0], keep_until)
            windows[index + 1] = _trim(
                text, max(next_start, cut), next_end, keep_from, groups[index + 1][1]
            )
    return [_make_snippet(text, start, end) for start, end in windows]
