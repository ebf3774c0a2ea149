"""The persistent passage index at scale: build cost, restarts, edits, memory, warm queries.

    python -m bench.speed.index --notes 1000 10000 [--embed-seconds 600] [--foreground]
    python -m bench.speed.index --prebuilt VAULT_PARENT CACHE_DIR
    python -m bench.speed.index --keyword-only --notes 10000 20000 50000

For each size, a generated vault (``bench/shared/generate_vault.py``, no Smart Connections
vectors) is indexed once in this process, the way ``obsidian-mcp index`` does it:

- **keyword-only**: every note read, cut and stored in an index of its own with
  ``OBSIDIAN_INDEX_EMBEDDINGS=false`` (wall and CPU seconds): everything but the model;
- **read**: the same for the index that is then embedded;
- ***T_model***: the model alone embedding 2,000 of the build's own first texts, then 2,000
  of all its texts (a seeded sample), with the build's batch and threads, in this
  process, scaled to the build's count: the floor a build is measured against;
- **embed**: passage texts embedded by the background builder (one batch at a time, as a
  server builds), or with ``--foreground`` as ``obsidian-mcp index`` builds (a batch on
  each core side by side, *T_model* then measured so too), for at most
  ``--embed-seconds``, timed until every passage has its first text's vector
  (searchable by meaning) and until the end (the whole build is extrapolated from the
  rate when it does not finish, and said so), with the builder's thread split into
  finding work (its look-ups), the model's calls and writing vectors;
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
- **edit**: a planted note rewritten (on disk for the folder, by REST PUT for the
  stand-in), then the first query after the staleness bound: its time, and whether it
  shows the new text; ``EDIT_ROUNDS`` times, median and most;
- the server's resident memory (VmRSS) after all that.

With ``--prebuilt``, nothing is built: VAULT_PARENT holds ``vault/`` and
``planted.jsonl`` (``python -m bench.shared.generate_vault``) and CACHE_DIR is the
``OBSIDIAN_CACHE_DIR`` an ``obsidian-mcp index --vault VAULT_PARENT/vault`` filled. Both are
copied to a temporary folder (modification times kept, the index file renamed for the
copy's identity), never written; the copy is opened once to bring its schema up to date,
timed apart as **upgrade**, then served as above. ``--code DIR`` serves it with another
checkout's server (``git worktree add DIR <commit>``): a before-and-after pair is two runs
back to back on the same copies' source.

Results go to ``bench/out/index-<time>.json`` and a markdown table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread

from bench.shared.generate_vault import Planted, generate
from bench.shared.harness import (
    OUT_DIR,
    REPO_ROOT,
    KeywordPicker,
    copy_prebuilt,
    markdown_table,
    median,
    percentile,
    prime_standin,
    server_env,
    stdio_session,
)
from bench.speed.scale import Probe, ToolTiming, time_tools
from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import Embedder, Matrix, cores_available
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.index.vectors import BUILD_BATCH, EmbeddingBuilder
from obsidian_mcp.opening import model_loader, open_retriever
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.standin.process import StandinProcess

SEMANTIC = "vault_semantic_query"
# Stat listings are at most this far apart (the server's default); an edit is looked for
# by the first query after it.
REFRESH_SECONDS = 2.0
# Edits, each followed by the question that should show it: one sample said too little (a
# background listing in flight, or not, when it came).
EDIT_ROUNDS = 5
# Texts the model embeds alone, of each kind, for T_model (issue 38: at least 2,000).
MODEL_SAMPLE = 2000
# Every tool's warm calls on the built index: at most this many, or until this many seconds.
TOOL_CALLS = 20
TOOL_SECONDS = 10.0


@dataclass
class Split:
    """Seconds the builder's thread spent, by what it did (wall time inside each call)."""

    looking_up: float = 0.0
    embedding: float = 0.0
    writing: float = 0.0


