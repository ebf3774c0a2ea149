"""A short run of the lost-update benchmark (bench/robustness/edit_races.py; `python -m
bench.robustness.edit_races` is the long one): a simulated user saves a note every 50 ms, in place
and by rename, while an agent makes 20 edits to it and to three other notes, through the
vault folder and the stand-in REST API (5.1.0), with and without force. No user change is
lost, and every agent edit is either applied (exactly, on a text holding every user line
saved before its write) or refused with a reason.

Through REST alone a write cannot be checked (the plugin has no conditional write; a save
landing between the server's read and its PUT would be overwritten, `RestSource.replace_if`),
so there a note changed a moment ago is left alone even with force=True: every edit to the
user's note is refused, in both modes."""

from pathlib import Path

import anyio
import pytest

from bench.robustness.edit_races import Outcome, Plan, RivalOutcome, RivalPlan, run_all, run_rivals

SMALL = Plan(edits=20, period=0.05, versions=("5.1.0",), repeat=1)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    root: Path = tmp_path_factory.mktemp("edit-races")
    return anyio.run(run_all, root, SMALL)


def _label(outcome: Outcome) -> str:
    return f"{outcome.source} {outcome.mode} {outcome.style}"


def test_every_combination_ran(outcomes: list[Outcome]) -> None:
    keys = {(o.source, o.mode, o.style) for o in outcomes}
    assert keys == {
        (source, mode, style)
        for source in ("folder", "REST 5.1.0", "REST 5.1.0 + folder")
        for mode in ("default", "force")
        for style in ("in-place", "rename")
    }
    for outcome in outcomes:
        assert outcome.user_writes >= 2, _label(outcome)
        assert outcome.edits == SMALL.edits


def test_no_user_change_is_lost(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        assert outcome.user_lost == [], (_label(outcome), outcome.notes, outcome.errors)


def test_every_agent_edit_is_applied_or_refused_with_a_reason(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        refused = sum(outcome.refused.values())
        assert outcome.errors == [], (_label(outcome), outcome.errors)
        assert outcome.window_edits == 0, _label(outcome)
        assert outcome.applied + refused == outcome.edits, _label(outcome)
        guarded = outcome.refused["user typing"] + outcome.refused["half saved"]
        if outcome.style == "rename":
            # A save by rename never leaves the note empty for a reader to see.
            assert outcome.refused["half saved"] == 0, _label(outcome)
        if outcome.mode == "default" or outcome.source == "REST 5.1.0":
            # The user saved the note moments ago: the guard refuses every edit to it.
            assert outcome.applied_user_note == 0, _label(outcome)
            assert guarded == SMALL.edits // 2, _label(outcome)
        else:
            # With force on disk only a note read in the middle of an in-place save (empty)
            # is left alone: the swap checks what the typing guard would have.
            assert outcome.refused["user typing"] == 0, _label(outcome)
            assert outcome.applied_user_note > 0, _label(outcome)


# Several server processes at once (bench/robustness/edit_races.py, "several server processes"): a
# process appending scratch entries while another edits the scratch note, and two processes
# editing one note through the folder and through the REST API alone.
RIVALS = RivalPlan(edits=12, versions=("5.1.0",), scenarios=("scratch", "folder", "rest"), repeat=1)


@pytest.fixture(scope="module")
def rivals(tmp_path_factory: pytest.TempPathFactory) -> list[RivalOutcome]:
    return anyio.run(run_rivals, tmp_path_factory.mktemp("rivals"), RIVALS)


def test_nothing_acknowledged_by_one_process_is_lost_to_another(
    rivals: list[RivalOutcome],
) -> None:
    assert {(o.scenario, o.source) for o in rivals} == {
        ("scratch", "folder"),
        ("folder", "folder"),
        ("rest", "REST 5.1.0"),
    }
    for outcome in rivals:
        label = f"{outcome.scenario} {outcome.source}"
        assert outcome.errors == [], label
        assert outcome.lost_edits == [] and outcome.lost_entries == [], label
        assert outcome.refused_but_written == [], label
        # Each process acknowledged some of its calls; none was taken for the user typing
        # (the journal says which changes the server made).
        assert outcome.acknowledged_edits > 0, label
        assert outcome.refused["user typing"] == 0, label
    [scratch] = [o for o in rivals if o.scenario == "scratch"]
    assert scratch.acknowledged_entries == RIVALS.edits
