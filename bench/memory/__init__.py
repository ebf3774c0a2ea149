"""Memory: does ``vault_recall`` find what was remembered, and how fast at 100,000 entries.

What: recall and remember medians at 1,000 to 100,000 entries (cold load, warm recall by
tags and by query, a new process's first recall), through the store and the MCP tool,
over the folder and the stand-in; recall by meaning on paraphrased questions; the memory
features' quality (supersession, near duplicates, "nothing found", scopes) on a held-out
third. Against: issue 4.5 (warm recall <= 50 ms, remember <= 10 ms at 100,000 entries),
in the report's "Targets: memory". Question sets: ``bench/memory/sets/`` (JSONL, each row
saying whether it is held out), read by ``bench.memory.sets``.

    python -m bench memory [--quick]        # 1,000 to 100,000 entries, 7 min; "Memory"
    python -m bench.memory.recall --meaning # recall by meaning: hit rates
    python -m bench.memory.quality          # the memory features' quality
    python -m bench.memory.locomo --data locomo10.zip  # LoCoMo turn-level recall (issue
                                            # 37; the data is not shipped), 10 min
"""
