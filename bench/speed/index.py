"""The persistent passage index at scale: build cost, restarts, edits, memory, warm queries.

    python -m bench.speed.index --notes 1000 10000 [--embed-seconds 600]
    python -m bench.speed.index --prebuilt VAULT_PARENT CACHE_DIR

For each size, a generated vault (``bench/shared/generate_vault.py``, no Smart Connections
vectors) is indexed once in this process, the way ``obsidian-mcp index`` does it:

- **read**: every note read, cut into passages and stored (seconds);
- **embed**: passage texts embedded by the background builder for at most
  ``--embed-seconds`` (passages per second; the full build time is measured when it
  finishes within the budget, else extrapolated from the rate and said so);
- the index's size on disk.

Then, on that index, each through the vault folder and through the stand-in Local REST
API 5.x (with the folder configured too, so both share the folder-keyed index), a NEW
server process (stdio subprocess; the stand-in, like a running Obsidian, has answered one
listing of every note's stat before, timed apart):

- **restart**: seconds from starting the process to its first answer (a planted
  question), and whether the answer holds the planted passage;
- **warm**: median and p95 of ``vault_semantic_query`` over the planted questions (query
  embedding and the freshness check included; the stat listing runs at most every
  ``OBSIDIAN_INDEX_REFRESH_SECONDS``, default 2 s, and its cost is in the p95);
- **edit**: one planted note rewritten (on disk for the folder, by REST PUT for the
  stand-in), then the first query after the staleness bound: its time, and whether it
  shows the new text;
- the server's resident memory (VmRSS) after all that.

With ``--prebuilt``, nothing is built: VAULT_PARENT holds ``vault/`` and
``planted.jsonl`` (``python -m bench.shared.generate_vault``) and CACHE_DIR is the
``OBSIDIAN_CACHE_DIR`` an ``obsidian-mcp index --vault VAULT_PARENT/vault`` filled. Both are
copied to a temporary folder (modification times kept, the index file renamed for the
copy's identity), never written; the copy is opened once to bring its schema up to date,
timed apart as **upgrade**, then served as above.

Results go to ``bench/out/index-<time>.json`` and a markdown table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from bench.shared.generate_vault import generate
from bench.shared.harness import (
    OUT_DIR,
    markdown_table,
    median,
    percentile,
    server_env,
    stdio_session,
)
from obsidian_mcp.config import Settings
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.opening import model_loader, open_retriever
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import JSONLOGIC
from obsidian_mcp.vault import Vault
from tests.standin.process import StandinProcess

SEMANTIC = "vault_semantic_query"
# Stat listings are at most this far apart (the server's default); an edit is looked for
# by the first query after it.
REFRESH_SECONDS = 2.0


@dataclass
class Build:
    notes: int
    read_seconds: float
    passages: int
    distinct_texts: int
    embedded: int
    embed_seconds: float
    complete: bool
    bytes_on_disk: int

    @property
    def passages_per_second(self) -> float:
        return self.embedded / self.embed_seconds if self.embed_seconds else 0.0

    @property
    def full_build_seconds(self) -> float:
        """Measured when the build finished, else read time plus the rest at this rate."""
        if self.complete:
            return self.read_seconds + self.embed_seconds
        return self.read_seconds + self.distinct_texts / max(self.passages_per_second, 1e-9)


@dataclass
class Serve:
    notes: int
    source: str
    restart_seconds: float
    restart_hit: bool
    restart_first_line: str
    warm_median_ms: float
    warm_p95_ms: float
    edit_ms: float
    edit_used: bool
    rss_mb: float


async def build(vault: Path, index_dir: Path, notes: int, embed_seconds: float) -> Build:
    settings = Settings.model_validate({"vault_path": vault, "index_dir": index_dir})
    retriever = open_retriever(Vault(None, FolderSource(vault)), settings, model_loader(settings))
    started = time.perf_counter()
    await retriever.corpus.sync(read_all=True)
    read_seconds = time.perf_counter() - started
    store = retriever.corpus.store
    assert retriever.embedder is not None and retriever.builder is not None
    model = (await anyio.to_thread.run_sync(retriever.embedder.get)).model_id
    distinct = store.count_unembedded(model)
    builder = retriever.builder
    started = time.perf_counter()
    builder.start()
    while builder.running and time.perf_counter() - started < embed_seconds:
        await anyio.sleep(1.0)
    complete = not builder.running
    retriever.close()  # stops after the batch in hand
    embed_time = time.perf_counter() - started
    stats = IndexStore(store.path).stats()
    embedded = distinct - IndexStore(store.path).count_unembedded(model)
    return Build(
        notes,
        read_seconds,
        stats.passages,
        distinct,
        embedded,
        embed_time,
        complete and embedded == distinct,
        stats.bytes_on_disk,
    )


def server_rss_mb(marker: str) -> float:
    """VmRSS of the server process whose environment holds `marker` (its config dir)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"obsidian_mcp" in cmdline and marker.encode() in environ:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    return 0.0