@dataclass
class Build:
    notes: int
    passages: int
    # Distinct passage texts to embed (a passage has one per run of sentences).
    texts: int
    # The same notes read, cut and stored with OBSIDIAN_INDEX_EMBEDDINGS=false, apart.
    keyword_only_seconds: float
    keyword_only_cpu: float
    read_seconds: float
    read_cpu: float
    # From the builder's start until every passage had its first text's vector.
    searchable_seconds: float | None
    embedded: int
    embed_seconds: float
    embed_cpu: float
    complete: bool
    # The model alone, on a sample of the build's own first texts and of all its texts,
    # with the build's batch and threads, in this process: texts per second.
    model_rate_first: float
    model_rate_all: float
    split: Split
    bytes_on_disk: int
    # Batches embedded at once: 1 as a server builds, every core as `obsidian-mcp index`.
    side_by_side: int = 1

    @property
    def texts_per_passage(self) -> float:
        return self.texts / self.passages if self.passages else 0.0

    @property
    def t_model_first(self) -> float:
        """The model's own time for one text a passage, scaled from the sample."""
        return self.passages / self.model_rate_first

    @property
    def t_model_all(self) -> float:
        """The model's own time for every text the build embeds."""
        return self.texts / self.model_rate_all

    @property
    def build_seconds(self) -> float:
        """Measured when the build finished, else read time plus the rest at this rate."""
        if self.complete:
            return self.read_seconds + self.embed_seconds
        rate = self.embedded / self.embed_seconds if self.embed_seconds else 0.0
        return self.read_seconds + self.texts / max(rate, 1e-9)


@dataclass
class Serve:
    notes: int
    source: str
    restart_seconds: float
    restart_hit: bool
    restart_first_line: str
    warm_median_ms: float
    warm_p95_ms: float
    edit_ms: float  # median of EDIT_ROUNDS
    edit_max_ms: float
    edit_used: bool  # every round's answer showed its edit
    rss_mb: float
    # Every tool's first call in this process and its warm calls, after the above.
    tools: list[ToolTiming]


