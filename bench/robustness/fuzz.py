"""Hostile inputs: every tool called with generated arguments, each answer classified.

An answer is *normal* (a result), *actionable* (an error that says what to change), or
*unexpected* (a traceback, a bare "Error executing tool X", pydantic's raw dump, the
crash catch-all, or a reply longer than its budget). A call that gets no answer within
the timeout is a *hang*; a client that loses the server is a *crash*. After every call
the vault is unchanged outside the memory files (the writers' folder, where each process
writes its own file, and the memory page made from them) and the scratch note, and a
canary file beside the vault is untouched; a change counts as unexpected. The single
memory file of earlier versions is only read: a write to it counts as unexpected too.

The edit tools write the note they name, so they run apart (`run_edit_fuzz`, on a vault
copy and server of their own) with arguments aimed at real notes and a stricter check per
call: every file under the run's folder keeps its bytes except the note the call names,
and that one only changes with a receipt (see "the edit tools" below).

The test suite runs a short profile (tests/test_fuzz.py); `python -m bench --fuzz` runs
the long one, at least 1,000 calls per tool through the folder and through the stand-in.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from mcp import Client

from obsidian_mcp.memory.files import MemoryFiles

Schema = dict[str, Any]
CallResult = tuple[bool, str]

OUTCOMES = ("normal", "actionable", "unexpected", "crash", "hang")
CALL_TIMEOUT_SECONDS = 30.0
# An error the model reads is a sentence or three; the longest legitimate ones (a missing
# note with five suggested paths) stay well under this.
MAX_ERROR_CHARS = 1500
# vault_read_note may return up to max_chars=100,000 characters, plus its header.
MAX_REPLY_CHARS = 102_000
# Slack over a token budget for the reply's fixed frame (header, footer, next call).
BUDGET_SLACK_TOKENS = 300
_MEMORY = MemoryFiles("obsidian-mcp/memory.jsonl")
# What the tools may write: the memory page, the scratch note, and every file of the
# memory writers' folder. The legacy memory file is not among them: it is only read.
WRITABLE = [Path(_MEMORY.view), Path("obsidian-mcp/scratch.md")]
WRITABLE_FOLDERS = [Path(_MEMORY.folder)]

_BAD_TEXT = re.compile(
    r"Traceback|errors\.pydantic\.dev|validation error for|Input should be|\[type=|"
    r"internal error \(|^Error executing tool \w+:?\s*$"
)

_MEGABYTE = 1_000_000
BIG_STRINGS = [
    "a" * _MEGABYTE,
    "word " * (2 * _MEGABYTE // 5),
    "Mira lighthouse " * (_MEGABYTE // 16),
    "../" * (_MEGABYTE // 3),
    "a/" * 200_000 + "x.md",
]
HOSTILE_STRINGS = [
    "",
    " ",
    "\x00",
    "Characters/Mira\x00.md",
    "\ud800",
    "a\udfffb",
    "\u202eevil\u202c",
    "e\u0301\u0301\u0301",
    "🦜🏳️‍🌈",
    "../outside.md",
    "..\\outside.md",
    "%2e%2e/outside.md",
    "%252e%252e%252foutside.md",
    "..%2f..%2fcanary.txt",
    "..%5c..%5ccanary.txt",
    "Characters/../../canary.txt",
    "C:\\Windows\\win.ini",
    "c:/x.md",
    "/etc/passwd",
    "\\\\server\\share\\x.md",
    "CON",
    "NUL",
    "COM1.md",
    "aux.md",
    "Home.md/x.md",
    "x" * 300 + ".md",
    "é" * 200 + ".md",
    "/".join(["d"] * 2000),
    "#tag",
    "my tag",
    "a,b,c",
    "##",
    "#",
    "99999999d",
    "9999-12-31",
    "0001-01-01T00:00",
    "0001-01-01",
    "2026-13-45",
    "-3d",
    "1e400",
    "NaN",
    "null",
    "[]",
    '{"a": 1}',
    '"quoted phrase" word',
    '"',
    "Mira",
    "Home.md",
    "Characters",
    "Characters/Mira.md",
]


# Real notes and folders of the fixture vault, so that reads also reach a note's text.
REAL_PATHS = [
    "Home.md",
    "Home",
    "Characters/Hobb Marrow.md",
    "Characters/Ilvane Dusk",
    "Characters",
    "Lore",
    "Sessions",
    "",
]


def string_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(HOSTILE_STRINGS),
        st.text(max_size=40),
        st.sampled_from(BIG_STRINGS),
    )


def any_value() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        string_values(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
    )
    return st.one_of(
        scalars,
        st.lists(scalars, max_size=30),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    )


def _concrete(schema: Schema) -> Schema:
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    return options[0] if options else schema


def plausible(schema: Schema) -> st.SearchStrategy[Any]:
    """Values of the right type, around and beyond the edges of what is allowed."""
    spec = _concrete(schema)
    if "enum" in spec:
        return st.sampled_from([*spec["enum"], "", "yesterday", "MARKDOWN"])
    kind = spec.get("type")
    if kind == "integer":
        low, high = spec.get("minimum", 0), spec.get("maximum", 1000)
        return st.one_of(
            st.integers(min_value=low - 3, max_value=high + 3),
            st.sampled_from([-1, 0, -(2**63), 2**63, 10**30]),
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(string_values(), max_size=25)
    return string_values()


def well_typed(schema: Schema) -> st.SearchStrategy[Any]:
    """Values that pass validation, hostile in content: they reach the tool's own code."""
    spec = _concrete(schema)
    if "enum" in spec:
        return st.sampled_from(spec["enum"])
    kind = spec.get("type")
    if kind == "integer":
        low, high = spec.get("minimum", -(2**40)), spec.get("maximum", 2**40)
        return st.one_of(st.integers(min_value=low, max_value=high), st.sampled_from([low, high]))
    if kind == "boolean":
        return st.booleans()
    short = st.one_of(
        st.sampled_from(HOSTILE_STRINGS), st.sampled_from(REAL_PATHS), st.text(max_size=40)
    )
    if kind == "array":
        return st.lists(short, max_size=spec.get("maxItems", 5))
    return short


