"""Retrieval: does the answer come back? Hit rates on question sets whose answers we know.

What: the gold phrase in ``vault_semantic_query``'s first response, and within two calls
(the second being the read the first suggests), per strategy, per slice (dev and
held-out, category, trait), per development vault, and with each stage switched off.
Against: issues 3 and 9 (first response >= 75%, paraphrase >= 70%, within two calls >=
90%), in the report's "Targets: retrieval and context economy". Questions: JSONL beside
the vaults they ask about (``fixtures/questions.jsonl``, ``fixtures/ledgerline/``).

    python -m bench retrieval [--quick]                  # ablation, 4 min (section "Ablation")
    python -m bench.retrieval.quality --report bench     # every figure per vault, 4 min
    python -m bench.retrieval.ablation --report bench    # each stage off, both vaults, 2 min
    python -m bench.retrieval.tune --misses              # in-process view for tuning
    python -m bench.retrieval.weak_match                 # the weak-match floor's rates
    python -m bench.retrieval.several_vaults             # one server over several vaults
    python -m bench.retrieval.questions check            # the question set keeps its rules

Each run's sections land in ``bench/REPORT.md`` under "Retrieval" and "Ablation".
"""
