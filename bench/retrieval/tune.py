"""In-process tuning view of retrieval on the dev questions of every development vault.

    python -m bench.retrieval.tune            # dev questions of both vaults, index kept in /tmp
    python -m bench.retrieval.tune --misses   # and each missed question, with where its gold was

Fast enough to run after every change (the server's own `Retriever`, in this process, on
an index built once and kept under ``--work``). For each dev question: the first response
(`Retriever.semantic_query` with the tool's defaults, rendered as the tool renders it),
whether it holds the gold, its tokens; on a miss, the read it suggests (as
``economy.follow_hint`` makes it, here through `reading.read_note_window`) and whether the
two hold the gold; and the candidate ceiling: is the gold within the first 20 passages of
the keyword ranking, the dense ranking, the fused order? Held-out questions are never
looked at here; `python -m bench.retrieval.vaults` reports them.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.retrieval.candidate_recall import candidate_recall, environment
from bench.retrieval.traces import suggested_read
from bench.retrieval.vaults import VAULTS, DevVault
from bench.shared.harness import (
    Question,
    count_tokens,
    is_hit,
    load_questions,
    markdown_table,
    median,
    server_env,
)
from obsidian_mcp.config import Settings
from obsidian_mcp.errors import VaultError
from obsidian_mcp.opening import model_loader, open_retriever, open_vault
from obsidian_mcp.reading import read_note_window
from obsidian_mcp.retrieval.render import format_search
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.server.read_tools import format_window
from obsidian_mcp.sources.rest import build_http_client

# The candidate ceiling's depth (one of candidate_recall.DEPTHS).
CEILING_DEPTH = 20
# What vault_semantic_query is called with (its default).
LIMIT = 5


@dataclass(frozen=True)
class Looked:
    question: Question
    hit: bool
    # The first response or, on a miss, it and the read it suggests hold the gold.
    hit_two: bool
    tokens: int
    keyword: bool
    dense: bool
    fused: bool
    response: str


@asynccontextmanager
async def built_retriever(
    dev_vault: DevVault, work: Path, *, embeddings: bool = True
) -> AsyncIterator[tuple[Retriever, dict[str, str]]]:
    """The server's own retriever over a copy of the vault under `work` (kept between
    runs), its index brought up to date; and the environment its settings came from."""
    where = work / dev_vault.name
    if not (where / "vault").exists():
        shutil.copytree(dev_vault.vault, where / "vault")
    env = server_env(vault=where / "vault", config_dir=where / "config", embeddings=embeddings)
    with environment(env):
        settings = Settings()
    async with build_http_client(settings) as http:
        vault, note = await open_vault(settings, http)
        if vault is None:
            raise RuntimeError(note)
        retriever = open_retriever(vault, settings, model_loader(settings))
        try:
            await retriever.build_index()
            yield retriever, env
        finally:
            retriever.close()


async def suggested_text(retriever: Retriever, response: str) -> str:
    """What the read a response suggests returns, as vault_read_note renders it; empty
    when it suggests none (an error reads as text that holds no gold)."""
    args = suggested_read(response)
    if args is None:
        return ""
    try:
        window = await read_note_window(
            retriever.vault,
            args["path"],
            heading=args.get("heading"),
            offset=0,
            max_chars=retriever.settings.read_max_chars,
        )
    except VaultError as exc:
        return str(exc)
    return format_window(window)


async def look(dev_vault: DevVault, work: Path) -> list[Looked]:
    questions = [q for q in load_questions(dev_vault.questions) if q.split == "dev"]
    responses: list[str] = []
    followed: list[str] = []
    async with built_retriever(dev_vault, work) as (retriever, env):
        for question in questions:
            result = await retriever.semantic_query(
                question.question, limit=LIMIT, folder=question.folder or ""
            )
            response = format_search(result)
            responses.append(response)
            missed = not is_hit(response, question.gold)
            followed.append(await suggested_text(retriever, response) if missed else "")
    ceiling = await candidate_recall(env, questions)
    at = f"@{CEILING_DEPTH}"
    return [
        Looked(
            question,
            is_hit(response, question.gold),
            is_hit(response + "\n" + read, question.gold),
            count_tokens(response),
            ceiling["keyword"][at][number],
            ceiling["dense"][at][number],
            ceiling["fused"][at][number],
            response,
        )
        for number, (question, response, read) in enumerate(
            zip(questions, responses, followed, strict=True)
        )
    ]


def share(flags: Sequence[bool]) -> str:
    """The share and the count: one question moves a vault's share by 1-2 points."""
    return f"{100 * sum(flags) / len(flags):.0f}% ({sum(flags)})" if flags else "-"


def table(results: dict[str, list[Looked]]) -> str:
    rows: list[list[object]] = []
    for name, looked in results.items():
        categories = ["all", *sorted({x.question.category for x in looked})]
        for category in categories:
            chosen = [x for x in looked if category in ("all", x.question.category)]
            rows.append(
                [
                    name,
                    category,
                    len(chosen),
                    share([x.hit for x in chosen]),
                    share([x.hit_two for x in chosen]),
                    f"{median([x.tokens for x in chosen]):.0f}",
                    share([x.keyword for x in chosen]),
                    share([x.dense for x in chosen]),
                    share([x.fused for x in chosen]),
                ]
            )
    both = [x for looked in results.values() for x in looked]
    rows.append(
        [
            "both",
            "all",
            len(both),
            share([x.hit for x in both]),
            share([x.hit_two for x in both]),
            "",
            "",
            "",
            "",
        ]
    )
    return markdown_table(
        [
            "vault",
            "category",
            "questions",
            "first response",
            "within two",
            "median tokens",
            f"keyword top {CEILING_DEPTH}",
            f"dense top {CEILING_DEPTH}",
            f"fused top {CEILING_DEPTH}",
        ],
        rows,
    )


async def run(args: argparse.Namespace) -> dict[str, list[Looked]]:
    return {v.name: await look(v, args.work) for v in VAULTS if args.vault in (None, v.name)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.tune", description=__doc__)
    parser.add_argument("--vault", choices=[v.name for v in VAULTS], default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/obsidian-mcp-tune"))
    parser.add_argument("--misses", action="store_true", help="list each missed question")
    args = parser.parse_args(argv)
    results = anyio.run(run, args)
    if args.misses:
        for name, looked in results.items():
            for x in looked:
                if not x.hit:
                    where = ", ".join(
                        n
                        for n, f in (("kw", x.keyword), ("dense", x.dense), ("fused", x.fused))
                        if f
                    )
                    print(f"{name} {x.question.id} [{x.question.category}] {x.question.question}")
                    print(f"    gold in top {CEILING_DEPTH}: {where or 'none'}")
                    print(f"    the read it suggests: {'answers' if x.hit_two else 'misses'}")
    print(table(results))


if __name__ == "__main__":
    main()
