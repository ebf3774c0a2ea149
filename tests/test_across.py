"""How a search over several vaults shares out its cutting (`across.offered_shares`): the
passages cut in every vault together are as many as one vault's query cuts, taken where
the best weighed scores are."""

from obsidian_mcp.retrieval.across import offered_shares
from obsidian_mcp.retrieval.fusion import RankedPassages
from obsidian_mcp.retrieval.search import OFFERED_PER_SHOWN, OfferedPassages


def offered(*scores: float) -> OfferedPassages:
    """A vault's offered passages with these fused scores, best first."""
    ranked = [(number, score) for number, score in enumerate(scores)]
    found = RankedPassages("local-index", "", ranked, len(ranked), {})
    return OfferedPassages("a question", "", found, ranked, [])


def test_as_many_are_cut_as_one_vault_would_cut_where_the_scores_are_best() -> None:
    limit = 2
    lore = offered(*(1.0 - 0.1 * n for n in range(8)))  # 1.0, 0.9, ... 0.3
    journal = offered(*(2.0 - 0.5 * n for n in range(4)))  # relative: 1.0, 0.75, 0.5, 0.25
    shares = offered_shares([("lore", lore), ("journal", journal)], None, limit)
    assert sum(shares) == limit * OFFERED_PER_SHOWN == 8
    # The eight best relative scores: lore's 1.0-0.5 (six), journal's 1.0 and 0.75.
    assert shares == [6, 2]


def test_a_vault_far_from_the_question_gets_a_smaller_share() -> None:
    lore, journal = offered(1.0, 0.9, 0.8, 0.7, 0.6), offered(1.0, 0.9, 0.8, 0.7, 0.6)
    even = offered_shares([("lore", lore), ("journal", journal)], None, 1)
    weighed = offered_shares(
        [("lore", lore), ("journal", journal)], {"lore": 0.8, "journal": 0.5}, 1
    )
    assert even == [2, 2]
    assert weighed == [4, 0]  # journal's weight is (0.5 / 0.8) ** 4 = 0.15


def test_no_share_is_more_than_what_a_vault_offered() -> None:
    shares = offered_shares([("lore", offered(1.0)), ("journal", offered(1.0, 0.2))], None, 5)
    assert shares == [1, 2]
    assert offered_shares([("lore", offered()), ("journal", offered())], None, 5) == [0, 0]
