"""Retrieval per development vault: the figures issue 20 asks for, on each vault apart.

    python -m bench.retrieval.vaults   # both vaults, index built; ledgerline's first session too
    python -m bench.retrieval.vaults --vault ledgerline --no-first-session
    python -m bench.retrieval.vaults --no-first-session --model-path DIR   # another model

What a user gets with the default install: the server on the vault folder, no Smart
Connections, the local passage index built (``obsidian-mcp index``). Each question gets
``vault_semantic_query`` with defaults and, on a miss, the read its response suggests
(``economy.follow_hint``). Figures per vault, split and category: answer in the first
response, within two calls, and the first response's median tokens; and each ranking's
candidate ceiling on the same index (``candidate_recall``: is the gold in its top 20?).

**First session**: a fresh copy of the vault, no index; the server starts and questions
are asked one after another (in a seeded random order) until ``FIRST_SESSION_SECONDS``
have passed, as a user's first minute would, once per ``FIRST_SESSION_MODES`` (the
default, and the first-day levers switched off or changed one at a time). Their hit rate
is set against the same questions on the built index, all from this one run.

Held-out questions (a seeded third per category of each vault, drawn before any result
was seen: ``bench/retrieval/questions.py`` for fixtures, ``fixtures/ledgerline/README.md``) are
reported apart and never tuned on.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench.retrieval.candidate_recall import Recall, candidate_recall
from bench.retrieval.traces import Recorder, Trace, run_traced, semantic_step
from bench.shared.harness import (
    FIXTURE_VAULT,
    OUT_DIR,
    QUESTIONS,
    REPO_ROOT,
    Question,
    build_indexes,
    copy_prebuilt,
    copy_vault,
    load_questions,
    markdown_table,
    median,
    save_results,
    server_env,
    stdio_session,
)

# A user's first minute with a new install: what issue 20 measures the first day by.
FIRST_SESSION_SECONDS = 60.0
_ORDER_SEED = "obsidian-mcp first session, issue 20"


@dataclass(frozen=True)
class DevVault:
    name: str
    vault: Path
    questions: Path


VAULTS = (
    DevVault("fixtures", FIXTURE_VAULT, QUESTIONS),
    DevVault(
        "ledgerline",
        REPO_ROOT / "fixtures" / "ledgerline" / "vault",
        REPO_ROOT / "fixtures" / "ledgerline" / "questions.jsonl",
    ),
)


def figures(traces: Sequence[Trace]) -> dict[str, float]:
    count = len(traces) or 1
    return {
        "questions": len(traces),
        "hit_first": 100 * sum(t.hit_first for t in traces) / count,
        "hit_two": 100 * sum(t.hit_two for t in traces) / count,
        "median_first_tokens": median([t.first_tokens for t in traces]) if traces else 0,
        "errors": sum(1 for t in traces if t.error),
    }


def by_slice(traces: Sequence[Trace], questions: Sequence[Question]) -> dict[str, Any]:
    """{split: {"all" | category: figures}}, plus "all" over both splits."""
    split_of = {q.id: q.split for q in questions}
    out: dict[str, Any] = {}
    for split in ("all", "dev", "heldout"):
        chosen = [t for t in traces if split == "all" or split_of[t.question] == split]
        categories = sorted({t.category for t in chosen})
        out[split] = {
            "all": figures(chosen),
            **{c: figures([t for t in chosen if t.category == c]) for c in categories},
        }
    return out


# What the servers are given to run another model than the bundled one (`--model-path`).
ModelEnv = dict[str, str]


async def built_index_run(
    dev_vault: DevVault, questions: Sequence[Question], work: Path, model: ModelEnv
) -> tuple[list[Trace], Recall]:
    """Each question's first response and follow-up on a built index, and the candidate
    ceiling of each ranking on the same index (`candidate_recall`)."""
    copy = copy_vault(
        work / dev_vault.name / "built" / "vault", vectors=False, source=dev_vault.vault
    )
    env = server_env(vault=copy, config_dir=work / dev_vault.name / "built" / "config") | model
    return await _questions_on_built_index(env, questions, f"{dev_vault.name}, index built")


async def inside_run(
    dev_vault: DevVault,
    questions: Sequence[Question],
    work: Path,
    inside: tuple[Path, Path],
    model: ModelEnv,
) -> tuple[list[Trace], Recall, str]:
    """`built_index_run` with the vault's notes placed among a generated vault's (issue
    38: each development vault inside 10,000 generated notes), in the same folders where
    names meet (both have Characters/, Lore/, ...), and the run's name (with how many
    notes the generated vault has). Its index was built elsewhere (`inside`: its parent
    folder and cache, as ``bench.speed.index --prebuilt`` takes them), so only the
    vault's own notes are embedded here."""
    where = work / dev_vault.name / "inside"
    vault = where / "vault"
    env = server_env(vault=vault, config_dir=where / "config") | model
    copy_prebuilt(*inside, vault, env)
    around = sum(1 for _ in vault.rglob("*.md"))
    for note in sorted(dev_vault.vault.rglob("*")):
        relative = note.relative_to(dev_vault.vault)
        if not note.is_file() or ".smart-env" in relative.parts:
            continue  # as copy_vault(vectors=False) leaves it out
        target = vault / relative
        if target.exists():
            raise SystemExit(f"{target} is in both vaults: pick another generated vault")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(note, target)
    label = f"{dev_vault.name}, inside {around:,} notes"
    traces, recall = await _questions_on_built_index(env, questions, label)
    return traces, recall, label


