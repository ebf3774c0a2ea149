"""Ablation: what each retrieval stage is worth, measured by switching it off.

    python -m bench.retrieval.ablation                    # dev split of both vaults, each stage off
    python -m bench.retrieval.ablation --split heldout    # the held-out thirds, reported apart
    python -m bench.retrieval.ablation --vault ledgerline # one development vault (folder mode only)

For every configuration (all stages on, the server's default, then each stage of
``Stages`` off alone, through ``OBSIDIAN_STAGES_OFF``) the server runs as a stdio
subprocess driven by a real MCP client, in two modes: on the stand-in Local REST API
with ``/search/smart`` ("smart"), and on the vault folder without ``.smart-env``
("folder"). Each question gets ``vault_semantic_query``
with defaults and, on a miss, the read its response suggests (``economy.follow_hint``).
Figures: answer in the first response, within two calls, and the first response's median
tokens, for the whole split and the slices each stage is aimed at. Tune on ``dev`` only.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import anyio

from bench.retrieval.traces import Recorder, Trace, run_traced, semantic_step
from bench.retrieval.vaults import VAULTS, DevVault, figures
from bench.shared.harness import (
    OUT_DIR,
    QUERY_VECTORS,
    Question,
    build_indexes,
    copy_vault,
    load_questions,
    markdown_table,
    server_env,
    stdio_session,
)
from bench.shared.sections import Stamp, write_section
from obsidian_mcp.config import StageName
from tests.standin.process import StandinProcess

STAGES: tuple[StageName, ...] = get_args(StageName)


def configurations(stages: Sequence[StageName]) -> list[tuple[str, frozenset[StageName]]]:
    """(name, stages off): every stage (the server's default), then each of `stages` off
    alone."""
    return [("all stages", frozenset()), *((f"no {s}", frozenset({s})) for s in stages)]


# The slices each stage is aimed at, reported beside the whole split.
SLICES = ("two-file", "paraphrase", "temporal", "trait: alias", "trait: next-sentence")


def in_slice(question: Question, name: str) -> bool:
    if name.startswith("trait: "):
        return name.removeprefix("trait: ") in question.traits
    return question.category == name


def summarise(traces: Sequence[Trace], questions: Sequence[Question]) -> dict[str, Any]:
    by_id = {q.id: q for q in questions}
    return {
        "all": figures(traces),
        **{
            name: figures([t for t in traces if in_slice(by_id[t.question], name)])
            for name in SLICES
        },
    }


async def run_config(
    env: dict[str, str],
    off: frozenset[StageName],
    label: str,
    questions: Sequence[Question],
) -> list[Trace]:
    env = env | {"OBSIDIAN_STAGES_OFF": json.dumps(sorted(off))}
    async with stdio_session(env) as session:
        recorder = Recorder(session.client)
        traces, _ = await run_traced(label, recorder, semantic_step(recorder), questions)
    return traces


async def ablation(
    questions: Sequence[Question],
    work: Path,
    *,
    embeddings: bool = True,
    vault: DevVault = VAULTS[0],
    smart: bool = True,
    stages: Sequence[StageName] = STAGES,
) -> dict[str, Any]:
    """Every configuration in every mode: {mode: {config: summary}}. Each mode's passage
    index is built first, so every configuration meets the same complete index (a build
    still running in the background would favour the configurations measured last).
    `embeddings=False` runs without the local model (the quick run). Only the fixture
    vault has the questions' vectors `/search/smart` needs: other vaults run the folder
    mode alone, as does `smart=False`. `stages`: those switched off in turn."""
    config_dir = work / "config"
    results: dict[str, dict[str, Any]] = {}
    if smart and vault.name == VAULTS[0].name:
        with_env = copy_vault(work / "with-env" / "vault", vectors=True)
        results["smart"] = {}
        async with StandinProcess(
            with_env, plugin_version="5.1.0", smart="upstream", query_vectors=QUERY_VECTORS
        ) as standin:
            env = server_env(standin=standin, config_dir=config_dir, embeddings=embeddings)
            build_indexes([env])
            for name, off in configurations(stages):
                traces = await run_config(env, off, f"smart, {name}", questions)
                results["smart"][name] = summarise(traces, questions)
    without_env = copy_vault(work / "no-env" / "vault", vectors=False, source=vault.vault)
    results["folder"] = {}
    env = server_env(vault=without_env, config_dir=config_dir, embeddings=embeddings)
    build_indexes([env])
    for name, off in configurations(stages):
        traces = await run_config(env, off, f"folder, {name}", questions)
        results["folder"][name] = summarise(traces, questions)
    split = ", ".join(sorted({q.split for q in questions}))
    return {"questions": len(questions), "split": split, "vault": vault.name, "modes": results}


def ablation_table(*founds: dict[str, Any]) -> str:
    """One row per vault, mode and configuration: first response, within two calls, median
    tokens of the first response, then first-response hits on each aimed-at slice."""
    rows: list[list[object]] = []
    for found in founds:
        for mode, configs in found["modes"].items():
            for name, summary in configs.items():
                whole = summary["all"]
                rows.append(
                    [
                        found.get("vault", VAULTS[0].name),
                        mode,
                        name,
                        f"{whole['hit_first']:.0f}%",
                        f"{whole['hit_two']:.0f}%",
                        f"{whole['median_first_tokens']:.0f}",
                        *(
                            f"{summary[s]['hit_first']:.0f}% (n={summary[s]['questions']})"
                            for s in SLICES
                        ),
                    ]
                )
    return markdown_table(
        [
            "vault",
            "mode",
            "configuration",
            "first response",
            "within two",
            "median tokens",
            *SLICES,
        ],
        rows,
    )


def section(found: dict[str, Any]) -> str:
    """The report's section "Ablation": ``ablation_table`` of the ``python -m bench`` run."""
    return "\n".join(
        [
            "## Ablation: each retrieval stage off in turn",
            "",
            f"{found['questions']} questions of the {found['split']} split; the server on the "
            "stand-in with `/search/smart` (smart) and on the folder without `.smart-env` "
            "(folder); `vault_semantic_query` with defaults, then the read its response "
            "suggests. Reproduce with `python -m bench.retrieval.ablation`.",
            "",
            ablation_table(found),
        ]
    )


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for vault in VAULTS:
        if args.vault not in (None, vault.name):
            continue
        questions = [q for q in load_questions(vault.questions) if q.split == args.split]
        print(f"ablation: {len(questions)} {args.split} questions of {vault.name}", flush=True)
        with tempfile.TemporaryDirectory(prefix="ablation-") as tmp:
            found.append(await ablation(questions, Path(tmp), vault=vault))
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.ablation", description=__doc__)
    parser.add_argument("--split", choices=("dev", "heldout"), default="dev")
    parser.add_argument(
        "--vault",
        choices=[v.name for v in VAULTS],
        default=None,
        help="one development vault (default: each, side by side)",
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the JSON goes")
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="write the table as a section of REPORT.md in this folder (e.g. bench)",
    )
    args = parser.parse_args(argv)
    stamp = Stamp.taken("bench.retrieval.ablation", argv)
    started = time.perf_counter()
    found = anyio.run(run, args)
    seconds = time.perf_counter() - started
    table = ablation_table(*found)
    print("\n" + table)
    on = "" if args.vault is None else f", {args.vault}"
    if args.report is not None:
        section = (
            "## Ablation: each stage of vault_semantic_query switched off "
            f"({args.split} split{on})"
            f"\n\nTook {seconds / 60:.0f} min. Each question gets "
            "`vault_semantic_query` with defaults, and on a miss the read its response "
            "suggests; the slices are those a stage aims at. Only fixtures has the query "
            "vectors the stand-in's `/search/smart` needs, so ledgerline runs the folder "
            "mode alone.\n\n" + table
        )
        name = f"ablation-{args.split}" + on.replace(", ", "-")
        print(f"report: {write_section(args.report, name, section, stamp)}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = (
        args.out
        / f"ablation-{args.vault or 'both'}-{args.split}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    path.write_text(json.dumps({"seconds": seconds, "vaults": found}, indent=1) + "\n", "utf-8")
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
