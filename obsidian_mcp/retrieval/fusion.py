# pyright: strict
"""Reciprocal rank fusion: combine rankings that score on different scales."""

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

# The constant from Cormack et al. (2009); it keeps one list's top hit from drowning the
# agreement of several lists further down.
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[Sequence[K], float]], k: int = RRF_K
) -> dict[K, float]:
    """Fused score per item: the sum over (ranking, weight) of weight / (k + rank), rank
    counted from 1. An item repeated within a ranking counts at its best rank."""
    fused: dict[K, float] = {}
    for ranking, weight in rankings:
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused
