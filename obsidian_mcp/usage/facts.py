# pyright: strict
"""What a tool call returned, taken from the domain result rather than the rendered text.

While a call is logged, `collecting()` gives it an empty `CallFacts`; the tool hands its
domain result to `returned(result)`, which fills in the sources that answered, the notes
and sections the reply shows, and how many items it holds. With the log off there is no
`CallFacts` and `returned` does nothing.
"""

from collections.abc import Generator, Iterable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import singledispatch

from obsidian_mcp.memory.store import Recall
from obsidian_mcp.reading import NoteOutline, NoteWindow, SearchMap
from obsidian_mcp.retrieval.packing import SearchResult
from obsidian_mcp.retrieval.quick_context import QuickContext
from obsidian_mcp.retrieval.related import Related

# A note and the heading path of the section shown ("" for the whole note).
NoteSection = tuple[str, str]


@dataclass
class CallFacts:
    """Filled by the tool while its call is logged; empty for tools that return no notes."""

    sources: tuple[str, ...] = ()
    notes: tuple[NoteSection, ...] = ()
    # Passages, notes, rows or memories the reply holds; None when the tool did not say.
    items: int | None = None
    # The vaults the call worked on, when the server has several (`vaults_used`).
    vaults: tuple[str, ...] = ()


_CURRENT: ContextVar[CallFacts | None] = ContextVar("usage_call_facts", default=None)


@contextmanager
def collecting() -> Generator[CallFacts]:
    """A fresh `CallFacts` for the tool call that runs inside this block."""
    facts = CallFacts()
    token = _CURRENT.set(facts)
    try:
        yield facts
    finally:
        _CURRENT.reset(token)


def returned(result: object) -> None:
    """Note what `result` (a tool's domain result) returned, when the call is logged."""
    facts = _CURRENT.get()
    if facts is not None:
        _fill(result, facts)


def vaults_used(names: Iterable[str]) -> None:
    """Note which of several configured vaults the call worked on, when it is logged."""
    facts = _CURRENT.get()
    if facts is not None:
        facts.vaults = tuple(names)


def _section(heading_path: Iterable[str]) -> str:
    return " > ".join(heading_path)


def _unique(notes: Iterable[NoteSection]) -> tuple[NoteSection, ...]:
    return tuple(dict.fromkeys(notes))


@singledispatch
def _fill(result: object, facts: CallFacts) -> None:
    """A result this module does not know returns no notes."""


@_fill.register
def _(result: SearchResult, facts: CallFacts) -> None:
    shown = [(hit.path, _section(hit.section)) for g in result.groups for hit in g.passages]
    # The best passage left out is named with the call that reads it: the reply points there.
    named = [(hit.path, _section(hit.section)) for hit in result.over_budget[:1]]
    facts.sources = tuple(result.source.split("+"))
    facts.notes = _unique(shown + named)
    facts.items = result.shown


@_fill.register
def _(result: QuickContext, facts: CallFacts) -> None:
    notes = [(f.path, "") for f in result.main_files]
    notes += [(entity.path, "") for entity in result.entities]
    notes += [(hit.path, _section(hit.section)) for hit in result.previews]
    facts.sources = tuple(result.source.split("+"))
    facts.notes = _unique(notes)
    facts.items = len(result.main_files) + len(result.previews)


@_fill.register
def _(result: Related, facts: CallFacts) -> None:
    neighbours = (*result.outlinks, *result.backlinks, *result.similar)
    facts.sources = (result.similar_source,) if result.similar_source else ()
    facts.notes = _unique((n.path, "") for n in neighbours if n.path is not None)
    facts.items = len(neighbours)


@_fill.register
def _(result: NoteWindow, facts: CallFacts) -> None:
    facts.notes = ((result.path, result.section or ""),)
    facts.items = 1


@_fill.register
def _(result: NoteOutline, facts: CallFacts) -> None:
    facts.notes = ((result.path, ""),)
    facts.items = 1


@_fill.register
def _(result: SearchMap, facts: CallFacts) -> None:
    facts.notes = tuple((row.path, "") for row in result.rows if not row.is_folder)
    facts.items = len(result.rows)


@_fill.register
def _(result: Recall, facts: CallFacts) -> None:
    facts.items = len(result.memories)
