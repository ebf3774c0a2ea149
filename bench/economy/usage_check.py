"""The usage log checked against the benchmark (issue 29): ``python -m bench`` runs the
context-economy conversations with ``OBSIDIAN_USAGE_LOG=on``, then ``obsidian-mcp stats
--json`` (a subprocess, as a user runs it) must give the figures the benchmark counted
itself from what its own MCP client sent and received:

- calls, and reply tokens (count, median, p90, total), per tool;
- the follow-ups: a search is *searched again* when the session's next search is on
  similar words (at least half the words of the shorter question in common, words as
  the keyword index cuts them), and *read elsewhere* when, before that next search, a
  ``vault_read_note`` or ``vault_peek_file`` that answered opened a note whose path is
  not in the search's reply text;
- the definitions' cost: (calls + 1) x the definitions' tokens per session.

The benchmark's side is computed here from the client's records (reply texts, the
arguments it sent), not from the log, so the two can never drift: a difference stops
the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.shared.harness import REPO_ROOT, CallResult, markdown_table, median, percentile
from obsidian_mcp.retrieval.keyword import terms

# The tools whose follow-ups are counted, and the ones that open a note.
SEARCHES = {
    "vault_semantic_query": "query",
    "vault_smart_search": "query",
    "vault_search_map": "query",
    "vault_quick_context": "topic",
}
READS = ("vault_read_note", "vault_peek_file")

Call = tuple[str, dict[str, Any], CallResult]


def usage_env(cache: Path) -> dict[str, str]:
    """What a server's environment needs to log its calls into ``cache/usage``."""
    return {"OBSIDIAN_USAGE_LOG": "on", "OBSIDIAN_CACHE_DIR": str(cache)}


def _words(arguments: dict[str, Any], tool: str) -> set[str]:
    question = arguments.get(SEARCHES[tool], "")
    return set(terms(question)) if isinstance(question, str) else set()


def _similar(first: set[str], second: set[str]) -> bool:
    if not first or not second:
        return False
    return 2 * len(first & second) >= min(len(first), len(second))


def follow_ups(sessions: Sequence[Sequence[Call]]) -> dict[str, int]:
    counts = {"searches": 0, "searched_again": 0, "read_elsewhere": 0, "missed": 0}
    for calls in sessions:
        searches = [n for n, (tool, _, _) in enumerate(calls) if tool in SEARCHES]
        for number, start in enumerate(searches):
            tool, arguments, reply = calls[start]
            end = searches[number + 1] if number + 1 < len(searches) else len(calls)
            again = end < len(calls) and _similar(
                _words(arguments, tool), _words(calls[end][1], calls[end][0])
            )
            elsewhere = any(
                read_tool in READS and not read.is_error and read_args["path"] not in reply.text
                for read_tool, read_args, read in calls[start + 1 : end]
            )
            counts["searches"] += 1
            counts["searched_again"] += again
            counts["read_elsewhere"] += elsewhere
            counts["missed"] += again or elsewhere
    return counts


def bench_figures(sessions: Sequence[Sequence[Call]], definitions: int) -> dict[str, Any]:
    """The figures ``stats`` must reproduce, from the benchmark's own records."""
    tools: dict[str, list[int]] = {}
    for calls in sessions:
        for tool, _, result in calls:
            tools.setdefault(tool, []).append(result.tokens)
    return {
        "calls": sum(len(calls) for calls in sessions),
        "sessions": len(sessions),
        "tools": {
            tool: {
                "calls": len(tokens),
                "median": median(tokens),
                "p90": percentile(tokens, 90),
                "total": sum(tokens),
            }
            for tool, tokens in sorted(tools.items())
        },
        "follow_ups": follow_ups(sessions),
        "definitions": {
            "requests": sum(len(calls) + 1 for calls in sessions),
            "tokens": sum((len(calls) + 1) * definitions for calls in sessions),
        },
    }


