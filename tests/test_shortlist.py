"""The vectors' shortlist: a narrow copy scored first, past SHORTLIST_FROM_ROWS rows.

The law: whatever loads, growth, drops and fits come in whatever order, the shortlist holds
each held row's projection in that row's place, so a ranking through it yields every text
once with the score exact scoring gives it. Retrieval itself is checked on the fixture
vault's real vectors and questions (the bundled model, run by ONNX Runtime)."""

import itertools
import json
import sqlite3
import threading
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from obsidian_mcp.index import shortlist as shortlist_module
from obsidian_mcp.index import store as store_module
from obsidian_mcp.index import vectors as vectors_module
from obsidian_mcp.index.coding import Codes
from obsidian_mcp.index.embedder import Matrix, OnnxEmbedder
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.store import IndexStore
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
    """Every size of vault gets a shortlist, of 8 rows out of 4 of the 16 dimensions, and
    any vector stored outside a snapshot makes it due."""
    monkeypatch.setattr(shortlist_module, "SHORTLIST_FROM_ROWS", 1)
    monkeypatch.setattr(vectors_module, "SHORTLIST_SIZE", 8)
    monkeypatch.setattr(shortlist_module, "SHORTLIST_DIMS", 4)
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_ROWS", 1)


_FILES = itertools.count()