async def _questions_on_built_index(
    env: dict[str, str], questions: Sequence[Question], label: str
) -> tuple[list[Trace], Recall]:
    """Build the index of the server of `env`, then each question's traces and the
    candidate ceiling of each ranking on it."""
    build_indexes([env])
    recall = await candidate_recall(env, questions)
    async with stdio_session(env) as session:
        recorder = Recorder(session.client)
        traces, _ = await run_traced(label, recorder, semantic_step(recorder), questions)
    return traces, recall


# The first session: with the server's default; without the first-question wait, as a
# vault too big to wait for gets it (its questions embed their keyword candidates on
# demand); without either, as before issue 20; and with the model on both cores while the
# user waits. All measured in the same run.
FIRST_SESSION_MODES: dict[str, dict[str, str]] = {
    "meaning wait (default)": {},
    "no wait, keyword candidates embedded on demand": {"OBSIDIAN_INDEX_MEANING_WAIT_SECONDS": "0"},
    "no wait, nothing on demand (before issue 20)": {
        "OBSIDIAN_INDEX_MEANING_WAIT_SECONDS": "0",
        "OBSIDIAN_INDEX_ON_DEMAND_PASSAGES": "0",
    },
    "meaning wait, model on 2 threads": {"OBSIDIAN_MODEL_THREADS": "2"},
}


async def first_session_run(
    dev_vault: DevVault,
    questions: Sequence[Question],
    work: Path,
    mode: str,
    model: ModelEnv,
) -> list[Trace]:
    """Questions asked from the server's start on a copy never indexed, until the first
    minute is over; the traces of those asked within it."""
    where = work / dev_vault.name / f"cold-{list(FIRST_SESSION_MODES).index(mode)}"
    copy = copy_vault(where / "vault", vectors=False, source=dev_vault.vault)
    env = server_env(vault=copy, config_dir=where / "config") | FIRST_SESSION_MODES[mode] | model
    order = list(questions)
    random.Random(_ORDER_SEED).shuffle(order)
    asked: list[Trace] = []
    started = time.perf_counter()
    async with stdio_session(env) as session:
        recorder = Recorder(session.client)
        step = semantic_step(recorder)
        for question in order:
            if time.perf_counter() - started >= FIRST_SESSION_SECONDS:
                break
            with contextlib.redirect_stdout(io.StringIO()):  # one line per question otherwise
                traces, _ = await run_traced("first session", recorder, step, [question])
            asked += traces
        print(f"  first session: {sum(t.hit_first for t in asked)}/{len(asked)} answered")
    return asked


def slice_table(name: str, found: dict[str, Any]) -> str:
    rows: list[list[object]] = []
    for split, slices in found.items():
        for category, f in slices.items():
            rows.append(
                [
                    name,
                    split,
                    category,
                    int(f["questions"]),
                    f"{f['hit_first']:.0f}%",
                    f"{f['hit_two']:.0f}%",
                    f"{f['median_first_tokens']:.0f}",
                ]
            )
    return markdown_table(
        [
            "vault",
            "split",
            "category",
            "questions",
            "first response",
            "within two",
            "median tokens",
        ],
        rows,
    )


