"""Memory store benchmark (not a test): 100,000 entries, folder and stand-in REST API.

    python -m bench.memory.recall [--entries 100000] [--runs 50]
    python -m bench.memory.recall --meaning

The first measures the cold load (first recall of a store with no cache: the index is
built), warm recall by tags and by query, and remember, through the domain code and through
the MCP tool layer (an in-process client), by words (OBSIDIAN_MEMORY_MEANING=false, so
the background embedding of 100,000 memories does not run under the timings); then the
first recall of a NEW process (the index read from its cache), by tags, by query and by time
range, with meaning on as a user has it; then the same through the stand-in Local REST API.
It does so for both layouts the store reads: the entries in the single file of earlier
versions (`obsidian-mcp/memory.jsonl`, rows named "folder, ..." and "stand-in, ..."), and
spread over the files of `WRITERS` writers of other devices in `obsidian-mcp/memory/`, as
sync leaves them (rows named "folder, 4 files, ..."); remembers go to the process's own
file in both. The second measures recall by meaning: hit rate of paraphrased queries
(`bench/memory/sets/recall_pairs.jsonl`) over 1,000 memories, by words only and with
meaning, and remember/recall medians with the model. Each prints one table.
"""

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
from mcp import Client

from bench.memory.sets import PAIRS, distractors
from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import Embedder
from obsidian_mcp.memory.files import MemoryFiles
from obsidian_mcp.memory.index import terms
from obsidian_mcp.memory.model import IdMaker, Memory, encode
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.opening import model_loader
from obsidian_mcp.server import build_server
from obsidian_mcp.server.app import app_lifespan
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.standin.process import StandinProcess

MEMORY = "obsidian-mcp/memory.jsonl"
# The writers' files of the second layout: other devices' (a process folds only its own
# device's), each holding every WRITERS-th entry, as several devices writing one at a
# time leave them.
WRITERS = ["benchdeva-0-3", "benchdeva-1-0", "benchdevb-0-12", "benchdevc-2-1"]


def shared_model() -> Embedder:
    """The bundled model, loaded once for the whole benchmark."""
    load = model_loader(Settings())
    assert load is not None, "the bundled embedding model is not installed"
    return load()
_NAMES = [
    "gale", "mira", "ship", "storm", "reef", "harbour", "dragon", "tea", "journal", "captain",
    "map", "lantern", "forest", "river", "council", "treaty", "ledger", "spell", "rune", "tower",
    "bridge", "winter", "harvest", "festival", "debt", "oath", "sword", "letter", "secret",
    "promise", "rival", "mentor", "voyage", "island", "cave", "compass", "star", "tide", "market",
    "guild",
]
_SYLLABLES = ["ka", "ri", "to", "mel", "an", "sor", "vel", "dra", "qui", "bo", "len", "tha"]
# A vocabulary with a natural (Zipf) spread: a few words everywhere, most words rare.
_WORDS = _NAMES + sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in "aeiou"})
_WEIGHTS = [1 / rank for rank in range(1, len(_WORDS) + 1)]
_TAGS = [f"{a}-{b}" for a in _NAMES[:20] for b in ("npc", "place", "plot", "lore", "item")]
# Queries use words of middling frequency, as a name or topic would be.
_QUERY_WORDS = _WORDS[20:400]

Row = tuple[str, str, float, float]  # (source, operation, median ms, p95 ms)


def entry_lines(entries: int) -> list[str]:
    rng = random.Random(7)
    ids = IdMaker(random.Random(8))
    start = datetime.now(UTC) - timedelta(days=365)
    step = timedelta(days=365) / entries
    lines: list[str] = []
    for n in range(entries):
        ts = start + step * n
        words = rng.choices(_WORDS, weights=_WEIGHTS, k=rng.randint(8, 30))
        content = " ".join(words).capitalize() + "."
        tags = tuple(sorted(set(rng.choices(_TAGS, k=rng.randint(1, 3)))))
        why = " ".join(rng.choices(_WORDS, weights=_WEIGHTS, k=6))
        lines.append(encode(Memory(ids.make(ts), ts, f"{content} ({n})", tags, why)))
    return lines


