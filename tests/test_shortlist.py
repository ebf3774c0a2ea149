"""The vectors' shortlist: a narrow copy scored first, past SHORTLIST_FROM_ROWS rows.

The law: whatever loads, growth, drops and fits come in whatever order, the shortlist holds
each held row's projection in that row's place, so a ranking through it yields every text
once with the score exact scoring gives it. Retrieval itself is checked on the fixture
vault's real vectors and questions (the bundled model, run by ONNX Runtime)."""

import json
import threading
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsidian_mcp.index import shortlist as shortlist_module
from obsidian_mcp.index import vectors as vectors_module
from obsidian_mcp.index.embedder import Matrix, OnnxEmbedder
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.shortlist import Projection
from obsidian_mcp.index.store import Codes, IndexStore
from obsidian_mcp.index.vectors import PassageVectors
from tests.fixture_vault import REPO_ROOT

_DIMS = 16


def _unit_rows(rng: np.random.Generator, count: int) -> Matrix:
    rows = rng.standard_normal((count, _DIMS)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _exact(vectors: PassageVectors, query: Matrix) -> list[tuple[str, float]]:
    """The ranking with the shortlist set aside: every row scored."""
    projection, vectors._projection = vectors._projection, None
    try:
        return list(vectors.ranked(query))
    finally:
        vectors._projection = projection


def _short_rows_match_the_held_rows(vectors: PassageVectors) -> None:
    projection = vectors._projection
    assert projection is not None
    held = len(vectors)
    codes: Codes = np.zeros((held, projection.basis.shape[1]), dtype=np.int8)
    scales: Matrix = np.zeros(held, dtype=np.float32)
    projection.project(vectors._codes[:held], vectors._scales[:held], codes, scales)
    assert np.array_equal(vectors._short_codes[:held], codes)
    assert np.array_equal(vectors._short_scales[:held], scales)
    assert len(vectors._short_codes) == len(vectors._codes)  # the same room


def _ranks_every_text_once_with_its_exact_score(
    vectors: PassageVectors, query: Matrix, held: list[str]
) -> None:
    ranked = list(vectors.ranked(query))
    exact = dict(_exact(vectors, query))
    assert sorted(h for h, _ in ranked) == sorted(held)
    assert all(score == pytest.approx(exact[h], abs=1e-6) for h, score in ranked)
    shortlisted = [score for _, score in ranked[: vectors_module.SHORTLIST_SIZE]]
    assert shortlisted == sorted(shortlisted, reverse=True)


@pytest.fixture
def small_shortlist(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every size of vault gets a shortlist, of 8 rows out of 4 of the 16 dimensions."""
    monkeypatch.setattr(vectors_module, "SHORTLIST_FROM_ROWS", 1)
    monkeypatch.setattr(vectors_module, "SHORTLIST_SIZE", 8)
    monkeypatch.setattr(shortlist_module, "SHORTLIST_DIMS", 4)


_STEP = st.one_of(
    st.tuples(st.just("store"), st.integers(1, 40)),
    st.tuples(st.just("drop"), st.integers(0, 2**40)),
    st.tuples(st.just("fit"), st.just(0)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(_STEP, min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_law_the_shortlist_holds_each_rows_projection_and_ranks_every_text_once(
    small_shortlist: None, steps: list[tuple[str, int]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    store = IndexStore(":memory:")
    vectors = PassageVectors("m", _DIMS)
    stored: dict[str, Matrix] = {}
    made = 0
    for step, amount in steps:
        if step == "store":
            rows = _unit_rows(rng, amount)
            hashes = [f"h{made + n}" for n in range(amount)]
            made += amount
            store.put_vectors("m", hashes, rows)
            stored.update(zip(hashes, rows, strict=True))
            vectors.refresh(store)  # grows past the room, projecting what arrives
            if vectors._fit_thread is not None:
                vectors._fit_thread.join()
        elif step == "drop" and stored:
            kept = {h for n, h in enumerate(stored) if amount >> (n % 40) & 1}
            vectors.keep_only(frozenset(kept), rows_seen=len(vectors))
            stored = {h: row for h, row in stored.items() if h in kept}
        else:
            vectors.fit_shortlist()
    if not stored:
        return
    if vectors._projection is None:
        assert vectors.fit_shortlist()
    _short_rows_match_the_held_rows(vectors)
    for query in list(stored.values())[:3]:
        _ranks_every_text_once_with_its_exact_score(vectors, query, list(stored))


class SlowFit:
    """`fitted` that lets the test act while a fit is under way, between finding the
    directions and putting the projection in place."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fitting, self.go_on = threading.Event(), threading.Event()
        self._fitted = shortlist_module.fitted
        monkeypatch.setattr(vectors_module, "fitted", self)

    def __call__(self, codes: Codes, scales: Matrix) -> Projection:
        self.fitting.set()
        assert self.go_on.wait(5)
        return self._fitted(codes, scales)


def _settled(vectors: PassageVectors) -> None:
    assert vectors._fit_thread is not None
    vectors._fit_thread.join()


def test_a_fit_over_rows_dropped_meanwhile_is_void_and_the_next_refresh_fits_again(
    small_shortlist: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`keep_only` reorders the rows while the fit projects them: the fit must not put a
    projection of the old order in place."""
    rows = _unit_rows(np.random.default_rng(3), 31)
    store = IndexStore(":memory:")
    store.put_vectors("m", [f"h{n}" for n in range(30)], rows[:30])
    vectors = PassageVectors("m", _DIMS)
    slow = SlowFit(monkeypatch)
    vectors.refresh(store)
    assert slow.fitting.wait(5)
    assert vectors.keep_only(frozenset(f"h{n}" for n in range(0, 30, 2)), rows_seen=30) == 15
    slow.go_on.set()
    _settled(vectors)
    assert vectors._projection is None
    store.put_vectors("m", ["h30"], rows[30:])
    vectors.refresh(store)
    _settled(vectors)
    _short_rows_match_the_held_rows(vectors)
    assert next(iter(vectors.ranked(rows[4])))[0] == "h4"


@pytest.mark.parametrize("arriving", [2, 300], ids=["within the room", "past the room"])
def test_rows_that_arrive_while_a_fit_runs_are_projected_when_it_lands(
    small_shortlist: None, monkeypatch: pytest.MonkeyPatch, arriving: int
) -> None:
    rows = _unit_rows(np.random.default_rng(4), 30 + arriving)
    hashes = [f"h{n}" for n in range(len(rows))]
    store = IndexStore(":memory:")
    store.put_vectors("m", hashes[:30], rows[:30])
    vectors = PassageVectors("m", _DIMS)
    slow = SlowFit(monkeypatch)
    vectors.refresh(store)
    assert slow.fitting.wait(5)
    room = len(vectors._codes)
    store.put_vectors("m", hashes[30:], rows[30:])
    assert vectors.refresh(store) == arriving
    assert (len(vectors._codes) > room) == (arriving > room - 30)
    slow.go_on.set()
    _settled(vectors)
    _short_rows_match_the_held_rows(vectors)
    _ranks_every_text_once_with_its_exact_score(vectors, rows[-1], hashes)


def test_below_the_threshold_no_shortlist_is_fitted() -> None:
    """The development vaults, alone or inside 10,000 notes, keep the exact ranking."""
    rng = np.random.default_rng(5)
    store = IndexStore(":memory:")
    store.put_vectors("m", [f"h{n}" for n in range(50)], _unit_rows(rng, 50))
    vectors = PassageVectors("m", _DIMS)
    vectors.refresh(store)
    assert vectors._fit_thread is None and vectors._projection is None


def test_the_shortlist_finds_the_exact_nearest_texts_of_real_questions(
    fixture_index: Path, embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture vault's 1,049 stored texts and its 126 questions, through a shortlist
    of 64 (6%): the nearest 20 texts are the exact ranking's for 0.998 of them (measured);
    the smallest-variance directions find far fewer."""
    monkeypatch.setattr(vectors_module, "SHORTLIST_SIZE", 64)
    questions = [
        json.loads(line)["question"]
        for line in (REPO_ROOT / "fixtures" / "questions.jsonl").read_text().splitlines()
    ]
    queries = embedder.embed(questions, TextRole.QUERY)
    store = IndexStore(fixture_index)
    try:
        vectors = PassageVectors(embedder.vector_space, embedder.dims)
        vectors.refresh(store)
    finally:
        store.close()
    assert len(vectors) > 16 * 64
    assert vectors.fit_shortlist()
    found = []
    for query in queries:
        nearest = {digest for digest, _ in islice(vectors.ranked(query), 20)}
        exact = {digest for digest, _ in _exact(vectors, query)[:20]}
        found.append(len(nearest & exact) / 20)
    assert float(np.mean(found)) >= 0.99
