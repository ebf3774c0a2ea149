"""Edit economy: what updating one section of a note costs an agent, ours against the peer.

The task (issue 18, must-show 3): update the "Current state" section of the handover note
``Dev/Handover.md`` of ``fixtures/vault``, in two ways an agent does it:

- ``replace``: rewrite the section's body with the new state (six bullets);
- ``append``: add one bullet at the end of the section.

Each side runs on its own fresh copy of the vault behind the stand-in Local REST API,
driven through a real MCP client (the SDK's ``Client`` on a stdio subprocess), and
follows the calls an agent makes:

- ours, ``replace``: ``vault_read_note(path, heading="Current state")`` (the section and
  its version token), then ``vault_edit_note(operation="replace", target="Current state",
  content, version)``; the receipt (diff, sizes, new version, edit_id) is the
  confirmation. ``append``: ``vault_peek_file(path)`` (outline and version) then
  ``vault_edit_note(operation="append", ...)``.
- peer (``mcp-obsidian``, ``bench/shared/peer.py``): ``obsidian_patch_content(filepath,
  operation, target_type="heading", target="Current state", content)``, whose reply is one
  line with no content, then ``obsidian_get_file_contents(filepath)`` to confirm. For
  ``replace`` the agent must also see the current state before rewriting it, and the
  peer's only way is the whole note, so a second row adds that read first.

The peer sends the Local REST API's 1.x header PATCH (``Operation``, ``Target-Type``,
``Target``) without ``Markdown-Patch-Version: 1``: plugin 5.x refuses that (40084) and 6.x
has no header PATCH at all, so the peer is tried on 5.1.0 and 6.0.0 (what it answers is
reported) and measured on 4.1.7 and 3.2.0, where it works. Ours runs on 5.1.0 and 4.1.7.

Counted per call, characters / 4 as everywhere in the benchmark (``harness.count_tokens``):
the request's arguments (``json.dumps``) and the reply. A conversation of n calls makes
n + 1 requests, each carrying the tool definitions (``bench.economy.definitions``, measured in the
same sessions), so the whole conversation is ``(n + 1) x definitions + arguments +
replies``, as ``economy.conversation_costs`` counts (which leaves the arguments out: they
are small for a search, not for an edit). HTTP requests are the stand-in's count of
requests from the call's start to its end (start-up requests settled and left out).

Afterwards each side's note is read from disk and compared with the original (only the
section may change, and the new text must be there) and with the other side's.

    python -m bench.economy.edits            # prints the tables; JSON into bench/out/
    python -m bench.economy.edits --no-peer  # ours only
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bench.economy.definitions import measure_definitions
from bench.shared.harness import (
    FIXTURE_VAULT,
    OUT_DIR,
    Session,
    count_tokens,
    markdown_table,
    server_env,
    stdio_session,
)
from bench.shared.peer import PEER_REQUIREMENT, PeerInstall, ensure_peer, peer_session
from tests.standin.process import StandinProcess

NOTE = "Dev/Handover.md"
SECTION = "Current state"
# The section's new body: the state a fortnight later.
NEW_STATE = """\
- Version 0.5.0 is running on the home server (the grey NUC under the desk, hostname `wick`).
- Ingest works for the whole vault: about 110 notes, re-indexed every five minutes by a \
systemd timer that now runs as the `lk` user.
- Retrieval is keyword-only, via SQLite FTS5 ([[ADR-001 Use SQLite FTS5 for memory search]]).
- Chunking is per heading and skips fenced code ([[ADR-002 Chunk notes by heading]]).
- The bot pulls the top 8 chunks for each player message. Budget is 1,800 tokens of context.
- BUG-7 measured: 14 of 40 paraphrased questions miss. See [[Bug Log#BUG-7]]."""
NEW_BULLET = "- 2026-11-26: handed over to Priya; the eval harness in `eval/` runs in CI."
# The next heading after the section: what lies from it on must not change.
NEXT_HEADING = "## Next steps"
OURS_VERSIONS = ("5.1.0", "4.1.7")
PEER_VERSIONS = ("5.1.0", "6.0.0", "4.1.7", "3.2.0")
SCENARIOS = ("replace", "append")
SIDES = ("ours", "peer")
_VERSION = re.compile(r"\bversion ([0-9a-f]{12})\b")
# Requests still arriving this long after start-up are the server's warm-up, not a call.
SETTLE_SECONDS = 1.5


@dataclass
class Step:
    tool: str
    arguments: dict[str, Any]
    argument_tokens: int
    reply_tokens: int
    is_error: bool
    reply: str
    http_requests: int


@dataclass
class Flow:
    side: str  # "ours" or "peer"
    scenario: str
    plugin: str
    how: str
    definitions: int  # tokens of the tool definitions each request carries
    steps: list[Step] = field(default_factory=list)
    before: str = ""  # the note on disk before and after the flow
    after: str = ""
    error: str = ""

    @property
    def calls(self) -> int:
        return len(self.steps)

    @property
    def argument_tokens(self) -> int:
        return sum(s.argument_tokens for s in self.steps)

    @property
    def reply_tokens(self) -> int:
        return sum(s.reply_tokens for s in self.steps)

    @property
    def http_requests(self) -> int:
        return sum(s.http_requests for s in self.steps)

    @property
    def conversation(self) -> int:
        return (self.calls + 1) * self.definitions + self.argument_tokens + self.reply_tokens

    @property
    def failed(self) -> bool:
        return bool(self.error) or any(s.is_error for s in self.steps)

    def summary(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k not in ("before", "after")},
            "calls": self.calls,
            "argument_tokens": self.argument_tokens,
            "reply_tokens": self.reply_tokens,
            "http_requests": self.http_requests,
            "conversation": self.conversation,
            "failed": self.failed,
            "check": check_note(self.scenario, self.before, self.after),
        }

    def without_first(self) -> Flow:
        """The same flow without its first call (the peer's read before a replace)."""
        return Flow(
            self.side,
            self.scenario,
            self.plugin,
            self.how.split(" → ", 1)[-1],
            self.definitions,
            self.steps[1:],
            self.before,
            self.after,
            self.error,
        )


# --- checking the note on disk -----------------------------------------------------------


def _split(text: str) -> tuple[str, str, str] | None:
    """(everything up to and including the section's heading line, the body, from the next
    heading on)."""
    head = text.find(f"\n## {SECTION}\n")
    tail = text.find(f"\n{NEXT_HEADING}\n", head)
    if head < 0 or tail < 0:
        return None
    body_start = head + len(f"\n## {SECTION}\n")
    return text[:body_start], text[body_start : tail + 1], text[tail + 1 :]


def _squeeze(text: str) -> str:
    """The text with trailing spaces, blank lines and the ends' whitespace dropped."""
    return "\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip())


def check_note(scenario: str, before: str, after: str) -> dict[str, Any]:
    """Whether the edit did what was asked, and only that: the note outside the section is
    unchanged, and the section holds the new text (replace: only it, whitespace aside;
    append: the old body and then the bullet)."""
    old, new = _split(before), _split(after)
    if old is None or new is None:
        joined = NEXT_HEADING in after and f"\n{NEXT_HEADING}\n" not in after
        return {
            "changed": before != after,
            "outside_unchanged": False,
            "as_asked": False,
            "broken": f"'{NEXT_HEADING}' joined to the section's last line: no longer a heading"
            if joined
            else "the section or the next heading is gone",
        }
    outside = old[0] == new[0] and old[2] == new[2]
    wanted = NEW_STATE if scenario == "replace" else old[1].rstrip() + "\n" + NEW_BULLET
    as_asked = _squeeze(new[1]) == _squeeze(wanted)
    return {
        "changed": before != after,
        "outside_unchanged": outside,
        "as_asked": as_asked,
        "section": new[1],
    }


def compare(ours: str, peer: str) -> dict[str, Any]:
    """How two results of the same edit differ: not at all, in whitespace only, or more;
    with the differing lines (line breaks and trailing spaces shown)."""
    if ours == peer:
        return {"same": True, "whitespace_only": True, "diff": []}
    diff = list(
        difflib.unified_diff(
            [repr(line) for line in ours.splitlines(keepends=True)],
            [repr(line) for line in peer.splitlines(keepends=True)],
            "ours",
            "peer",
            n=1,
            lineterm="",
        )
    )
    return {
        "same": False,
        "whitespace_only": _squeeze(ours) == _squeeze(peer),
        "diff": diff[:30],
    }


# --- driving both sides ------------------------------------------------------------------


def fresh_vault(target: Path) -> Path:
    """A copy of the fixture vault with its modification times (old: nobody is typing)."""
    shutil.copytree(FIXTURE_VAULT, target, ignore=shutil.ignore_patterns(".smart-env"))
    return target


async def _settled(standin: StandinProcess) -> None:
    """Wait until the stand-in has seen no request for SETTLE_SECONDS (the server's
    start-up reads), then zero its counts."""
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < SETTLE_SECONDS:
        await anyio.sleep(0.25)
        total = (await anyio.to_thread.run_sync(standin.stats))["total"]
        if total != last:
            last, quiet_since = total, time.monotonic()
    await anyio.to_thread.run_sync(standin.reset_stats)


async def _step(session: Session, standin: StandinProcess, tool: str, args: dict[str, Any]) -> Step:
    await anyio.to_thread.run_sync(standin.reset_stats)
    result = await session.call(tool, args)
    requests = (await anyio.to_thread.run_sync(standin.stats))["total"]
    return Step(
        tool,
        args,
        count_tokens(json.dumps(args, ensure_ascii=False)),
        result.tokens,
        result.is_error,
        result.text,
        requests,
    )


FlowCalls = Callable[[Session, StandinProcess, Flow], Awaitable[None]]


async def ours_replace(session: Session, standin: StandinProcess, flow: Flow) -> None:
    read = await _step(session, standin, "vault_read_note", {"path": NOTE, "heading": SECTION})
    flow.steps.append(read)
    version = _VERSION.search(read.reply)
    edit = {"path": NOTE, "operation": "replace", "target": SECTION, "content": NEW_STATE}
    if version is not None:
        edit["version"] = version.group(1)
    flow.steps.append(await _step(session, standin, "vault_edit_note", edit))


async def ours_append(session: Session, standin: StandinProcess, flow: Flow) -> None:
    peek = await _step(session, standin, "vault_peek_file", {"path": NOTE})
    flow.steps.append(peek)
    version = _VERSION.search(peek.reply)
    edit = {"path": NOTE, "operation": "append", "target": SECTION, "content": NEW_BULLET}
    if version is not None:
        edit["version"] = version.group(1)
    flow.steps.append(await _step(session, standin, "vault_edit_note", edit))


def peer_flow(operation: str, content: str, *, read_first: bool) -> FlowCalls:
    async def calls(session: Session, standin: StandinProcess, flow: Flow) -> None:
        read = {"filepath": NOTE}
        if read_first:
            flow.steps.append(await _step(session, standin, "obsidian_get_file_contents", read))
        patch = {
            "filepath": NOTE,
            "operation": operation,
            "target_type": "heading",
            "target": SECTION,
            "content": content,
        }
        flow.steps.append(await _step(session, standin, "obsidian_patch_content", patch))
        flow.steps.append(await _step(session, standin, "obsidian_get_file_contents", read))

    return calls


OURS_HOW = {
    "replace": 'vault_read_note(heading="Current state") → vault_edit_note(replace, version)',
    "append": "vault_peek_file → vault_edit_note(append, version)",
}
PEER_HOW = {
    "replace": "obsidian_get_file_contents → obsidian_patch_content(replace) → "
    "obsidian_get_file_contents",
    "append": "obsidian_patch_content(append) → obsidian_get_file_contents",
}
OURS_CALLS: dict[str, FlowCalls] = {"replace": ours_replace, "append": ours_append}
PEER_CALLS: dict[str, FlowCalls] = {
    "replace": peer_flow("replace", NEW_STATE, read_first=True),
    "append": peer_flow("append", NEW_BULLET, read_first=False),
}


@asynccontextmanager
async def _ours(standin: StandinProcess, work: Path) -> AsyncIterator[Session]:
    env = server_env(standin=standin, config_dir=work / "config", embeddings=False)
    async with stdio_session(env) as session:
        yield session


async def run_flow(
    side: str,
    scenario: str,
    plugin: str,
    work: Path,
    peer: PeerInstall | None,
    peer_log: Path,
) -> Flow:
    """One side's calls for one scenario, on a fresh vault behind a fresh stand-in."""
    vault = fresh_vault(work / f"{side}-{scenario}-{plugin}" / "vault")
    before = (vault / NOTE).read_text("utf-8")
    how = OURS_HOW[scenario] if side == "ours" else PEER_HOW[scenario]
    calls = OURS_CALLS[scenario] if side == "ours" else PEER_CALLS[scenario]
    flow = Flow(side, scenario, plugin, how, 0, before=before)
    async with StandinProcess(vault, plugin_version=plugin) as standin:
        if side == "ours":
            opened = _ours(standin, vault.parent)
        else:
            assert peer is not None
            opened = peer_session(peer, standin, peer_log)
        async with opened as session:
            flow.definitions = (await measure_definitions(session.client)).tokens
            await _settled(standin)
            try:
                await calls(session, standin, flow)
            except Exception as exc:  # one failing flow must not hide the others
                flow.error = f"{type(exc).__name__}: {exc}"[:300]
    flow.after = (vault / NOTE).read_text("utf-8")
    return flow


async def edit_economy(
    work: Path,
    peer: PeerInstall | None,
    peer_log: Path,
    ours_versions: Sequence[str] = OURS_VERSIONS,
) -> dict[str, Any]:
    """Every flow: ours on `ours_versions`, the peer on PEER_VERSIONS, both scenarios; the
    flows, the peer's rows without its read before a replace, and the comparisons on disk
    of ours and the peer's on the first version both work on."""
    started = time.perf_counter()
    flows: list[Flow] = []
    for scenario in SCENARIOS:
        for plugin in ours_versions:
            print(f"edit economy: ours, {scenario}, plugin {plugin}", flush=True)
            flows.append(await run_flow("ours", scenario, plugin, work, None, peer_log))
        for plugin in PEER_VERSIONS if peer is not None else ():
            print(f"edit economy: peer, {scenario}, plugin {plugin}", flush=True)
            flows.append(await run_flow("peer", scenario, plugin, work, peer, peer_log))
    comparisons: dict[str, dict[str, Any]] = {}
    for scenario in SCENARIOS:
        for plugin in ours_versions:
            ours = _find(flows, "ours", scenario, plugin)
            theirs = _find(flows, "peer", scenario, plugin)
            if ours is None or theirs is None or ours.failed or theirs.failed:
                continue
            comparisons[scenario] = {"plugin": plugin, **compare(ours.after, theirs.after)}
            break
    rows = []
    for flow in flows:
        reference = next(
            (f for f in flows if (f.side, f.scenario) == ("ours", flow.scenario) and not f.failed),
            None,
        )
        versus = compare(reference.after, flow.after) if reference is not None else None
        rows.append({**flow.summary(), "versus_ours": versus})
        if flow.side == "peer" and flow.scenario == "replace" and not flow.failed:
            rows.append({**flow.without_first().summary(), "versus_ours": versus, "derived": True})
    return {
        "note": NOTE,
        "section": SECTION,
        "peer": PEER_REQUIREMENT if peer is not None else None,
        "flows": rows,
        "comparisons": comparisons,
        "seconds": time.perf_counter() - started,
    }


def _find(flows: Sequence[Flow], side: str, scenario: str, plugin: str) -> Flow | None:
    return next(
        (f for f in flows if (f.side, f.scenario, f.plugin) == (side, scenario, plugin)), None
    )


# --- the report --------------------------------------------------------------------------


def _first_line(text: str, limit: int = 110) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(empty)"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _outcome(row: dict[str, Any]) -> str:
    if row["error"]:
        return f"failed: {row['error'][:120]}"
    refused = next((s for s in row["steps"] if s["is_error"]), None)
    if refused is not None:
        message = refused["reply"].removeprefix("Caught Exception. Error: ")
        return f"{refused['tool']} refused: {_first_line(message, 150)}"
    check = row["check"]
    if not check["changed"]:
        return "note unchanged"
    if check.get("broken"):
        return "no: " + check["broken"]
    if check["as_asked"] and check["outside_unchanged"]:
        versus = row.get("versus_ours")
        if row["side"] == "ours" or versus is None:
            return "yes"
        if versus["same"]:
            return "yes, the same bytes as ours"
        return "yes, whitespace differs from ours" if versus["whitespace_only"] else "yes"
    parts = [
        "section not as asked" if not check["as_asked"] else "",
        "changed outside the section" if not check["outside_unchanged"] else "",
    ]
    return "; ".join(p for p in parts if p)


def _summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One sentence: ours against the peer's first working plugin version, and which
    versions refused the peer."""

    def cost(row: dict[str, Any]) -> str:
        calls = f"{row['calls']} call{'s' if row['calls'] != 1 else ''}"
        spent = row["argument_tokens"] + row["reply_tokens"]
        return (
            f"{calls}, {spent:,} tokens of arguments and replies "
            f"({row['conversation']:,} with the definitions)"
        )

    ours = next((r for r in rows if r["side"] == "ours" and not r["failed"]), None)
    peers = [r for r in rows if r["side"] == "peer" and not r["failed"]]
    refused = sorted({r["plugin"] for r in rows if r["side"] == "peer" and r["failed"]})
    parts = [f"Ours: {cost(ours)}." if ours else "Ours failed."]
    if peers:
        plugin = peers[0]["plugin"]
        same = [r for r in peers if r["plugin"] == plugin]
        parts.append(f"The peer on {plugin}: " + "; or ".join(cost(r) for r in same) + ".")
    if refused:
        parts.append(f"Plugin {', '.join(refused)} refused the peer's PATCH.")
    return [" ".join(parts)]


def section(result: dict[str, Any]) -> str:
    """The report's section: per scenario, one row per flow, then each call, then the two
    results on disk compared."""
    lines = [
        "## Updating a section: tokens for a handover round trip",
        "",
        f'Update the "{result["section"]}" section of `{result["note"]}` (fixture vault) '
        "through the stand-in Local REST API, each flow on a fresh copy, through a real MCP "
        "client (`python -m bench.economy.edits`; module docstring for the method). Tokens are "
        "characters / 4 of each request's arguments (`json.dumps`) and of each reply; a "
        "conversation of n calls makes n + 1 requests, each carrying the tool definitions. "
        "HTTP requests: the stand-in's count while the calls ran. 'As asked': the note on disk "
        "afterwards holds the new text in the section (whitespace at its ends aside) and is "
        "unchanged outside it (whitespace differences from ours are shown below the table). "
        "Peer: " + (f"`{result['peer']}`." if result["peer"] else "left out (`--no-peer`)."),
    ]
    for scenario in SCENARIOS:
        rows = [r for r in result["flows"] if r["scenario"] == scenario]
        what = (
            "rewrite the section's body with the new state (six bullets)"
            if scenario == "replace"
            else "add one bullet at the end of the section"
        )
        lines += ["", f"### `{scenario}`: {what}", ""]
        table = [
            [
                r["side"] + (" (patch and read only)" if r.get("derived") else ""),
                r["plugin"],
                r["how"],
                r["calls"],
                f"{r['argument_tokens']:,}",
                f"{r['reply_tokens']:,}",
                f"{r['definitions']:,} x {r['calls'] + 1}",
                f"{r['conversation']:,}",
                r["http_requests"],
                _outcome(r),
            ]
            for r in rows
        ]
        lines.append(
            markdown_table(
                [
                    "side",
                    "plugin",
                    "the calls",
                    "n",
                    "arguments (tokens)",
                    "replies (tokens)",
                    "definitions x requests",
                    "whole conversation (tokens)",
                    "HTTP requests",
                    "changed as asked",
                ],
                table,
            )
        )
        lines += ["", *_summary(rows)]
        shown = [r for r in rows if not r.get("derived") and not r["failed"]]
        if shown:
            lines += ["", "Each call (first working run of each side):", ""]
            firsts = [next((r for r in shown if r["side"] == side), None) for side in SIDES]
            calls = [
                [
                    first["side"],
                    s["tool"],
                    s["argument_tokens"],
                    s["reply_tokens"],
                    s["http_requests"],
                    _first_line(s["reply"]),
                ]
                for first in firsts
                if first is not None
                for s in first["steps"]
            ]
            lines.append(
                markdown_table(
                    ["side", "tool", "arguments", "reply", "HTTP", "reply's first line"], calls
                )
            )
        compared = result["comparisons"].get(scenario)
        if compared is not None:
            if compared["same"]:
                verdict = "byte for byte the same note"
            elif compared["whitespace_only"]:
                verdict = "the same note except for whitespace"
            else:
                verdict = "different notes"
            lines += [
                "",
                f"On disk (plugin {compared['plugin']}), ours and the peer's leave {verdict}.",
            ]
            if compared["diff"]:
                lines += ["", "```diff", *compared["diff"], "```"]
    return "\n".join(lines)


# --- command line ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="python -m bench.economy.edits",
        description="Tokens for a handover update round trip: ours against the peer.",
    )
    parser.add_argument("--no-peer", action="store_true", help="ours only")
    parser.add_argument("--peer-venv", type=Path, default=OUT_DIR / "peer-venv")
    parser.add_argument("--cache", type=Path, default=OUT_DIR, help="where the JSON goes")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    peer = None if args.no_peer else ensure_peer(args.peer_venv)
    with tempfile.TemporaryDirectory(prefix="bench-edit-") as work:
        result = anyio.run(edit_economy, Path(work), peer, args.cache / "peer-stderr.log")
    (args.cache / "edit-economy.json").write_text(
        json.dumps(result, indent=1, ensure_ascii=False) + "\n", "utf-8"
    )
    print(section(result))
    return result


if __name__ == "__main__":
    main()