_STEP = st.one_of(
    st.tuples(st.just("store"), st.integers(1, 40)),
    st.tuples(st.just("drop"), st.integers(0, 2**40)),
    st.tuples(st.just("fit"), st.just(0)),
    st.tuples(st.just("snapshot"), st.just(0)),
    st.tuples(st.just("new process"), st.just(0)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(_STEP, min_size=1, max_size=8), seed=st.integers(0, 2**16))
# Every row dropped, then one stored: the refresh must not take the snapshot in again.
@example(steps=[("store", 1), ("snapshot", 0), ("drop", 0), ("store", 1)], seed=0)
def test_law_the_shortlist_holds_each_rows_projection_and_ranks_every_text_once(
    small_shortlist: None, tmp_path: Path, steps: list[tuple[str, int]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    store = IndexStore(tmp_path / f"{next(_FILES)}.sqlite3")  # a new file each example
    vectors = PassageVectors("m", _DIMS)
    stored: dict[str, Matrix] = {}  # the texts held
    in_store: dict[str, Matrix] = {}  # what a new process loads (drops are in memory)
    made = 0
    for step, amount in steps:
        if step == "store":
            rows = _unit_rows(rng, amount)
            hashes = [f"h{made + n}" for n in range(amount)]
            made += amount
            store.put_vectors("m", hashes, rows)
            stored.update(zip(hashes, rows, strict=True))
            in_store.update(zip(hashes, rows, strict=True))
            vectors.refresh(store)  # grows past the room, projecting what arrives
            if vectors._fit_thread is not None:
                vectors._fit_thread.join()
        elif step == "drop" and stored:
            kept = {h for n, h in enumerate(stored) if amount >> (n % 40) & 1}
            vectors.keep_only(frozenset(kept), rows_seen=len(vectors))
            stored = {h: row for h, row in stored.items() if h in kept}
        elif step == "snapshot":
            store.save_vector_snapshot("m")
        elif step == "new process":
            snapshot = store.vector_snapshot("m")
            vectors = PassageVectors("m", _DIMS)
            vectors.refresh(store)
            stored = dict(in_store)
            if snapshot is not None:  # its shortlist is taken in, not fitted again
                assert snapshot.shortlisted is not None
                held = vectors._projection
                assert held is not None
                assert np.array_equal(held.basis, snapshot.shortlisted.projection.basis)
                assert vectors._fit_thread is None
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
    """`shortlisted` that lets the test act while a fit is under way, between finding the
    directions and putting the projection in place."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fitting, self.go_on = threading.Event(), threading.Event()
        self._shortlisted = shortlist_module.shortlisted
        monkeypatch.setattr(vectors_module, "shortlisted", self)

    def __call__(self, codes: Codes, scales: Matrix) -> shortlist_module.Shortlisted:
        self.fitting.set()
        assert self.go_on.wait(5)
        return self._shortlisted(codes, scales)


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


def _stored_shortlist(file: Path) -> shortlist_module.Shortlisted | None:
    store = IndexStore(file)
    try:
        snapshot = store.vector_snapshot("m")
    finally:
        store.close()
    assert snapshot is not None
    return snapshot.shortlisted


def _same_shortlist(found: shortlist_module.Shortlisted, codes: Codes, scales: Matrix) -> bool:
    """Whether `found` is the shortlist of exactly these rows."""
    expected = shortlist_module.shortlisted(codes, scales)
    return (
        np.array_equal(found.projection.mean, expected.projection.mean)
        and np.array_equal(found.projection.basis, expected.projection.basis)
        and np.array_equal(found.codes, expected.codes)
        and np.array_equal(found.scales, expected.scales)
    )


def _snapshot_rows(file: Path) -> tuple[Codes, Matrix]:
    with sqlite3.connect(file) as db:
        codes, scales = db.execute("SELECT codes, scales FROM vector_snapshots").fetchone()
    scale_array = np.frombuffer(scales, dtype=np.float32)
    return np.frombuffer(codes, dtype=np.int8).reshape(len(scale_array), -1), scale_array


def test_a_snapshot_past_the_threshold_holds_its_shortlist_and_a_new_process_takes_it_in(
    small_shortlist: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Written with the snapshot, from exactly its rows; a new process holds it as the
    rows' shortlist without a fit, and projects the rows stored after it."""
    monkeypatch.setattr(shortlist_module, "SHORTLIST_FROM_ROWS", 40)
    rows = _unit_rows(np.random.default_rng(6), 45)
    hashes = [f"h{n}" for n in range(45)]
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    store.put_vectors("m", hashes[:39], rows[:39])
    store.save_vector_snapshot("m")
    assert _stored_shortlist(file) is None  # 39 rows: below the threshold
    store.put_vectors("m", hashes[39:44], rows[39:44])
    assert store.save_vector_snapshot("m") == 44
    found = _stored_shortlist(file)
    assert found is not None and _same_shortlist(found, *_snapshot_rows(file))
    store.put_vectors("m", hashes[44:], rows[44:])  # after the snapshot
    monkeypatch.setattr(vectors_module, "shortlisted", None)  # a fit would fail
    vectors = PassageVectors("m", _DIMS)
    assert vectors.refresh(store) == 45
    assert vectors._fit_thread is None
    _short_rows_match_the_held_rows(vectors)
    _ranks_every_text_once_with_its_exact_score(vectors, rows[44], hashes)
    store.close()


def test_a_snapshot_that_grows_past_the_threshold_is_due_for_its_shortlist(
    small_shortlist: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not only when a tenth of its rows are outside it: a vault whose snapshot was written
    below the threshold gets one with the next look."""
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    store.put_vectors("m", [f"h{n}" for n in range(30)], _unit_rows(np.random.default_rng(7), 30))
    monkeypatch.setattr(shortlist_module, "SHORTLIST_FROM_ROWS", 100)
    assert store.save_vector_snapshot("m") == 30
    assert _stored_shortlist(file) is None
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_ROWS", 1000)  # no row count makes it due
    assert store.save_vector_snapshot("m") == 0
    monkeypatch.setattr(shortlist_module, "SHORTLIST_FROM_ROWS", 30)
    assert store.save_vector_snapshot("m") == 30
    found = _stored_shortlist(file)
    assert found is not None and _same_shortlist(found, *_snapshot_rows(file))
    assert store.save_vector_snapshot("m") == 0
    store.close()


def test_a_shortlist_is_taken_only_with_the_snapshot_it_was_made_from(
    small_shortlist: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    rows = _unit_rows(np.random.default_rng(10), 34)
    store.put_vectors("m", [f"h{n}" for n in range(30)], rows[:30])
    assert store.save_vector_snapshot("m") == 30
    with sqlite3.connect(file) as db:  # as if made for an older snapshot
        db.execute("UPDATE vector_shortlists SET through_seq = through_seq - 1")
    assert _stored_shortlist(file) is None
    assert store.save_vector_snapshot("m") == 30  # due for one
    assert _stored_shortlist(file) is not None
    monkeypatch.setattr(shortlist_module, "SHORTLIST_FROM_ROWS", 100)
    store.put_vectors("m", ["h30", "h31", "h32", "h33"], rows[30:])  # a tenth more
    assert store.save_vector_snapshot("m") == 34  # below the threshold now: none kept
    with sqlite3.connect(file) as db:
        assert db.execute("SELECT count(*) FROM vector_shortlists").fetchone()[0] == 0
    store.close()


def test_an_index_written_before_the_shortlist_was_stored_gains_it_on_opening(
    small_shortlist: None, tmp_path: Path
) -> None:
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    store.put_vectors("m", [f"h{n}" for n in range(30)], _unit_rows(np.random.default_rng(8), 30))
    store.save_vector_snapshot("m")
    store.close()
    with sqlite3.connect(file) as db:  # as schema 7 left it
        db.execute("DROP TABLE vector_shortlists")
        db.execute("PRAGMA user_version = 7")
    found = _stored_shortlist(file)
    assert found is not None and _same_shortlist(found, *_snapshot_rows(file))


def test_a_damaged_shortlist_is_set_aside_and_fitted_again(
    small_shortlist: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    rows = _unit_rows(np.random.default_rng(9), 30)
    store.put_vectors("m", [f"h{n}" for n in range(30)], rows)
    store.save_vector_snapshot("m")
    with sqlite3.connect(file) as db:
        db.execute("UPDATE vector_shortlists SET codes = substr(codes, 2)")
    vectors = PassageVectors("m", _DIMS)
    assert vectors.refresh(store) == 30  # the rows themselves are whole
    assert "shortlist of m's vector snapshot is damaged" in caplog.text
    _settled(vectors)  # fitted in the background
    _short_rows_match_the_held_rows(vectors)
    _ranks_every_text_once_with_its_exact_score(vectors, rows[3], [f"h{n}" for n in range(30)])
    store.close()


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
