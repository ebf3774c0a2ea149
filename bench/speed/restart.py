"""A new server on a built index, checkouts side by side: restart and memory, alternating.

    python -m bench.speed.restart VAULT_PARENT CACHE_DIR --code DIR [DIR ...] [--rounds 5]
        [--source standin]

VAULT_PARENT and CACHE_DIR are a prebuilt index, as for ``python -m bench.speed.index
--prebuilt`` (``vault/``, ``planted.jsonl``, and the cache folder an ``obsidian-mcp index``
filled). Each checkout (``git worktree add DIR <commit>``; ``.`` is this one) serves its
own copy of it, upgraded once by that checkout. Then, round after round, each checkout in
turn starts a new server (stdio subprocess) and is timed from the start to its first
answer, a planted question (``vault_semantic_query``); five more questions follow, and
the server's resident memory (VmRSS) is read before it stops. The order alternates so
that a shared, noisy machine weighs on every checkout alike: a single run's restart
varies by a second here, which one server per checkout cannot tell from a change.

Against issue 38 at 10,000 notes: a new process's first answer <= 1.5 s, the server's
RSS <= 380 MB. A round of 10,000 notes takes about 10 s a checkout. Results go to
``bench/out/restart-<time>.json`` and a table is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from bench.shared.harness import (
    OUT_DIR,
    copy_prebuilt,
    gold_found,
    markdown_table,
    prime_standin,
    save_results,
    server_env,
    stdio_session,
)
from bench.speed.index import SEMANTIC, server_rss_mb
from tests.standin.process import StandinProcess

# Questions after the first answer, before the memory is read: what a session's start
# brings in (parses, the query cache) beside the loaded index.
MORE_QUESTIONS = 5


async def one_restart(
    env: dict[str, str], code: Path, planted: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """A new server of `code`: seconds to its first answer, whether that answer holds the
    planted passage, and its RSS after `MORE_QUESTIONS` more questions."""
    started = time.perf_counter()
    async with stdio_session(env, repo=code) as session:
        first = await session.call(SEMANTIC, {"query": planted[0]["question"]})
        seconds = time.perf_counter() - started
        for entry in planted[1 : 1 + MORE_QUESTIONS]:
            await session.call(SEMANTIC, {"query": entry["question"]})
        rss = server_rss_mb(env["OBSIDIAN_CONFIG_DIR"])
    hit = not first.is_error and gold_found(first.text, planted[0]["gold"])
    return {"seconds": seconds, "hit": hit, "rss_mb": rss}


async def served_copy(
    stack: contextlib.AsyncExitStack, work: Path, code: Path, parent: Path, cache: Path, source: str
) -> dict[str, str]:
    """A copy of the prebuilt index in `work`, upgraded by `code`, and the environment of a
    server on it: through the folder, or through a stand-in Local REST API 5.x of its own
    (the folder configured too, as `bench.speed.index` does, so the server finds the
    folder-keyed index) that `stack` keeps running, primed as a running Obsidian is."""
    env = server_env(vault=work / "vault", config_dir=work / "config")
    upgrade = copy_prebuilt(parent, cache, work / "vault", env, code)
    print(f"  {code}: its copy upgraded in {upgrade:.2f} s", flush=True)
    if source != "standin":
        return env
    standin = await stack.enter_async_context(
        StandinProcess(work / "vault", plugin_version="5.1.0", startup_timeout=300)
    )
    primed = await prime_standin(standin)
    print(f"  {code}: the stand-in's own first listing {primed:.2f} s", flush=True)
    return server_env(standin=standin, vault=work / "vault", config_dir=work / "config")


async def run(
    parent: Path, cache: Path, codes: Sequence[Path], rounds: int, source: str = "folder"
) -> dict[str, Any]:
    """`source`: "folder" or "standin" (`served_copy`)."""
    planted = [
        json.loads(line)
        for line in (parent / "planted.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    runs: dict[str, list[dict[str, Any]]] = {str(code): [] for code in codes}
    async with contextlib.AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="restart-bench-")))
        envs = [
            await served_copy(stack, tmp / f"checkout-{n}", code, parent, cache, source)
            for n, code in enumerate(codes)
        ]
        for round_number in range(rounds):
            # Who goes first alternates, so that no checkout always follows another's exit.
            order = list(zip(codes, envs, strict=True))
            if round_number % 2:
                order.reverse()
            for code, env in order:
                result = await one_restart(env, code, planted)
                runs[str(code)].append(result)
                print(
                    f"  round {round_number + 1} {code}: {result['seconds']:.2f} s, "
                    f"{result['rss_mb']:.0f} MB",
                    flush=True,
                )
    return {"parent": str(parent), "rounds": rounds, "source": source, "runs": runs}


def table(found: dict[str, Any]) -> str:
    rows: list[list[object]] = []
    for code, results in found["runs"].items():
        seconds = [r["seconds"] for r in results]
        rss = [r["rss_mb"] for r in results]
        rows.append(
            [
                code,
                len(results),
                f"{statistics.median(seconds):.2f}",
                f"{min(seconds):.2f} / {max(seconds):.2f}",
                f"{statistics.median(rss):.0f}",
                f"{min(rss):.0f} / {max(rss):.0f}",
                sum(1 for r in results if r["hit"]),
            ]
        )
    headers = [
        "checkout",
        "rounds",
        "start to first answer s (median)",
        "min / max",
        "RSS MB (median)",
        "min / max",
        "planted hit",
    ]
    return markdown_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("parent", type=Path, help="holds vault/ and planted.jsonl")
    parser.add_argument("cache", type=Path, help="the cache folder the index was built in")
    parser.add_argument(
        "--code",
        type=Path,
        nargs="+",
        default=[Path(".")],
        help="the checkouts to compare (git worktree add DIR <commit>); '.' is this one",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--source",
        choices=("folder", "standin"),
        default="folder",
        help="serve through the vault folder, or through the stand-in Local REST API 5.x",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    codes = [code.resolve() for code in args.code]
    found = anyio.run(run, args.parent, args.cache, codes, args.rounds, args.source)
    print(table(found))
    print(f"results: {save_results(OUT_DIR, 'restart', found)}")


if __name__ == "__main__":
    main()
