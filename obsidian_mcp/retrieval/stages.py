# pyright: strict
"""Which stages of `vault_semantic_query` run (`OBSIDIAN_STAGES_OFF`, default: all). The
benchmark switches each one off in turn to measure what it is worth (`python -m
bench.retrieval.ablation`, the ablation table in bench/REPORT.md)."""

from collections.abc import Set
from dataclasses import dataclass

from obsidian_mcp.config import StageName


@dataclass(frozen=True, slots=True)
class Stages:
    # Candidates from BM25 over passages (candidates.CandidateSources.gather).
    keyword: bool = True
    # Candidates from the local passage index, by meaning.
    dense: bool = True
    # Candidates from a semantic source: /search/smart, a custom route, Smart Connections.
    semantic: bool = True
    # Each ranking's best few are shown first, before the fused order (fusion.seated).
    seats: bool = True
    # A passage of the note that replaced a ranked one (`superseded_by`) comes before it
    # (currency.current_first).
    currency: bool = True
    # A passage is shown from its best sentence on, with what follows (cutting.focus_window);
    # off, it is shown as indexed.
    cutting: bool = True

    @classmethod
    def without(cls, off: Set[StageName]) -> "Stages":
        return cls(
            keyword="keyword" not in off,
            dense="dense" not in off,
            semantic="semantic" not in off,
            seats="seats" not in off,
            currency="currency" not in off,
            cutting="cutting" not in off,
        )
