# pyright: strict
"""Stage 3 of `vault_semantic_query`, currency: what is current comes before what it replaced.

Working vaults keep decisions that replace each other: the old ADR stays, and the
frontmatter says which replaced which, on the old note (`status: superseded`,
`superseded_by: "[[ADR-0010 Gapless numbering]]"`, also `replaced_by`) or on the new one
(`supersedes: "[[ADR-0008 Money#Rounding]]"`, also `replaces`; with a heading, only that
section was replaced). The old note often shares more words with a question than its
replacement, so it ranks first and an agent answers with a rule that no longer holds.
Here, when a replaced passage is among the ranked ones, a passage of the note that replaced
it (and of the one that replaced that) comes right before it: the replacement's
best-ranked passage, or, when no source ranked it, its passage richest in the question's
words. Each replaced note's group says what replaced it (`Currency.label`), and every group
shows its note's dates (`NoteDates`, rendered by `render.group_header`).
"""

import datetime
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from obsidian_mcp.paths import note_name
from obsidian_mcp.retrieval.corpus import Chunk, Corpus, NoteRecord
from obsidian_mcp.retrieval.links import LinkGraph
from obsidian_mcp.text.markdown import split_frontmatter

# Frontmatter keys of an old note that name the note replacing it.
SUCCESSOR_KEYS = ("superseded_by", "superseded-by", "supersededBy", "replaced_by", "replaced-by")
# Frontmatter keys of a new note that name the notes (or sections) it replaces.
PREDECESSOR_KEYS = ("supersedes", "replaces")
# A `status` that says the note no longer holds (without naming its successor, the note is
# labelled but nothing is moved).
REPLACED_STATUSES = frozenset(
    {"superseded", "deprecated", "replaced", "obsolete", "cancelled", "canceled", "retired"}
)
# Frontmatter dates shown beside a note, in this order: when it was written, then changed.
DATE_KEYS = ("date", "created", "revised", "updated")
# A chain of replacements is followed this far (and never round a cycle).
_MAX_CHAIN = 3
_LINK_RE = re.compile(r"\[\[([^\]|#]+)(?:#([^\]|]+))?")
# Most notes say nothing of what they replace: their frontmatter's text is searched for
# the keys before any note is parsed (this runs again after every change to the vault).
_CLAIM_RE = re.compile(r"^(?:supersedes|replaces)\s*:", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NoteLink:
    """A note named in frontmatter, as written, and the heading it points at ('' for the
    whole note)."""

    target: str
    heading: str = ""


@dataclass(frozen=True, slots=True)
class NoteDates:
    """What a note's frontmatter says of its time: its dates as (key, ISO date), whether
    it was replaced (its status) and by what, and what it replaces."""

    dates: tuple[tuple[str, str], ...]
    replaced_status: str
    successor: str
    predecessors: tuple[NoteLink, ...] = ()


def _date_text(value: object) -> str:
    if isinstance(value, datetime.date):
        return value.isoformat()[:10]
    text = str(value).strip() if isinstance(value, str | int) else ""
    return text[:10] if re.match(r"\d{4}-\d{2}-\d{2}", text) else ""


def _links(value: object) -> list[NoteLink]:
    """The notes a frontmatter value names: "[[Note#Heading]]", "Note", or a list of them."""
    items: list[object] = value if isinstance(value, list) else [value]  # pyright: ignore[reportUnknownVariableType]
    links: list[NoteLink] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            continue
        found = _LINK_RE.search(item)
        if found is None:
            links.append(NoteLink(item.strip()))
        else:
            links.append(NoteLink(found.group(1).strip(), (found.group(2) or "").strip()))
    return links


def note_dates(frontmatter: dict[str, object]) -> NoteDates:
    dates = tuple(
        (key, text) for key in DATE_KEYS if (text := _date_text(frontmatter.get(key))) != ""
    )
    status = frontmatter.get("status")
    replaced = status.strip().casefold() if isinstance(status, str) else ""
    successor = next(
        (links[0].target for key in SUCCESSOR_KEYS if (links := _links(frontmatter.get(key)))),
        "",
    )
    predecessors = tuple(link for key in PREDECESSOR_KEYS for link in _links(frontmatter.get(key)))
    return NoteDates(
        dates, replaced if replaced in REPLACED_STATUSES else "", successor, predecessors
    )


# The passage of a note that stands for it when no source ranked one (its id, or None).
PassagePick = Callable[[NoteRecord], int | None]


@dataclass(frozen=True, slots=True)
class Replacement:
    """A note that replaced another, or only its section under `heading`."""

    path: str
    heading: str = ""

    def covers(self, chunk: Chunk) -> bool:
        wanted = self.heading.casefold()
        return not wanted or any(h.casefold() == wanted for h in chunk.section)


class Currency:
    """Who replaced whom in one corpus: from each old note's frontmatter, and from the
    claims of new notes (collected once per corpus generation)."""

    def __init__(self, links: LinkGraph) -> None:
        self._links = links
        self._generation = -1
        self._claims: dict[str, list[Replacement]] = {}
        # Each note's claims as written (link target, heading), kept with the record they
        # were read from: a record changes only when its note does, so after an edit only
        # that note's frontmatter is read again (all 10,000 were, 0.11 s before a question).
        self._written: dict[str, tuple[NoteRecord, list[tuple[str, str]]]] = {}

    def _claims_of(self, record: NoteRecord) -> list[tuple[str, str]]:
        kept = self._written.get(record.path)
        if kept is not None and kept[0] is record:
            return kept[1]
        yaml_text, _ = split_frontmatter(record.content)
        if yaml_text is None or not _CLAIM_RE.search(yaml_text):
            return []
        dates = note_dates(record.parsed.frontmatter)
        return [(link.target, link.heading) for link in dates.predecessors]

    def _refresh(self, corpus: Corpus) -> None:
        if corpus.generation == self._generation:
            return
        resolver = self._links.resolver_for(corpus)
        claims: dict[str, list[Replacement]] = {}
        written: dict[str, tuple[NoteRecord, list[tuple[str, str]]]] = {}
        # Only the notes whose text holds a claim's key are read (the notes' texts stay in
        # the index): reading all 10,000 took 0.2-0.3 s before a new process's first answer.
        # Nor is anything kept for the others: an entry for each of 50,000 notes, made
        # again after every edit, took 250-280 ms of the question after it.
        may_claim = corpus.paths_that_may_hold_any(PREDECESSOR_KEYS)
        records = corpus.records()
        if may_claim is not None:
            records = [record for record in records if record.path in may_claim]
        for record in records:
            own = self._claims_of(record)
            written[record.path] = (record, own)
            for target, heading in own:
                old = resolver.resolve(target, record.path)
                if old is not None and old != record.path:
                    claims.setdefault(old, []).append(Replacement(record.path, heading))
        self._claims, self._written = claims, written
        self._generation = corpus.generation

    def replacements(self, corpus: Corpus, path: str) -> list[Replacement]:
        """The notes that replaced this one (or a section of it), as its own frontmatter
        names them first, then as others claim."""
        self._refresh(corpus)
        record = corpus.record(path)
        named: list[Replacement] = []
        if record is not None:
            successor = note_dates(record.parsed.frontmatter).successor
            found = self._links.resolver_for(corpus).resolve(successor, path) if successor else None
            if found is not None and found != path:
                named.append(Replacement(found))
        return named + [
            r for r in self._claims.get(path, []) if r.path not in {n.path for n in named}
        ]

    def successors(self, corpus: Corpus, chunk: Chunk) -> list[str]:
        """The notes that replaced this passage, the nearest first, as far as the chain goes."""
        chain: list[str] = []
        current = [r for r in self.replacements(corpus, chunk.path) if r.covers(chunk)]
        while current and len(chain) < _MAX_CHAIN:
            following = current[0].path
            if following == chunk.path or following in chain:
                break
            chain.append(following)
            current = [r for r in self.replacements(corpus, following) if not r.heading]
        return chain

    def label(self, corpus: Corpus, record: NoteRecord) -> str:
        """What a note's group says of its replacement: "superseded by [[New]]", "Rounding
        superseded by [[New]]" (a section), or its status alone; '' if it holds."""
        dates = note_dates(record.parsed.frontmatter)
        status = dates.replaced_status
        replacements = self.replacements(corpus, record.path)
        if not replacements:
            # A successor no note answers to is still worth naming as written.
            return (
                f"{status or 'superseded'} by [[{dates.successor}]]" if dates.successor else status
            )
        parts = [
            (f"{r.heading} " if r.heading else "")
            + f"{status or 'superseded'} by [[{note_name(r.path)}]]"
            for r in replacements
        ]
        return "; ".join(parts)


def current_first(
    corpus: Corpus,
    ranked: Sequence[tuple[int, float]],
    currency: Currency,
    pick: PassagePick,
) -> list[tuple[int, float]]:
    """The ranking with each replaced passage preceded by a passage of each note that
    replaced it (the newest first), unless one is already shown before it. The passage
    that stands in scores at least what it replaces: replies order their notes by score,
    and the current rule must not follow the old one."""
    by_path: dict[str, tuple[int, float]] = {}
    for chunk_id, score in ranked:
        by_path.setdefault(corpus.chunk(chunk_id).path, (chunk_id, score))
    placed: set[int] = set()
    shown_paths: set[str] = set()
    out: list[tuple[int, float]] = []
    for chunk_id, score in ranked:
        if chunk_id in placed:
            continue
        chunk = corpus.chunk(chunk_id)
        for successor in reversed(currency.successors(corpus, chunk)):
            if successor in shown_paths:
                continue
            stand_in = by_path.get(successor)
            if stand_in is None:
                record = corpus.record(successor)
                picked = pick(record) if record is not None else None
                stand_in = None if picked is None else (picked, score)
            if stand_in is not None and stand_in[0] not in placed:
                stand_in = (stand_in[0], max(stand_in[1], score))
                out.append(stand_in)
                placed.add(stand_in[0])
                shown_paths.add(successor)
        out.append((chunk_id, score))
        placed.add(chunk_id)
        shown_paths.add(chunk.path)
    return out
