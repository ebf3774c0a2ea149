"""Speed: how long every tool takes, from 200 to 50,000 notes, and what each layer adds.

What: each tool's first and warm calls on generated vaults through the folder and the
stand-in Local REST API; a tool call's overhead over its raw REST request; the index
build, the embedder, HTTP clients in parallel, the usage log's cost, an edit's time.
Against: issue 3.4 (warm ``vault_semantic_query`` <= 200 ms at 10,000 notes) and 2.7
(a tool call <= 2x its raw request), in the report's "Targets: speed".

    python -m bench speed [--quick]         # 1,000 to 10,000 notes, 9 min; "Speed and scale"
    python -m bench big                     # 10,000 and 50,000 notes: "Big vault"
    python -m bench.speed.index --notes 1000 10000    # the passage index: build, reopen
    python -m bench.speed.embedding         # the local model's passages per second
    python -m bench.speed.http_load         # 20 HTTP clients on one server
    python -m bench.speed.usage_overhead    # the usage log off, on and full; its section
    python -m bench.speed.edit_speed        # an edit of a 1 MB note
    python -m bench.speed.lookup            # the index builder's own work, no model
"""
