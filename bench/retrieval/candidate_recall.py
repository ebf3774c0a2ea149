"""Candidate recall: is the answer among each ranking's best passages at all, and how high?

Run by ``python -m bench.retrieval.quality`` for the stand-in with ``/search/smart`` and for
the folder with the local index. In process, on the same index the server uses, each
question's candidates come from ``CandidateSources.gather`` (the pipeline's first stage):
the keyword (BM25) ranking, the dense ranking of the local index, the semantic source's
ranking (Smart Connections blocks mapped to passages), and the fused order. A ranking
"holds" a question at k when every gold phrase is in the text of its first k passages.
This is the ceiling of a ranking: what the later stages can show at best.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from bench.shared.harness import Question, gold_found, markdown_table
from obsidian_mcp.config import Settings
from obsidian_mcp.opening import model_loader, open_retriever, open_vault
from obsidian_mcp.retrieval.fusion import fuse
from obsidian_mcp.retrieval.search import Retriever, folder_prefix
from obsidian_mcp.sources.rest import build_http_client

DEPTHS = (1, 3, 5, 10, 20)
RANKINGS = ("keyword", "dense", "semantic", "fused")


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """This process's OBSIDIAN_* settings replaced by `env` (what a server would get)."""
    saved = {key: value for key, value in os.environ.items() if key.startswith("OBSIDIAN_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(env)
    try:
        yield
    finally:
        for key in env:
            os.environ.pop(key, None)
        os.environ.update(saved)


def passage_text(retriever: Retriever, ids: Sequence[int]) -> str:
    parts: list[str] = []
    for chunk_id in ids:
        chunk = retriever.corpus.chunk(chunk_id)
        record = retriever.corpus.record(chunk.path)
        if record is not None:
            parts.append(record.content[chunk.start : chunk.end])
    return "\n".join(parts)


# Per ranking, per depth ("@k" and "any"), one flag per question.
Recall = dict[str, dict[str, list[bool]]]


async def candidate_recall(env: dict[str, str], questions: Sequence[Question]) -> Recall:
    """Per ranking, per depth ("@k"), whether each question's gold is within the first k;
    "any" says whether the ranking had any passage for the question at all."""
    held: dict[str, dict[str, list[bool]]] = {
        name: {"any": [], **{f"@{k}": [] for k in DEPTHS}} for name in RANKINGS
    }
    with environment(env):
        settings = Settings()
    async with build_http_client(settings) as http:
        vault, note = await open_vault(settings, http)
        if vault is None:
            raise RuntimeError(f"no vault for candidate recall: {note}")
        retriever = open_retriever(vault, settings, model_loader(settings))
        try:
            await retriever.build_index()
            for question in questions:
                _, prefix = folder_prefix(question.folder or "")
                await retriever.corpus.sync(read_all=True)
                candidates = await retriever.candidates.gather(
                    question.question, prefix, retriever.stages
                )
                rankings = {
                    "keyword": candidates.keyword,
                    "dense": candidates.dense_ranking,
                    "semantic": candidates.semantic,
                    "fused": [c for c, _ in fuse(candidates, seats=True).ranked],
                }
                for name, ranking in rankings.items():
                    held[name]["any"].append(bool(ranking))
                    for k in DEPTHS:
                        text = passage_text(retriever, ranking[:k])
                        held[name][f"@{k}"].append(
                            all(gold_found(text, gold) for gold in question.gold)
                        )
        finally:
            retriever.close()
    return held


def recall_table(by_mode: dict[str, dict[str, dict[str, list[bool]]]]) -> str:
    """Per mode and ranking (one the mode has), the share of questions held at each depth."""
    rows: list[list[object]] = []
    for mode, held in by_mode.items():
        for name in RANKINGS:
            if any(held[name]["any"]):
                count = len(held[name]["any"])
                shares = (100 * sum(held[name][f"@{k}"]) / count for k in DEPTHS)
                rows.append([mode, name, *(f"{share:.0f}%" for share in shares)])
    return markdown_table(["mode", "ranking", *(f"top {k}" for k in DEPTHS)], rows)


def category_table(
    by_mode: dict[str, dict[str, dict[str, list[bool]]]], questions: Sequence[Question]
) -> str:
    """Top-20 recall per category, per mode and ranking."""
    categories = sorted({q.category for q in questions})
    rows: list[list[object]] = []
    for mode, held in by_mode.items():
        for name in RANKINGS:
            if not any(held[name]["any"]):
                continue
            cells: list[object] = []
            for category in categories:
                flags = [
                    flag
                    for flag, q in zip(held[name]["@20"], questions, strict=True)
                    if q.category == category
                ]
                cells.append(f"{100 * sum(flags) / len(flags):.0f}%")
            rows.append([mode, name, *cells])
    return markdown_table(["mode", "ranking (top 20)", *categories], rows)