async def serve(
    env: dict[str, str],
    notes: int,
    source: str,
    planted: list[tuple[str, str, str]],
    edit: Callable[[str, str], Awaitable[None]],
) -> Serve:
    started = time.perf_counter()
    async with stdio_session(env) as session:
        question, gold, _ = planted[0]
        first = await session.call(SEMANTIC, {"query": question})
        restart = time.perf_counter() - started
        warm: list[float] = []
        for n in range(20):
            question, _, _ = planted[(n + 1) % len(planted)]
            result = await session.call(SEMANTIC, {"query": question})
            warm.append(1000 * result.seconds)
        marker = f"Edited by the index benchmark {time.time_ns()}: the {notes} keys are brass."
        await edit(planted[1][2], marker)
        await anyio.sleep(REFRESH_SECONDS)
        after = await session.call(SEMANTIC, {"query": f"which keys are brass {notes}"})
        rss = server_rss_mb(env["OBSIDIAN_CONFIG_DIR"])
    return Serve(
        notes,
        source,
        restart,
        gold in first.text,
        first.text.splitlines()[0][:160],
        median(warm),
        percentile(warm, 95),
        1000 * after.seconds,
        marker.split(":")[0] in after.text,
        rss,
    )


async def run_size(notes: int, work: Path, embed_seconds: float) -> tuple[Build, list[Serve]]:
    out = work / f"gen-{notes}"
    planted_rows = generate(out, notes, vectors=False)
    vault = out / "vault"
    planted = [(p.question, p.gold, p.path) for p in planted_rows]
    config = work / f"config-{notes}"
    env = server_env(vault=vault, config_dir=config)
    index_dir = Path(env["OBSIDIAN_INDEX_DIR"])
    built = await build(vault, index_dir, notes, embed_seconds)
    print(f"  {notes:,} notes: {built}", flush=True)
    runs = await serve_both(vault, config, notes, planted)
    shutil.rmtree(out)
    return built, runs


async def run_prebuilt(parent: Path, cache: Path, work: Path) -> tuple[float, list[Serve]]:
    """Serve a copy of a vault and its index built elsewhere; (seconds to upgrade the
    copy's schema, the serve runs)."""
    vault = work / "prebuilt" / "vault"
    shutil.copytree(parent / "vault", vault, copy_function=shutil.copy2)
    rows = [
        json.loads(line)
        for line in (parent / "planted.jsonl").read_text("utf-8").split("\n")
        if line
    ]
    planted = [(row["question"], row["gold"], row["gold_file"]) for row in rows]
    config = work / "config-prebuilt"
    env = server_env(vault=vault, config_dir=config)
    source = index_path(
        Settings.model_validate({"vault_path": parent / "vault", "cache_dir": cache})
    )
    target = index_path(
        Settings.model_validate({"vault_path": vault, "index_dir": env["OBSIDIAN_INDEX_DIR"]})
    )
    target.parent.mkdir(parents=True)
    shutil.copy2(source, target)
    started = time.perf_counter()
    IndexStore(target).close()
    upgrade = time.perf_counter() - started
    print(f"  upgrade of {source.name}: {upgrade:.2f} s", flush=True)
    # The copies are written back to disk before anything is timed: an index built in an
    # earlier session is on disk, and the kernel flushing 450 MB of fresh copies slowed
    # the first restart timed after them (2.47 s through the folder against 1.8 s).
    os.sync()
    return upgrade, await serve_both(vault, config, len(list(vault.rglob("*.md"))), planted)


