"""The benchmark harness end to end: a few questions and a tiny generated vault.

These tests check that the harness produces figures. They do not check the figures
against targets: that is the job of ``python -m bench.retrieval.quality``.
"""

from pathlib import Path

import pytest

from bench.retrieval import quality as retrieval_quality
from bench.shared.generate_vault import generate
from bench.shared.harness import (
    FIXTURE_VAULT,
    KeywordPicker,
    Question,
    is_hit,
    load_questions,
    markdown_table,
    percentile,
)

pytestmark = pytest.mark.anyio


def one_per_category(categories: tuple[str, ...]) -> list[Question]:
    questions = load_questions()
    return [next(q for q in questions if q.category == c) for c in categories]


def test_hit_tolerates_whitespace_and_markdown_but_not_case() -> None:
    response = "**Mira** keeps the [[Tide-Compass|compass]]\n  under her pillow."
    assert is_hit(response, ["Mira keeps the compass under her pillow"])
    assert is_hit(response, ["Mira** keeps the [[Tide-Compass|compass]] under"])
    assert not is_hit(response, ["mira keeps"])
    assert not is_hit(response, ["Mira keeps", "nowhere in the response"])
    assert not is_hit("Mira keeps the … pillow", ["Mira keeps the compass"])


def test_percentile_and_table() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 90) == 5
    table = markdown_table(["a", "b"], [[1, 2.0]])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | 2.0 |"]


def test_keywords_are_rare_known_words_names_first() -> None:
    picker = KeywordPicker(FIXTURE_VAULT)
    assert picker.pick("What kind of boat is the Slow Mercy?") == "slow mercy"
    assert picker.pick("zzzqx") == "zzzqx"


def test_generated_vault_is_deterministic(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", 60)
    second = generate(tmp_path / "b", 60)
    assert first == second
    assert len(first) == 5
    files_a = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    files_b = sorted(
        p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file()
    )
    assert files_a == files_b
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    for planted in first:
        note = (tmp_path / "a" / "vault" / planted.path).read_text("utf-8")
        assert planted.gold in note


async def test_quality_run_produces_figures(tmp_path: Path) -> None:
    questions = one_per_category(("exact-keyword", "two-file", "folder-scoped"))
    results = await retrieval_quality.quality(questions, tmp_path, embeddings=False)
    expected = set(retrieval_quality.STRATEGIES)
    assert set(results) == expected
    for name, outcomes in results.items():
        assert [o.question for o in outcomes] == [q.id for q in questions], name
        assert all(not o.error and o.tokens > 0 and o.calls >= 1 for o in outcomes), name
    report, data = retrieval_quality.quality_report(results, questions)
    assert set(data["summary"]) == expected
    assert all(f"| {name} |" in report for name in expected)
    assert set(data["by_group"]) >= {"all", "dev", "original 58", "exact-keyword"}
    assert data["by_group"]["all"]["semantic"]["questions"] == len(questions)
