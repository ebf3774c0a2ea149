"""Benchmarks (not tests) of obsidian-mcp, one package per subject.

    retrieval/   does the answer come back: hit rates per strategy, stage, vault, question
    economy/     what reaching it costs an agent: tokens, calls, tool definitions
    speed/       how long every tool takes, at 1,000 to 50,000 notes
    memory/      recall and remember: hit rates by meaning, speed at 100,000 entries
    editing/     the read/edit laws on generated notes and on whole vaults
    robustness/  hostile inputs, crashes, races, a 30-minute soak
    shared/      what the subjects share: servers and stand-ins, generated vaults, hit
                 tests, tables, the report's targets and stamped sections; it imports no
                 subject

``python -m bench`` runs them and assembles ``bench/REPORT.md`` (``bench/__main__.py``):
each subject renders its own targets, tables and charts (its ``report`` module;
retrieval's ablation in ``retrieval/ablation.py``), and ``bench/report.py`` gathers them.

The flat modules of earlier versions (``python -m bench.lens``, ``bench.retrieval_bench``
...) are still runnable by their old names, which ``CHANGELOG.md`` cites: ``MOVED`` maps
each to where it lives now (``bench.economy`` and ``bench.speed`` name their subjects now:
their modules run as ``bench.economy.context`` and ``bench.speed.scale``).
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

MOVED = {
    "ablation": "retrieval.ablation",
    "candidate_recall": "retrieval.candidate_recall",
    "crash": "robustness.crash",
    "definitions": "economy.definitions",
    "edit_corpus": "editing.corpus",
    "edit_economy": "economy.edits",
    "edit_fuzz": "robustness.edit_fuzz",
    "edit_races": "robustness.edit_races",
    "edit_speed": "speed.edit_speed",
    "embedding": "speed.embedding",
    "fuzz": "robustness.fuzz",
    "generate_vault": "shared.generate_vault",
    "harness": "shared.harness",
    "http_load": "speed.http_load",
    "index_bench": "speed.index",
    "lens": "editing.lens",
    "locomo": "memory.locomo",
    "memory_bench": "memory.recall",
    "memory_quality": "memory.quality",
    "memory_races": "robustness.memory_races",
    "peer": "shared.peer",
    "questions": "retrieval.questions",
    "read_overhead": "speed.read_overhead",
    "retrieval_bench": "retrieval.quality",
    "round_trips": "editing.round_trips",
    "several_vaults": "retrieval.several_vaults",
    "soak": "robustness.soak",
    "tune": "retrieval.tune",
    "usage_check": "economy.usage_check",
    "usage_overhead": "speed.usage_overhead",
    "vaults": "retrieval.vaults",
    "weak_match": "retrieval.weak_match",
}
_HERE = Path(__file__).resolve().parent


class _OldNames(importlib.abc.MetaPathFinder):
    """Finds ``bench.<old name>`` as the file it moved to, so ``python -m`` runs it."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, old = fullname.partition(".")
        if package != "bench" or old not in MOVED:
            return None
        return importlib.util.spec_from_file_location(
            fullname, _HERE / (MOVED[old].replace(".", "/") + ".py")
        )


sys.meta_path.append(_OldNames())
