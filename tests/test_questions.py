"""The benchmark question set keeps its rules (bench/retrieval/questions.py), on the real vault."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from bench.retrieval.questions import (
    DEEP_OFFSET,
    assign_splits,
    missing_query_vectors,
    note_passages,
    problems,
    read_rows,
    shared_terms,
    strict_paraphrases,
    vault_notes,
)
from bench.shared.harness import load_questions


@pytest.fixture(scope="module")
def notes() -> dict[str, str]:
    return vault_notes()


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return read_rows()


def test_the_question_set_keeps_every_rule(
    rows: list[dict[str, Any]], notes: dict[str, str]
) -> None:
    assert problems(rows, notes) == []
    assert missing_query_vectors(rows) == []
    assert len(strict_paraphrases(rows, notes)) >= 20
    assert [row["id"] for row in rows[:58]] == [f"q{n:02d}" for n in range(1, 59)]


def test_the_harness_reads_split_batch_and_traits(rows: list[dict[str, Any]]) -> None:
    questions = load_questions()
    assert Counter(q.split for q in questions) == Counter(row["split"] for row in rows)
    assert {q.batch for q in questions} == {"original-58", "issue-9"}
    assert any("alias" in q.traits for q in questions)
    assert any("next-sentence" in q.traits for q in questions)


def _row(rows: list[dict[str, Any]], id_: str, **changes: Any) -> dict[str, Any]:
    row = copy.deepcopy(next(row for row in rows if row["id"] == id_))
    return row | changes


def test_the_checker_names_each_broken_rule(
    rows: list[dict[str, Any]], notes: dict[str, str]
) -> None:
    broken = [
        _row(rows, "q01", id="x-twice", gold="Mira"),
        _row(rows, "q01", id="x-absent", gold="a two-legged gull"),
        _row(rows, "q01", id="x-elsewhere", gold_file="Places/Vellmouth.md"),
        _row(rows, "q68", id="x-shares", question="Why won't the Widow let anyone read?"),
        _row(rows, "q24", id="x-shallow", gold="The *Gannet's Due* left the Vellmouth"),
        _row(rows, "q42", id="x-one-note", gold_file=[rows[41]["gold_file"][0]] * 2),
        _row(rows, "q01", id="x-held", split="heldout"),
        _row(rows, "q01", id="x-kind", category="trivia"),
    ]
    found = problems(broken, notes)

    def about(id_: str) -> str:
        return " ".join(p for p in found if p.startswith(f"{id_}:"))

    assert "occurs" in about("x-twice") and "not once" in about("x-twice")
    assert "occurs 0 times" in about("x-absent")
    assert "is not in Places/Vellmouth.md" in about("x-elsewhere")
    assert "shares terms" in about("x-shares") and "read" in about("x-shares")
    assert f"before {DEEP_OFFSET}" in about("x-shallow")
    assert "two different notes" in about("x-one-note")
    assert "must be dev" in about("x-held")
    assert "category 'trivia'" in about("x-kind")
    assert any("fewer than 100" in p for p in found)


def test_a_question_without_a_query_vector_is_named(rows: list[dict[str, Any]]) -> None:
    unseen = _row(rows, "q01", id="x-new", question="Who is Admiral Pocket, really?")
    assert missing_query_vectors([rows[0], unseen]) == [
        "x-new: no query vector in query_vectors.jsonl; run scripts/embed_fixtures.py"
    ]


def test_original_paraphrases_that_share_words_are_kept_but_not_counted(
    rows: list[dict[str, Any]], notes: dict[str, str]
) -> None:
    q14 = _row(rows, "q14")
    assert shared_terms(q14, notes) == ["mira"]
    assert "q14" not in strict_paraphrases(rows, notes)
    assert not [p for p in problems(rows, notes) if p.startswith("q14:")]


def test_passages_are_paragraphs_and_list_lines_under_their_headings() -> None:
    text = (
        "---\ntags: [x]\n---\n# Title\n\nFirst paragraph\ncontinues here.\n\n## Part\n\n"
        "- one item\n- two item\n\n```bash\n# not a heading\n```\n"
    )
    passages = list(note_passages("Folder/Note.md", text))
    assert [(p.headings, p.text) for p in passages] == [
        (("Title",), "First paragraph\ncontinues here."),
        (("Title", "Part"), "- one item"),
        (("Title", "Part"), "- two item"),
        (("Title", "Part"), "```bash\n# not a heading\n```"),
    ]
    assert text[passages[1].offset :].startswith("- one item")
    assert passages[0].context().startswith("Note\nTitle\n")


def _synthetic(category: str, originals: int, new: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{category}-{n:02d}", "category": category, "batch": "original-58"}
        for n in range(originals)
    ] + [
        {"id": f"{category}-{n:02d}", "category": category, "batch": "issue-9"}
        for n in range(originals, originals + new)
    ]


def test_the_split_holds_out_a_third_of_each_category_from_new_rows_only() -> None:
    rows = _synthetic("a", 6, 6) + _synthetic("b", 0, 9)
    assert assign_splits(rows) == 21
    held = [row for row in rows if row["split"] == "heldout"]
    assert Counter(row["category"] for row in held) == {"a": 4, "b": 3}
    assert all(row["batch"] == "issue-9" for row in held)

    again = copy.deepcopy(rows)
    assert assign_splits(again) == 0 and again == rows
    fresh = _synthetic("a", 6, 6) + _synthetic("b", 0, 9)
    assign_splits(fresh)
    assert fresh == rows  # seeded: the same draw every time


def test_adding_questions_later_keeps_every_earlier_assignment() -> None:
    rows = _synthetic("a", 0, 9)
    assign_splits(rows)
    before = {row["id"]: row["split"] for row in rows}
    rows += [{"id": f"a-late-{n}", "category": "a", "batch": "issue-9"} for n in range(3)]
    assert assign_splits(rows) == 3
    assert {row["id"]: row["split"] for row in rows[:9]} == before
    assert sum(row["split"] == "heldout" for row in rows) == 4
