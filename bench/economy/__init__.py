"""Context economy: what reaching the answer costs an agent, in tokens and calls.

What: per strategy (``vault_semantic_query``, keyword search, quick context, the drill-down
an agent does without this server, and the peer ``mcp-obsidian``), tokens and calls until
the gold phrase appears; the tool definitions a client sends with every request; a
handover section updated through the editing tools. Against: issues 3, 5 and 19 (>= 5x
fewer tokens than the drill-down and the peer, hit rate not worse; definitions <= 2,550
tokens), in the report's "Targets: retrieval and context economy".

    python -m bench economy [--quick] [--no-peer]   # 3 min (quick: 20 s); sections "Context
                                                    # economy", "Updating a section"
    python -m bench.economy.definitions             # the definitions table alone, 5 s

The usage log's figures (``obsidian-mcp stats``) are checked against the ones this run
counts itself (``usage_check``).
"""
