# pyright: strict
"""Results as passages grouped by file, and greedy packing into a token budget."""

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from obsidian_mcp.retrieval.cutting import PassageHit
from obsidian_mcp.retrieval.strength import MatchStrength
from obsidian_mcp.text.markdown import ParsedNote
from obsidian_mcp.text.snippets import sentence_spans
from obsidian_mcp.text.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class FileContext:
    """The quick-context line heading a file's group."""

    path: str
    title: str
    gist: str
    tags: tuple[str, ...]
    tokens: int
    # The note's frontmatter dates not already in its path, as (key, ISO date).
    dates: tuple[tuple[str, str], ...] = ()
    # What replaced the note ("superseded by [[ADR-0010 …]]"), when it says it was.
    replaced: str = ""


@dataclass(frozen=True, slots=True)
class FileGroup:
    context: FileContext
    passages: tuple[PassageHit, ...]
    # Exact-search matches in the file (vault_smart_search); None for ranked search.
    matches: int | None = None

    @property
    def score(self) -> float:
        """The group's best passage's score, what the groups are ordered by."""
        return max((hit.score for hit in self.passages), default=0.0)


@dataclass(frozen=True, slots=True)
class Packing:
    chosen: tuple[PassageHit, ...]
    # Good enough to show but over the token budget, best first.
    over_budget: tuple[PassageHit, ...]
    tokens: int


# A passage shortened below this many characters says too little to be worth its header.
_MIN_SHORTENED_CHARS = 120


def shorten(hit: PassageHit, max_chars: int) -> PassageHit | None:
    """The passage cut to its leading whole sentences within `max_chars`; None if not even
    a useful first sentence fits. Never cuts inside a sentence."""
    kept_end = 0
    for _, end in sentence_spans(hit.text):
        if end > max_chars:
            break
        kept_end = end
    if kept_end < min(_MIN_SHORTENED_CHARS, len(hit.text)):
        return None
    if kept_end >= len(hit.text.rstrip()):
        return hit
    return replace(hit, text=hit.text[:kept_end], end=hit.start + kept_end, cut_after=True)


def pack(
    ranked: Sequence[PassageHit],
    *,
    limit: int,
    budget: int,
    passage_cost: Callable[[PassageHit], int],
    group_cost: Callable[[str], int],
) -> Packing:
    """Take passages best first while `limit` and the token `budget` allow.

    A passage that does not fit whole is shortened to the sentences that do; one that
    cannot be shortened usefully is passed over (and reported) so that a smaller one
    further down may still fit. A file's group header is paid for with its first passage.
    """
    chosen: list[PassageHit] = []
    over: list[PassageHit] = []
    paths: set[str] = set()
    spent = 0
    for hit in ranked:
        if len(chosen) >= limit:
            break
        header = 0 if hit.path in paths else group_cost(hit.path)
        cost = header + passage_cost(hit)
        if spent + cost > budget:
            overhead = passage_cost(hit) - estimate_tokens(hit.text)
            spare_tokens = budget - spent - header - overhead
            shortened = shorten(hit, spare_tokens * 4) if spare_tokens > 0 else None
            if shortened is None:
                over.append(hit)
                continue
            hit = shortened
            cost = header + passage_cost(hit)
            if spent + cost > budget:
                over.append(hit)
                continue
        chosen.append(hit)
        paths.add(hit.path)
        spent += cost
    return Packing(tuple(chosen), tuple(over), spent)


def by_score(hits: Sequence[PassageHit]) -> list[PassageHit]:
    """Best score first; hits of one score keep their order."""
    return sorted(hits, key=lambda hit: -hit.score)


def group_by_file(
    hits: Sequence[PassageHit],
    contexts: dict[str, FileContext],
    matches: dict[str, int] | None = None,
) -> list[FileGroup]:
    """Groups in the order of each file's best score, so the best passage leads (a model
    reads the first group first); passages in reading order within a group. The hits'
    own order decides which get in (fusion seats each ranking's best) and breaks ties."""
    by_path: dict[str, list[PassageHit]] = {}
    for hit in by_score(hits):
        by_path.setdefault(hit.path, []).append(hit)
    return [
        FileGroup(
            contexts[path],
            tuple(sorted(found, key=lambda h: h.start)),
            matches.get(path) if matches is not None else None,
        )
        for path, found in by_path.items()
    ]


