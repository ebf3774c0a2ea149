"""Currency: a note that says it was replaced comes after what replaced it, and says so
(issue 20, item 5). Through a real retriever on a folder vault, keywords only (the stage
works on the ranking, whichever source made it)."""

import datetime
from pathlib import Path

import pytest

from obsidian_mcp.retrieval.currency import note_dates
from obsidian_mcp.retrieval.render import format_search, search_data
from tests.test_index import bump_mtime
from tests.test_pipeline_stages import retriever, write

OLD = (
    '---\nstatus: superseded\nsuperseded_by: "[[ADR-2 Gapless numbers]]"\ndate: 2026-06-15\n'
    "---\n# ADR-1 Sequence numbers\n\n## Decision\n\nInvoice numbers come from a Postgres "
    "sequence per tenant; gaps after a rollback are accepted.\n"
)
NEW = (
    "---\nstatus: accepted\ndate: 2026-08-20\n---\n# ADR-2 Gapless numbers\n\n## Decision\n\n"
    "A counter row locked per tenant and fiscal year hands out the next number, so no "
    "number is ever skipped.\n"
)
QUERY = "Do invoice numbers come from a Postgres sequence per tenant?"


def decisions(tmp_path: Path, notes: dict[str, str]) -> Path:
    vault = tmp_path / "vault"
    for path, text in notes.items():
        write(vault, path, text)
    for n in range(4):  # other notes, so that the query's words are rare enough to rank
        write(vault, f"Notes/Day {n}.md", f"# Day {n}\n\nThe team met and talked about lunch.\n")
    return vault


@pytest.mark.anyio
async def test_the_note_that_replaced_a_ranked_one_comes_first_and_the_old_one_says_so(
    tmp_path: Path,
) -> None:
    vault = decisions(
        tmp_path,
        {"Decisions/ADR-1 Sequence numbers.md": OLD, "Decisions/ADR-2 Gapless numbers.md": NEW},
    )
    result = await retriever(vault, tmp_path).semantic_query(QUERY, limit=3)
    paths = [group.context.path for group in result.groups]
    # The new decision shares no word of the question's but "invoice", "number" and "tenant"
    # with many notes: it is shown because the old one names it.
    assert paths[:2] == [
        "Decisions/ADR-2 Gapless numbers.md",
        "Decisions/ADR-1 Sequence numbers.md",
    ]
    text = format_search(result)
    assert "superseded by [[ADR-2 Gapless numbers]] · date 2026-06-15" in text
    assert "date 2026-08-20" in text
    assert "no number is ever skipped" in text

    off = await retriever(vault, tmp_path, stages_off=("currency",)).semantic_query(QUERY, limit=3)
    assert off.groups[0].context.path == "Decisions/ADR-1 Sequence numbers.md"


@pytest.mark.anyio
async def test_a_chain_of_replacements_shows_the_newest_first_and_a_cycle_ends(
    tmp_path: Path,
) -> None:
    middle = NEW.replace("status: accepted", "status: superseded\nsuperseded_by: '[[ADR-3]]'")
    newest = (
        "---\nstatus: accepted\nsuperseded_by: '[[ADR-1 Sequence numbers]]'\n---\n# ADR-3\n\n"
        "Numbers are handed out by the ledger service.\n"
    )  # names the oldest as its successor by mistake: a cycle, followed no further
    vault = decisions(
        tmp_path,
        {
            "Decisions/ADR-1 Sequence numbers.md": OLD,
            "Decisions/ADR-2 Gapless numbers.md": middle,
            "Decisions/ADR-3.md": newest,
        },
    )
    result = await retriever(vault, tmp_path).semantic_query(QUERY, limit=3)
    assert [group.context.path for group in result.groups] == [
        "Decisions/ADR-3.md",
        "Decisions/ADR-2 Gapless numbers.md",
        "Decisions/ADR-1 Sequence numbers.md",
    ]


