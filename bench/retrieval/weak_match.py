"""The weak-match label of vault_semantic_query, calibrated: how often it is set on the
questions each development vault answers, and on questions about neither vault.

    python -m bench.retrieval.weak_match             # both vaults, index kept in /tmp
    python -m bench.retrieval.weak_match --sweep     # and the rates at other floors

Each question is asked twice through the server's own `Retriever` (as `bench.retrieval.tune` does):
with the local passage index (the label judged by meaning, `strength.MEANING_FLOOR`) and
with meaning switched off (judged by words, `strength.WORDS_FLOOR`). Answerable questions
are the vaults' own (dev and held-out splits); off-vault questions are in
``fixtures/off_vault_questions.jsonl`` (unrelated ones asked of both vaults, adjacent ones
written for one vault: its kind of subject, nothing in it; each with a dev and a held-out
half). The floors are chosen on the dev splits only: the highest floor of the sweep that
labels none of both vaults' answerable dev questions (a reply labelled weak tells the
agent not to answer from it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.retrieval.tune import built_retriever
from bench.retrieval.vaults import VAULTS, DevVault
from bench.shared.harness import REPO_ROOT, load_questions, markdown_table
from obsidian_mcp.retrieval import strength

OFF_VAULT = REPO_ROOT / "fixtures" / "off_vault_questions.jsonl"
SWEEP = {
    "meaning": [0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50],
    "words": [0.05, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50],
}


@dataclass(frozen=True)
class Asked:
    vault: str
    id: str
    question: str
    group: str  # "answerable" or "off-vault"
    split: str
    meaning: float | None
    words: float | None


@dataclass(frozen=True)
class Probe:
    id: str
    question: str
    group: str
    split: str
    folder: str


def probes(dev_vault: DevVault) -> list[Probe]:
    answerable = [
        Probe(q.id, q.question, "answerable", q.split, q.folder or "")
        for q in load_questions(dev_vault.questions)
    ]
    off: list[Probe] = []
    for line in OFF_VAULT.read_text("utf-8").splitlines():
        row = json.loads(line)
        if row["vault"] in ("both", dev_vault.name):
            off.append(Probe(row["id"], row["question"], "off-vault", row["split"], ""))
    return answerable + off


async def measure(dev_vault: DevVault, work: Path, *, meaning: bool) -> list[float | None]:
    values: list[float | None] = []
    async with built_retriever(dev_vault, work, embeddings=meaning) as (retriever, _):
        for probe in probes(dev_vault):
            found = await retriever.ranked_passages(probe.question, folder=probe.folder)
            values.append(found.strength.value if found.strength is not None else None)
    return values


async def run(vault_names: Sequence[str], work: Path) -> list[Asked]:
    asked: list[Asked] = []
    for dev_vault in VAULTS:
        if dev_vault.name not in vault_names:
            continue
        by_meaning = await measure(dev_vault, work, meaning=True)
        by_words = await measure(dev_vault, work, meaning=False)
        for probe, m, w in zip(probes(dev_vault), by_meaning, by_words, strict=True):
            asked.append(
                Asked(dev_vault.name, probe.id, probe.question, probe.group, probe.split, m, w)
            )
    return asked


def labelled(values: Sequence[float | None], floor: float) -> tuple[int, int]:
    known = [v for v in values if v is not None]
    return sum(1 for v in known if v < floor), len(known)


def rate(values: Sequence[float | None], floor: float) -> str:
    hit, total = labelled(values, floor)
    return f"{hit}/{total} ({100 * hit / total:.0f}%)" if total else "-"


def values_of(asked: Sequence[Asked], measure_name: str, **where: str) -> list[float | None]:
    chosen = [a for a in asked if all(getattr(a, k) == v for k, v in where.items())]
    return [a.meaning if measure_name == "meaning" else a.words for a in chosen]


def chosen_floor(asked: Sequence[Asked], measure_name: str) -> float:
    """The highest floor of the sweep labelling none of the answerable dev questions of
    every vault."""
    dev = values_of(asked, measure_name, group="answerable", split="dev")
    fitting = [floor for floor in SWEEP[measure_name] if labelled(dev, floor)[0] == 0]
    return max(fitting, default=min(SWEEP[measure_name]))


def rates_table(asked: Sequence[Asked], measure_name: str, floors: Sequence[float]) -> str:
    vaults = sorted({a.vault for a in asked})
    rows: list[list[object]] = [
        [
            f"{floor:.2f}",
            name,
            *(
                rate(values_of(asked, measure_name, vault=name, group=g, split=s), floor)
                for g in ("answerable", "off-vault")
                for s in ("dev", "heldout")
            ),
        ]
        for floor in floors
        for name in vaults
    ]
    return markdown_table(
        [
            "floor",
            "vault",
            "answerable dev",
            "answerable held-out",
            "off-vault dev",
            "off-vault held-out",
        ],
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.retrieval.weak_match", description=__doc__
    )
    parser.add_argument("--vault", choices=[v.name for v in VAULTS], default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/obsidian-mcp-tune"))
    parser.add_argument("--sweep", action="store_true", help="rates at every floor swept")
    parser.add_argument("--dump", type=Path, help="write every question's measures here")
    args = parser.parse_args(argv)
    names = [args.vault] if args.vault else [v.name for v in VAULTS]
    asked = anyio.run(run, names, args.work)
    if args.dump:
        args.dump.write_text(
            "\n".join(json.dumps(a.__dict__, ensure_ascii=False) for a in asked) + "\n", "utf-8"
        )
    for name, floor in (("meaning", strength.MEANING_FLOOR), ("words", strength.WORDS_FLOOR)):
        print(f"\n## Labelled weak by {name} (floor in use {floor:.2f}; "
              f"the dev choice: {chosen_floor(asked, name):.2f})\n")
        print(rates_table(asked, name, SWEEP[name] if args.sweep else [floor]))


if __name__ == "__main__":
    main()
