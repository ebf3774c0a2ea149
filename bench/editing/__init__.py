"""Editing: the read/edit laws, checked on generated notes and on whole real vaults.

What: for every target a read names, replacing it with what the read returned changes
nothing (GetPut) and reading it after a replace returns what was written (PutGet)
(``lens``, 10,000 generated notes, 1 min); the same through the server on every heading
and block of the development vaults (``round_trips``, 2 min); the editing corpus through
every source and plugin version (``corpus``). Against: ``docs/editing.md``; any failure
is a bug (each prints its counts, 0 failures expected). Speed of edits is in ``speed``,
races and hostile edits in ``robustness``.

    python -m bench.editing.lens [--cases 10000]
    python -m bench.editing.round_trips
    python -m bench.editing.corpus
"""