def arguments_for(schema: Schema) -> st.SearchStrategy[dict[str, Any]]:
    """Half the calls well typed (hostile content that reaches the tool's code), half with
    anything at all in any parameter, missing ones and a stranger included."""
    properties: dict[str, Schema] = schema.get("properties", {})
    required = set(schema.get("required", []))
    typed = st.fixed_dictionaries(
        {name: well_typed(spec) for name, spec in properties.items() if name in required},
        optional={
            name: well_typed(spec) for name, spec in properties.items() if name not in required
        },
    )
    anything = st.fixed_dictionaries(
        {},
        optional={
            **{name: st.one_of(plausible(spec), any_value()) for name, spec in properties.items()},
            "unknown_argument": any_value(),
        },
    )
    return st.one_of(typed, anything)


def classify(tool: str, arguments: dict[str, Any], is_error: bool, text: str) -> str:
    if is_error:
        if _BAD_TEXT.search(text) or len(text) > MAX_ERROR_CHARS or not text.strip():
            return "unexpected"
        return "actionable"
    budget = arguments.get("max_tokens")
    if "max_tokens" in arguments or tool in ("vault_quick_context", "vault_semantic_query"):
        tokens = budget if isinstance(budget, int) and budget >= 100 else 1000
        if math.ceil(len(text) / 4) > tokens + BUDGET_SLACK_TOKENS:
            return "unexpected"
    return "unexpected" if len(text) > MAX_REPLY_CHARS else "normal"


def _skipped(path: Path, skip: set[Path], trees: tuple[Path, ...]) -> bool:
    return path in skip or any(path.is_relative_to(tree) for tree in trees)


def tree_digest(root: Path, skip: set[Path], trees: tuple[Path, ...] = ()) -> str:
    """Every file's path and content, hashed: the final proof nothing changed. `skip`
    leaves paths out, `trees` folders with everything in them."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and not _skipped(path, skip, trees):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def tree_stamp(
    root: Path, skip: set[Path], trees: tuple[Path, ...] = ()
) -> list[tuple[str, int, int]]:
    """Every entry's path, size and modification time in nanoseconds: any write changes
    one of them, and checking it after each call costs far less than hashing."""
    return [
        (str(path), st.st_size, st.st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if not _skipped(path, skip, trees) and not path.is_symlink()
        for st in (path.stat(),)
    ]


@dataclass
class Tally:
    """Outcomes per tool, and the first few unexpected answers to show; for the edit tools
    also how often the named note was written (or moved to Obsidian's trash by an undo)
    and how many calls changed anything else."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    wrote: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    outside: Counter[str] = field(default_factory=Counter)

    def add(self, tool: str, outcome: str, detail: str) -> None:
        self.counts.setdefault(tool, Counter())[outcome] += 1
        if outcome in ("unexpected", "crash", "hang") and len(self.examples) < 20:
            self.examples.append(f"{tool} [{outcome}]: {detail[:500]!r}")

    def failures(self) -> int:
        return sum(c["unexpected"] + c["crash"] + c["hang"] for c in self.counts.values())

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "tool": tool,
                "calls": sum(c.values()),
                **{o: c[o] for o in OUTCOMES},
                **(
                    {
                        "wrote": self.wrote[tool]["wrote"],
                        "trashed": self.wrote[tool]["trashed"],
                        "outside": self.outside[tool],
                    }
                    if tool in EDIT_TOOLS
                    else {}
                ),
            }
            for tool, c in sorted(self.counts.items())
        ]


class Guard:
    """The vault and the canary beside it, as they must stay."""

    def __init__(
        self,
        vault: Path,
        canary: Path,
        writable: list[Path],
        writable_folders: list[Path] | None = None,
    ) -> None:
        """`writable`: files the tools may write; `writable_folders`: folders whose every
        file they may write (the memory writers' folder; by default `WRITABLE_FOLDERS`)."""
        self.vault, self.canary = vault, canary
        self.skip = {vault / p for p in writable}
        # The folder holding the writable files appears on first write; it is theirs.
        self.skip |= {vault / p.parent for p in writable}
        folders = WRITABLE_FOLDERS if writable_folders is None else writable_folders
        self.trees = tuple(vault / p for p in folders)
        self.vault_digest = tree_digest(vault, self.skip, self.trees)
        self.vault_stamp = tree_stamp(vault, self.skip, self.trees)
        self.canary_bytes = canary.read_bytes()

    def changed(self, *, thorough: bool = False) -> str | None:
        if self.canary.read_bytes() != self.canary_bytes:
            return "the canary beside the vault changed"
        if tree_stamp(self.vault, self.skip, self.trees) != self.vault_stamp or (
            thorough and tree_digest(self.vault, self.skip, self.trees) != self.vault_digest
        ):
            return "the vault changed outside the memory files and the scratch note"
        return None


def prepare_vault(fixture: Path, work: Path) -> tuple[Path, Path]:
    """A copy of the fixture vault, and a canary file beside it."""
    vault = work / "vault"
    shutil.copytree(fixture, vault)
    canary = work / "canary.txt"
    canary.write_text("canary: must never change\n")
    return vault, canary


