"""Memory store benchmark (not a test): 100,000 entries, folder and stand-in REST API.

    python -m bench.memory_bench [--entries 100000] [--runs 50]

Measures the cold load (first recall of a fresh store), warm recall by tags and by query,
and remember, through the domain code and through the MCP tool layer (an in-process
client); then the same through the stand-in Local REST API. Prints one table.
"""

import argparse
import logging
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
from mcp import Client
from pydantic import SecretStr

from obsidian_mcp.config import Settings
from obsidian_mcp.memory.model import IdMaker, Memory, encode
from obsidian_mcp.memory.store import MemoryStore
from obsidian_mcp.server import build_server
from obsidian_mcp.server.app import app_lifespan
from tests.standin.process import StandinProcess

MEMORY = "obsidian-mcp/memory.jsonl"
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


def build_file(target: Path, entries: int) -> None:
    rng = random.Random(7)
    ids = IdMaker(random.Random(8))
    start = datetime.now(UTC) - timedelta(days=365)
    step = timedelta(days=365) / entries
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for n in range(entries):
            ts = start + step * n
            words = rng.choices(_WORDS, weights=_WEIGHTS, k=rng.randint(8, 30))
            content = " ".join(words).capitalize() + "."
            tags = tuple(sorted(set(rng.choices(_TAGS, k=rng.randint(1, 3)))))
            why = " ".join(rng.choices(_WORDS, weights=_WEIGHTS, k=6))
            out.write(encode(Memory(ids.make(ts), ts, f"{content} ({n})", tags, why)))


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


async def run(entries: int, runs: int) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        vault = root / "vault"
        started = time.perf_counter()
        build_file(vault / MEMORY, entries)
        print(f"built {entries:,} entries ({(vault / MEMORY).stat().st_size / 1e6:.1f} MB) "
              f"in {time.perf_counter() - started:.1f} s")
        folder = Settings(vault_path=vault, config_dir=root / "cfg", api_key=None)
        async with app_lifespan(folder) as state:
            rows += await measure_store(state.require().memory, "folder, domain", runs)
        rows += await measure_tools(folder, "folder, MCP tool", runs)

        rest_vault = root / "rest-vault"
        (rest_vault / MEMORY).parent.mkdir(parents=True)
        shutil.copy(vault / MEMORY, rest_vault / MEMORY)
        async with StandinProcess(rest_vault, plugin_version="5.1.0") as standin:
            rest = Settings(api_key=SecretStr(standin.api_key), host="127.0.0.1", port=standin.port,
                            cert=Path(standin.cert), config_dir=root / "cfg",
                            request_timeout=60, retry_budget=120)
            async with app_lifespan(rest) as state:
                services = state.require()
                rows += await measure_store(services.memory, "stand-in, domain", runs)
                # Every recall re-reads the file (no staleness window): the price of the
                # plugin having no stat or range read for a .jsonl file.
                always = MemoryStore(services.vault, MEMORY, max_staleness=0)
                await always.recall(limit=1)
                fresh = await timed(max(runs // 5, 5), lambda n: always.recall(tags=["bench"]))
                rows.append(("stand-in, domain", "recall, file re-read each time", *fresh))
            rows += await measure_tools(rest, "stand-in, MCP tool", runs)
    return rows


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    parser = argparse.ArgumentParser(description="Memory store benchmark.")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    rows = anyio.run(run, args.entries, args.runs)
    logging.getLogger().setLevel(logging.WARNING)
    print(f"\n{'source':<20} {'operation':<32} {'median ms':>10} {'p95 ms':>10}")
    for source, operation, median, p95 in rows:
        p95_text = "" if p95 != p95 else f"{p95:10.2f}"  # NaN: a single measurement
        print(f"{source:<20} {operation:<32} {median:>10.2f} {p95_text:>10}")


if __name__ == "__main__":
    main()