def stats_figures(cache: Path) -> dict[str, Any]:
    """``obsidian-mcp stats --json`` over the log in ``cache``, in the same shape."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    done = subprocess.run(
        [sys.executable, "-m", "obsidian_mcp", "stats", "--json"],
        env={**env, "OBSIDIAN_CACHE_DIR": str(cache)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(done.stdout)
    return {
        "calls": data["calls"],
        "sessions": data["sessions"],
        "tools": {
            tool: {
                "calls": found["calls"],
                "median": found["tokens"]["median"],
                "p90": found["tokens"]["p90"],
                "total": found["tokens"]["total"],
            }
            for tool, found in sorted(data["tools"].items())
        },
        "follow_ups": {key: data["follow_ups"][key] for key in follow_ups([])},
        "definitions": {
            "requests": data["definitions"]["requests"],
            "tokens": data["definitions"]["tokens"],
        },
        "skipped_lines": data["log"]["skipped"],
    }


def differences(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Where two figure trees differ (numbers compared to 1e-9)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found: list[str] = []
        for key in sorted(set(ours) | set(theirs)):
            found += differences(ours.get(key), theirs.get(key), f"{where}/{key}")
        return found
    if isinstance(ours, int | float) and isinstance(theirs, int | float):
        return [] if abs(ours - theirs) <= 1e-9 else [f"{where}: bench {ours}, stats {theirs}"]
    return [] if ours == theirs else [f"{where}: bench {ours!r}, stats {theirs!r}"]


def check(
    sessions: Sequence[Sequence[Call]], cache: Path, definitions: int, keep: Path | None
) -> dict[str, Any]:
    """Compare; keep a copy of the log in ``keep/usage`` (``OBSIDIAN_CACHE_DIR=keep
    obsidian-mcp stats`` reads it); raise when stats and the benchmark disagree."""
    ours = bench_figures(sessions, definitions)
    theirs = stats_figures(cache)
    if keep is not None:
        shutil.rmtree(keep / "usage", ignore_errors=True)
        shutil.copytree(cache / "usage", keep / "usage", ignore=shutil.ignore_patterns("key"))
    found = differences(ours, {k: v for k, v in theirs.items() if k != "skipped_lines"})
    if theirs["skipped_lines"]:
        found.append(f"stats skipped {theirs['skipped_lines']} unreadable lines")
    if found:
        raise RuntimeError("obsidian-mcp stats disagrees with the benchmark: " + "; ".join(found))
    print(
        f"  usage log: stats agrees with the benchmark ({ours['calls']} calls in "
        f"{ours['sessions']} sessions)",
        flush=True,
    )
    return {"bench": ours, "stats": theirs, "agree": True}


def section(usage: dict[str, Any]) -> list[str]:
    """The report's table: each figure as the benchmark counted it and as stats read it."""
    ours, theirs = usage["bench"], usage["stats"]

    def both(a: float, b: float) -> str:
        return " / ".join(f"{v:,.1f}".removesuffix(".0") for v in (a, b))

    rows = [
        [
            f"`{tool}`",
            both(figures["calls"], theirs["tools"][tool]["calls"]),
            both(figures["median"], theirs["tools"][tool]["median"]),
            both(figures["p90"], theirs["tools"][tool]["p90"]),
            both(figures["total"], theirs["tools"][tool]["total"]),
        ]
        for tool, figures in ours["tools"].items()
    ]
    follow, found = ours["follow_ups"], theirs["follow_ups"]
    return [
        "### The usage log agrees with the benchmark",
        "",
        f"The conversations above ran with `OBSIDIAN_USAGE_LOG=on` ({ours['sessions']} "
        f"server sessions, {ours['calls']} calls); `obsidian-mcp stats --json` over that log "
        "gives each figure the benchmark counted from its own client (bench / stats; "
        "`bench/economy/usage_check.py`; a difference stops the run).",
        "",
        markdown_table(
            ["tool", "calls", "reply tokens median", "p90", "total"], rows
        ).replace("| n/a |", "| - |"),
        "",
        f"Follow-ups of {both(follow['searches'], found['searches'])} searches: searched "
        f"again {both(follow['searched_again'], found['searched_again'])}, read elsewhere "
        f"{both(follow['read_elsewhere'], found['read_elsewhere'])}. Tool definitions: "
        f"{both(ours['definitions']['requests'], theirs['definitions']['requests'])} requests, "
        f"{both(ours['definitions']['tokens'], theirs['definitions']['tokens'])} tokens.",
    ]
