# pyright: strict
"""Stage 4 of `vault_semantic_query`, passage cutting: what of each ranked passage is shown.

A passage is shown from its sentence richest in the query's words, starting at that
sentence's paragraph, through whole sentences of its section, up to FOCUS_CHARS; a short
block that a semantic source judged relevant as a whole is shown whole. Off (the
`cutting` stage), a passage is shown as indexed.
"""

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from obsidian_mcp.retrieval.corpus import Chunk, Corpus, NoteRecord
from obsidian_mcp.retrieval.keyword import terms, words
from obsidian_mcp.text.markdown import plain_text
from obsidian_mcp.text.snippets import sentence_spans

# Most characters of one passage as shown: a paragraph or two. On the dev questions
# (python -m bench.retrieval.quality, first response / median tokens, folder with the local
# index): 440 gave 71% / 678, 560 74% / 724, 700 76% / 750, 840 73% / 780 (fewer fit).
FOCUS_CHARS = 700
_MIN_PROSE_WORDS = 4
_LINE_BREAK_RE = re.compile(r"\n")
_TAG_RE = re.compile(r"(?<!\w)#[^\s#]+")
_LINK_RE = re.compile(r"!?\[\[[^\]]*\]\]")


def display_section(section: tuple[str, ...], title: str) -> tuple[str, ...]:
    """The heading path without a leading top heading that only repeats the note's title."""
    return section[1:] if section and section[0] == title else section


@dataclass(frozen=True, slots=True)
class PassageHit:
    """Verbatim text of a note, `content[start:end]`, under the heading path `section`."""

    path: str
    section: tuple[str, ...]
    start: int
    end: int
    text: str
    # Relative to the best hit of the response (1.0), for ranking at a glance.
    score: float
    # Whether the section has text before / after the passage (shown as "…").
    cut_before: bool
    cut_after: bool


def line_of(content: str, offset: int) -> int:
    """1-indexed line number of a character offset."""
    return content.count("\n", 0, offset) + 1


def lines_to_span(content: str, lines: tuple[int, int]) -> tuple[int, int]:
    """Character span of a 1-indexed inclusive line range."""
    starts = [0, *(m.end() for m in _LINE_BREAK_RE.finditer(content))]
    first = min(max(lines[0], 1), len(starts)) - 1
    last = max(lines[1], lines[0])
    return starts[first], starts[last] if last < len(starts) else len(content)


def block_text_span(content: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of a block's text: its heading line and surrounding blank space left out
    (the heading is shown as the passage's link). None when the block has no text."""
    if content.startswith("#", start):
        line_end = content.find("\n", start)
        start = end if line_end < 0 else line_end + 1
    text = content[start:end]
    stripped = text.strip()
    if not stripped:
        return None
    first = start + text.index(stripped[0])
    return first, first + len(stripped)


def passage_hit(record: NoteRecord, start: int, end: int, score: float) -> PassageHit:
    """`content[start:end]` as a hit, with its section and whether the section goes on."""
    sections = record.parsed.sections
    content = record.parsed.content
    index = bisect_right([s.start for s in sections], start) - 1
    if index < 0:
        return PassageHit(record.path, (), start, end, content[start:end], score, False, False)
    section = sections[index]
    return PassageHit(
        path=record.path,
        section=display_section(section.path, record.parsed.title),
        start=start,
        end=end,
        text=content[start:end],
        score=score,
        cut_before=bool(content[section.body_start : start].strip()),
        cut_after=bool(content[end : section.end].strip()),
    )


def focus_window(
    record: NoteRecord, chunk: Chunk, weighted: Sequence[tuple[str, float]]
) -> tuple[int, int]:
    """The span to show for a passage: from its sentence richest in query terms onward
    through whole sentences of its section, up to FOCUS_CHARS. Notes tell things in
    order, so what answers a question usually follows the words it shares with the
    question: the line after "Rook gave her the compass" is what she said."""
    content = record.parsed.content
    sections = record.parsed.sections
    index = bisect_right([s.start for s in sections], chunk.start) - 1
    section_end = sections[index].end if index >= 0 else len(content)
    limit = min(section_end, chunk.end + FOCUS_CHARS)
    sentences = [
        (chunk.start + start, chunk.start + end)
        for start, end in sentence_spans(content[chunk.start : limit])
    ]
    if not sentences:
        return chunk.start, chunk.end
    weights = dict(weighted)
    in_chunk = [i for i, (start, _) in enumerate(sentences) if start < chunk.end]
    # A passage starts on prose: a line of tags or a lone link names the topic without
    # saying anything about it.
    prose = [i for i in in_chunk if is_prose(content[slice(*sentences[i])])]
    best = max(
        prose or in_chunk,
        key=lambda i: (
            sum(weights.get(t, 0.0) for t in set(terms(plain_text(content[slice(*sentences[i])])))),
            -i,
        ),
    )
    # Start at the paragraph the best sentence belongs to: a line of dialogue often ends on
    # the word the question shares ("That's a promise") after the words that answer it.
    first = best
    while (
        first > 0
        and "\n" not in content[sentences[first - 1][1] : sentences[first][0]]
        and sentences[best][1] - sentences[first - 1][0] <= FOCUS_CHARS
    ):
        first -= 1
    last = best
    while last + 1 < len(sentences) and sentences[last + 1][1] - sentences[first][0] <= FOCUS_CHARS:
        last += 1
    return sentences[first][0], sentences[last][1]


def sentence_terms(content: str, span: tuple[int, int]) -> set[str]:
    return set(terms(plain_text(content[span[0] : span[1]])))


def is_prose(sentence: str) -> bool:
    """Whether a sentence says something of its own, beyond links and tags ("See [[A]]
    and [[B]].", "#session #secret")."""
    bare = _TAG_RE.sub(" ", _LINK_RE.sub(" ", sentence))
    return len(words(plain_text(bare))) >= _MIN_PROSE_WORDS


def cut_passages(
    corpus: Corpus,
    ranked: Sequence[tuple[int, float]],
    whole_blocks: dict[int, tuple[int, int]],
    weighted: Sequence[tuple[str, float]],
    *,
    top: float,
    cutting: bool,
) -> list[PassageHit]:
    """The ranked passages as shown, best first: each cut to its window (or its whole
    block), scored relative to `top`, and none overlapping a better one of its note."""
    hits: list[PassageHit] = []
    spans: dict[str, list[tuple[int, int]]] = {}
    for chunk_id, score in ranked:
        chunk = corpus.chunk(chunk_id)
        record = corpus.record(chunk.path)
        if record is None:
            continue
        start, end = whole_blocks.get(chunk_id) or (
            focus_window(record, chunk, weighted) if cutting else (chunk.start, chunk.end)
        )
        taken = spans.setdefault(chunk.path, [])
        if any(start < other_end and end > other_start for other_start, other_end in taken):
            continue  # overlaps a better passage already shown
        taken.append((start, end))
        hits.append(passage_hit(record, start, end, round(score / top, 2)))
    return hits