def first_session_table(result: dict[str, Any]) -> str:
    rows = [
        [
            vault,
            int(r["asked"]),
            f"{r.get('first_wait_seconds', 0)} s",
            f"{r['cold_first']:.0f}%",
            f"{r['built_first']:.0f}%",
            f"{r['cold_first'] - r['built_first']:+.0f}",
        ]
        for vault, r in result.items()
    ]
    return markdown_table(
        [
            "vault",
            "questions asked in the first 60 s",
            "the first answer waited",
            "first response, cold",
            "same questions, index built",
            "difference (points)",
        ],
        rows,
    )


def ceiling_table(found: dict[str, Any]) -> str:
    """Per vault, split and category: the share of questions whose gold is within the
    first 20 passages of each ranking (the ceiling of what the later stages can show)."""
    rows: list[list[object]] = []
    for name, recall in found["candidate_recall"].items():
        categories: list[str] = found["categories"][name]
        splits: list[str] = found["splits"][name]
        for split in ("dev", "heldout"):
            for category in ["all", *sorted(set(categories))]:
                chosen = [
                    i
                    for i, (c, s) in enumerate(zip(categories, splits, strict=True))
                    if s == split and category in ("all", c)
                ]
                if not chosen:
                    continue
                cells = [
                    f"{100 * sum(recall[r]['@20'][i] for i in chosen) / len(chosen):.0f}%"
                    for r in ("keyword", "dense", "fused")
                ]
                rows.append([name, split, category, len(chosen), *cells])
    return markdown_table(
        [
            "vault",
            "split",
            "category",
            "questions",
            "keyword top 20",
            "dense top 20",
            "fused top 20",
        ],
        rows,
    )


def report(found: dict[str, Any]) -> str:
    """The per-vault tables as markdown: figures per split and category, candidate ceilings,
    and the first session when it was run."""
    parts = [
        "Per vault, split and category (first response / within two calls / median tokens "
        "of the first response; `python -m bench.retrieval.vaults`):"
    ]
    parts += [slice_table(name, slices) for name, slices in found["per_vault"].items()]
    parts += [
        "Candidate ceiling per vault: is the gold within each ranking's first 20 passages "
        "at all (`bench/retrieval/candidate_recall.py`)?",
        ceiling_table(found),
    ]
    if found.get("inside"):
        parts += [
            "Each vault alone and inside a generated vault (`--inside`), built index, one run "
            "each: issue 38 asks for the first response within 2 points.",
            crowding_table(found),
        ]
    if found["first_session"]:
        parts += [
            "First session: questions asked in the first minute on a cold copy, against the "
            "same questions on the built index:",
            first_session_table(found["first_session"]),
        ]
    return "\n\n".join(parts)


def _shown_notes(text: str, own: set[str]) -> list[bool]:
    """For each note a response shows (its groups, in order): whether it is one of `own`
    (a group's heading starts with its path, then its title or facts)."""
    return [
        any(line[3:] == path or line[3:].startswith(path + " ") for path in own)
        for line in text.splitlines()
        if line.startswith("## ")
    ]


def crowding(
    dev_vault: DevVault, alone: Sequence[Trace], inside: Sequence[Trace]
) -> dict[str, Any]:
    """Of the questions answered in the first response alone and not inside: how many, and
    how many notes of the generated vault the first response inside showed in their place
    (the top one and all)."""
    own = {str(p.relative_to(dev_vault.vault)) for p in dev_vault.vault.rglob("*.md")}
    among = {t.question: t for t in inside}
    lost = [t.question for t in alone if t.hit_first and not among[t.question].hit_first]
    gained = [t.question for t in alone if not t.hit_first and among[t.question].hit_first]
    shown = {q: _shown_notes(among[q].texts[0], own) if among[q].texts else [] for q in lost}
    return {
        "lost": len(lost),
        "gained": len(gained),
        "lost_questions": sorted(lost),
        "gained_questions": sorted(gained),
        "generated_on_top": sorted(q for q, notes in shown.items() if notes and not notes[0]),
        "generated_shown": sum(notes.count(False) for notes in shown.values()),
        "notes_shown": sum(len(notes) for notes in shown.values()),
    }


def crowding_table(found: dict[str, Any]) -> str:
    rows = [
        [
            name,
            f"{c['alone_first']:.1f}%",
            f"{c['inside_first']:.1f}%",
            f"{c['inside_first'] - c['alone_first']:+.1f}",
            c["lost"],
            c["gained"],
            len(c["generated_on_top"]),
            f"{c['generated_shown']} of {c['notes_shown']}",
        ]
        for name, c in found["inside"].items()
    ]
    return markdown_table(
        [
            "vault",
            "alone, first response (all questions)",
            "inside, first response",
            "points",
            "lost inside",
            "gained inside",
            "lost: a generated note on top",
            "lost: generated notes shown",
        ],
        rows,
    )