def read_span(parsed: ParsedNote, hit: PassageHit) -> tuple[int, int]:
    """What `vault_read_note` returns of the note for the passage's heading path: the
    whole note for none (the passage is above the first heading, or under a top heading
    that only repeats the title), else the passage's section with its subsections."""
    sections = parsed.sections
    index = bisect_right(sections, hit.start, key=lambda section: section.start) - 1
    if not hit.section or index < 0:
        return 0, len(parsed.content)
    return sections[index].start, sections[index].subtree_end


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans merged where they touch or overlap, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def holds_unshown_text(
    parsed: ParsedNote, span: tuple[int, int], shown: Sequence[PassageHit]
) -> bool:
    """Whether a block of the note's text within `span` (a paragraph, list, table...; not
    headings or frontmatter) has text outside the passages `shown` of that note."""
    content = parsed.content
    covered = _union((hit.start, hit.end) for hit in shown)
    covered_starts = [start for start, _ in covered]
    blocks = parsed.paragraphs
    for block in blocks[bisect_left(blocks, span[0], key=lambda block: block.start) :]:
        if block.start >= span[1]:
            break
        position = block.start
        for start, end in covered[max(bisect_right(covered_starts, position) - 1, 0) :]:
            if start >= block.end:
                break
            if end <= position:
                continue
            if content[position:start].strip():
                return True
            position = end
        if content[position : block.end].strip():
            return True
    return False


def next_read(
    groups: Sequence[FileGroup],
    seated: Sequence[PassageHit],
    parsed_of: Callable[[str], ParsedNote | None],
    *,
    text_shown: bool = True,
) -> PassageHit | None:
    """The passage whose section the `next:` hint reads in full, among those the reply's
    `groups` show (`seated`: the same passages in the order fusion seated them). The best
    passage when its read holds text the reply does not show (issue 26.1: the best passage
    leads and the hint names it). When its section is shown whole, reading it adds nothing:
    the hint takes the first passage fusion seated whose read holds more. None when every
    section is shown whole; the best passage when the reply shows no text (concise).

    Measured with `python -m bench.retrieval.vaults --no-first-session` (within two calls of all
    questions; the first responses and the passages shown are the same under each rule):
    fixtures 101 of 126 and ledgerline 57 of 80 naming the best passage whatever its read
    holds (main 330a22d); 102 and 58 taking the next by score when the best is shown whole;
    104 and 58 taking the next fusion seated (`bench.retrieval.tune`, dev questions: fixtures 69 ->
    70 of 84, ledgerline 41 either way). Before 26.1 (the first passage, in reading order,
    of the note fusion seated first): 103 and 58; the dev questions that hint answered and
    this one does not have a best passage whose section holds more, which 26.1 names."""
    shown = [hit for group in groups for hit in group.passages]
    best = next(iter(by_score(shown)), None)
    if best is None or not text_shown:
        return best

    def holds_more(hit: PassageHit) -> bool:
        parsed = parsed_of(hit.path)
        of_note = [other for other in shown if other.path == hit.path]
        return parsed is not None and holds_unshown_text(parsed, read_span(parsed, hit), of_note)

    return next((hit for hit in (best, *seated) if holds_more(hit)), None)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One search response: what was found, what was shown, and what was left out."""

    tool: str
    query: str
    folder: str
    # Which ranking produced it: a semantic source name, or "exact" for exact search.
    source: str
    source_note: str
    groups: tuple[FileGroup, ...]
    limit: int
    max_tokens: int
    # Everything that matched, shown or not.
    total_passages: int
    total_files: int
    over_budget: tuple[PassageHit, ...]
    # How good the best match is (ranked search; None for exact matches).
    strength: MatchStrength | None = None
    # The passage whose section the reply suggests reading in full (`next_read`).
    read_next: PassageHit | None = None

    @property
    def weak(self) -> bool:
        """Whether even the best passage is only weakly about the question."""
        return self.strength is not None and self.strength.weak and bool(self.groups)

    @property
    def shown(self) -> int:
        return sum(len(group.passages) for group in self.groups)

    @property
    def best(self) -> PassageHit | None:
        """The best passage shown: the first of the first group's best score."""
        return next(iter(by_score([h for g in self.groups for h in g.passages])), None)
