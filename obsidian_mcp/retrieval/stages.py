# pyright: strict
"""Which optional stages of `vault_semantic_query` run (`OBSIDIAN_STAGES_OFF`; the default
is chosen by measurement, see `Settings.stages_off`). The benchmark runs them all, then
each one off in turn, to measure what it is worth (`python -m bench.ablation`)."""

from collections.abc import Set
from dataclasses import dataclass

from obsidian_mcp.config import StageName


@dataclass(frozen=True, slots=True)
class Stages:
    # The query's roles and aliases also search for the names they stand for (expansion.py).
    expansion: bool = True
    # No note gets more than a few passages while other notes have some (packing.diversify).
    note_cap: bool = True
    # The reply ends with a short menu of the next-best passages and their calls (render.py).
    menu: bool = True
    # A passage is shown from its best sentence on, with what follows (search.focus_window);
    # off, it is shown as indexed.
    cutting: bool = True

    @classmethod
    def without(cls, off: Set[StageName]) -> "Stages":
        return cls(
            expansion="expansion" not in off,
            note_cap="note-cap" not in off,
            menu="menu" not in off,
            cutting="cutting" not in off,
        )
