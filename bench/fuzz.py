"""Hostile inputs: every tool called with generated arguments, each answer classified.

An answer is *normal* (a result), *actionable* (an error that says what to change), or
*unexpected* (a traceback, a bare "Error executing tool X", pydantic's raw dump, the
crash catch-all, or a reply longer than its budget). A call that gets no answer within
the timeout is a *hang*; a client that loses the server is a *crash*. After every call
the vault is unchanged outside the memory files (the writers' folder, where each process
writes its own file, and the memory page made from them) and the scratch note, and a
canary file beside the vault is untouched; a change counts as unexpected. The single
memory file of earlier versions is only read: a write to it counts as unexpected too.

The test suite runs a short profile (tests/test_fuzz.py); `python -m bench --fuzz` runs
the long one, at least 1,000 calls per tool through the folder and through the stand-in.
"""

from __future__ import annotations

import hashlib
import math
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
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
            **{
                name: st.one_of(plausible(spec), any_value())
                for name, spec in properties.items()
            },
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
    """Outcomes per tool, and the first few unexpected answers to show."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, tool: str, outcome: str, detail: str) -> None:
        self.counts.setdefault(tool, Counter())[outcome] += 1
        if outcome in ("unexpected", "crash", "hang") and len(self.examples) < 20:
            self.examples.append(f"{tool} [{outcome}]: {detail[:300]!r}")

    def failures(self) -> int:
        return sum(c["unexpected"] + c["crash"] + c["hang"] for c in self.counts.values())

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"tool": tool, "calls": sum(c.values()), **{o: c[o] for o in OUTCOMES}}
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
    lines = [
        "| tool | calls | normal results | actionable errors | unexpected errors | crashes "
        "| hangs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['tool']} | {r['calls']:,} | {r['normal']:,} | {r['actionable']:,} | "
        f"{r['unexpected']} | {r['crash']} | {r['hang']} |"
        for r in rows
    ]
    return "\n".join(lines)


def run_fuzz(server: Any, guard: Guard, examples: int, tally: Tally | None = None) -> Tally:
    """Every tool of `server` (an MCPServer), `examples` generated calls each."""
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
            fuzz_tool(call, guard, tally, tool.name, tool.input_schema, examples)
            broken = guard.changed(thorough=True)
            if broken is not None:
                tally.add(tool.name, "unexpected", broken)
    return tally


FIXTURE_VAULT = Path(__file__).resolve().parent.parent / "fixtures" / "vault"
STANDIN_VERSION = "5.1.0"


def long_profile(work: Path, calls_per_tool: int) -> dict[str, Any]:
    """The report's run: `calls_per_tool` calls of every tool through the folder and
    through the stand-in, each on a fresh copy of the fixture vault."""
    import time

    from obsidian_mcp.config import Settings
    from obsidian_mcp.server import build_server
    from tests.standin.process import StandinProcess

    started = time.perf_counter()
    sources: dict[str, list[dict[str, Any]]] = {}
    examples: list[str] = []
    for source in ("folder", f"stand-in {STANDIN_VERSION}"):
        root = work / source.replace(" ", "-")
        root.mkdir(parents=True)
        vault, canary = prepare_vault(FIXTURE_VAULT, root)
        guard = Guard(vault, canary, WRITABLE)
        print(f"hostile inputs: {calls_per_tool:,} calls per tool through the {source}", flush=True)
        if source == "folder":
            settings = Settings(vault_path=vault, config_dir=root / "cfg", api_key=None)
            tally = run_fuzz(build_server(settings), guard, calls_per_tool)
        else:
            with StandinProcess(vault, plugin_version=STANDIN_VERSION) as standin:
                settings = Settings.model_validate(
                    {
                        "api_key": standin.api_key,
                        "port": standin.port,
                        "cert": Path(standin.cert),
                        "config_dir": root / "cfg",
                        "request_timeout": 5.0,
                    }
                )
                tally = run_fuzz(build_server(settings), guard, calls_per_tool)
        sources[source] = tally.rows()
        examples += tally.examples
    return {
        "calls_per_tool": calls_per_tool,
        "sources": sources,
        "examples": examples,
        "seconds": time.perf_counter() - started,
    }
