"""Snippets, sentence splitting and span merging, with their documented guarantees."""

import itertools
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from obsidian_mcp.text.snippets import (
    Snippet,
    cut_to_sentences,
    merge_spans,
    sentence_spans,
    snippet_around,
    snippets_for_matches,
    truncate_at_word,
)

PROSE = (
    "Mira left the harbour at dawn. The fog was thick, and the lanterns were out! "
    "Nobody saw her go. Did the ferryman know? He said nothing."
)


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


def inside_word(text: str, pos: int) -> bool:
    return 0 < pos < len(text) and not text[pos - 1].isspace() and not text[pos].isspace()


def word_length_at(text: str, pos: int) -> int:
    """Length of the word that `pos` falls inside."""
    return next(
        len(word.group()) for word in re.finditer(r"\S+", text) if word.start() < pos < word.end()
    )


def span_of(text: str, needle: str) -> tuple[int, int]:
    start = text.index(needle)
    return start, start + len(needle)


# --- sentence_spans -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   \n\n ", []),
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Wait… What now?", ["Wait…", "What now?"]),
        ("Wait... and then it came.", ["Wait... and then it came."]),
        ("Really?! Yes.", ["Really?!", "Yes."]),
        ('"Go!" she said. "Now!" He ran.', ['"Go!" she said.', '"Now!"', "He ran."]),
        ("“Stop.” Then silence.", ["“Stop.”", "Then silence."]),
        ("He (quietly.) Left.", ["He (quietly.)", "Left."]),
        ("Mr. Smith met Dr. Jones.", ["Mr. Smith met Dr. Jones."]),
        ("Use tools, e.g. Hammers. Done.", ["Use tools, e.g. Hammers.", "Done."]),
        ("J. R. R. Tolkien wrote.", ["J. R. R. Tolkien wrote."]),
        ("Pi is 3.14 roughly. Yes.", ["Pi is 3.14 roughly.", "Yes."]),
        ("See example.com today. Ok.", ["See example.com today.", "Ok."]),
        ("Visit example.com. Then go.", ["Visit example.com.", "Then go."]),
        ("Born in the U.S. Army ranks.", ["Born in the U.S. Army ranks."]),
        ("It is *done.* Next.", ["It is *done.*", "Next."]),
        ("no terminator at all", ["no terminator at all"]),
        ("First para\n\nSecond para", ["First para", "Second para"]),
        ("wrapped line\ncontinues here.", ["wrapped line\ncontinues here."]),
        (
            "- one\n- two\n* three\n1. four\n2) five",
            ["- one", "- two", "* three", "1. four", "2) five"],
        ),
        ("- item\n  continued", ["- item\n  continued"]),
        ("Intro:\n- a", ["Intro:", "- a"]),
        ("# Heading\nBody text", ["# Heading", "Body text"]),
        ("> quote one\n> quote two", ["> quote one", "> quote two"]),
        ("| a |\n| b |", ["| a |", "| b |"]),
        ("```\ncode\n```\nAfter", ["```", "code", "```", "After"]),
        ("Line one.\r\nLine two.", ["Line one.", "Line two."]),
        ("  padded.  ", ["padded."]),
    ],
)
def test_sentence_spans(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n\"'-#>|…A")), max_size=200))
def test_sentence_spans_cover_every_word_once(text: str) -> None:
    spans = sentence_spans(text)
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end
        assert not text[start].isspace() and not text[end - 1].isspace()
        assert not text[previous_end:start].strip()
        previous_end = end
    assert not text[previous_end:].strip()


# --- cut_to_sentences ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("One. Two. Three.", 100, ("One. Two. Three.", False)),
        ("One. Two. Three.", 9, ("One. Two.", True)),
        ("One. Two. Three.", 8, ("One.", True)),
        ("One. Two. Three.", 4, ("One.", True)),
        ("A long first sentence here. B.", 12, ("A long first…", True)),
        ("Supercalifragilistic word.", 5, ("Super…", True)),
        ("  One.\n\nTwo.  ", 100, ("One.\n\nTwo.", False)),
        ("", 10, ("", False)),
        ("   ", 10, ("", False)),
    ],
)
def test_cut_to_sentences(text: str, max_chars: int, expected: tuple[str, bool]) -> None:
    assert cut_to_sentences(text, max_chars) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abc .!?\n")), max_size=200), st.integers(1, 60))
def test_cut_to_sentences_bounds(text: str, max_chars: int) -> None:
    cut, was_cut = cut_to_sentences(text, max_chars)
    assert len(cut) <= max_chars + 1
    if cut.endswith("…"):
        assert was_cut
    else:
        assert len(cut) <= max_chars
        assert cut in text
    assert was_cut == (cut.rstrip("…").strip() != text.strip())