async def run(
    vault: str | None = None,
    *,
    first_session: bool = True,
    inside: tuple[Path, Path] | None = None,
    model_path: Path | None = None,
) -> dict[str, Any]:
    """The figures of one development vault (by name) or of every one (None); with
    `inside`, each also among a generated vault's notes (`inside_run`); with `model_path`,
    every server runs that model folder instead of the bundled model."""
    model: ModelEnv = {} if model_path is None else {"OBSIDIAN_MODEL_PATH": str(model_path)}
    chosen = [v for v in VAULTS if vault in (None, v.name)]
    results: dict[str, Any] = {
        "per_vault": {},
        "first_session": {},
        "traces": {},
        "candidate_recall": {},
        "categories": {},
        "splits": {},
        "inside": {},
    }
    with tempfile.TemporaryDirectory(prefix="vaults-") as tmp:
        work = Path(tmp)
        for dev_vault in chosen:
            questions = load_questions(dev_vault.questions)
            print(f"{dev_vault.name}: {len(questions)} questions", flush=True)
            traces, recall = await built_index_run(dev_vault, questions, work, model)
            _record(results, dev_vault.name, questions, traces, recall)
            if inside is not None:
                among, among_recall, name = await inside_run(
                    dev_vault, questions, work, inside, model
                )
                _record(results, name, questions, among, among_recall)
                results["inside"][name] = crowding(dev_vault, traces, among) | {
                    "alone_first": figures(traces)["hit_first"],
                    "inside_first": figures(among)["hit_first"],
                }
            if not first_session or dev_vault.name != "ledgerline":
                continue
            built = {t.question: t for t in traces}
            for mode in FIRST_SESSION_MODES:
                cold = await first_session_run(dev_vault, questions, work, mode, model)
                same = [built[t.question] for t in cold]
                waited = re.search(r"waited (\d+) s for the meaning index", cold[0].texts[0])
                results["first_session"][f"{dev_vault.name}, {mode}"] = {
                    "asked": len(cold),
                    "first_wait_seconds": int(waited.group(1)) if waited else 0,
                    "cold_first": figures(cold)["hit_first"],
                    "built_first": figures(same)["hit_first"],
                    "by_category": {
                        c: [
                            figures([t for t in cold if t.category == c])["hit_first"],
                            figures([t for t in same if t.category == c])["hit_first"],
                        ]
                        for c in sorted({t.category for t in cold})
                    },
                }
    return results


def _record(
    results: dict[str, Any],
    name: str,
    questions: Sequence[Question],
    traces: Sequence[Trace],
    recall: Recall,
) -> None:
    """One run's figures, under `name`, in each table of `results`."""
    results["per_vault"][name] = by_slice(traces, questions)
    results["candidate_recall"][name] = recall
    results["categories"][name] = [q.category for q in questions]
    results["splits"][name] = [q.split for q in questions]
    results["traces"][name] = {t.question: [t.hit_first, t.hit_two, t.first_tokens] for t in traces}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.vaults", description=__doc__)
    parser.add_argument("--vault", choices=[v.name for v in VAULTS], default=None)
    parser.add_argument(
        "--no-first-session",
        dest="first_session",
        action="store_false",
        help="leave out the cold-start run on ledgerline",
    )
    parser.add_argument(
        "--inside",
        nargs=2,
        type=Path,
        metavar=("PARENT", "CACHE"),
        help="also run each vault among the notes of PARENT/vault, whose index is built in "
        "the OBSIDIAN_CACHE_DIR CACHE (python -m bench.shared.generate_vault, then "
        "obsidian-mcp index with that cache; as python -m bench.speed.index --prebuilt)",
    )
    parser.add_argument(
        "--model-path",
        type=Path,
        help="a model folder (OBSIDIAN_MODEL_PATH: model.onnx, tokenizer.json, model.json) "
        "every server runs instead of the bundled model",
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="where the JSON goes")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    inside = None if args.inside is None else (args.inside[0], args.inside[1])
    found = anyio.run(
        partial(
            run,
            args.vault,
            first_session=args.first_session,
            inside=inside,
            model_path=args.model_path,
        )
    )
    found["seconds"] = time.perf_counter() - started
    print("\n" + report(found))
    path = save_results(args.out, "vaults", found)
    print(f"\nresults: {path} ({found['seconds'] / 60:.1f} min)")


if __name__ == "__main__":
    main()
