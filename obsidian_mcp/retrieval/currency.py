# pyright: strict
"""Stage 3 of `vault_semantic_query`, currency: what is current comes before what it replaced.

Working vaults keep decisions that replace each other: the old ADR stays, marked in its
frontmatter (`status: superseded`, `superseded_by: "[[ADR-0010 Gapless numbering]]"`, the
convention of ADR templates; `replaced_by` too). The old note often shares more words with
a question than its replacement, so it ranks first and an agent answers with a rule that
no longer holds. Here, when a passage of a replaced note is among the ranked passages, a
passage of the note that replaced it (and of the one that replaced that) comes right before
it: the replacement's best-ranked passage, or, when no source ranked it, its passage
richest in the question's words. Each replaced note's group names what replaced it, and
every group shows its note's dates (`NoteDates`, rendered by `render.group_header`).
"""

import datetime
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from obsidian_mcp.retrieval.corpus import Corpus, NoteRecord

# Frontmatter keys that name the note replacing this one.
SUCCESSOR_KEYS = ("superseded_by", "superseded-by", "supersededBy", "replaced_by", "replaced-by")
# A `status` that says the note no longer holds (without naming its successor, the note is
# labelled but nothing is moved).
REPLACED_STATUSES = frozenset(
    {"superseded", "deprecated", "replaced", "obsolete", "cancelled", "canceled", "retired"}
)
# Frontmatter dates shown beside a note, in this order: when it was written, then changed.
DATE_KEYS = ("date", "created", "revised", "updated")
# A chain of replacements is followed this far (and never round a cycle).
_MAX_CHAIN = 3
_LINK_RE = re.compile(r"\[\[([^\]|#]+)")


@dataclass(frozen=True, slots=True)
class NoteDates:
    """What a note's frontmatter says of its time: its dates as (key, ISO date), and
    whether it was replaced (its status) and by what (a link target, as written)."""

    dates: tuple[tuple[str, str], ...]
    replaced_status: str
    successor: str

    @property
    def replaced(self) -> bool:
        return bool(self.replaced_status or self.successor)


def _date_text(value: object) -> str:
    if isinstance(value, datetime.date):
        return value.isoformat()[:10]
    text = str(value).strip() if isinstance(value, str | int) else ""
    return text[:10] if re.match(r"\d{4}-\d{2}-\d{2}", text) else ""


def _link_target(value: object) -> str:
    """The note a frontmatter value names: "[[Note]]", "Note", or the first of a list."""
    if isinstance(value, list):
        items: list[object] = value  # pyright: ignore[reportUnknownVariableType]
        value = items[0] if items else ""
    if not isinstance(value, str):
        return ""
    found = _LINK_RE.search(value)
    return (found.group(1) if found else value).strip()


def note_dates(frontmatter: dict[str, object]) -> NoteDates:
    dates = tuple(
        (key, text) for key in DATE_KEYS if (text := _date_text(frontmatter.get(key))) != ""
    )
    status = frontmatter.get("status")
    replaced = status.strip().casefold() if isinstance(status, str) else ""
    successor = next((t for key in SUCCESSOR_KEYS if (t := _link_target(frontmatter.get(key)))), "")
    return NoteDates(dates, replaced if replaced in REPLACED_STATUSES else "", successor)


# The passage of a note that stands for it when no source ranked one (its id, or None).
PassagePick = Callable[[NoteRecord], int | None]
# A link target resolved from the note holding it: the path, or None.
Resolve = Callable[[str, str], str | None]


def successors(corpus: Corpus, path: str, resolve: Resolve) -> list[str]:
    """The notes that replaced this one, the nearest first, as far as the chain goes."""
    chain: list[str] = []
    current = path
    while len(chain) < _MAX_CHAIN:
        record = corpus.record(current)
        if record is None:
            break
        target = note_dates(record.parsed.frontmatter).successor
        following = resolve(target, current) if target else None
        if following is None or following == path or following in chain:
            break
        chain.append(following)
        current = following
    return chain


def current_first(
    corpus: Corpus,
    ranked: Sequence[tuple[int, float]],
    resolve: Resolve,
    pick: PassagePick,
) -> list[tuple[int, float]]:
    """The ranking with each replaced note's first passage preceded by a passage of each
    note that replaced it (the newest first), unless one is already shown before it."""
    by_path: dict[str, tuple[int, float]] = {}
    for chunk_id, score in ranked:
        by_path.setdefault(corpus.chunk(chunk_id).path, (chunk_id, score))
    placed: set[int] = set()
    shown_paths: set[str] = set()
    out: list[tuple[int, float]] = []
    for chunk_id, score in ranked:
        if chunk_id in placed:
            continue
        path = corpus.chunk(chunk_id).path
        if path not in shown_paths:
            for successor in reversed(successors(corpus, path, resolve)):
                if successor in shown_paths:
                    continue
                stand_in = by_path.get(successor)
                if stand_in is None:
                    record = corpus.record(successor)
                    picked = pick(record) if record is not None else None
                    stand_in = None if picked is None else (picked, score)
                if stand_in is not None and stand_in[0] not in placed:
                    out.append(stand_in)
                    placed.add(stand_in[0])
                    shown_paths.add(successor)
        out.append((chunk_id, score))
        placed.add(chunk_id)
        shown_paths.add(path)
    return out