# --- truncate_at_word ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("short", 10, "short"),
        ("exactly ten", 11, "exactly ten"),
        ("two words", 5, "two…"),
        ("two words", 3, "two…"),
        ("two  words here", 10, "two  words…"),
        ("unbreakable", 4, "unbr…"),
    ],
)
def test_truncate_at_word(text: str, max_chars: int, expected: str) -> None:
    assert truncate_at_word(text, max_chars) == expected


# --- merge_spans ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spans", "gap", "merged"),
    [
        ([], 0, []),
        ([(5, 10), (0, 3)], 0, [(0, 3), (5, 10)]),
        ([(0, 5), (5, 8)], 0, [(0, 8)]),
        ([(0, 5), (3, 4)], 0, [(0, 5)]),
        ([(0, 5), (7, 9)], 2, [(0, 9)]),
        ([(0, 5), (8, 9)], 2, [(0, 5), (8, 9)]),
        ([(4, 4), (1, 2)], 0, [(1, 2)]),
        ([(0, 2), (0, 2)], 0, [(0, 2)]),
    ],
)
def test_merge_spans(spans: list[tuple[int, int]], gap: int, merged: list[tuple[int, int]]) -> None:
    assert merge_spans(spans, gap) == merged


@pytest.mark.parametrize(("spans", "gap"), [([(3, 1)], 0), ([(0, 1)], -1)])
def test_merge_spans_rejects_bad_input(spans: list[tuple[int, int]], gap: int) -> None:
    with pytest.raises(ValueError):
        merge_spans(spans, gap)


span_lists = st.lists(
    st.tuples(st.integers(0, 100), st.integers(0, 30)).map(lambda s: (s[0], s[0] + s[1])),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(span_lists, st.integers(0, 5))
def test_merge_spans_properties(spans: list[tuple[int, int]], gap: int) -> None:
    merged = merge_spans(spans, gap)
    assert merged == sorted(merged)
    for (_, end), (next_start, _) in itertools.pairwise(merged):
        assert end + gap < next_start  # disjoint, and further apart than the gap
    covered = {i for start, end in merged for i in range(start, end)}
    union = {i for start, end in spans for i in range(start, end)}
    if gap == 0:
        assert covered == union
    else:
        assert union <= covered
        assert all(start in union and end - 1 in union for start, end in merged)


# --- snippet_around ----------------------------------------------------------------------


def test_whole_sentence_when_it_fits() -> None:
    snippet = snippet_around(PROSE, *span_of(PROSE, "fog"), max_chars=60)
    assert snippet.text == "…The fog was thick, and the lanterns were out!…"
    assert (snippet.cut_before, snippet.cut_after) == (True, True)


def test_sentences_are_added_while_they_fit() -> None:
    snippet = snippet_around(PROSE, *span_of(PROSE, "ferryman"), max_chars=70)
    assert snippet.text == "…Nobody saw her go. Did the ferryman know? He said nothing."
    assert not snippet.cut_after


def test_no_ellipsis_when_everything_fits() -> None:
    snippet = snippet_around("  Short text.  ", 2, 7, max_chars=100)
    assert snippet == Snippet("Short text.", 2, 13, False, False)


def test_long_sentence_is_windowed_at_word_boundaries() -> None:
    text = " ".join(f"w{i:02d}" for i in range(40)) + "."
    snippet = snippet_around(text, *span_of(text, "w20"), max_chars=23)
    assert snippet.text == "…w18 w19 w20 w21 w22…"
    assert snippet.end - snippet.start <= 23


def test_window_starts_at_sentence_start_when_in_reach() -> None:
    text = "Before. " + "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu."
    snippet = snippet_around(text, *span_of(text, "beta"), max_chars=30)
    assert snippet.text.startswith("…Alpha beta")
    assert snippet.cut_after


def test_match_inside_a_word_keeps_the_whole_word() -> None:
    text = "one two concatenate three four five six seven eight nine ten."
    snippet = snippet_around(text, *span_of(text, "cat"), max_chars=20)
    assert "concatenate" in snippet.text


def test_match_longer_than_budget_is_truncated_from_its_start() -> None:
    text = "Intro. alpha beta gamma delta epsilon. Outro."
    start, end = span_of(text, "alpha beta gamma delta")
    snippet = snippet_around(text, start, end, max_chars=12)
    assert snippet.text == "…alpha beta…"
    assert snippet.start == start


def test_single_giant_word_is_cut() -> None:
    text = "x" * 50
    snippet = snippet_around(text, 10, 12, max_chars=8)
    assert snippet.end - snippet.start == 8
    assert snippet.start <= 10 and snippet.end >= 12


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [("", 0, 0), ("abc", -5, 99), ("abc", 2, 1), ("   ", 1, 2), ("a b", 1, 1)],
)
def test_degenerate_inputs(text: str, start: int, end: int) -> None:
    snippet = snippet_around(text, start, end, max_chars=5)
    assert 0 <= snippet.start <= snippet.end <= len(text)


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        snippet_around("text", 0, 1, max_chars=0)


