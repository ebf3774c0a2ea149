# pyright: strict
"""Results as passages grouped by file, and greedy packing into a token budget."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from obsidian_mcp.retrieval.strength import MatchStrength
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
