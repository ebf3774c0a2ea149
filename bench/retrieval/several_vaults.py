"""Several vaults in one server (issue 28): what a search over every vault costs in time
and in answers, set against each vault searched alone, and reads through a connection that
drops.

    python -m bench.retrieval.several_vaults                 # both parts
    python -m bench.retrieval.several_vaults --part search   # or --part drops

**Search.** Both development vaults (``fixtures/vault`` without its Smart Connections
folder, and ``fixtures/ledgerline``), their passage indexes built, served by one stdio
server from a vaults file. Every question of both sets is asked of it three ways:
``vault_semantic_query`` naming none (every vault) first, then naming its own vault and
naming the other. No question's folder is passed (it would name a folder of one vault
only). Each question is also asked of two one-vault servers, one a vault. Per question,
the time over every vault is set against the slower of the two one-vault servers (issue
28: within twice the time of the slowest vault alone): each of the three calls timed is
the first time its server meets the question, so none finds what an earlier call of the
same question left in a cache (the query's vector, the index pages of its words). The
first response's hit (``harness.is_hit``) over every vault is set against the hit with its
own vault named, and against the hit of the one-vault server of its own vault, in the same
run (what a user with one vault gets: issue 28 wants it unchanged).

**Dropped connections.** The stand-in over a copy of the fixture vault drops every third
request from its start; a REST-only server answers 30 ``vault_read_note`` calls while it
reads the vault in the background. Failures and seconds.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench.retrieval.vaults import VAULTS
from bench.shared.harness import (
    OUT_DIR,
    Question,
    build_indexes,
    copy_vault,
    is_hit,
    load_questions,
    markdown_table,
    median,
    percentile,
    save_results,
    server_env,
    stdio_session,
)
from tests.standin.process import StandinProcess

READS = 30
DROP_EVERY = 3
_NOTE = "Characters/Companion/Mira Vessant.md"


def _vaults_file(folders: dict[str, Path], target: Path) -> Path:
    lines: list[str] = []
    for name, folder in folders.items():
        lines += [f"[vaults.{name}]", f"path = {json.dumps(str(folder))}", ""]
    target.write_text("\n".join(lines), "utf-8")
    return target


async def search_run(work: Path) -> dict[str, Any]:
    """Each question over every vault and over each vault alone, in one server."""
    index_dir = work / "index"
    folders: dict[str, Path] = {}
    envs: list[dict[str, str]] = []
    for dev in VAULTS:
        folders[dev.name] = copy_vault(work / dev.name, vectors=False, source=dev.vault)
        env = server_env(vault=folders[dev.name], config_dir=work / f"config-{dev.name}")
        envs.append(env | {"OBSIDIAN_INDEX_DIR": str(index_dir)})
    for env in envs:
        build_indexes([env])
    env = server_env(config_dir=work / "config") | {
        "OBSIDIAN_INDEX_DIR": str(index_dir),
        "OBSIDIAN_CONFIG": str(_vaults_file(folders, work / "vaults.toml")),
    }
    asked: list[tuple[str, Question]] = [
        (dev.name, question) for dev in VAULTS for question in load_questions(dev.questions)
    ]
    rows: list[dict[str, Any]] = []
    async with stdio_session(env) as session:
        await session.call("vault_semantic_query", {"query": "warm up"})
        for own, question in asked:
            other = next(name for name in folders if name != own)
            found: dict[str, Any] = {}
            # Every vault first: the time compared is a first meeting with the question.
            for way, vault in (("every", None), ("own", own), ("other", other)):
                arguments: dict[str, Any] = {"query": question.question}
                if vault is not None:
                    arguments["vault"] = vault
                found[way] = await session.call("vault_semantic_query", arguments)
            rows.append(
                {
                    "vault": own,
                    "question": question.id,
                    "seconds": {way: found[way].seconds for way in found},
                    "tokens": {way: found[way].tokens for way in found},
                    "hit": {way: is_hit(found[way].text, question.gold) for way in found},
                    "errors": [way for way in found if found[way].is_error],
                }
            )
    for dev, alone_env in zip(VAULTS, envs, strict=True):
        async with stdio_session(alone_env) as session:
            await session.call("vault_semantic_query", {"query": "warm up"})
            for row, (own, question) in zip(rows, asked, strict=True):
                result = await session.call("vault_semantic_query", {"query": question.question})
                row["seconds"][f"alone {dev.name}"] = result.seconds
                row["errors"] += [f"alone {dev.name}"] if result.is_error else []
                if own == dev.name:
                    row["tokens"]["alone"] = result.tokens
                    row["hit"]["alone"] = is_hit(result.text, question.gold)
    return {"rows": rows}


def _slowest_alone(row: dict[str, Any]) -> float:
    """The slower of the one-vault servers' times for the row's question."""
    return max(seconds for way, seconds in row["seconds"].items() if way.startswith("alone "))


def search_table(found: dict[str, Any]) -> str:
    rows = found["rows"]
    out: list[list[object]] = []
    for name in [*sorted({row["vault"] for row in rows}), "both"]:
        chosen = [row for row in rows if name in ("both", row["vault"])]
        ratios = [row["seconds"]["every"] / _slowest_alone(row) for row in chosen]
        total_every = sum(row["seconds"]["every"] for row in chosen)
        total_slowest = sum(_slowest_alone(row) for row in chosen)
        count = len(chosen)
        out.append(
            [
                name,
                count,
                f"{median([_slowest_alone(r) for r in chosen]) * 1000:.0f}",
                f"{median([r['seconds']['every'] for r in chosen]) * 1000:.0f}",
                f"{median(ratios):.2f}",
                f"{percentile(ratios, 90):.2f}",
                f"{total_every / total_slowest:.2f}",
                f"{100 * sum(r['hit']['alone'] for r in chosen) / count:.0f}%",
                f"{100 * sum(r['hit']['own'] for r in chosen) / count:.0f}%",
                f"{100 * sum(r['hit']['every'] for r in chosen) / count:.0f}%",
                f"{median([r['tokens']['own'] for r in chosen]):.0f} / "
                f"{median([r['tokens']['every'] for r in chosen]):.0f}",
                sum(len(r["errors"]) for r in chosen),
            ]
        )
    return markdown_table(
        [
            "questions of",
            "questions",
            "slower vault alone, median ms",
            "every vault, median ms",
            "every / slower alone, median",
            "p90",
            "sum every / sum slower",
            "first response, one-vault server",
            "first response, own vault named",
            "first response, no vault named",
            "median tokens own / every",
            "errors",
        ],
        out,
    )


async def drops_run(work: Path) -> dict[str, Any]:
    """30 reads through a REST-only server while the stand-in drops every third request."""
    vault = copy_vault(work / "vault", vectors=False)
    with StandinProcess(vault, drop_every=DROP_EVERY) as standin:
        env = server_env(standin=standin, config_dir=work / "config", embeddings=False)
        async with stdio_session(env) as session:
            started = time.perf_counter()
            results = [await session.call("vault_read_note", {"path": _NOTE}) for _ in range(READS)]
            seconds = time.perf_counter() - started
        injected = standin.stats()["injected"]["drop"]
    failures = [result.text[:200] for result in results if result.is_error]
    return {"reads": READS, "failures": failures, "seconds": seconds, "dropped": injected}


def drops_table(found: dict[str, Any]) -> str:
    return markdown_table(
        ["reads", "failed", "requests dropped (server's background read too)", "seconds"],
        [[found["reads"], len(found["failures"]), found["dropped"], f"{found['seconds']:.1f}"]],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.retrieval.several_vaults", description=__doc__
    )
    parser.add_argument("--part", choices=["search", "drops"], default=None)
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the JSON goes")
    args = parser.parse_args(argv)
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="several-vaults-") as tmp:
        if args.part in (None, "drops"):
            found["drops"] = anyio.run(drops_run, Path(tmp) / "drops")
            print(drops_table(found["drops"]), flush=True)
        if args.part in (None, "search"):
            found["search"] = anyio.run(search_run, Path(tmp) / "search")
            print(search_table(found["search"]), flush=True)
    print(f"results: {save_results(args.out, 'several-vaults', found)}")


if __name__ == "__main__":
    main()