async def serve_both(
    vault: Path, config: Path, notes: int, planted: list[tuple[str, str, str]]
) -> list[Serve]:
    """A new server process on the built index through the folder, then the stand-in."""
    env = server_env(vault=vault, config_dir=config)

    async def edit_on_disk(path: str, marker: str) -> None:
        target = vault / path
        target.write_text(target.read_text("utf-8") + f"\n\n{marker}\n", "utf-8")

    runs = [await serve(env, notes, "folder", planted, edit_on_disk)]
    async with StandinProcess(vault, plugin_version="5.1.0", startup_timeout=300) as standin:

        async def edit_by_put(path: str, marker: str) -> None:
            async with standin.async_client(timeout=30) as http:
                text = (vault / path).read_text("utf-8")
                response = await http.put(
                    f"/vault/{path}",
                    content=f"{text}\n\n{marker}\n",
                    headers={"Content-Type": "text/markdown"},
                )
                response.raise_for_status()

        # Obsidian is running long before an agent session starts; the stand-in's first
        # listing of a fresh process reads every note's stat from a cold disk cache (5.4 s
        # of an 8.3 s restart at 10,000 notes), which no user waits for. It is done, and
        # timed apart, before the server starts.
        async with standin.async_client(timeout=300) as http:
            started = time.perf_counter()
            listing = await http.post(
                "/search/",
                content=json.dumps({"var": "stat"}),
                headers={"Content-Type": JSONLOGIC},
            )
            listing.raise_for_status()
        print(f"  the stand-in's own first listing: {time.perf_counter() - started:.2f} s")
        rest_env = server_env(standin=standin, vault=vault, config_dir=config)
        runs.append(await serve(rest_env, notes, "stand-in", planted, edit_by_put))
    for run in runs:
        print(f"  {run}", flush=True)
    return runs


def report(builds: list[Build], serves: list[Serve]) -> str:
    build_rows = [
        [
            f"{b.notes:,}",
            f"{b.read_seconds:.1f}",
            f"{b.passages:,}",
            f"{b.distinct_texts:,}",
            f"{b.passages_per_second:.1f}",
            f"{b.full_build_seconds:.0f}" + ("" if b.complete else " (extrapolated)"),
            f"{b.bytes_on_disk / 1e6:.1f}",
        ]
        for b in builds
    ]
    serve_rows = [
        [
            f"{s.notes:,}",
            s.source,
            f"{s.restart_seconds:.2f}",
            "yes" if s.restart_hit else "no",
            f"{s.warm_median_ms:.0f}",
            f"{s.warm_p95_ms:.0f}",
            f"{s.edit_ms:.0f}",
            "yes" if s.edit_used else "no",
            f"{s.rss_mb:.0f}",
        ]
        for s in serves
    ]
    build_table = [
        "## Passage index: build",
        "",
        markdown_table(
            [
                "notes",
                "read+cut+store s",
                "passages",
                "distinct texts",
                "embedded/s",
                "full build s",
                "index MB",
            ],
            build_rows,
        ),
        "",
    ]
    return "\n".join(
        [
            *(build_table if builds else []),
            "## Passage index: a new server process on the built index",
            "",
            markdown_table(
                [
                    "notes",
                    "source",
                    "start to first answer s",
                    "planted hit",
                    "warm median ms",
                    "warm p95 ms",
                    "query after an edit ms",
                    "edit used",
                    "RSS MB",
                ],
                serve_rows,
            ),
        ]
    )


async def main_async(
    sizes: list[int], embed_seconds: float, prebuilt: tuple[Path, Path] | None
) -> None:
    builds: list[Build] = []
    serves: list[Serve] = []
    upgrade: float | None = None
    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        if prebuilt is not None:
            upgrade, serves = await run_prebuilt(*prebuilt, Path(tmp))
        for notes in sizes if prebuilt is None else []:
            built, runs = await run_size(notes, Path(tmp), embed_seconds)
            builds.append(built)
            serves += runs
    text = report(builds, serves)
    if upgrade is not None:
        text += f"\n\nSchema upgrade of the prebuilt index (once): {upgrade:.2f} s"
    print(text)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"index-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "builds": [asdict(b) for b in builds],
                "serves": [asdict(s) for s in serves],
                "upgrade_seconds": upgrade,
            },
            indent=1,
        )
    )
    print(f"results: {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The passage index at scale.")
    parser.add_argument("--notes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument(
        "--embed-seconds",
        type=float,
        default=600.0,
        help="longest the embedding phase of one build may run before the rate is used",
    )
    parser.add_argument(
        "--prebuilt",
        nargs=2,
        type=Path,
        metavar=("VAULT_PARENT", "CACHE_DIR"),
        help="serve a copy of an already built vault and index instead of building",
    )
    args = parser.parse_args(argv)
    prebuilt = None if args.prebuilt is None else (args.prebuilt[0], args.prebuilt[1])
    anyio.run(main_async, args.notes, args.embed_seconds, prebuilt)


if __name__ == "__main__":
    main()
