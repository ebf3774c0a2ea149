"""Shared helpers for the benchmarks: questions, keywords, gold checks, token counts,
percentiles, markdown tables, the stand-in and the server as a real MCP client sees it.

Definitions every benchmark uses, so figures stay comparable:

- **Tokens** are characters / 4, rounded up (what the server's own estimate does).
- **Hit**: every gold phrase of the question occurs in the response. Both sides are
  compared case-sensitively after collapsing runs of whitespace to one space. A gold also
  counts when it occurs once markdown is stripped from both sides (wikilinks to their
  shown text, ``[text](url)`` to its text, emphasis and code marks, heading, quote and
  list markers at line starts), because the server may quote a passage with its markup
  while the gold was copied from rendered text, or the other way round. A ``…`` or
  anything else inserted into the middle of the phrase is a miss.
- **Keywords** for the strategies that need words, not a question: the question's
  content words (letters, digits, apostrophes and hyphens; not a stopword; at least three
  characters), lowercased, that occur in at least one note of the vault; names (words
  capitalised after the question's first word) first, then by how few notes contain them
  (ties: alphabetical); the first ``KEYWORDS`` kept, in question order. Like an agent
  picking the distinctive words, and never words no note contains
  (unless no content word occurs anywhere: then the rarest of them, so the search fails
  as it would for the agent).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from obsidian_mcp.config import Settings
from obsidian_mcp.index.location import index_path
from obsidian_mcp.memory.index import SHORT_ID_CHARS
from obsidian_mcp.sources.rest import JSONLOGIC
from obsidian_mcp.usage.stats import percentile  # one definition for bench and stats
from tests.standin.process import StandinProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE_VAULT = REPO_ROOT / "fixtures" / "vault"
QUERY_VECTORS = REPO_ROOT / "fixtures" / "query_vectors.jsonl"
QUESTIONS = REPO_ROOT / "fixtures" / "questions.jsonl"
OUT_DIR = REPO_ROOT / "bench" / "out"
KEYWORDS = 2

# fmt: off
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "done",
    "get", "got", "gets", "many", "much", "one", "ones", "also", "anything", "something",
    "someone", "anyone", "ever", "every", "still", "yet", "say", "said", "says", "tell", "told",
    "know", "knows", "knew", "note", "notes", "vault", "according", "happened", "mean", "means",
    "kind", "name", "called", "make", "made", "take", "took", "long", "far", "first", "last",
    "exactly", "actually",
))
# fmt: on
WORD = re.compile("[\\w'\u2019-]+")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: tuple[str, ...]
    category: str
    folder: str | None = None
    split: str = "dev"
    batch: str = ""
    traits: tuple[str, ...] = ()


def load_questions(path: Path = QUESTIONS, limit: int | None = None) -> list[Question]:
    """Questions from JSON lines: ``question``, ``gold`` (a string or a list of strings, all
    required), ``category``, and optional ``id``, ``folder`` (the scope to search in),
    ``split``, ``batch`` and ``traits`` (``bench/retrieval/questions.py`` says what they mean)."""
    out: list[Question] = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        gold = row["gold"]
        out.append(
            Question(
                id=str(row.get("id", number)),
                question=str(row["question"]),
                gold=(gold,) if isinstance(gold, str) else tuple(str(g) for g in gold),
                category=str(row.get("category", "uncategorised")),
                folder=row.get("folder") or None,
                split=str(row.get("split", "dev")),
                batch=str(row.get("batch", "")),
                traits=tuple(str(t) for t in row.get("traits", ())),
            )
        )
    return out[:limit] if limit is not None else out


# --- text measures ---------------------------------------------------------------------


def copy_vault(target: Path, *, vectors: bool, source: Path = FIXTURE_VAULT) -> Path:
    """A copy of a vault, with or without Smart Connections' folder."""
    ignore = None if vectors else shutil.ignore_patterns(".smart-env")
    shutil.copytree(source, target, ignore=ignore)
    return target


def with_endings(ids: Iterable[str]) -> set[str]:
    """Whole memory ids (from the files, or a JSON recall) with every ending a reply may
    name them by (receipts show the shortest no other id has, of SHORT_ID_CHARS or more):
    what a receipt's id is looked up in."""
    return {
        whole[start:] for whole in ids for start in range(max(len(whole) - SHORT_ID_CHARS, 0) + 1)
    }


