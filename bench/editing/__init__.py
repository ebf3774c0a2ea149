"""Editing: the read/edit laws, checked on generated notes and on whole real vaults.

What: for every target a read names, replacing it with what the read returned changes
nothing (GetPut) and reading it after a replace returns what was written (PutGet), on
10,000 generated notes (``lens``); the same through the tools on every heading and block
of both development vaults, through the folder and plugins 3.2 and 6.0 (``round_trips``);
the editing corpus through every source and plugin version (``corpus``). Against:
``docs/editing.md``: 0 failures, in the report's "Targets: editing". Speed of edits is in
``speed``, races and hostile edits in ``robustness``.

    python -m bench editing [--quick]   # lens and round trips, 6 min; section "Editing"
    python -m bench.editing.lens [--cases 10000]
    python -m bench.editing.round_trips [--vault DIR ...]
    python -m bench.editing.corpus
"""
