"""The `obsidian-mcp` command (and `python -m obsidian_mcp`): the CLI, imported with the
cycle collector paused, and what the import built frozen.

A new server spends half its way to the first answer importing: its modules, the MCP SDK's
models above all, build some hundreds of thousands of objects that live as long as the
process, and the collector's passes over them while they are built find nothing to free.
Paused, importing all that `serve` needs took 0.73-0.76 s instead of 0.82-0.84 s (four runs
each). Paused alone it gains nothing: resumed, the collector walks every object the pause
let pile up. Frozen too (here for the CLI, in `cli._serve` for the server), a new server's
first answer at 10,000 notes came after 1.52 s instead of 1.62 (median of 20 alternating
restarts; python -m bench.speed.restart).
"""

import gc

from obsidian_mcp.index.bulk import collector_paused


def main() -> None:
    with collector_paused():
        from obsidian_mcp.cli import main as run

        # Out of every later collection's way: resumed, the collector would walk it all at
        # once (the new objects are all young) and again in each full collection after.
        gc.freeze()
    run()
