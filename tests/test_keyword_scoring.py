"""BM25 over a term's postings at once, against BM25 one passage at a time.

The laws: `IndexStore.term_postings` holds exactly what SQLite's GROUP BY over the FTS5
instances gives, and `Bm25Index.matches` scores every passage as the loop over those rows
did (the definition, kept here), to the last bit and in the same order, held or not. The
order matters: ties in the keyword ranking keep it."""

import math
from collections.abc import Callable, Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from obsidian_mcp.index.store import Ids, IndexStore, NoteRow, PassageRow
from obsidian_mcp.retrieval.keyword import Bm25Index

_WORDS = ("ferry", "ledger", "lamp", "quay", "eel", "bell")

_PASSAGE = st.tuples(
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12),  # its text's terms
    st.lists(st.sampled_from(_WORDS), max_size=3),  # its headings' terms
)
_NOTES = st.lists(st.lists(_PASSAGE, min_size=1, max_size=4), min_size=1, max_size=12)


def _stored(notes: list[list[tuple[list[str], list[str]]]]) -> tuple[IndexStore, dict[int, int]]:
    """The notes in an index; each passage's length (its text's terms) by id."""
    store = IndexStore(":memory:")
    rows = [
        NoteRow(
            f"n{n}.md",
            0,
            1,
            "x",
            (),
            None,
            tuple(
                PassageRow(("h",), 0, 1, tuple(text), tuple(headings), (f"{n}-{p}",))
                for p, (text, headings) in enumerate(passages)
            ),
            (),
            f"n{n}",
        )
        for n, passages in enumerate(notes)
    ]
    stored = store.put_notes(rows)
    lengths = {p.id: p.length for note in stored.values() for p in note.passages}
    return store, lengths


def _rows(store: IndexStore, term: str) -> list[tuple[int, bool, int]]:
    """The postings as the index gave them one row each before."""
    with store._question_reader() as db:  # pyright: ignore[reportPrivateUsage]
        rows = db.execute(
            "SELECT doc, col = 'heading_terms', count(*) FROM passage_terms_instances "
            "WHERE term = ? GROUP BY doc, col",
            (term,),
        ).fetchall()
    return [(doc, bool(heading), count) for doc, heading, count in rows]


def _matches_one_at_a_time(
    store: IndexStore,
    weighted_terms: Sequence[tuple[str, float]],
    length_of: Callable[[int], int | None],
    k1: float = 1.2,
    b: float = 0.75,
) -> tuple[dict[int, float], dict[int, float]]:
    """BM25 as it was defined, a passage at a time."""
    count, total = store.keyword_totals()
    if not count:
        return {}, {}
    average = total / count or 1.0
    totals: dict[int, float] = {}
    headings: dict[int, float] = {}
    for term, term_weight in weighted_terms:
        postings = _rows(store, term)
        in_text = sum(1 for _, heading, _ in postings if not heading)
        weight = term_weight * math.log(1 + (count - in_text + 0.5) / (in_text + 0.5))
        for doc, heading, occurrences in postings:
            if heading:
                headings[doc] = headings.get(doc, 0.0) + weight
                continue
            length = length_of(doc)
            if length is None:
                continue
            norm = k1 * (1 - b + b * length / average)
            totals[doc] = totals.get(doc, 0.0) + weight * occurrences * (k1 + 1) / (
                occurrences + norm
            )
    return totals, headings


@settings(max_examples=150, deadline=None)
@given(notes=_NOTES)
def test_law_a_terms_postings_are_the_rows_sqlite_groups(
    notes: list[list[tuple[list[str], list[str]]]],
) -> None:
    store, _ = _stored(notes)
    for term in (*_WORDS, "absent"):
        postings = store.term_postings(term)
        as_rows = list(
            zip(
                postings.passages.tolist(),
                postings.in_headings.tolist(),
                postings.occurrences.tolist(),
                strict=True,
            )
        )
        assert sorted(as_rows) == sorted(_rows(store, term))
        assert postings.passages.tolist() == sorted(postings.passages.tolist())


@settings(max_examples=150, deadline=None)
@given(
    notes=_NOTES,
    query=st.lists(
        st.tuples(st.sampled_from((*_WORDS, "absent")), st.sampled_from((1.0, 0.5, 2.0))),
        min_size=1,
        max_size=5,
    ),
    held_share=st.integers(0, 4),
    seed=st.integers(0, 2**16),
)
def test_law_bm25_of_whole_postings_is_bm25_a_passage_at_a_time(
    notes: list[list[tuple[list[str], list[str]]]],
    query: list[tuple[str, float]],
    held_share: int,
    seed: int,
) -> None:
    """Some passages are not the caller's (stored by another process since): neither way
    scores their text; both count them in each term's frequency."""
    store, lengths = _stored(notes)
    rng = np.random.default_rng(seed)
    held = {i: n for i, n in lengths.items() if rng.integers(4) < held_share}

    def lengths_of(ids: Ids) -> Ids:
        return np.array([held.get(i, -1) for i in ids.tolist()], dtype=np.int64)

    totals, headings = Bm25Index(store).matches(query, lengths_of)
    expected_totals, expected_headings = _matches_one_at_a_time(store, query, held.get)
    assert list(totals.items()) == list(expected_totals.items())  # bit for bit, in order
    assert list(headings.items()) == list(expected_headings.items())
