"""The benchmark report in one command.

    python -m bench --full      # the report: all questions, 1,000 to 10,000 notes,
                                # memory at 1,000 to 100,000 entries
    python -m bench --quick     # a handful of questions, a 200-note vault (CI, ~1 min)

Starts what it needs: the stand-in Local REST API over a copy of ``fixtures/vault`` (its
``/search/smart`` on ``fixtures/query_vectors.jsonl``), this server as a stdio subprocess,
and the peer ``mcp-obsidian`` from PyPI (installed on first use into ``--peer-venv``,
default ``bench/out/peer-venv``). Writes ``REPORT.md`` and its PNG charts into ``--out``
(default ``bench/``) and every figure as JSON into ``--cache`` (default ``bench/out/``).
Children's stderr (the stand-in's request log, the servers' logs) goes to
``<cache>/bench-stderr.log`` unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from bench import economy, report, speed
from bench.harness import OUT_DIR, QUESTIONS, REPO_ROOT, Question, load_questions
from bench.peer import PEER_REQUIREMENT, ensure_peer


@dataclass(frozen=True)
class Plan:
    mode: str
    questions: int | None  # None: all; else one per category, at most this many
    sizes: tuple[int, ...]
    warm_calls: int
    budget_seconds: float
    memory_sizes: tuple[int, ...]
    memory_runs: int
    overhead_rounds: int
    # Meaning from the local model in the quality runs (the quick run skips building the
    # passage indexes it needs; python -m bench.index_bench measures the index itself).
    embeddings: bool


PLANS = {
    "quick": Plan("quick", 6, (200,), 3, 5.0, (200, 1000), 5, 20, False),
    "full": Plan(
        "full", None, (1000, 5000, 10_000), 20, 10.0, (1000, 10_000, 100_000), 50, 200, True
    ),
}


def pick_questions(plan: Plan) -> list[Question]:
    questions = load_questions(QUESTIONS)
    if plan.questions is None:
        return questions
    firsts = {q.category: q for q in reversed(questions)}
    return sorted(firsts.values(), key=questions.index)[: plan.questions]


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    memory_kib = 0
    cpuinfo, meminfo = Path("/proc/cpuinfo"), Path("/proc/meminfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    if meminfo.exists():
        memory_kib = next(
            int(line.split()[1])
            for line in meminfo.read_text().splitlines()
            if line.startswith("MemTotal:")
        )
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_kib / 2**20,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mcp": importlib.metadata.version("mcp"),
        "commit": commit or "unknown",
    }


@contextmanager
def stderr_to(log: Path | None) -> Iterator[None]:
    """Send this process's stderr (and so its children's) to ``log`` while running."""
    if log is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("w", encoding="utf-8") as target:
        os.dup2(target.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


async def measure(plan: Plan, cache: Path, peer_venv: Path, work: Path) -> dict[str, Any]:
    peer = ensure_peer(peer_venv)
    questions = pick_questions(plan)
    print(f"context economy: {len(questions)} questions", flush=True)
    found = await economy.economy(
        questions, work / "economy", peer, cache / "peer-stderr.log", embeddings=plan.embeddings
    )
    print(f"speed and scale: {', '.join(f'{n:,}' for n in plan.sizes)} notes", flush=True)
    scale = await speed.scale(plan.sizes, work / "scale", plan.warm_calls, plan.budget_seconds)
    print(f"memory: {', '.join(f'{n:,}' for n in plan.memory_sizes)} entries", flush=True)
    memory = await speed.memory(plan.memory_sizes, plan.memory_runs)
    print("tool-call overhead over raw REST", flush=True)
    overhead = await speed.overhead(work, plan.overhead_rounds)
    return {
        "economy": found,
        "peer": {"requirement": PEER_REQUIREMENT, "version": peer.version},
        "scale": [asdict(run) for run in scale],
        "memory": [asdict(row) for row in memory],
        "overhead": {**asdict(overhead), "ratio": overhead.ratio},
    }


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="The benchmark report in one command."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        dest="mode",
        action="store_const",
        const="quick",
        help="a handful of questions, a 200-note vault, small memory stores",
    )
    mode.add_argument(
        "--full",
        dest="mode",
        action="store_const",
        const="full",
        help="the report's run (the default)",
    )
    parser.set_defaults(mode="full")
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "bench",
        help="where REPORT.md and the charts go (default bench/)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=OUT_DIR,
        help="logs and results JSON (default bench/out/)",
    )
    parser.add_argument(
        "--peer-venv",
        type=Path,
        default=OUT_DIR / "peer-venv",
        help="the peer's own environment, made on first use (default bench/out/peer-venv/)",
    )
    parser.add_argument("--verbose", action="store_true", help="leave children's stderr on")
    return parser


def main(argv: list[str] | None = None) -> Path:
    args = parser().parse_args(argv)
    plan = PLANS[args.mode]
    args.cache.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    date = datetime.now(UTC)
    log = None if args.verbose else args.cache / "bench-stderr.log"
    with stderr_to(log), tempfile.TemporaryDirectory(prefix="bench-") as work:
        results = anyio.run(measure, plan, args.cache, args.peer_venv, Path(work))
    results |= {
        "mode": plan.mode,
        "command": " ".join(["python -m bench", *(sys.argv[1:] if argv is None else argv)]),
        "date": date.strftime("%Y-%m-%d %H:%M UTC"),
        "duration_seconds": time.perf_counter() - started,
        "machine": machine(),
        "config": asdict(plan),
    }
    stamp = date.strftime("%Y%m%d-%H%M%S")
    (args.cache / f"bench-{stamp}.json").write_text(
        json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n", "utf-8"
    )
    path = report.render(results, args.out)
    print(f"report: {path} ({results['duration_seconds'] / 60:.1f} min)")
    return path


if __name__ == "__main__":
    main()