texts = st.text(alphabet=st.sampled_from(list('ab cd.!?\n\t"é')), max_size=300)


@st.composite
def text_and_match(draw: st.DrawFn) -> tuple[str, int, int, int]:
    text = draw(texts)
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, len(text)))
    return text, start, end, draw(st.integers(1, 80))


@settings(max_examples=200, deadline=None)
@given(text_and_match())
def test_snippet_around_guarantees(case: tuple[str, int, int, int]) -> None:
    text, match_start, match_end, max_chars = case
    snippet = snippet_around(text, match_start, match_end, max_chars)
    start, end = snippet.start, snippet.end
    excerpt = text[start:end]
    assert 0 <= start <= end <= len(text)
    assert end - start <= max_chars
    assert len(snippet.text) <= max_chars + 2
    expected = ("…" if snippet.cut_before else "") + excerpt + ("…" if snippet.cut_after else "")
    assert snippet.text == expected
    assert snippet.cut_before == bool(text[:start].strip())
    assert snippet.cut_after == bool(text[end:].strip())
    if 0 < match_end - match_start <= max_chars:
        assert start <= match_start and match_end <= end
        assert text[match_start:match_end] in snippet.text
    elif match_end - match_start > max_chars:
        assert match_start <= start and end <= match_end
    if excerpt and match_end > match_start:
        assert not excerpt[0].isspace() or start == match_start
        assert not excerpt[-1].isspace() or end == match_end
    elif excerpt:
        assert not excerpt[0].isspace() and not excerpt[-1].isspace()
    # A word is split only at the match or when that word outgrows the budget.
    if inside_word(text, start):
        assert start == match_start or word_length_at(text, start) > max_chars
    if inside_word(text, end):
        assert end == match_end or word_length_at(text, end) > max_chars


# --- snippets_for_matches ---------------------------------------------------------------


def test_nearby_matches_share_a_snippet() -> None:
    matches = [span_of(PROSE, "fog"), span_of(PROSE, "lanterns")]
    (snippet,) = snippets_for_matches(PROSE, matches, max_chars=80)
    assert "fog" in snippet.text and "lanterns" in snippet.text


def test_distant_matches_get_separate_non_overlapping_snippets() -> None:
    matches = [span_of(PROSE, "harbour"), span_of(PROSE, "nothing")]
    first, second = snippets_for_matches(PROSE, matches, max_chars=40)
    assert "harbour" in first.text and "nothing" in second.text
    assert first.end <= second.start


def test_overlapping_windows_are_cut_apart_between_matches() -> None:
    text = " ".join(f"w{i:02d}" for i in range(30))
    matches = [span_of(text, "w05"), span_of(text, "w12")]
    first, second = snippets_for_matches(text, matches, max_chars=20)
    assert "w05" in first.text and "w12" in second.text
    assert first.end <= second.start
    assert first.end - first.start <= 20 and second.end - second.start <= 20


def test_duplicate_and_unsorted_matches() -> None:
    fog, dawn = span_of(PROSE, "fog"), span_of(PROSE, "dawn")
    assert snippets_for_matches(PROSE, [fog, dawn, fog], 200) == snippets_for_matches(
        PROSE, [dawn, fog], 200
    )
    assert snippets_for_matches(PROSE, [], 50) == []


@st.composite
def text_and_disjoint_matches(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]], int]:
    text = draw(texts)
    assume(text)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=12)))
    matches = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    return text, matches, draw(st.integers(1, 80))


@settings(max_examples=200, deadline=None)
@given(text_and_disjoint_matches())
def test_snippets_for_matches_guarantees(case: tuple[str, list[tuple[int, int]], int]) -> None:
    text, matches, max_chars = case
    snippets = snippets_for_matches(text, matches, max_chars)
    for snippet in snippets:
        assert snippet.end - snippet.start <= max_chars
        assert len(snippet.text) <= max_chars + 2
    for before, after in itertools.pairwise(snippets):
        assert before.end <= after.start
    for start, end in matches:
        if 0 < end - start <= max_chars:
            assert any(s.start <= start and end <= s.end for s in snippets)


def test_a_long_sentence_splits_into_clauses_at_semicolons() -> None:
    clause = "the wall failed at its weakest point near the sluices at the harbour mouth"
    long_sentence = "; ".join([clause] * 6) + "."
    spans = sentence_spans(long_sentence)
    assert len(spans) == 6
    assert [long_sentence[s:e] for s, e in spans][:2] == [clause + ";", clause + ";"]
    short = "It rained; we stayed in."
    assert sentence_spans(short) == [(0, len(short))]
