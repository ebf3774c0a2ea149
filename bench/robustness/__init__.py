"""Robustness: nothing lost, nothing leaked, no crash, under hostile use and long runs.

What, and what must be 0: unexpected errors when every tool gets 1,000 hostile calls
(``fuzz``, 6 min; ``edit_fuzz`` for the edit tools); acknowledged writes lost when the
server is killed mid-burst (``crash``, 50 kills per source); memories lost when
processes and synced devices write at once (``memory_races``); user lines lost when an
agent edits while the user types (``edit_races``); stale answers, growing memory or
descriptors, or a leaked key over 30 minutes (``soak``). Each long run rewrites only its
own section of ``bench/REPORT.md``:

    python -m bench fuzz          # or --fuzz; section "Hostile inputs"
    python -m bench crash         # or --crash 50; "Crashes"
    python -m bench races         # or --races; "Memory races"
    python -m bench edit-races    # or --edit-races; "Edits while the user types"
    python -m bench soak          # or --soak 30; "Soak"

The test suite runs a short version of each (tests/test_fuzz.py, test_crash.py, ...).
"""
