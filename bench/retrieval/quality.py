"""Retrieval benchmark: answer quality and context cost per strategy.

    python -m bench.retrieval.quality                 # all questions, five strategies
    python -m bench.retrieval.quality --quick         # five questions, no per-vault run

Run from the repo root with the project venv. Everything goes through the real server, a
stdio subprocess driven by the SDK's ``Client``, except strategy 5, which is the raw REST
output an agent would get without this server. Every strategy sees the same questions and
the same vault (a temporary copy of ``fixtures/vault``):

1. ``semantic``: ``vault_semantic_query`` with defaults (plus the question's ``folder``),
   the server on the stand-in Local REST API 5.x whose ``/search/smart`` (upstream
   mcp-tools) ranks with ``fixtures/query_vectors.jsonl`` and the vault's ``.smart-env``.
2. ``keyword``: the same call on the folder source of a copy without ``.smart-env``; the
   response should say ``lexical-fallback``.
3. ``folder+vectors``: the same call on the folder source with ``.smart-env`` (stored
   vectors, query expanded through the best keyword hits' vectors).
4. ``drill-down``: ``vault_search_map(keywords)`` (in the question's folder, if any),
   again in its top row while that is a folder (at most four map calls), then
   ``vault_peek_file`` and ``vault_read_note`` of the whole top file (following its
   continuation hints); tokens of all responses, hit when the gold is in any of them.
5. ``simple+note``: raw ``POST /search/simple/?query=<keywords>&contextLength=100`` plus a
   raw ``GET`` of the best-scored note; tokens of both; hit checked on the JSON text and
   on its decoded strings (an agent reads ``\\u00e9`` as ``é``).

Then, per development vault (fixtures and ledgerline, each with its held-out third), what
``python -m bench.retrieval.vaults`` measures: the default install's first response, within two
calls and median tokens per split and category, each ranking's candidate ceiling, and
ledgerline's first session on a cold copy (``--no-vaults`` leaves this out).

Hit, tokens and keywords are defined in ``bench/shared/harness.py``; the question set, its
slices and its held-out split in ``bench/retrieval/questions.py``. Every figure is given for the
whole set and for each slice (dev, held-out, original 58, new, each category, each trait).
Results (with every response, for inspection) go to ``bench/out/retrieval-<time>.json``
and a markdown report is printed.

Speed at scale (generated vaults of 1,000 to 10,000 notes) is measured by
``python -m bench`` (``bench/speed/scale.py``), which runs this module's strategies too.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio

from bench.retrieval import vaults
from bench.retrieval.candidate_recall import candidate_recall, category_table, recall_table
from bench.retrieval.questions import question_groups
from bench.retrieval.strategies import (
    Outcome,
    drill_down_runner,
    run_strategy,
    semantic_runner,
    simple_search_runner,
)
from bench.shared.harness import (
    OUT_DIR,
    QUERY_VECTORS,
    QUESTIONS,
    KeywordPicker,
    Question,
    build_indexes,
    copy_vault,
    load_questions,
    markdown_table,
    median,
    percentile,
    server_env,
    stdio_session,
)
from bench.shared.sections import Stamp, write_section
from tests.standin.process import StandinProcess

STRATEGIES = (
    "semantic",
    "keyword",
    "folder+meaning",
    "folder+vectors",
    "drill-down",
    "simple+note",
)
BASELINES = ("drill-down", "simple+note")


# --- the quality run ---------------------------------------------------------------------


async def quality(
    questions: Sequence[Question],
    work: Path,
    *,
    embeddings: bool = True,
    recall: dict[str, dict[str, dict[str, list[bool]]]] | None = None,
) -> dict[str, list[Outcome]]:
    """Every strategy on the questions; `embeddings=False` runs them without the local
    model (no index to build: the harness's own tests). With `recall`, each ranking's
    candidate recall is measured too, on the stand-in ("smart") and the folder."""
    with_env = copy_vault(work / "with-env" / "vault", vectors=True)
    without_env = copy_vault(work / "no-env" / "vault", vectors=False)
    picker = KeywordPicker(with_env)
    config_dir = work / "config"
    results: dict[str, list[Outcome]] = {}
    async with StandinProcess(
        with_env, plugin_version="5.1.0", smart="upstream", query_vectors=QUERY_VECTORS
    ) as standin:
        rest_env = server_env(standin=standin, config_dir=config_dir, embeddings=embeddings)
        build_indexes([rest_env])
        if recall is not None:
            recall["smart"] = await candidate_recall(rest_env, questions)
        async with stdio_session(rest_env) as rest:
            results["semantic"] = await run_strategy("semantic", semantic_runner(rest), questions)
            results["drill-down"] = await run_strategy(
                "drill-down", drill_down_runner(rest, picker), questions
            )
        async with standin.async_client(timeout=30) as http:
            results["simple+note"] = await run_strategy(
                "simple+note", simple_search_runner(http, picker), questions
            )
    folder_envs = folder_strategies(with_env, without_env, config_dir, embeddings)
    if recall is not None:
        recall["folder"] = await candidate_recall(folder_envs["folder+meaning"], questions)
    for name, env in folder_envs.items():
        async with stdio_session(env) as folder:
            results[name] = await run_strategy(name, semantic_runner(folder), questions)
    return results


def folder_strategies(
    with_env: Path, without_env: Path, config_dir: Path, embeddings: bool = True
) -> dict[str, dict[str, str]]:
    """The folder-only strategies' server environments, their passage indexes built:
    keywords alone; the local index; the local index beside Smart Connections' vectors."""
    envs = {
        "keyword": server_env(vault=without_env, config_dir=config_dir, embeddings=False),
        "folder+meaning": server_env(
            vault=without_env, config_dir=config_dir, embeddings=embeddings
        ),
        "folder+vectors": server_env(vault=with_env, config_dir=config_dir, embeddings=embeddings),
    }
    build_indexes(list(envs.values()))
    return envs


def summarise(outcomes: Sequence[Outcome]) -> dict[str, float]:
    tokens = [o.tokens for o in outcomes]
    return {
        "questions": len(outcomes),
        "hit_rate": 100 * sum(o.hit for o in outcomes) / len(outcomes) if outcomes else 0.0,
        "median_tokens": median(tokens),
        "p90_tokens": percentile(tokens, 90),
        "mean_calls": sum(o.calls for o in outcomes) / len(outcomes) if outcomes else 0.0,
        "median_seconds": median([o.seconds for o in outcomes]),
        "labelled_fallback": 100 * sum(o.labelled_fallback for o in outcomes) / len(outcomes)
        if outcomes
        else 0.0,
        "errors": sum(1 for o in outcomes if o.error),
    }


def quality_report(
    results: dict[str, list[Outcome]], questions: Sequence[Question]
) -> tuple[str, dict[str, Any]]:
    summary = {name: summarise(results[name]) for name in STRATEGIES if name in results}
    rows = [
        [
            name,
            f"{s['hit_rate']:.1f}%",
            s["median_tokens"],
            s["p90_tokens"],
            f"{s['mean_calls']:.1f}",
            f"{1000 * s['median_seconds']:.0f}",
        ]
        for name, s in summary.items()
    ]
    parts = [
        "## Retrieval quality and context cost",
        "",
        markdown_table(
            ["strategy", "hit rate", "median tokens", "p90 tokens", "calls", "median ms"], rows
        ),
    ]
    by_group: dict[str, dict[str, dict[str, float]]] = {}
    group_rows: list[list[object]] = []
    for group, ids in question_groups(questions).items():
        row: list[object] = [group, len(ids)]
        for name in summary:
            stats = summarise([o for o in results[name] if o.question in ids])
            by_group.setdefault(group, {})[name] = stats
            row.append(f"{stats['hit_rate']:.0f}% / {stats['median_tokens']:.0f}")
        group_rows.append(row)
    categories = {q.category for q in questions}
    by_category = {group: stats for group, stats in by_group.items() if group in categories}
    parts += [
        "",
        "Per slice of the question set (hit rate / median tokens); held-out questions are "
        "never tuned on (`bench/retrieval/questions.py`):",
        "",
        markdown_table(["questions", "n", *summary], group_rows),
    ]
    ratios: dict[str, dict[str, float | bool]] = {}
    if "semantic" in summary:
        base = summary["semantic"]
        for name in BASELINES:
            other = summary[name]
            ratios[name] = {
                "token_ratio": other["median_tokens"] / base["median_tokens"],
                "p90_token_ratio": other["p90_tokens"] / base["p90_tokens"],
                "hit_rate_not_worse": base["hit_rate"] >= other["hit_rate"],
            }
        parts += [
            "",
            markdown_table(
                [
                    "baseline",
                    "median tokens / semantic",
                    "p90 tokens / semantic",
                    "semantic hit rate >= baseline",
                ],
                [
                    [
                        n,
                        f"{r['token_ratio']:.1f}x",
                        f"{r['p90_token_ratio']:.1f}x",
                        r["hit_rate_not_worse"],
                    ]
                    for n, r in ratios.items()
                ],
            ),
        ]
        keyword = [o for o in results["keyword"] if o.category == "exact-keyword"]
        parts += [
            "",
            f"Targets: semantic >= 90% hit and median <= 800 tokens "
            f"({base['hit_rate']:.1f}%, {base['median_tokens']:.0f}); keyword-only >= 90% "
            f"on exact-keyword ({summarise(keyword)['hit_rate']:.1f}%) and >= 70% overall "
            f"({summary['keyword']['hit_rate']:.1f}%), labelled lexical-fallback in "
            f"{summary['keyword']['labelled_fallback']:.0f}% of responses; "
            "each baseline >= 5x the tokens at an equal or worse hit rate.",
        ]
        parts += [
            "",
            f"Pseudo-relevance feedback (folder+vectors vs keyword): hit rate "
            f"{summary['folder+vectors']['hit_rate']:.1f}% vs "
            f"{summary['keyword']['hit_rate']:.1f}%, median tokens "
            f"{summary['folder+vectors']['median_tokens']:.0f} vs "
            f"{summary['keyword']['median_tokens']:.0f}.",
        ]
    data = {
        "summary": summary,
        "by_category": by_category,
        "by_group": by_group,
        "ratios": ratios,
        "outcomes": {name: [asdict(o) for o in outs] for name, outs in results.items()},
    }
    return "\n".join(parts), data


# --- command line ----------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    with tempfile.TemporaryDirectory(prefix="retrieval-bench-") as tmp:
        questions = load_questions(args.questions, 5 if args.quick else None)
        print(f"quality: {len(questions)} questions", flush=True)
        recall: dict[str, dict[str, dict[str, list[bool]]]] = {}
        results = await quality(questions, Path(tmp), recall=recall)
        data["report"], data["quality"] = quality_report(results, questions)
        data["candidate_recall"] = recall
        data["report"] += (
            "\n\nCandidate recall: share of questions whose gold is in a ranking's first k "
            "passages (`bench/retrieval/candidate_recall.py`; the ceiling of what the later stages "
            "can show):\n\n" + recall_table(recall) + "\n\nTop-20 recall per category:\n\n"
            + category_table(recall, questions)
        )
    if args.vaults and not args.quick:
        data["vaults"] = await vaults.run()
        data["report"] += "\n\n## Retrieval per development vault\n\n" + vaults.report(
            data["vaults"]
        )
    print("\n" + data["report"])
    return data


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.retrieval.quality",
        description="Retrieval benchmark: answer quality and context cost per strategy.",
    )
    parser.add_argument("--quick", action="store_true", help="five questions only")
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument(
        "--no-vaults",
        dest="vaults",
        action="store_false",
        help="leave out the per-vault figures (fixtures and ledgerline, "
        "python -m bench.retrieval.vaults)",
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the JSON goes")
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="write the report as a section of REPORT.md in this folder (e.g. bench)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    stamp = Stamp.taken("bench.retrieval.quality", argv)
    data = anyio.run(run, args)
    if args.report is not None:
        section = (
            "## Retrieval quality per strategy, slice and ranking\n\n" + data["report"]
        )
        print(f"report: {write_section(args.report, 'retrieval', section, stamp)}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"retrieval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