async def keyword_only_build(vault: Path, index_dir: Path) -> tuple[float, float]:
    """Wall and CPU seconds of reading, cutting and storing every note with no model."""
    settings = Settings.model_validate(
        {"vault_path": vault, "index_dir": index_dir, "index_embeddings": False}
    )
    retriever = open_retriever(Vault(None, FolderSource(vault)), settings, None)
    wall, cpu = time.perf_counter(), time.process_time()
    await retriever.corpus.sync(read_all=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    retriever.close()
    return wall, cpu


def model_rate(embedder: Embedder, texts: list[str], side_by_side: int = 1) -> float:
    """Texts per second of the model alone on `texts`, a build's batch at a time, and
    `side_by_side` batches at once (each on a thread of its own, as the builder runs them)."""
    batches = [texts[first : first + BUILD_BATCH] for first in range(0, len(texts), BUILD_BATCH)]
    started = time.perf_counter()
    with ThreadPoolExecutor(side_by_side) as pool:
        list(pool.map(partial(embedder.embed, role=TextRole.DOCUMENT), batches))
    return len(texts) / (time.perf_counter() - started)


def sample_texts(texts: list[tuple[str, str]], size: int = MODEL_SAMPLE) -> list[str]:
    """The seeded sample of (hash, text) rows *T_model* is measured on: their texts."""
    return [text for _, text in random.Random(38).sample(texts, min(size, len(texts)))]


@contextmanager
def _instrumented(
    store: IndexStore, embedder: Embedder, split: Split
) -> Iterator[Callable[[], float | None]]:
    """Time the builder's look-ups, model calls and writes into `split` (the model is
    shared by every build of the process: its own method is put back after); the function
    given says when (perf_counter) the builder first looked past first texts, the end of its
    first pass: every passage searchable by meaning."""
    look_up, write, embed = store.unembedded, store.put_vectors, embedder.embed
    firsts_done: list[float] = []

    def timed_look_up(
        model: str, limit: int, after: int = 0, *, firsts_only: bool = False
    ) -> tuple[list[tuple[str, str]], int]:
        started = time.perf_counter()
        if not firsts_only and not firsts_done:
            firsts_done.append(started)
        try:
            return look_up(model, limit, after, firsts_only=firsts_only)
        finally:
            split.looking_up += time.perf_counter() - started

    def timed_write(model: str, hashes: Sequence[str], vectors: Matrix) -> None:
        started = time.perf_counter()
        try:
            write(model, hashes, vectors)
        finally:
            split.writing += time.perf_counter() - started

    def timed_embed(texts: Sequence[str], role: TextRole) -> Matrix:
        started = time.perf_counter()
        try:
            return embed(texts, role)
        finally:
            split.embedding += time.perf_counter() - started

    store.unembedded = timed_look_up  # type: ignore[method-assign]
    store.put_vectors = timed_write  # type: ignore[method-assign]
    embedder.embed = timed_embed  # type: ignore[method-assign]
    try:
        yield lambda: firsts_done[0] if firsts_done else None
    finally:
        embedder.embed = embed  # type: ignore[method-assign]


async def run_builder(builder: EmbeddingBuilder, side_by_side: int, bound: float) -> bool:
    """The server's background build (`side_by_side` 1), or the foreground build of
    `obsidian-mcp index` (`Retriever.build_index`), stopped after `bound` seconds; whether
    it finished first."""
    started = time.perf_counter()
    if side_by_side == 1:
        builder.start()
        while builder.running and time.perf_counter() - started < bound:
            await anyio.sleep(1.0)
        return not builder.running
    stopped = False

    async def stop_at_bound() -> None:
        nonlocal stopped
        await anyio.sleep(bound)
        stopped = True
        builder.stop()  # the batches in hand end, the rest are not begun

    async with anyio.create_task_group() as group:
        group.start_soon(stop_at_bound)
        await anyio.to_thread.run_sync(partial(builder.run_until_done, side_by_side=side_by_side))
        group.cancel_scope.cancel()
    return not stopped


async def build(
    vault: Path, index_dir: Path, notes: int, embed_seconds: float, side_by_side: int = 1
) -> Build:
    keyword_wall, keyword_cpu = await keyword_only_build(vault, index_dir / "keywords-only")
    settings = Settings.model_validate({"vault_path": vault, "index_dir": index_dir})
    retriever = open_retriever(Vault(None, FolderSource(vault)), settings, model_loader(settings))
    started, cpu = time.perf_counter(), time.process_time()
    await retriever.corpus.sync(read_all=True)
    read_seconds, read_cpu = time.perf_counter() - started, time.process_time() - cpu
    store = retriever.corpus.store
    assert retriever.embedder is not None and retriever.builder is not None
    embedder = await anyio.to_thread.run_sync(retriever.embedder.get)
    model = embedder.vector_space
    texts = store.count_unembedded(model)
    everything, _ = store.unembedded(model, texts + 1)
    firsts, _ = store.unembedded(model, texts + 1, firsts_only=True)
    rate_first = model_rate(embedder, sample_texts(firsts), side_by_side)
    rate_all = model_rate(embedder, sample_texts(everything), side_by_side)
    del everything, firsts
    split = Split()
    with _instrumented(store, embedder, split) as firsts_done_at:
        builder = retriever.builder
        started, cpu = time.perf_counter(), time.process_time()
        complete = await run_builder(builder, side_by_side, embed_seconds)
        retriever.close()  # stops after the batch in hand
        embed_time, embed_cpu = time.perf_counter() - started, time.process_time() - cpu
        searchable_at = firsts_done_at()
    left = IndexStore(store.path)
    embedded = texts - left.count_unembedded(model)
    stats = left.stats()
    left.close()
    return Build(
        notes=notes,
        passages=stats.passages,
        texts=texts,
        keyword_only_seconds=keyword_wall,
        keyword_only_cpu=keyword_cpu,
        read_seconds=read_seconds,
        read_cpu=read_cpu,
        searchable_seconds=None if searchable_at is None else searchable_at - started,
        embedded=embedded,
        embed_seconds=embed_time,
        embed_cpu=embed_cpu,
        complete=complete and embedded == texts,
        model_rate_first=rate_first,
        model_rate_all=rate_all,
        split=split,
        bytes_on_disk=stats.bytes_on_disk,
        side_by_side=side_by_side,
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
    probes: list[Probe],
    edit: Callable[[str, str], Awaitable[None]],
    code: Path = REPO_ROOT,
) -> Serve:
    started = time.perf_counter()
    async with stdio_session(env, repo=code) as session:
        first = await session.call(SEMANTIC, {"query": probes[0].planted.question})
        restart = time.perf_counter() - started
        warm: list[float] = []
        for n in range(20):
            question = probes[(n + 1) % len(probes)].planted.question
            result = await session.call(SEMANTIC, {"query": question})
            warm.append(1000 * result.seconds)
        after: list[float] = []
        used = True
        for _ in range(EDIT_ROUNDS):
            marker = f"Edited by the index benchmark {time.time_ns()}: the {notes} keys are brass."
            await edit(probes[1].planted.path, marker)
            await anyio.sleep(REFRESH_SECONDS)
            answer = await session.call(SEMANTIC, {"query": f"which keys are brass {notes}"})
            after.append(1000 * answer.seconds)
            used = used and marker.split(":")[0] in answer.text
        tools = await time_tools(session, notes, source, probes, TOOL_CALLS, TOOL_SECONDS)
        rss = server_rss_mb(env["OBSIDIAN_CONFIG_DIR"])
    return Serve(
        notes,
        source,
        restart,
        probes[0].planted.gold in first.text,
        first.text.splitlines()[0][:160],
        median(warm),
        percentile(warm, 95),
        median(after),
        max(after),
        used,
        rss,
        tools,
    )


async def run_size(
    notes: int, work: Path, embed_seconds: float, side_by_side: int = 1
) -> tuple[Build, list[Serve]]:
    out = work / f"gen-{notes}"
    planted_rows = generate(out, notes, vectors=False)
    vault = out / "vault"
    planted = list(planted_rows)
    config = work / f"config-{notes}"
    env = server_env(vault=vault, config_dir=config)
    index_dir = Path(env["OBSIDIAN_INDEX_DIR"])
    built = await build(vault, index_dir, notes, embed_seconds, side_by_side)
    print(f"  {notes:,} notes: {built}", flush=True)
    runs = await serve_both(vault, config, notes, planted)
    shutil.rmtree(out)
    return built, runs


async def run_prebuilt(
    parent: Path, cache: Path, work: Path, code: Path = REPO_ROOT
) -> tuple[float, list[Serve]]:
    """Serve a copy of a vault and its index built elsewhere, with the server of the
    checkout `code`; (seconds to upgrade the copy's schema, the serve runs)."""
    vault = work / "prebuilt" / "vault"
    config = work / "config-prebuilt"
    upgrade = copy_prebuilt(parent, cache, vault, server_env(vault=vault, config_dir=config), code)
    print(f"  upgrade of the prebuilt index: {upgrade:.2f} s; server of {code}", flush=True)
    rows = [
        json.loads(line)
        for line in (parent / "planted.jsonl").read_text("utf-8").split("\n")
        if line
    ]
    planted = [Planted(row["id"], row["gold_file"], row["question"], row["gold"]) for row in rows]
    notes = len(list(vault.rglob("*.md")))
    return upgrade, await serve_both(vault, config, notes, planted, code)


async def serve_both(
    vault: Path, config: Path, notes: int, planted: list[Planted], code: Path = REPO_ROOT
) -> list[Serve]:
    """A new server process (of the checkout `code`) on the built index through the folder,
    then the stand-in."""
    env = server_env(vault=vault, config_dir=config)
    picker = KeywordPicker(vault)
    probes = [Probe(p, picker.pick(p.question), n) for n, p in enumerate(planted)]

    # Each edit is the note as generated plus one marker: markers piling up in one note
    # (five rounds through each source) outgrew the passage an answer shows, and the tenth
    # round's answer showed the first nine, its own left out.
    originals: dict[str, str] = {}

    def edited(path: str, marker: str) -> str:
        original = originals.setdefault(path, (vault / path).read_text("utf-8"))
        return f"{original}\n\n{marker}\n"

    async def edit_on_disk(path: str, marker: str) -> None:
        (vault / path).write_text(edited(path, marker), "utf-8")

    runs = [await serve(env, notes, "folder", probes, edit_on_disk, code)]
    async with StandinProcess(vault, plugin_version="5.1.0", startup_timeout=300) as standin:

        async def edit_by_put(path: str, marker: str) -> None:
            async with standin.async_client(timeout=30) as http:
                response = await http.put(
                    f"/vault/{path}",
                    content=edited(path, marker),
                    headers={"Content-Type": "text/markdown"},
                )
                response.raise_for_status()

        primed = await prime_standin(standin)
        print(f"  the stand-in's own first listing: {primed:.2f} s")
        rest_env = server_env(standin=standin, vault=vault, config_dir=config)
        runs.append(await serve(rest_env, notes, "stand-in", probes, edit_by_put, code))
    for run in runs:
        print(f"  {run}", flush=True)
    return runs


def _seconds(wall: float, cpu: float | None = None) -> str:
    return f"{wall:.0f}" if cpu is None else f"{wall:.0f} ({cpu:.0f})"


def build_tables(builds: list[Build]) -> list[str]:
    """The build against the model's own time, and the builder's thread by what it did."""
    rows = []
    for b in builds:
        searchable = None if b.searchable_seconds is None else b.read_seconds + b.searchable_seconds
        whole = _seconds(b.build_seconds, b.read_cpu + b.embed_cpu if b.complete else None)
        rows.append(
            [
                f"{b.notes:,}",
                "server (1)" if b.side_by_side == 1 else f"index ({b.side_by_side})",
                f"{b.passages:,}",
                f"{b.texts_per_passage:.2f}",
                _seconds(b.keyword_only_seconds, b.keyword_only_cpu),
                _seconds(b.read_seconds, b.read_cpu),
                "-" if searchable is None else _seconds(searchable),
                _seconds(b.t_model_first),
                "-" if searchable is None else f"{searchable / b.t_model_first:.2f}",
                whole + ("" if b.complete else " (extrapolated)"),
                _seconds(b.t_model_all),
                f"{b.build_seconds / b.t_model_all:.2f}",
                f"{b.bytes_on_disk / 1e6:.0f}",
            ]
        )
    splits = [
        [
            f"{b.notes:,}",
            f"{b.read_seconds:.1f}",
            f"{b.split.looking_up:.1f}",
            f"{b.split.embedding:.1f}",
            f"{b.split.writing:.1f}",
            # Side by side the parts are summed over the threads: more than the wall.
            f"{b.embed_seconds - b.split.looking_up - b.split.embedding - b.split.writing:.1f}"
            if b.side_by_side == 1
            else "-",
        ]
        for b in builds
    ]
    return [
        "## Passage index: build (wall seconds, CPU in brackets)",
        "",
        "Searchable: until every passage has its first text's vector; *T_model*: the model "
        "alone on 2,000 of the build's own texts (first texts, then any), its batch and "
        "threads, in the same run, scaled to the build's count. Targets: each ratio <= 1.15; "
        "keyword-only <= 60 s at 10,000 notes, <= 5 min at 50,000.",
        "",
        markdown_table(
            [
                "notes",
                "build (batches at once)",
                "passages",
                "texts per passage",
                "keyword-only build",
                "read, cut, store",
                "searchable by meaning",
                "T_model, first texts",
                "ratio",
                "whole build",
                "T_model, all texts",
                "ratio",
                "index MB",
            ],
            rows,
        ),
        "",
        "## Passage index: the build's cost by part (seconds)",
        "",
        "Wall seconds inside each kind of call, summed over the threads of a build that "
        "embeds side by side.",
        "",
        markdown_table(
            ["notes", "reading notes", "finding work", "embedding", "writing", "other"],
            splits,
        ),
        "",
    ]


def report(builds: list[Build], serves: list[Serve]) -> str:
    serve_rows = [
        [
            f"{s.notes:,}",
            s.source,
            f"{s.restart_seconds:.2f}",
            "yes" if s.restart_hit else "no",
            f"{s.warm_median_ms:.0f}",
            f"{s.warm_p95_ms:.0f}",
            f"{s.edit_ms:.0f} / {s.edit_max_ms:.0f}",
            "yes" if s.edit_used else "no",
            f"{s.rss_mb:.0f}",
        ]
        for s in serves
    ]
    return "\n".join(
        [
            *(build_tables(builds) if builds else []),
            "## Passage index: a new server process on the built index",
            "",
            "Targets: start to first answer <= 1.5 s at 10,000 notes (3 s at 50,000); warm "
            "median / p95 <= 50 / 150 ms (150 / 400); a query after an edit <= 200 ms (300); "
            "RSS <= 380 MB (700).",
            "",
            markdown_table(
                [
                    "notes",
                    "source",
                    "start to first answer s",
                    "planted hit",
                    "warm median ms",
                    "warm p95 ms",
                    f"query after an edit ms (median / most of {EDIT_ROUNDS})",
                    "edit used",
                    "RSS MB",
                ],
                serve_rows,
            ),
            "",
            "## Passage index: every tool on the built index (ms)",
            "",
            "In the same processes, after the above: each tool's first call, then up to "
            f"{TOOL_CALLS} warm calls ({TOOL_SECONDS:.0f} s at most). Targets at 10,000 notes: "
            "first call <= 1 s (2 s at 50,000); warm median <= 100 ms (300), "
            "`vault_scratch_append` through REST excepted (it waits 100 ms by design).",
            "",
            markdown_table(
                ["notes", "source", "tool", "first", "warm median", "warm p95", "errors"],
                [
                    [
                        f"{s.notes:,}",
                        s.source,
                        t.tool,
                        f"{t.first_ms:,.0f}",
                        f"{t.warm_median_ms:,.0f}",
                        f"{t.warm_p95_ms:,.0f}",
                        str(t.errors),
                    ]
                    for s in serves
                    for t in s.tools
                ],
            ),
        ]
    )


async def keyword_only_sizes(sizes: list[int]) -> None:
    """Everything but the model at each size: notes read, cut and stored, wall and CPU."""
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        for notes in sizes:
            out = Path(tmp) / f"gen-{notes}"
            generate(out, notes, vectors=False)
            index_dir = Path(tmp) / f"index-{notes}"
            wall, cpu = await keyword_only_build(out / "vault", index_dir)
            store = IndexStore(
                index_path(
                    Settings.model_validate({"vault_path": out / "vault", "index_dir": index_dir})
                )
            )
            stats = store.stats()
            store.close()
            rows.append(
                [
                    f"{notes:,}",
                    f"{stats.passages:,}",
                    _seconds(wall, cpu),
                    f"{1000 * wall / notes:.1f}",
                    f"{stats.bytes_on_disk / 1e6:.0f}",
                ]
            )
            print(f"  {notes:,} notes: {wall:.0f} s", flush=True)
            shutil.rmtree(out)
    print(
        "## Passage index: keyword-only build (OBSIDIAN_INDEX_EMBEDDINGS=false)\n\n"
        "Targets: <= 60 s at 10,000 notes, <= 5 min at 50,000 (linear).\n\n"
        + markdown_table(["notes", "passages", "wall s (CPU)", "ms per note", "index MB"], rows)
    )


async def main_async(
    sizes: list[int],
    embed_seconds: float,
    prebuilt: tuple[Path, Path] | None,
    code: Path = REPO_ROOT,
    side_by_side: int = 1,
) -> None:
    builds: list[Build] = []
    serves: list[Serve] = []
    upgrade: float | None = None
    with tempfile.TemporaryDirectory(prefix="index-bench-") as tmp:
        if prebuilt is not None:
            upgrade, serves = await run_prebuilt(*prebuilt, Path(tmp), code)
        for notes in sizes if prebuilt is None else []:
            built, runs = await run_size(notes, Path(tmp), embed_seconds, side_by_side)
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
    parser.add_argument(
        "--code",
        type=Path,
        default=REPO_ROOT,
        help="with --prebuilt: serve with this checkout's server (a worktree of an earlier "
        "commit, for a before-and-after pair)",
    )
    parser.add_argument(
        "--foreground",
        action="store_true",
        help="build as obsidian-mcp index does, a batch on each core side by side (default: "
        "as a server builds in the background, one batch at a time)",
    )
    parser.add_argument(
        "--keyword-only",
        action="store_true",
        help="only the keyword-only build at each size (no model, no server)",
    )
    args = parser.parse_args(argv)
    if args.keyword_only:
        anyio.run(keyword_only_sizes, args.notes)
        return
    prebuilt = None if args.prebuilt is None else (args.prebuilt[0], args.prebuilt[1])
    side_by_side = cores_available() if args.foreground else 1
    anyio.run(main_async, args.notes, args.embed_seconds, prebuilt, args.code, side_by_side)


if __name__ == "__main__":
    main()