def count_tokens(text: str) -> int:
    return -(-len(text) // 4)


def collapse(text: str) -> str:
    return " ".join(text.split())


_WIKILINK = re.compile(r"!?\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")
_MDLINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_LINE_MARK = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+|>[ \t]?(?:\[![^\]]*\][+-]?[ \t]*)?|[-*+][ \t]+"
    r"(?:\[[ xX]\][ \t]+)?|\d+[.)][ \t]+)",
    re.MULTILINE,
)
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)[*_]|[*_](?!\w)|`|==|~~")


def strip_markdown(text: str) -> str:
    text = _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _MDLINK.sub(r"\1", text)
    text = _LINE_MARK.sub("", text)
    return _EMPHASIS.sub("", text)


def gold_found(response: str, gold: str) -> bool:
    if collapse(gold) in collapse(response):
        return True
    return collapse(strip_markdown(gold)) in collapse(strip_markdown(response))


def is_hit(response: str, golds: Iterable[str]) -> bool:
    return all(gold_found(response, gold) for gold in golds)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def save_results(out: Path, name: str, found: dict[str, Any]) -> Path:
    """A run's figures as `out/NAME-YYYYmmdd-HHMMSS.json`; its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(found, indent=1) + "\n", "utf-8")
    return path


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        if isinstance(value, float):
            return "n/a" if math.isnan(value) else f"{value:,.1f}"
        return str(value).replace("|", "\\|")

    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# --- keywords --------------------------------------------------------------------------


def words(text: str) -> list[str]:
    return [w.strip("'\u2019-").lower() for w in WORD.findall(text)]


class KeywordPicker:
    """The deterministic keyword extraction described in the module docstring."""

    def __init__(self, vault: Path) -> None:
        self.doc_freq: dict[str, int] = {}
        for note in vault.rglob("*.md"):
            rel = note.relative_to(vault).as_posix()
            if any(part.startswith(".") for part in rel.split("/")):
                continue
            for word in set(words(note.read_text("utf-8"))):
                self.doc_freq[word] = self.doc_freq.get(word, 0) + 1

    def pick(self, question: str, count: int = KEYWORDS) -> str:
        proper: dict[str, bool] = {}
        for index, token in enumerate(WORD.findall(question)):
            word = token.strip("'\u2019-").lower()
            if len(word) >= 3 and word not in STOPWORDS and word not in proper:
                proper[word] = index > 0 and token[0].isupper()
        known = [w for w in proper if self.doc_freq.get(w, 0) > 0] or list(proper)
        ranked = sorted(known, key=lambda w: (not proper[w], self.doc_freq.get(w, 0), w))
        chosen = set(ranked[:count])
        return " ".join(w for w in known if w in chosen) or question


# --- processes -------------------------------------------------------------------------


async def prime_standin(standin: StandinProcess, smart_query: str | None = None) -> float:
    """Have the stand-in answer one listing of every note's stat, as a running Obsidian has
    long before an agent session starts; the seconds it took, to be said apart. A fresh
    stand-in's first listing reads every note from a cold disk cache and resolves every
    link (5.4 s of an 8.3 s restart at 10,000 notes), where Obsidian's metadata cache was
    made when the vault opened: no user waits for it. Given `smart_query`, one search by
    Smart Connections too, whose vectors a running Obsidian holds (the stand-in reads them
    at its first search: 1.8 s at 10,000 notes)."""
    async with standin.async_client(timeout=300) as http:
        started = time.perf_counter()
        listing = await http.post(
            "/search/",
            content=json.dumps({"var": "stat"}),
            headers={"Content-Type": JSONLOGIC},
        )
        listing.raise_for_status()
        if smart_query is not None:
            searched = await http.post(
                "/search/smart",
                content=json.dumps({"query": smart_query}),
                headers={"Content-Type": "text/plain"},
            )
            searched.raise_for_status()
    return time.perf_counter() - started


def server_env(
    *,
    standin: StandinProcess | None = None,
    vault: Path | None = None,
    config_dir: Path,
    embeddings: bool = True,
) -> dict[str, str]:
    """Environment for the server: only what is given here, nothing inherited that starts
    with ``OBSIDIAN_`` (the stdio client adds just a safe default set such as PATH). The
    passage index goes beside the config dir; ``embeddings=False`` ranks without meaning
    from the local model (keywords and the plugin's sources only)."""
    env = {
        "OBSIDIAN_CONFIG_DIR": str(config_dir),
        "OBSIDIAN_INDEX_DIR": str(config_dir / "index"),
        "OBSIDIAN_INDEX_EMBEDDINGS": str(embeddings).lower(),
    }
    if standin is not None:
        env |= {
            "OBSIDIAN_API_KEY": standin.api_key,
            "OBSIDIAN_HOST": "127.0.0.1",
            "OBSIDIAN_PORT": str(standin.port),
            "OBSIDIAN_PROTOCOL": "https",
            "OBSIDIAN_CERT": standin.cert,
        }
    if vault is not None:
        env["OBSIDIAN_VAULT_PATH"] = str(vault)
    return env


def server_pid(parent: int) -> int | None:
    """The ``obsidian_mcp serve`` process among ``parent``'s children."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"obsidian_mcp" in cmdline and b"serve" in cmdline:
            return int(entry.name)
    return None


def index_file_of(env: dict[str, str]) -> Path:
    """The passage index file the server started with `env` uses."""
    settings = Settings.model_validate(
        {
            "vault_path": env.get("OBSIDIAN_VAULT_PATH"),
            "host": env.get("OBSIDIAN_HOST", "127.0.0.1"),
            "port": env.get("OBSIDIAN_PORT", 27124),
            "index_dir": env["OBSIDIAN_INDEX_DIR"],
        }
    )
    return index_path(settings)


def build_indexes(envs: Sequence[dict[str, str]]) -> None:
    """Build the passage index of each server environment with ``obsidian-mcp index`` (what
    a user runs once). The environments serve copies of one vault: the first build is
    copied to the others first, so they only re-read notes (their copies' modification
    times differ) and reuse every vector by its text's hash."""
    wanted = [env for env in envs if env.get("OBSIDIAN_INDEX_EMBEDDINGS") != "false"]
    for number, env in enumerate(wanted):
        if number:
            target = index_file_of(env)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(index_file_of(wanted[0]), target)
        subprocess.run(
            [sys.executable, "-m", "obsidian_mcp", "index"],
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home()), **env},
            cwd=REPO_ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def copy_prebuilt(
    parent: Path, cache: Path, vault: Path, env: dict[str, str], code: Path = REPO_ROOT
) -> float:
    """Copy a vault (``parent/vault``) and the passage index built for it elsewhere (under
    ``cache``, the server's cache folder there) to `vault` and where the server started
    with `env` looks for its index; seconds the copy's schema upgrade took (once), by the
    checkout `code` that will serve it: an index upgraded by a newer schema than the
    server's own is set aside and built again. The notes keep their modification times,
    so the server reads none of them again."""
    shutil.copytree(parent / "vault", vault, copy_function=shutil.copy2)
    source = index_path(
        Settings.model_validate({"vault_path": parent / "vault", "cache_dir": cache})
    )
    target = index_file_of(env)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    upgrade = subprocess.run(
        [sys.executable, "-c", _UPGRADE, str(target)],
        cwd=code,
        check=True,
        capture_output=True,
        text=True,
    )
    # Written back to disk before anything is timed: an index built in an earlier session
    # is on disk, and the kernel flushing 450 MB of fresh copies slowed the first restart
    # timed after them (2.47 s through the folder against 1.8 s).
    os.sync()
    return float(upgrade.stdout)


# Opens an index file with the checkout it runs in, so that checkout's schema upgrade
# runs; prints the seconds it took.
_UPGRADE = """
import sys, time
from obsidian_mcp.index.store import IndexStore
started = time.perf_counter()
IndexStore(sys.argv[1]).close()
print(time.perf_counter() - started)
"""


def stdio_params(env: dict[str, str], repo: Path = REPO_ROOT) -> StdioServerParameters:
    """The server of the checkout `repo` (another commit's, for a before-and-after run:
    `python -m` finds the package in its working folder first)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "obsidian_mcp", "serve"],
        env=env,
        cwd=repo,
    )


@dataclass
class CallResult:
    text: str
    tokens: int
    seconds: float
    is_error: bool
    progress: int = 0


@dataclass
class Session:
    """A connected MCP client that measures each call."""

    client: Client

    async def call(
        self, tool: str, arguments: dict[str, Any], *, progress: bool = False
    ) -> CallResult:
        events: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            events.append(progress)

        started = time.perf_counter()
        result = await self.client.call_tool(
            tool, arguments, progress_callback=on_progress if progress else None
        )
        elapsed = time.perf_counter() - started
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        return CallResult(text, count_tokens(text), elapsed, bool(result.is_error), len(events))


@asynccontextmanager
async def stdio_session(
    env: dict[str, str], timeout: float = 300, repo: Path = REPO_ROOT
) -> AsyncIterator[Session]:
    """The server (of the checkout `repo`) as a stdio subprocess, driven by the SDK's
    client; a call taking longer than ``timeout`` seconds raises."""
    async with Client(stdio_params(env, repo), read_timeout_seconds=timeout) as client:
        yield Session(client)


async def tool_names(session: Session) -> set[str]:
    return {tool.name for tool in (await session.client.list_tools()).tools}