async def call_once(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    try:
        with anyio.fail_after(CALL_TIMEOUT_SECONDS):
            result = await client.call_tool(tool, arguments)
    except TimeoutError:
        return "hang", f"no answer in {CALL_TIMEOUT_SECONDS:g} s"
    except Exception as exc:
        return "crash", f"{type(exc).__name__}: {exc}"
    text = "".join(getattr(block, "text", "") for block in result.content)
    return classify(tool, arguments, result.is_error, text), text


def fuzz_tool(
    call: Callable[[str, dict[str, Any]], tuple[str, str]],
    guard: Guard,
    tally: Tally,
    tool: str,
    schema: Schema,
    examples: int,
) -> None:
    """`examples` generated calls of one tool; `call` runs one on the live client."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        # Megabyte strings are the point here, and slow to draw; no example is filtered.
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(arguments_for(schema))
    def one_call(arguments: dict[str, Any]) -> None:
        outcome, text = call(tool, arguments)
        broken = guard.changed()
        if broken is not None:
            outcome, text = "unexpected", broken
        tally.add(tool, outcome, f"{arguments!r:.200} -> {text}")

    one_call()


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Outcomes per tool; with the edit tools among the rows, two more columns: calls
    that wrote the note they named (an undo's removal through Obsidian's trash included),
    and calls that changed any other file (which also count as unexpected)."""
    edits = any("outside" in r for r in rows)
    lines = [
        "| tool | calls | normal results | actionable errors | unexpected errors | crashes "
        "| hangs |" + (" wrote the named note | writes outside it |" if edits else ""),
        "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if edits else ""),
    ]
    for r in rows:
        line = (
            f"| {r['tool']} | {r['calls']:,} | {r['normal']:,} | {r['actionable']:,} | "
            f"{r['unexpected']} | {r['crash']} | {r['hang']} |"
        )
        if edits:
            wrote = r["wrote"] + r["trashed"] if "wrote" in r else None
            trashed = f" ({r['trashed']} to .trash)" if r.get("trashed") else ""
            line += f" {wrote:,}{trashed} | {r['outside']} |" if wrote is not None else " - | - |"
        lines.append(line)
    return "\n".join(lines)


def run_fuzz(server: Any, guard: Guard, examples: int, tally: Tally | None = None) -> Tally:
    """Every tool of `server` (an MCPServer) but the edit tools, `examples` generated calls
    each. The edit tools write the notes they name, which this guard forbids: they run on
    their own vault copy with `run_edit_fuzz`."""
    from anyio.from_thread import start_blocking_portal

    tally = tally if tally is not None else Tally()
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(server)) as client,
    ):
        tools = portal.call(client.list_tools).tools

        def call(tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
            return portal.call(call_once, client, tool, arguments)

        for tool in tools:
            if tool.name in EDIT_TOOLS:
                continue
            fuzz_tool(call, guard, tally, tool.name, tool.input_schema, examples)
            broken = guard.changed(thorough=True)
            if broken is not None:
                tally.add(tool.name, "unexpected", broken)
    return tally


FIXTURE_VAULT = Path(__file__).resolve().parents[2] / "fixtures" / "vault"
STANDIN_VERSION = "5.1.0"


def long_profile(work: Path, calls_per_tool: int) -> dict[str, Any]:
    """The report's run: `calls_per_tool` calls of every tool through the folder and
    through the stand-in, each on a fresh copy of the fixture vault; the edit tools on a
    copy of their own (`edit_fuzz`)."""
    import time

    from obsidian_mcp.config import Settings
    from obsidian_mcp.server import build_server
    from tests.standin.process import StandinProcess

    def settings_for(root: Path, standin: StandinProcess | None, vault: Path) -> Settings:
        where: dict[str, Any] = (
            {"vault_path": vault, "api_key": None}
            if standin is None
            else {
                "api_key": standin.api_key,
                "port": standin.port,
                "cert": Path(standin.cert),
                "request_timeout": 5.0,
            }
        )
        return Settings.model_validate(
            {**where, "config_dir": root / "cfg", "cache_dir": root / "cache"}
        )

    def fuzz_edits(root: Path, vault: Path, standin: StandinProcess | None, examples: int) -> Tally:
        """The edit tools' run through the folder, or the stand-in beside it."""
        settings = settings_for(root, standin, vault)
        return edit_fuzz(partial(build_server, settings), root, vault, root / "cache", examples)

    started = time.perf_counter()
    sources: dict[str, list[dict[str, Any]]] = {}
    examples: list[str] = []
    for source in ("folder", f"stand-in {STANDIN_VERSION}"):
        slug = source.replace(" ", "-")
        root, edit_root = work / slug, work / f"{slug}-edits"
        root.mkdir(parents=True)
        edit_root.mkdir(parents=True)
        vault, canary = prepare_vault(FIXTURE_VAULT, root)
        edit_vault, _ = prepare_vault(FIXTURE_VAULT, edit_root)
        guard = Guard(vault, canary, WRITABLE)
        print(f"hostile inputs: {calls_per_tool:,} calls per tool through the {source}", flush=True)

        if source == "folder":
            tally = run_fuzz(build_server(settings_for(root, None, vault)), guard, calls_per_tool)
            edits = fuzz_edits(edit_root, edit_vault, None, calls_per_tool)
        else:
            with StandinProcess(vault, plugin_version=STANDIN_VERSION) as standin:
                settings = settings_for(root, standin, vault)
                tally = run_fuzz(build_server(settings), guard, calls_per_tool)
            with StandinProcess(edit_vault, plugin_version=STANDIN_VERSION) as standin:
                edits = fuzz_edits(edit_root, edit_vault, standin, calls_per_tool)
        sources[source] = sorted(tally.rows() + edits.rows(), key=lambda row: row["tool"])
        examples += tally.examples + edits.examples
    return {
        "calls_per_tool": calls_per_tool,
        "sources": sources,
        "examples": examples,
        "seconds": time.perf_counter() - started,
    }


# -- the edit tools --------------------------------------------------------------------------
#
# vault_edit_note writes the note it names, so the vault-wide guard above cannot judge it.
# The edit tools run on their own copy of the vault and server (run_edit_fuzz), with
# arguments aimed at real notes, headings, block ids and keys as well as hostile ones, and a
# stricter check per call: every file's bytes under the run's folder (the vault with its
# hidden and memory folders, the canary beside it, the config folder, and the cache folder
# with the passage and memory indexes; only the undo journal is left out) are taken before
# and after each call, and only the note the call names may differ (its path normalised,
# `.md` added), and only when the reply is a written receipt. A refusal, a dry run or a
# no-op writes nothing at all; the memory files, their page and hidden folders never change.

EDIT_TOOL = "vault_edit_note"
UNDO_TOOL = "vault_undo_edit"
EDIT_TOOLS = (EDIT_TOOL, UNDO_TOOL)
# The undo journal: the one file the edit tools keep outside the vault.
JOURNAL_FOLDER = "edits"

# Notes most edits aim at, so that edits meet earlier edits, undos and versions: the handover
# note, the CRLF daily note, the note with block ids, the empty note, and a few more.
EDIT_NOTES = [
    "Dev/Handover.md",
    "Home.md",
    "Daily/2026-10-05.md",
    "Daily/2026-10-03.md",
    "Characters/Companion/Key Moments.md",
    "Inbox/Untitled.md",
    "Characters/Hobb Marrow.md",
]
# Notes that do not exist yet: `create` makes them, later edits and undos meet them.
NEW_NOTES = [
    *(f"Inbox/fuzz-{n}.md" for n in range(4)),
    "Fuzz/Deep/er/new note.md",
    "Inbox/e\u0301te\u0301.md",
    "Inbox/\u00e9t\u00e9.md",
    "Inbox/🦜🏳️‍🌈.md",
    "Inbox/\u202eevil\u202c.md",
    "Inbox/new\nline.md",
    "Inbox/cr\rlf\r\n.md",
    "Inbox/tab\there.md",
    "Inbox/trailing .md",
    "Inbox/semi;colon#hash?q=1.md",
    "Inbox/percent%20name.md",
    "Inbox/Upper.MD",
    "Inbox/no-extension",
    "Inbox/archive.tar.gz",
    "Inbox/" + "n" * 240 + ".md",
    "Inbox/" + "é" * 126,
]
# What edits must never write, in many spellings: hidden folders and the memory files.
FORBIDDEN_PATHS = [
    ".obsidian/app.json",
    ".obsidian/app",
    ".obsidian/new.md",
    ".trash/Old Mira Draft.md",
    ".trash/Old Mira Draft",
    ".smart-env/new.md",
    "Dev/.hidden.md",
    ".hidden",
    "./.obsidian/app.json",
    "Dev/../.obsidian/app.json",
    "obsidian-mcp/memory.md",
    "obsidian-mcp/memory",
    "obsidian-mcp/memory/",
    "obsidian-mcp/memory.jsonl",
    "obsidian-mcp/memory.jsonl.md",
    "obsidian-mcp/memory/new.md",
    "obsidian-mcp/memory/new",
    "obsidian-mcp/memory (conflicted copy).jsonl",
    "obsidian-mcp/memory.sync-conflict-20260101-000000-ABC.jsonl",
    "./obsidian-mcp/memory.md",
    "obsidian-mcp//memory.md",
    " obsidian-mcp/memory.md ",
    "obsidian-mcp\\memory.md",
    "obsidian-mcp/./memory/x.md",
    "obsidian-mcp/memory/../memory.md",
    "obsidian-mcp/memory%2Fx.md",
    "obsidian-mcp%2Fmemory.md",
    "OBSIDIAN-MCP/Memory.md",
    "../vault/Home.md",
    "../canary.txt",
    "../cache/index",
    "Dev/Handover.md\x00.md",
    "Dev/Handover.md\r\n",
    "\r\nDev/Handover.md",
]
OPERATIONS = ["append", "prepend", "replace", "set", "delete", "replace_text", "create"]
ODD_OPERATIONS = ["", " append", "APPEND", "Replace", "patch", "undo", "delete_all", "\x00"]
ODD_FLAGS: list[Any] = ["true", "false", "yes", 1, 0, None, "", [], 2]
FORMATS = ["markdown", "json"]
BLOCK_IDS = [
    "^daily-confession-note",
    "^moment-first-meeting",
    "^moment-confession",
    "^moment-compass",
]
FRONTMATTER_KEYS = ["tags", "aliases", "updated", "title", "type", "status"]
TARGETS = [
    "Current state",
    "current state",
    "  CURRENT STATE  ",
    "Handover > Current state",
    "Handover > Next steps",
    "Handover > Gotchas",
    "Gotchas",
    "Contacts",
    "How the chunker breaks",
    "Handover",
    "re-index the vault and restart the bot",  # a comment inside a code fence
    "usage: ./reindex.sh [--full]",
    "Read this before touching anything",  # a callout's title
    "New section",
    "New > Deeper > Deepest",
    "Handover > New child",
    "Current state > ",
    " > ",
    ">",
    ">>",
    "Handover >> Current state",
    "Handover::Current state",
    *BLOCK_IDS,
    "^",
    "^^",
    "^missing-block",
    "^a b",
    "^moment-first-meeting\n",
    *FRONTMATTER_KEYS,
    "tags\n",
    "key: value",
    "a.b",
    "__proto__",
    "---",
    "the",
    "Version 0.4.2",
    "- ",
    "\n",
    "\r\n",
    "\r",
    "$&",
    "(.*)",
    "x" * 20_000,
    "x" * 20_001,
]
CONTENTS = [
    "",
    " ",
    "\n",
    "\r\n\r\n",
    "- Version 0.5.0 is running on `wick`.",
    "- one\n- two\n",
    "- one\r\n- two\r\n",
    "line one\rline two\r\nline three\n",
    "\n\n\nafter blank lines\n\n\n",
    "---",
    "---\ntitle: injected\n---",
    "# A new top heading",
    "## Current state",
    "## Next steps\n\n1. Nothing",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "```\nunclosed fence",
    "> [!note] callout\n> body",
    "^new-block-id",
    "text ^moment-first-meeting",
    "[[Home]] and [[Nowhere]] and ![[embed.png]]",
    "{{date}} $& $1 \\n \\1 %s {0}",
    "\x00",
    "a\x00b",
    "\u202eevil\u202c",
    "e\u0301\u0301\u0301",
    "🦜🏳️‍🌈",
    "\ufeffBOM at the start",
    "active",
    '"quoted: value"',
    "3",
    "[a, b]",
    "{a: 1, b: [2, 3]}",
    "2026-11-26",
    "null",
    "~",
    "'unterminated",
    "a: b: c",
    "- - -",
    "&anchor [*anchor, *anchor]",
    "*undefined_alias",
    "!!python/object/apply:os.system ['echo pwned']",
    "!!binary aGVsbG8=",
    "key:\n  nested: [1, 2]\n  other: x",
    "\t",
    "x" * 200_000,
    "x" * 200_001,
    "line\n" * 40_000,
    "word " * 39_999,
]
# The version of a note: its real current token (so the edit can proceed), an old one, or
# junk; resolved at call time (see _Resolve).
JUNK_VERSIONS = ["", " ", "0" * 12, "deadbeef", "c26c6ea4c331", "x" * 64, "x" * 65, "\x00", "v1"]


@dataclass(frozen=True)
class _Current:
    """Placeholder: the current version of the call's note, read from disk at call time."""


@dataclass(frozen=True)
class _Issued:
    """Placeholder: an edit_id a receipt of this run gave, `back` receipts ago."""

    back: int
    padded: bool = False


@dataclass(frozen=True)
class _MemoryWriter:
    """Placeholder: one of the memory writers' files as it exists at call time."""


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn about as often as its weight says (`st.one_of`
    draws its distinct branches evenly, and a branch listed twice counts once)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


def _format() -> st.SearchStrategy[Any]:
    return weighted((6, st.sampled_from(FORMATS)), (1, st.sampled_from(["", "MARKDOWN", "xml"])))


def _flag() -> st.SearchStrategy[Any]:
    return weighted((3, st.booleans()), (1, st.sampled_from(ODD_FLAGS)))


def edit_paths() -> st.SearchStrategy[Any]:
    real = st.sampled_from(EDIT_NOTES)
    respelled = real.flatmap(
        lambda p: st.sampled_from(
            [
                p.removesuffix(".md"),
                p.lower(),
                "./" + p,
                p.replace("/", "//"),
                p.replace("/", "\\"),
                " " + p + " ",
                p.replace("/", "/./"),
                p + ".md",
            ]
        )
    )
    return weighted(
        (3, real),
        (1, respelled),
        (1, st.sampled_from(NEW_NOTES)),
        (2, st.sampled_from(FORBIDDEN_PATHS)),
        (1, st.just(_MemoryWriter())),
        (1, st.sampled_from(HOSTILE_STRINGS)),
        (1, st.sampled_from(REAL_PATHS)),
        (1, st.text(max_size=40)),
    )


def _note_parts(text: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """A fixture note's heading paths (full and last name), block ids, frontmatter keys
    and some of its text (the start of its lines), to aim edits at what is there."""
    headings: list[str] = []
    stack: list[tuple[int, str]] = []
    fence = False
    lines = text.splitlines()
    keys: list[str] = []
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            if (found := re.match(r"([A-Za-z_][\w-]*):", line)) is not None:
                keys.append(found.group(1))
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        found = None if fence else re.match(r"(#{1,6})\s+(.+?)\s*$", line)
        if found is not None:
            level, name = len(found.group(1)), found.group(2)
            stack = [(lvl, n) for lvl, n in stack if lvl < level] + [(level, name)]
            headings += [" > ".join(n for _, n in stack), name]
    blocks = re.findall(r"\^[A-Za-z0-9-]+(?=\s*$)", text, re.MULTILINE)
    phrases = [line.strip()[:24] for line in lines if len(line.strip()) > 12][:12]
    return headings, blocks, keys, phrases


NOTE_PARTS = {note: _note_parts((FIXTURE_VAULT / note).read_text("utf-8")) for note in EDIT_NOTES}
YAML_VALUES = [c for c in CONTENTS if len(c) < 80]


def _optional_edit_flags(current_version: bool) -> dict[str, st.SearchStrategy[Any]]:
    return {
        "version": weighted(
            (3 if current_version else 1, st.just(_Current())),
            (1, st.sampled_from(JUNK_VERSIONS)),
        ),
        "create_target": _flag(),
        "dry_run": _flag(),
        "force": _flag(),
        "format": _format(),
    }


def _contents() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(CONTENTS), st.sampled_from(HOSTILE_STRINGS), st.text(max_size=80)
    )


def shaped_edit(note: str) -> st.SearchStrategy[dict[str, Any]]:
    """An edit of `note` whose arguments fit its operation: a heading or block of the
    note, one of its frontmatter keys, a piece of its text; hostile in content."""
    headings, blocks, keys, phrases = NOTE_PARTS.get(note, ([], [], [], []))
    path = st.sampled_from([note, note, note.removesuffix(".md"), note.lower(), "./" + note])
    section = st.fixed_dictionaries(
        {
            "path": path,
            "operation": st.sampled_from(["append", "prepend", "replace"]),
            "target": st.one_of(
                st.sampled_from(headings or ["New section"]),
                st.sampled_from(blocks or BLOCK_IDS),
                st.sampled_from(TARGETS),
            ),
            "content": _contents(),
        },
        optional=_optional_edit_flags(True),
    )
    frontmatter = st.fixed_dictionaries(
        {
            "path": path,
            "operation": st.sampled_from(["set", "set", "delete"]),
            "target": st.sampled_from(keys + FRONTMATTER_KEYS),
            "content": st.one_of(st.sampled_from(YAML_VALUES), st.text(max_size=20)),
        },
        optional=_optional_edit_flags(True),
    )
    text = st.fixed_dictionaries(
        {
            "path": path,
            "operation": st.just("replace_text"),
            "target": st.one_of(st.sampled_from(phrases or ["the"]), st.sampled_from(TARGETS)),
            "content": _contents(),
        },
        optional={
            **_optional_edit_flags(True),
            "expected_count": st.integers(min_value=0, max_value=4),
        },
    )
    return weighted((3, section), (1, frontmatter), (1, text))


def created_note() -> st.SearchStrategy[dict[str, Any]]:
    """A create (or, once made, an edit) of a note that was not in the vault."""
    return st.fixed_dictionaries(
        {
            "path": st.sampled_from(NEW_NOTES),
            "operation": st.sampled_from(["create", "create", "append", "replace"]),
            "target": st.sampled_from(["New section", "New > Deeper", "^new-block-id", "x"]),
            "content": _contents(),
        },
        optional=_optional_edit_flags(False),
    )


def loose_edit() -> st.SearchStrategy[dict[str, Any]]:
    """Well-typed edits with every argument drawn on its own: hostile paths (hidden and
    memory folders, traversal, huge, odd unicode), odd operations and combinations."""
    return st.fixed_dictionaries(
        {
            "path": edit_paths(),
            "operation": st.one_of(
                st.sampled_from(OPERATIONS),
                st.sampled_from(OPERATIONS),
                st.sampled_from(ODD_OPERATIONS),
            ),
        },
        optional={
            "target": st.one_of(
                st.sampled_from(TARGETS), st.sampled_from(HOSTILE_STRINGS), st.text(max_size=30)
            ),
            "content": _contents(),
            "expected_count": st.one_of(
                st.integers(min_value=-3, max_value=12),
                st.sampled_from([10_000, 10_001, 2**63, True]),
            ),
            **_optional_edit_flags(False),
        },
    )


def edit_arguments() -> st.SearchStrategy[dict[str, Any]]:
    """Edits aimed at the vault's notes (shaped to their operation), creates of new notes,
    and loose combinations, hostile in content throughout."""
    shaped = st.sampled_from(EDIT_NOTES).flatmap(shaped_edit)
    return weighted((3, shaped), (1, created_note()), (1, loose_edit()))


def undo_arguments() -> st.SearchStrategy[dict[str, Any]]:
    """Mostly ids this run's receipts gave (the last few, some padded with spaces), some
    made up or hostile."""
    issued = st.builds(_Issued, st.integers(min_value=0, max_value=12), st.booleans())
    return st.fixed_dictionaries(
        {
            "edit_id": weighted(
                (6, issued),
                (1, st.sampled_from(["e-00000000", "e-", "E-DEADBEEF", "e-%", "e-' OR 1=1 --"])),
                (1, st.sampled_from(HOSTILE_STRINGS)),
                (1, st.text(max_size=70)),
            )
        },
        optional={"format": _format()},
    )


def named_note(raw: Any) -> str | None:
    """The one note an edit call may write: its path as the server normalises it, with
    `.md` added; None when the path is refused or is not a note edits may write (hidden,
    or the memory files and their page)."""
    from obsidian_mcp.errors import VaultError
    from obsidian_mcp.paths import is_markdown, normalize_vault_path

    if not isinstance(raw, str):
        return None
    try:
        path = normalize_vault_path(raw)
    except VaultError:
        return None
    if not is_markdown(path):
        path += ".md"
    if any(part.startswith(".") for part in path.split("/")) or _MEMORY.owns(path):
        return None
    return path


Snapshot = dict[str, bytes | None]  # relative path -> bytes; folders end with "/" -> None


# SQLite's write-ahead log, shared-memory index and rollback journal beside a database (the
# passage index, the memory cache): SQLite writes them on its own schedule, whatever a call
# did (the index's background reading, a checkpoint on a slow machine); the databases
# themselves are still checked.
_SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


class EditGuard:
    """Every file under the run's folder, byte for byte, around each edit call (SQLite's
    own working files aside, `_SQLITE_SIDECARS`)."""

    def __init__(self, root: Path, vault: Path, journal: Path | None = None) -> None:
        """`root` holds everything checked (the vault, the canary, the config and cache
        folders); `journal` is the undo journal's folder, the one place left out."""
        self.root, self.vault = root, vault
        self.journal = journal

    def snapshot(self) -> Snapshot:
        found: Snapshot = {}
        for path in self.root.rglob("*"):
            if self.journal is not None and path.is_relative_to(self.journal):
                continue
            if path.name.endswith(_SQLITE_SIDECARS):
                continue
            key = path.relative_to(self.root).as_posix()
            if path.is_symlink() or not path.is_dir():
                try:
                    found[key] = path.read_bytes()
                except OSError as exc:
                    found[key] = f"unreadable: {exc}".encode()
            else:
                found[key + "/"] = None
        return found

    def settle(self, quiet: float = 1.0, limit: float = 120.0) -> bool:
        """Wait until nothing under the root changes for `quiet` seconds (a server's
        background work at start: the index's warm-up read, the memory page), at most
        `limit` seconds; whether it did."""
        import time

        started = last_change = time.monotonic()
        previous = self.snapshot()
        while time.monotonic() - started < limit:
            time.sleep(0.2)
            current = self.snapshot()
            if current != previous:
                previous, last_change = current, time.monotonic()
            elif time.monotonic() - last_change >= quiet:
                return True
        return False

    def vault_key(self, note: str) -> str:
        return (self.vault.relative_to(self.root) / note).as_posix()

    def judge(self, before: Snapshot, after: Snapshot, note: str | None) -> tuple[str, list[str]]:
        """What happened to `note` ("wrote", "trashed", "" for nothing) and every other
        path that changed. A file moved to the vault's `.trash/` counts as the note's
        own removal when it holds the note's bytes (Obsidian 5.x deletes to its trash)."""
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        changed += sorted(
            k for k in before.keys() ^ after.keys() if k.endswith("/") and k not in changed
        )
        target = self.vault_key(note) if note is not None else None
        ancestors = (
            {p.as_posix() + "/" for p in PurePosixPath(target).parents if str(p) != "."}
            if target
            else set()
        )
        trash = self.vault_key(".trash") + "/"
        removed = before.get(target) if target is not None and target not in after else None
        trashed = {
            key
            for key in changed
            if removed is not None
            and key.startswith(trash)
            and key not in before
            and after.get(key) == removed
        }
        # The folders Obsidian's trash makes for that removal (it keeps the note's folders).
        ancestors |= {p.as_posix() + "/" for key in trashed for p in PurePosixPath(key).parents} & {
            k for k in changed if k.startswith(trash) or k == trash
        }
        what = "trashed" if trashed else ""
        outside = []
        for key in changed:
            if key == target:
                what = what or "wrote"
            elif key in trashed or (key in ancestors and key not in before):
                continue  # a folder `create` made for the note, or the note in the trash
            else:
                outside.append(key)
        return what, outside


_EDIT_ID = re.compile(r"\bedit_id\W+(e-[0-9a-f]{8})")
_RECEIPT_PATH = re.compile(r"^(?:Edited |Dry run, nothing written: )(.+?) · ", re.DOTALL)


def _receipt(text: str) -> tuple[str | None, str | None]:
    """(path, edit_id) of a receipt in either format; Nones when it is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        match = _RECEIPT_PATH.match(text)
        found = _EDIT_ID.search(text)
        return (match.group(1) if match else None, found.group(1) if found else None)
    if not isinstance(data, dict):
        return None, None
    return data.get("path"), data.get("edit_id")


@dataclass
class EditRun:
    """What the run remembers between calls: the ids receipts gave and their notes."""

    guard: EditGuard
    issued: list[tuple[str, str]] = field(default_factory=list)  # (edit_id, note)

    def resolve(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The call's real arguments, and the note it may write."""
        from obsidian_mcp.text.versions import version_of

        args = dict(arguments)
        if isinstance(args.get("path"), _MemoryWriter):
            folder = self.guard.vault / _MEMORY.folder
            writers = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
            args["path"] = (
                writers[0].relative_to(self.guard.vault).as_posix()
                if writers
                else _MEMORY.folder + "/missing-0-0.jsonl"
            )
        if tool == UNDO_TOOL:
            wanted = args.get("edit_id")
            if isinstance(wanted, _Issued):
                edit_id, note = (
                    self.issued[-1 - wanted.back % len(self.issued)]
                    if self.issued
                    else ("e-00000000", "")
                )
                args["edit_id"] = f"  {edit_id}\n" if wanted.padded else edit_id
                return args, note or None
            note = next(
                (n for i, n in self.issued if isinstance(wanted, str) and i == wanted.strip()),
                None,
            )
            return args, note
        note = named_note(args.get("path"))
        if isinstance(args.get("version"), _Current):
            try:
                text = (self.guard.vault / note).read_bytes().decode("utf-8") if note else ""
                args["version"] = version_of(text)
            except (OSError, UnicodeDecodeError):
                args["version"] = "0" * 12
        return args, note


def _brief(arguments: dict[str, Any]) -> str:
    """The arguments with long strings cut, so an example shows every argument."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > 40:
            return f"{value[:24]!r}...({len(value):,} chars)"
        return value if isinstance(value, int | float | bool | None) else repr(value)[:40]

    return "{" + ", ".join(f"{k}={cut(v)}" for k, v in arguments.items()) + "}"


def edit_call(
    run: EditRun,
    call: Callable[[str, dict[str, Any]], tuple[str, str]],
    tally: Tally,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    """One edit-tool call, judged by the reply and by what changed on disk."""
    args, note = run.resolve(tool, arguments)
    before = run.guard.snapshot()
    outcome, text = call(tool, args)
    after = run.guard.snapshot()
    path, edit_id = _receipt(text)  # edit_id: the receipt of a write (None for a dry run)
    what, outside = run.guard.judge(before, after, note)
    detail = f"{_brief(args)} -> {text[:200]}"
    if outcome == "unexpected" and len(text) > MAX_REPLY_CHARS:
        detail = f"a reply of {len(text):,} chars: {detail}"
    if outside:
        outcome, detail = "unexpected", f"wrote outside the target {outside[:5]}: {detail}"
        tally.outside[tool] += 1
    elif what and edit_id is None:
        outcome, detail = "unexpected", f"changed {note!r} without a receipt: {detail}"
    elif edit_id is not None and not what:
        outcome, detail = "unexpected", f"receipt {edit_id} but {note!r} unchanged: {detail}"
    elif edit_id is not None and path != note:
        outcome, detail = "unexpected", f"receipt names {path!r}, not {note!r}: {detail}"
    if what:
        tally.wrote[tool][what] += 1
    if isinstance(path, str) and isinstance(edit_id, str):
        run.issued.append((edit_id, path))
    tally.add(tool, outcome, detail)


def seed_memory(server: Any) -> None:
    """Give the vault what edits must never touch: a memory (a writer's file and the memory
    page) and a scratch entry, made through `server`, which is then closed."""
    from anyio.from_thread import start_blocking_portal

    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(server)) as client,
    ):
        for tool, arguments in (
            ("vault_remember", {"content": "Fuzz runs keep the memory files.", "tags": ["fuzz"]}),
            ("vault_scratch_append", {"text": "fuzz: edits start"}),
        ):
            result = portal.call(client.call_tool, tool, arguments)
            if result.is_error:
                raise RuntimeError(f"{tool} failed before the edit run: {result.content}")


def edit_fuzz(
    build: Callable[[], Any], root: Path, vault: Path, cache: Path, examples: int
) -> Tally:
    """The edit tools' run on `vault` (a fresh copy under `root`): memory files seeded
    through one server from `build`, then `examples` calls of each edit tool through a
    second. `cache` is the servers' cache folder; its undo journal is the one place under
    `root` the check leaves out."""
    seed_memory(build())
    return run_edit_fuzz(build(), EditGuard(root, vault, cache / JOURNAL_FOLDER), examples)


# Of every AIMED_SHARE + 1 calls, AIMED_SHARE are aimed at the vault's notes and their parts
# (`edit_arguments`, `undo_arguments`), one is anything at all (`arguments_for`).
AIMED_SHARE = 5
# Edit and undo calls alternate in rounds of at least this many calls each, at most
# EDIT_ROUNDS of them (a short run is one round).
ROUND_MIN_CALLS = 50
# Edit and undo calls alternate in this many rounds, so that undo meets fresh ids and edits
# meet notes that earlier undos restored.
EDIT_ROUNDS = 10


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if n < total % parts else 0) for n in range(parts)]


# Cases every long run makes first, before the generated ones (each counts as one of the
# tool's calls): the largest content in one line (the receipt shows whole lines), YAML
# whose aliases refer to themselves or multiply, creates of the forbidden paths, a NUL in
# a new note, the CRLF note, the empty note gaining frontmatter, a count of 10,000, and
# the undos of the first of these.
_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcde", "bcdef", strict=True)
)
EXPLICIT_EDITS: dict[str, list[dict[str, Any]]] = {
    EDIT_TOOL: [
        {"path": "Inbox/fuzz-big.md", "operation": "create", "content": "x" * 200_000},
        {
            "path": "Inbox/fuzz-big-2.md",
            "operation": "create",
            "content": "x" * 200_000,
            "dry_run": True,
        },
        {
            "path": "Dev/Handover.md",
            "operation": "append",
            "target": "Contacts",
            "content": "y" * 200_000,
            "version": _Current(),
        },
        {"path": "Home.md", "operation": "set", "target": "title", "content": "&a [*a, *a]"},
        {
            "path": "Home.md",
            "operation": "set",
            "target": "title",
            "content": "&a [*a]",
            "dry_run": True,
        },
        {"path": "Home.md", "operation": "set", "target": "title", "content": _BOMB},
        {"path": "Inbox/Untitled.md", "operation": "set", "target": "tags", "content": "[a, b]"},
        {
            "path": "Daily/2026-10-05.md",
            "operation": "append",
            "target": "2026-10-05",
            "content": "- one\n- two",
        },
        {
            "path": "Daily/2026-10-05.md",
            "operation": "replace_text",
            "target": "\r\n",
            "content": "\n",
            "expected_count": 10_000,
        },
        {"path": "Inbox/fuzz-nul.md", "operation": "create", "content": "a\x00b"},
        {
            "path": "Dev/Handover.md",
            "operation": "replace",
            "target": "Current state",
            "content": "",
            "version": _Current(),
        },
        *(
            {"path": path, "operation": "create", "content": "x"}
            for path in [
                ".obsidian/new.md",
                ".trash/new.md",
                "obsidian-mcp/memory.md",
                "obsidian-mcp/memory",
                "obsidian-mcp/memory/new.md",
                "obsidian-mcp\\memory.md",
                "obsidian-mcp/memory.jsonl",
                "OBSIDIAN-MCP/Memory.md",
                "../canary.txt",
                "../outside.md",
            ]
        ),
        {"path": _MemoryWriter(), "operation": "replace_text", "target": "{", "content": "["},
    ],
    UNDO_TOOL: [
        *({"edit_id": _Issued(back)} for back in range(8)),
        {"edit_id": _Issued(0, padded=True)},
        {"edit_id": "e-00000000"},
    ],
}
# The explicit cases run when a tool gets at least this many calls (the long profile).
EXPLICIT_FROM = 100


def run_edit_fuzz(
    server: Any, guard: EditGuard, examples: int, tally: Tally | None = None
) -> Tally:
    """The edit tools of `server`, `examples` calls of each, each judged by `edit_call`:
    most aimed at the vault's notes and their parts (`edit_arguments`, `undo_arguments`),
    one in `AIMED_SHARE + 1` anything at all (as for the other tools). Edits and
    undos alternate in `EDIT_ROUNDS` rounds, each round drawn from its own seed."""
    from anyio.from_thread import start_blocking_portal

    tally = tally if tally is not None else Tally()
    run = EditRun(guard)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(server)) as client,
    ):
        schemas = {t.name: t.input_schema for t in portal.call(client.list_tools).tools}

        def call(tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
            return portal.call(call_once, client, tool, arguments)

        if not guard.settle():
            print("hostile edits: the server's start-up writes did not settle", flush=True)
        plan = [(EDIT_TOOL, edit_arguments()), (UNDO_TOOL, undo_arguments())]
        for tool, _ in plan:
            if tool not in schemas:
                tally.add(tool, "unexpected", "the server does not list this tool")
        explicit = EXPLICIT_EDITS if examples >= EXPLICIT_FROM else {}
        for tool, _ in plan:
            for arguments in explicit.get(tool, []) if tool in schemas else []:
                edit_call(run, call, tally, tool, arguments)
        rounds = max(1, min(EDIT_ROUNDS, examples // ROUND_MIN_CALLS))
        shares = {tool: _shares(examples - len(explicit.get(tool, [])), rounds) for tool, _ in plan}
        for number in range(rounds):
            for tool, aimed in plan:
                share = shares[tool][number]
                if tool not in schemas or share == 0:
                    continue
                strategy = weighted((AIMED_SHARE, aimed), (1, arguments_for(schemas[tool])))
                _edit_round(run, call, tally, tool, strategy, share, number)
    return tally


def _edit_round(
    run: EditRun,
    call: Callable[[str, dict[str, Any]], tuple[str, str]],
    tally: Tally,
    tool: str,
    strategy: st.SearchStrategy[dict[str, Any]],
    examples: int,
    number: int,
) -> None:
    @seed(number)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(strategy)
    def one_call(arguments: dict[str, Any]) -> None:
        edit_call(run, call, tally, tool, arguments)

    one_call()


FUZZ_HEADING = "## Hostile inputs"


def section(fuzz: dict[str, Any]) -> str:
    """Per tool and source: how every generated call was answered (bench/robustness/fuzz.py)."""
    lines = [
        FUZZ_HEADING,
        "",
        f"Every tool called {fuzz['calls_per_tool']:,} times with generated hostile "
        "arguments (wrong types, empty and 1-2 MB strings, NUL, lone surrogates, RTL and "
        "combining marks, emoji, huge and negative numbers, `..` in every encoding, drive "
        "letters, device names, 300-character names, odd tags, impossible dates), through a "
        "real MCP client. Unexpected errors (a traceback, a bare 'Error executing tool', "
        "the raw validation dump, the crash catch-all, a reply over its budget, or any "
        "change to the vault outside the memory file and scratch note, or to a canary file "
        f"beside it), crashes and hangs must all be 0. Took {fuzz['seconds'] / 60:.1f} min.",
        "",
        "The edit tools (`vault_edit_note`, `vault_undo_edit`) write the note they name, so "
        "they run on a vault copy and server of their own, with arguments aimed at real notes "
        "and their headings, block ids, frontmatter keys and text as well as hostile ones "
        "(traversal, hidden folders, the memory files in many spellings, 200,000-character "
        "and one-line contents, self-referencing YAML, CRLF, NUL, odd operations, stale and "
        "current versions, dry_run and force mixes), undo mostly given the ids earlier "
        "receipts returned. Before and after every call, every file under the run's folder "
        "is read byte for byte (the vault with its hidden and memory folders, the canary, "
        "the config folder, and the cache folder with the passage and memory indexes; only "
        "the undo journal is left out): only the named note (normalised path, `.md` added) "
        "may differ, and only when the reply is a receipt with an edit_id. A refusal, a dry "
        "run or a no-op must change nothing. 'Wrote the named note' counts calls that did "
        "(through the stand-in, an undone create goes to Obsidian's `.trash/` as the plugin's "
        "DELETE does); 'writes outside it' counts calls that changed anything else.",
    ]
    for source, rows in fuzz["sources"].items():
        lines += ["", f"### Through the {source}", "", markdown_table(rows)]
    if fuzz["examples"]:
        lines += ["", "First unexpected answers:", ""]
        lines += [f"- {example}" for example in fuzz["examples"]]
    return "\n".join(lines)