@pytest.mark.anyio
async def test_a_replacement_outside_the_folder_asked_or_missing_changes_nothing(
    tmp_path: Path,
) -> None:
    vault = decisions(
        tmp_path,
        {
            "Decisions/ADR-1 Sequence numbers.md": OLD,
            "Archive/ADR-2 Gapless numbers.md": NEW,
            "Decisions/ADR-9.md": OLD.replace("ADR-2 Gapless numbers", "ADR-404"),
        },
    )
    result = await retriever(vault, tmp_path).semantic_query(QUERY, limit=3, folder="Decisions")
    assert {group.context.path for group in result.groups} == {
        "Decisions/ADR-1 Sequence numbers.md",
        "Decisions/ADR-9.md",
    }
    assert "superseded by [[ADR-404]]" in format_search(result)


def test_note_dates_reads_what_frontmatter_says_in_its_usual_shapes() -> None:
    dates = note_dates(
        {
            "date": datetime.date(2026, 6, 15),
            "updated": "2026-10-23T09:00",
            "created": "last week",  # not a date: left out
            "status": "Deprecated",
            "replaced_by": ["[[New note|the new one]]", "[[Other]]"],
        }
    )
    assert dates.dates == (("date", "2026-06-15"), ("updated", "2026-10-23"))
    assert (dates.replaced_status, dates.successor) == ("deprecated", "New note")
    current = note_dates({"status": "accepted", "superseded_by": 3})
    assert (current.replaced_status, current.successor, current.dates) == ("", "", ())


@pytest.mark.anyio
async def test_the_link_carries_the_heading_path_and_json_says_what_replaced_a_note(
    tmp_path: Path,
) -> None:
    nested = (
        "# ADR-3\n\n## Decision\n\n### Numbering\n\n"
        "Invoice numbers come from a Postgres sequence.\n"
    )
    vault = decisions(
        tmp_path,
        {
            "Decisions/ADR-1 Sequence numbers.md": OLD,
            "Decisions/ADR-2 Gapless numbers.md": NEW,
            "Decisions/ADR-3.md": nested,
        },
    )
    result = await retriever(vault, tmp_path).semantic_query(QUERY, limit=5, max_tokens=2000)
    text = format_search(result)
    # Obsidian's link to a heading under another is the breadcrumb, written once.
    assert "### [[ADR-3#Decision#Numbering]] · score" in text
    assert "Decision > Numbering" not in text
    groups = {g["path"]: g for g in search_data(result)["groups"]}
    old = groups["Decisions/ADR-1 Sequence numbers.md"]
    assert old["replaced"] == "superseded by [[ADR-2 Gapless numbers]]"
    assert old["dates"] == {"date": "2026-06-15"}
    assert "replaced" not in groups["Decisions/ADR-2 Gapless numbers.md"]


@pytest.mark.anyio
@pytest.mark.parametrize("max_tokens", [120, 300])
async def test_over_budget_the_footer_names_the_best_passage_left_out_as_a_call(
    tmp_path: Path, max_tokens: int
) -> None:
    """Whether some passages fit (300) or none (120), what matched is never reported as
    nothing: the best passage left out is named as the call that reads it."""
    vault = decisions(
        tmp_path,
        {"Decisions/ADR-1 Sequence numbers.md": OLD, "Decisions/ADR-2 Gapless numbers.md": NEW},
    )
    result = await retriever(vault, tmp_path).semantic_query(QUERY, limit=5, max_tokens=max_tokens)
    text = format_search(result)
    assert result.over_budget and "Nothing matches" not in text
    best = result.over_budget[0]
    assert (
        f"left out to stay within max_tokens={max_tokens}, the best: "
        f'vault_read_note(path="{best.path}"' in text.split("\n---\n")[1]
    )
    assert text.count("vault_read_note") <= 2  # the best left out, and the best shown


MONEY = (
    "---\nstatus: accepted\ndate: 2026-06-26\n---\n# ADR-8 Money\n\n## Representation\n\n"
    "Amounts are integer minor units with a currency code, never floats.\n\n## Rounding\n\n"
    "Tax is computed on the invoice total per rate and rounded once with banker's rounding.\n"
)
TAX = (
    '---\nstatus: accepted\nsupersedes: "[[ADR-8 Money#Rounding]]"\ndate: 2026-09-26\n---\n'
    "# ADR-13 Tax per line\n\n## Decision\n\nEach line is taxed and rounded half away from "
    "zero, then summed per rate.\n"
)