def build_file(target: Path, entries: int) -> None:
    """The legacy layout: every entry in the single file of earlier versions."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(entry_lines(entries)), "utf-8")


def build_writer_files(vault: Path, entries: int) -> list[Path]:
    """The writers' layout: the same entries dealt out over the files of `WRITERS`."""
    folder = vault / MemoryFiles(MEMORY).folder
    folder.mkdir(parents=True, exist_ok=True)
    lines = entry_lines(entries)
    paths: list[Path] = []
    for n, name in enumerate(WRITERS):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(lines[n :: len(WRITERS)]), "utf-8")
        paths.append(path)
    return paths


def settle(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


async def timed(runs: int, action: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    samples: list[float] = []
    for n in range(runs):
        began = time.perf_counter()
        await action(n)
        samples.append(time.perf_counter() - began)
    return settle(samples)


async def measure_store(store: MemoryStore, label: str, runs: int) -> list[Row]:
    rng = random.Random(1)
    began = time.perf_counter()
    await store.recall(limit=1)
    rows: list[Row] = [(label, "cold load (first recall)", (time.perf_counter() - began) * 1000,
                        float("nan"))]
    tags = await timed(runs, lambda n: store.recall(tags=[rng.choice(_TAGS)]))
    query = await timed(runs, lambda n: store.recall(query=" ".join(rng.sample(_QUERY_WORDS, 2))))
    remember = await timed(
        runs, lambda n: store.remember(f"bench {label} {n} {time.time()}", ["bench"], "")
    )
    rows += [(label, "recall by tag", *tags), (label, "recall by query", *query),
             (label, "remember", *remember)]
    return rows


async def measure_tools(settings: Settings, label: str, runs: int) -> list[Row]:
    rng = random.Random(2)
    async with Client(build_server(settings), raise_exceptions=True) as client:
        began = time.perf_counter()
        await client.call_tool("vault_recall", {"limit": 1})
        rows: list[Row] = [(label, "cold load (first recall)",
                            (time.perf_counter() - began) * 1000, float("nan"))]
        tags = await timed(runs, lambda n: client.call_tool(
            "vault_recall", {"tags": [rng.choice(_TAGS)]}))
        query = await timed(runs, lambda n: client.call_tool(
            "vault_recall", {"query": " ".join(rng.sample(_QUERY_WORDS, 2))}))
        remember = await timed(runs, lambda n: client.call_tool(
            "vault_remember",
            {"content": f"tool {label} {n} {time.time()}", "tags": ["bench"], "context": ""}))
    return [*rows, (label, "recall by tag", *tags), (label, "recall by query", *query),
            (label, "remember", *remember)]


# What a new process's first recall asks, one process each.
FIRST_RECALLS: dict[str, dict[str, object]] = {
    "by tag": {"tags": [_TAGS[3]]},
    "by query": {"query": f"{_QUERY_WORDS[5]} {_QUERY_WORDS[40]}"},
    "by time range": {"time_range": "week"},
}


async def first_recall(settings: dict[str, object], recall: dict[str, object]) -> float:
    """In a fresh process: seconds from opening the server's state to the first answer."""
    began = time.perf_counter()
    async with app_lifespan(Settings.model_validate(settings)) as state:
        await state.require().memory.recall(**recall)  # type: ignore[arg-type]
        return time.perf_counter() - began


def new_process_rows(
    label: str, settings: dict[str, object], kinds: Sequence[str]
) -> list[Row]:
    rows: list[Row] = []
    for kind in kinds:
        recall = FIRST_RECALLS[kind]
        spec = json.dumps({"settings": settings, "recall": recall}, default=str)
        out = subprocess.run(
            [sys.executable, "-m", "bench.memory.recall", "--first-recall", spec],
            capture_output=True, text=True, check=True, env=os.environ,
        )
        seconds = float(out.stdout.strip().splitlines()[-1])
        rows.append((label, f"new process, first recall {kind}", seconds * 1000, float("nan")))
    return rows


# Row names of each layout: "folder, domain" for the legacy file; "folder, 4 files,
# domain" for the writers' files.
LAYOUTS = {"legacy": "", "writers": f"{len(WRITERS)} files, "}


async def run(
    entries: int,
    runs: int,
    layouts: Sequence[str] = tuple(LAYOUTS),
    first_recalls: Sequence[str] = tuple(FIRST_RECALLS),
) -> list[Row]:
    """Every measurement over each of `layouts`; a new process (one each) for each of
    `first_recalls`."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for layout in layouts:
            rows += await run_layout(root / layout, layout, entries, runs, first_recalls)
    return rows


@dataclass
class MemoryRow:
    entries: int
    source: str
    operation: str
    median_ms: float
    p95_ms: float


async def memory(
    sizes: Sequence[int], runs: int, layouts: Sequence[str], first_recalls: Sequence[str]
) -> list[MemoryRow]:
    rows: list[MemoryRow] = []
    for entries in sizes:
        started = time.perf_counter()
        found = await run(entries, runs, layouts, first_recalls)
        rows += [MemoryRow(entries, *row) for row in found]
        print(f"  memory at {entries:,} entries: {time.perf_counter() - started:.0f} s", flush=True)
    return rows


async def run_layout(
    root: Path, layout: str, entries: int, runs: int, first_recalls: Sequence[str]
) -> list[Row]:
    """Every measurement over one layout of the entries, in a folder of its own (vault,
    stand-in vault, config and caches)."""
    rows: list[Row] = []
    name = LAYOUTS[layout]
    os.environ["XDG_CACHE_HOME"] = str(root / "cache")  # the index cache, for children too
    pristine = root / "pristine"
    started = time.perf_counter()
    if layout == "legacy":
        build_file(pristine / MEMORY, entries)
    else:
        build_writer_files(pristine, entries)
    built = sum(path.stat().st_size for path in pristine.rglob("*.jsonl"))
    print(f"built {entries:,} entries ({built / 1e6:.1f} MB, {layout} layout) "
          f"in {time.perf_counter() - started:.1f} s")
    vault, rest_vault = root / "vault", root / "rest-vault"
    shutil.copytree(pristine, vault)
    shutil.copytree(pristine, rest_vault)
    folder = Settings(vault_path=vault, config_dir=root / "cfg", api_key=None,
                      memory_meaning=False)
    async with app_lifespan(folder) as state:
        rows += await measure_store(state.require().memory, f"folder, {name}domain", runs)
    rows += await measure_tools(folder, f"folder, {name}MCP tool", runs)
    rows += new_process_rows(f"folder, {name}new process",
                             {"vault_path": vault, "config_dir": root / "cfg"}, first_recalls)

    async with StandinProcess(rest_vault, plugin_version="5.1.0") as standin:
        rest_values: dict[str, object] = {
            "api_key": standin.api_key, "host": "127.0.0.1", "port": standin.port,
            "cert": standin.cert, "config_dir": root / "cfg", "request_timeout": 60,
            "retry_budget": 120,
        }
        rest = Settings.model_validate({**rest_values, "memory_meaning": False})
        async with app_lifespan(rest) as state:
            services = state.require()
            rows += await measure_store(services.memory, f"stand-in, {name}domain", runs)
            # Every recall re-reads the files (no staleness window): the price of the
            # plugin having no stat or range read for a .jsonl file.
            always = MemoryStore(services.vault, MEMORY, max_staleness=0,
                                 config_dir=root / "cfg")
            try:
                await always.recall(limit=1)
                fresh = await timed(max(runs // 5, 5), lambda n: always.recall(tags=["bench"]))
            finally:
                always.close()
            rows.append((f"stand-in, {name}domain", "recall, file re-read each time", *fresh))
        rows += await measure_tools(rest, f"stand-in, {name}MCP tool", runs)
        rows += new_process_rows(f"stand-in, {name}new process", rest_values, first_recalls)
    return rows


def memory_file(target: Path, memories: list[tuple[str, tuple[str, ...]]]) -> None:
    ids = IdMaker(random.Random(3))
    start = datetime.now(UTC) - timedelta(days=200)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for n, (content, tags) in enumerate(memories):
            ts = start + timedelta(hours=4 * n)
            out.write(encode(Memory(ids.make(ts), ts, content, tags, "")))


async def run_meaning(total: int) -> None:
    memories = [(content, tags) for content, tags, _ in PAIRS]
    memories += distractors(total - len(PAIRS))
    random.Random(5).shuffle(memories)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        memory_file(root / "vault" / MEMORY, memories)
        vault = Vault(None, FolderSource(root / "vault"))
        words = MemoryStore(vault, MEMORY, config_dir=root / "cfg")
        meaning = MemoryStore(vault, MEMORY, cache=root / "cache.sqlite",
                              embedder=shared_model, config_dir=root / "cfg")
        began = time.perf_counter()
        await meaning.catch_up_meaning()
        embed_seconds = time.perf_counter() - began
        hits = {"words only": [0, 0], "with meaning": [0, 0], "meaning, one tag": [0, 0]}
        disjoint = 0
        for content, tags, question in PAIRS:
            disjoint += not terms(question) & terms(content)
            # The last row recalls within the memory's first tag, as an agent narrows a
            # recall to "user" or "project".
            for label, store, kept in (("words only", words, ()),
                                       ("with meaning", meaning, ()),
                                       ("meaning, one tag", meaning, (tags[0],))):
                recalled = await store.recall(query=question, tags=kept, limit=5)
                found = [m.content for m in recalled.memories]
                hits[label][0] += found[:1] == [content]
                hits[label][1] += content in found
        recall = await timed(30, lambda n: meaning.recall(query=PAIRS[n % len(PAIRS)][2]))
        tagged = await timed(30, lambda n: meaning.recall(
            query=PAIRS[n % len(PAIRS)][2], tags=PAIRS[n % len(PAIRS)][1][:1]))
        remember = await timed(30, lambda n: meaning.remember(
            f"bench memory {n} {time.time()}", ["bench"], ""))
        words.close()
        meaning.close()
    print(f"\n{len(PAIRS)} paraphrased queries ({disjoint} share no content word with their "
          f"memory) over {total:,} memories; model {shared_model().model_id}")
    print(f"{'ranking':<16} {'hit@1':>8} {'hit@5':>8}")
    for label, (top1, top5) in hits.items():
        print(f"{label:<16} {top1 / len(PAIRS):>8.0%} {top5 / len(PAIRS):>8.0%}")
    print(f"embedding {total:,} memories (first start): {embed_seconds:.1f} s")
    print(f"recall by query with meaning: median {recall[0]:.1f} ms, p95 {recall[1]:.1f} ms")
    print(f"the same within one tag: median {tagged[0]:.1f} ms, p95 {tagged[1]:.1f} ms")
    print(f"remember with meaning: median {remember[0]:.1f} ms, p95 {remember[1]:.1f} ms")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    parser = argparse.ArgumentParser(description="Memory store benchmark.")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--meaning", action="store_true",
                        help="recall by meaning: paraphrase hit rate over 1,000 memories")
    parser.add_argument("--first-recall", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.first_recall:
        spec = json.loads(args.first_recall)
        print(anyio.run(first_recall, spec["settings"], spec["recall"]))
        return
    if args.meaning:
        anyio.run(run_meaning, 1000)
        return
    rows = anyio.run(run, args.entries, args.runs)
    logging.getLogger().setLevel(logging.WARNING)
    width = max([20, *(len(source) for source, *_ in rows)])
    print(f"\n{'source':<{width}} {'operation':<32} {'median ms':>10} {'p95 ms':>10}")
    for source, operation, median, p95 in rows:
        p95_text = "" if p95 != p95 else f"{p95:10.2f}"  # NaN: a single measurement
        print(f"{source:<{width}} {operation:<32} {median:>10.2f} {p95_text:>10}")


if __name__ == "__main__":
    main()
