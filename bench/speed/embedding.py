"""Embedding throughput of the local model on this machine.

    python -m bench.speed.embedding                  # threads 1 and 2, 512 passages each
    python -m bench.speed.embedding --threads 1 --passages 256

Passages are the ones the index embeds: `fixtures/vault` cut by the retrieval corpus's own
passage cutter (at most PASSAGE_CHARS = 480 characters), keeping those of 300 characters or
more so the figure is for full-size passages, repeated to the count asked for. They go to
`OnnxEmbedder.embed` in calls of CALL_SIZE, as an index build would send them. Also times
one short query, the cost a search pays before it can rank by meaning.
Prints one line per thread count; the target is 40 passages/s or more (issue 8).

    python -m bench.speed.embedding --on-demand      # a question's on-demand passages

``--on-demand`` times what a question waits for while the meaning index is incomplete:
the first text (a window of at most WINDOW_CHARS) of `index_on_demand_passages` passages,
embedded in one call, then side by side on every core (`embed_side_by_side`), alternating,
alone and beside a thread that embeds batches of BUILD_BATCH at the build's niceness.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable

import anyio

from bench.shared.harness import REPO_ROOT
from bench.speed.scale import resident_mib
from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import (
    Embedder,
    OnnxEmbedder,
    cores_available,
    default_model_files,
    embed_side_by_side,
)
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.vectors import BUILD_BATCH, BUILD_NICENESS, lower_this_threads_priority
from obsidian_mcp.retrieval.corpus import passage_spans
from obsidian_mcp.text.markdown import parse_note

MIN_CHARS = 300
# Texts per call, as the index's background build sends them (vectors.BUILD_BATCH).
CALL_SIZE = BUILD_BATCH
QUERY = "What did Mira promise at the lighthouse?"
QUERY_RUNS = 20
# The build embeds windows of a passage of at most this many characters.
WINDOW_CHARS = 200
ON_DEMAND_ROUNDS = 8


def realistic_passages(count: int) -> list[str]:
    vault = REPO_ROOT / "fixtures" / "vault"
    found: list[str] = []
    for file in sorted(vault.rglob("*.md")):
        rel = file.relative_to(vault).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        parsed = parse_note(rel, file.read_text("utf-8"))
        for _, start, end in passage_spans(parsed):
            text = parsed.content[start:end]
            if len(text) >= MIN_CHARS:
                found.append(text)
    return [found[i % len(found)] for i in range(count)]


def measure(threads: int, passages: list[str]) -> tuple[float, float, float, float]:
    """(passages per second, passages per CPU-second, median query milliseconds, MB the
    process grew by: the model and what its runs keep) at `threads` ONNX threads. The CPU
    figure is what the run would reach with its cores to itself: on a shared machine the
    wall-clock rate also measures the neighbours."""
    resident_before = resident_mib(os.getpid())[0]
    embedder = OnnxEmbedder(default_model_files(), threads=threads)
    embedder.embed(passages[:CALL_SIZE], TextRole.DOCUMENT)  # warm-up: first-call allocations
    started, cpu_started = time.perf_counter(), time.process_time()
    for first in range(0, len(passages), CALL_SIZE):
        embedder.embed(passages[first : first + CALL_SIZE], TextRole.DOCUMENT)
    rate = len(passages) / (time.perf_counter() - started)
    cpu_rate = len(passages) / (time.process_time() - cpu_started)
    query_ms: list[float] = []
    for _ in range(QUERY_RUNS):
        started = time.perf_counter()
        embedder.embed([QUERY], TextRole.QUERY)
        query_ms.append((time.perf_counter() - started) * 1000)
    grown = resident_mib(os.getpid())[0] - resident_before
    return rate, cpu_rate, statistics.median(query_ms), grown


def _build_beside(embedder: Embedder, texts: list[str], stop: threading.Event) -> None:
    """What the background build does meanwhile: batches of BUILD_BATCH, niced."""
    lower_this_threads_priority(BUILD_NICENESS)
    first = 0
    while not stop.is_set():
        embedder.embed(texts[first : first + BUILD_BATCH], TextRole.DOCUMENT)
        first = (first + BUILD_BATCH) % (len(texts) - BUILD_BATCH)


def on_demand() -> None:
    """A question's on-demand texts: one call against side by side, in one run."""
    windows = [p[:WINDOW_CHARS] for p in realistic_passages(512)]
    count = Settings.model_fields["index_on_demand_passages"].default
    embedder = OnnxEmbedder(default_model_files(), threads=1)
    embedder.embed(windows[:count], TextRole.DOCUMENT)  # warm-up

    def one_call(texts: list[str]) -> object:
        return embedder.embed(texts, TextRole.DOCUMENT)

    def side_by_side(texts: list[str]) -> object:
        return anyio.run(embed_side_by_side, embedder, texts, TextRole.DOCUMENT)

    ways: dict[str, Callable[[list[str]], object]] = {
        "one call": one_call,
        "side by side": side_by_side,
    }
    print(f"{count} texts of at most {WINDOW_CHARS} characters, {cores_available()} cores")
    for beside in (False, True):
        stop = threading.Event()
        build = threading.Thread(target=_build_beside, args=(embedder, windows[256:], stop))
        if beside:
            build.start()
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        for round_number in range(ON_DEMAND_ROUNDS):
            texts = windows[(round_number * count) % 256 :][:count]
            for name in sorted(ways, reverse=bool(round_number % 2)):
                started = time.perf_counter()
                ways[name](texts)
                seconds[name].append(time.perf_counter() - started)
        stop.set()
        if beside:
            build.join()
        medians = {name: statistics.median(s) for name, s in seconds.items()}
        print(
            f"{'beside a build' if beside else 'alone'}: "
            + ", ".join(
                f"{name} {m:.3f} s (max {max(seconds[name]):.3f})" for name, m in medians.items()
            )
            + f"; ratio {medians['side by side'] / medians['one call']:.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Embedding throughput of the local model.")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument(
        "--on-demand", action="store_true", help="time a question's on-demand embedding"
    )
    args = parser.parse_args(argv)
    if args.on_demand:
        on_demand()
        return 0
    passages = realistic_passages(args.passages)
    mean_chars = statistics.mean(len(p) for p in passages)
    print(f"{len(passages)} passages, mean {mean_chars:.0f} characters, calls of {CALL_SIZE}")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for threads in args.threads:
        rate, cpu_rate, query_ms, grown_mb = measure(threads, passages)
        verdict = "meets" if rate >= 40 else "misses"
        print(
            f"threads={threads}: {rate:.1f} passages/s ({verdict} the 40/s target), "
            f"{cpu_rate:.1f} per CPU-second; one query {query_ms:.1f} ms "
            f"(median of {QUERY_RUNS}); the process grew by {grown_mb:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