@pytest.mark.anyio
async def test_a_note_that_says_it_replaces_a_section_comes_before_that_section_only(
    tmp_path: Path,
) -> None:
    """The new note names what it replaces (`supersedes`, here one section of the old
    note): a question on that section gets the new rule first and the old note labelled;
    a question on the old note's other section gets the old note alone."""
    vault = decisions(
        tmp_path, {"Decisions/ADR-8 Money.md": MONEY, "Decisions/ADR-13 Tax per line.md": TAX}
    )
    rounding = await retriever(vault, tmp_path).semantic_query(
        "How is tax on the invoice total rounded, banker's rounding?", limit=3
    )
    assert [g.context.path for g in rounding.groups][:2] == [
        "Decisions/ADR-13 Tax per line.md",
        "Decisions/ADR-8 Money.md",
    ]
    assert "Rounding superseded by [[ADR-13 Tax per line]]" in format_search(rounding)
    off = await retriever(vault, tmp_path, stages_off=("currency",)).semantic_query(
        "How is tax on the invoice total rounded, banker's rounding?", limit=3
    )
    assert off.groups[0].context.path == "Decisions/ADR-8 Money.md"

    representation = await retriever(vault, tmp_path).semantic_query(
        "Are amounts integer minor units with a currency code, never floats?", limit=1
    )
    assert [g.context.path for g in representation.groups] == ["Decisions/ADR-8 Money.md"]


@pytest.mark.anyio
async def test_an_edit_that_adds_or_drops_a_claim_is_seen_by_the_next_question(
    tmp_path: Path,
) -> None:
    """Claims are read again only from the notes that changed (issue 38: every note's
    frontmatter was read after each edit, 0.11 s at 10,000 notes): one retriever sees a
    claim added by an edit, a new note's claim, and a claim dropped."""
    question = "How is tax on the invoice total rounded, banker's rounding?"
    unclaimed = TAX.replace('supersedes: "[[ADR-8 Money#Rounding]]"\n', "")
    vault = decisions(
        tmp_path, {"Decisions/ADR-8 Money.md": MONEY, "Decisions/ADR-13 Tax per line.md": unclaimed}
    )
    searcher = retriever(vault, tmp_path)

    async def first_two() -> list[str]:
        found = await searcher.semantic_query(question, limit=3)
        return [group.context.path for group in found.groups][:2]

    assert (await first_two())[0] == "Decisions/ADR-8 Money.md"
    write(vault, "Decisions/ADR-13 Tax per line.md", TAX)
    bump_mtime(vault / "Decisions/ADR-13 Tax per line.md")
    assert await first_two() == ["Decisions/ADR-13 Tax per line.md", "Decisions/ADR-8 Money.md"]
    write(vault, "Decisions/ADR-13 Tax per line.md", unclaimed)
    bump_mtime(vault / "Decisions/ADR-13 Tax per line.md")
    assert (await first_two())[0] == "Decisions/ADR-8 Money.md"
    write(vault, "Decisions/ADR-14 Tax again.md", TAX.replace("ADR-13 Tax per line", "ADR-14"))
    assert (await first_two())[0] == "Decisions/ADR-14 Tax again.md"


@pytest.mark.anyio
async def test_a_replacement_written_after_the_note_naming_it_is_found(tmp_path: Path) -> None:
    """Links are resolved again when the notes listed change (and only then): the note an
    old decision names as its successor, written later, is found by the next question."""
    vault = decisions(tmp_path, {"Decisions/ADR-1 Sequence numbers.md": OLD})
    searcher = retriever(vault, tmp_path)
    before = await searcher.semantic_query(QUERY, limit=3)
    assert before.groups[0].context.path == "Decisions/ADR-1 Sequence numbers.md"
    write(vault, "Decisions/ADR-2 Gapless numbers.md", NEW)
    after = await searcher.semantic_query(QUERY, limit=3)
    assert [g.context.path for g in after.groups][:2] == [
        "Decisions/ADR-2 Gapless numbers.md",
        "Decisions/ADR-1 Sequence numbers.md",
    ]
