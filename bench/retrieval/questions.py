"""The benchmark's question set, ``fixtures/questions.jsonl``: what a row holds, the rules every
row keeps, the checker that enforces them, and the fixed development / held-out split.

    python -m bench.retrieval.questions check   # every rule below, on the whole file;
                                                # exit 1 on a problem
    python -m bench.retrieval.questions split     # give rows without a split one (see "The split")

**A row** (JSON lines): ``id``; ``question``; ``gold``, a phrase (or a list of phrases, all
needed) copied from the vault; ``gold_file``, the note holding it (a list parallel to
``gold``); ``category``; ``folder`` (the scope to search in, or null); ``batch``
(``original-58`` for q01..q58, ``issue-9`` for the questions written for the retrieval
pipeline issue); ``split`` (``dev`` or ``heldout``); and optional ``traits``:

- ``alias``: the question names someone by role or alias ("the archivist", "the
  companion", "little wick") where the passage uses the name or another word;
- ``next-sentence``: the answer is the sentence next to the one the question matches best.

Questions are written from the vault (``fixtures/vault``), never from search results.

**Rules** (``check``):

- ids are unique; every row has the fields above with allowed values.
- Each gold phrase occurs exactly once in the vault (notes outside hidden folders), and in
  its ``gold_file``. Occurrence is the benchmark's own hit test (``harness.gold_found``):
  whitespace collapsed, case kept, markdown stripped when the raw text does not match.
- ``paraphrase`` (written for issue 9): the question shares no index term
  (``obsidian_mcp.retrieval.keyword.terms``: folded, stemmed, stopwords out) with its gold
  passage: the paragraph holding the gold (one line of it, in a list or table), the
  headings above it and the note's title. Five of the original 58 share a word or two;
  ``check`` lists them, and they do not count toward the paraphrase minimum.
- ``deep-session``: the gold starts at least ``DEEP_OFFSET`` characters into its note.
- ``two-file``: two golds, in two different notes.
- At least ``MINIMUM`` questions in all and ``MINIMUM_PER_CATEGORY`` in the named categories.
- In every category, a third of the questions (rounded, +-1) are held out.
- Every question has its real all-MiniLM-L6-v2 vector in ``fixtures/query_vectors.jsonl``
  (made by ``scripts/embed_fixtures.py``): the stand-in's ``/search/smart`` would
  otherwise fall back, silently, to an approximation from the notes' words.

**The split.** The held-out third is drawn once, at random (``SPLIT_SEED``), in each
category apart, before any tuning, and never changes: ``split`` only gives rows that have
none a split, so adding questions later keeps every earlier assignment. The original 58
are always ``dev``: the old ranking heuristics were tuned on them, so they cannot test
anything unseen. **Nobody tunes on held-out questions**: choose chunk sizes, depths,
weights and windows on ``dev`` only, and report ``heldout`` apart as the figure that says
whether a choice generalises.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.shared.harness import (
    FIXTURE_VAULT,
    QUERY_VECTORS,
    QUESTIONS,
    Question,
    collapse,
    gold_found,
    strip_markdown,
)
from obsidian_mcp.retrieval.keyword import terms

CATEGORIES = (
    "exact-keyword",
    "paraphrase",
    "deep-session",
    "two-file",
    "common-term",
    "folder-scoped",
)
SPLITS = ("dev", "heldout")
BATCHES = ("original-58", "issue-9")
TRAITS = ("alias", "next-sentence")
ORIGINAL = "original-58"
MINIMUM = 100
MINIMUM_PER_CATEGORY = {"paraphrase": 20, "deep-session": 20, "two-file": 12}
# Past the first few thousand characters: beyond what a note's first passages or a
# 16 KB Smart Connections block's opening words carry.
DEEP_OFFSET = 3000
EMBEDDING_DIMENSIONS = 384  # all-MiniLM-L6-v2, the fixture vectors' model
SPLIT_SEED = "obsidian-mcp questions, issue 9"

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|\|)")


@dataclass(frozen=True)
class Passage:
    """A paragraph of a note (or one line of a list or table) with where it sits."""

    note: str
    headings: tuple[str, ...]
    text: str
    offset: int  # characters from the start of the note file

    def context(self) -> str:
        """The passage as a retriever sees it: the note's title, its headings, its text."""
        title = self.note.rsplit("/", 1)[-1].removesuffix(".md")
        return "\n".join((title, *self.headings, self.text))


def note_passages(note: str, text: str) -> Iterator[Passage]:
    """The passages of one note, frontmatter left out, headings in fenced code ignored."""
    lines = text.splitlines(keepends=True)
    offset = 0
    if lines and lines[0].strip() == "---":
        for index in range(1, len(lines)):
            if lines[index].strip() == "---":
                offset = sum(len(line) for line in lines[: index + 1])
                lines = lines[index + 1 :]
                break
    headings: list[tuple[int, str]] = []
    block: list[tuple[int, str]] = []
    in_fence = False

    def flush() -> Iterator[Passage]:
        path = tuple(title for _, title in headings)
        if block and all(_ITEM.match(line) for _, line in block):
            for start, line in block:
                yield Passage(note, path, line.strip(), start)
        elif block:
            yield Passage(note, path, "".join(line for _, line in block).strip(), block[0][0])
        block.clear()

    for line in lines:
        start, offset = offset, offset + len(line)
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            yield from flush()
            level = len(heading.group(1))
            headings[:] = [(lvl, title) for lvl, title in headings if lvl < level]
            headings.append((level, heading.group(2)))
        elif line.strip():
            block.append((start, line))
        elif not in_fence:
            yield from flush()
    yield from flush()


def vault_notes(vault: Path = FIXTURE_VAULT) -> dict[str, str]:
    """Every note's text by vault path, hidden folders left out."""
    notes: dict[str, str] = {}
    for path in sorted(vault.rglob("*.md")):
        rel = path.relative_to(vault).as_posix()
        if not any(part.startswith(".") for part in rel.split("/")):
            notes[rel] = path.read_text("utf-8")
    return notes


@lru_cache(maxsize=1024)
def _collapsed(text: str, stripped: bool) -> str:
    """A note as the hit test compares it, cached: every gold is counted in every note."""
    return collapse(strip_markdown(text) if stripped else text)


def occurrences(gold: str, text: str) -> int:
    """How often the benchmark's hit test finds ``gold`` in ``text``."""
    found = _collapsed(text, False).count(collapse(gold))
    return found or _collapsed(text, True).count(collapse(strip_markdown(gold)))


def gold_passage(gold: str, note: str, text: str) -> Passage | None:
    return next((p for p in note_passages(note, text) if gold_found(p.text, gold)), None)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value or []]


def read_rows(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def write_rows(rows: Sequence[dict[str, Any]], path: Path = QUESTIONS) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")


def _row_problems(row: dict[str, Any], notes: dict[str, str]) -> Iterator[str]:
    golds, files = _as_list(row.get("gold")), _as_list(row.get("gold_file"))
    category = row.get("category")
    if not str(row.get("question", "")).strip():
        yield "no question"
    if category not in CATEGORIES:
        yield f"category {category!r} is not one of {', '.join(CATEGORIES)}"
    if row.get("batch") not in BATCHES:
        yield f"batch {row.get('batch')!r} is not one of {', '.join(BATCHES)}"
    if row.get("split") not in SPLITS:
        yield f"split {row.get('split')!r} is not one of {', '.join(SPLITS)}"
    if row.get("batch") == ORIGINAL and row.get("split") != "dev":
        yield "an original question must be dev: the old heuristics were tuned on it"
    if unknown := set(row.get("traits", [])) - set(TRAITS):
        yield f"unknown traits {sorted(unknown)}; known: {', '.join(TRAITS)}"
    if not golds or len(golds) != len(files):
        yield "gold and gold_file must be non-empty and of the same length"
        return
    for gold, note in zip(golds, files, strict=True):
        if note not in notes:
            yield f"gold_file {note!r} is not a note of the vault"
            continue
        total = sum(occurrences(gold, text) for text in notes.values())
        if total != 1:
            yield f"gold {gold!r} occurs {total} times in the vault, not once"
        elif not occurrences(gold, notes[note]):
            yield f"gold {gold!r} is not in {note}"
            continue
        passage = gold_passage(gold, note, notes[note])
        if passage is None:
            yield f"gold {gold!r} spans passages of {note}; copy it from one paragraph"
            continue
        if category == "deep-session":
            where = notes[note].find(gold)
            where = passage.offset if where < 0 else where
            if where < DEEP_OFFSET:
                yield f"deep-session gold starts at character {where}, before {DEEP_OFFSET}"
    if category == "two-file" and (len(golds) != 2 or len(set(files)) != 2):
        yield "two-file needs two golds in two different notes"
    paraphrase = category == "paraphrase" and row.get("batch") != ORIGINAL
    if paraphrase and (shared := shared_terms(row, notes)):
        yield f"paraphrase shares terms with its passage: {', '.join(shared)}"


def shared_terms(row: dict[str, Any], notes: dict[str, str]) -> list[str]:
    """The index terms the question shares with its gold passages."""
    passages = (
        gold_passage(gold, note, notes[note])
        for gold, note in zip(_as_list(row["gold"]), _as_list(row["gold_file"]), strict=True)
        if note in notes
    )
    context = " ".join(p.context() for p in passages if p is not None)
    return sorted(set(terms(row["question"])) & set(terms(context)))


def strict_paraphrases(rows: Sequence[dict[str, Any]], notes: dict[str, str]) -> list[str]:
    """Ids of the paraphrase questions that share no term with their passages. Five of the
    original 58 share one or two (kept as written, so their figures stay comparable); they
    do not count toward the minimum."""
    return [
        str(row["id"])
        for row in rows
        if row.get("category") == "paraphrase" and not shared_terms(row, notes)
    ]


def problems(rows: Sequence[dict[str, Any]], notes: dict[str, str]) -> list[str]:
    """Every broken rule, one line each (empty when the set is sound)."""
    found: list[str] = []
    ids = Counter(str(row.get("id")) for row in rows)
    found += [f"{id_}: id used {count} times" for id_, count in ids.items() if count > 1]
    for row in rows:
        found += [f"{row.get('id')}: {problem}" for problem in _row_problems(row, notes)]
    if len(rows) < MINIMUM:
        found.append(f"{len(rows)} questions, fewer than {MINIMUM}")
    by_category = Counter(row.get("category") for row in rows)
    counted = by_category | {"paraphrase": len(strict_paraphrases(rows, notes))}
    for category, least in MINIMUM_PER_CATEGORY.items():
        if counted[category] < least:
            found.append(f"{counted[category]} {category} questions, fewer than {least}")
    held = Counter(row.get("category") for row in rows if row.get("split") == "heldout")
    for category, count in by_category.items():
        if abs(held[category] - count / 3) > 1:
            found.append(f"{category}: {held[category]} of {count} held out, not a third")
    return found


def missing_query_vectors(rows: Sequence[dict[str, Any]], path: Path = QUERY_VECTORS) -> list[str]:
    """One line per question that has no query vector for the stand-in."""
    known = {
        str(row["query"]).strip()
        for row in map(json.loads, path.read_text("utf-8").splitlines())
        if len(row.get("vec", ())) == EMBEDDING_DIMENSIONS
    }
    return [
        f"{row.get('id')}: no query vector in {path.name}; run scripts/embed_fixtures.py"
        for row in rows
        if str(row.get("question", "")).strip() not in known
    ]


def assign_splits(rows: Sequence[dict[str, Any]], seed: str = SPLIT_SEED) -> int:
    """Give each row without a split one, in place: per category, enough new rows drawn at
    random to make a third of the category held out (originals stay dev); return how many
    rows changed."""
    changed = 0
    for category in sorted({str(row.get("category")) for row in rows}):
        members = [row for row in rows if row.get("category") == category]
        open_rows = [row for row in members if row.get("split") not in SPLITS]
        held = sum(1 for row in members if row.get("split") == "heldout")
        drawable = sorted(
            (row for row in open_rows if row.get("batch") != ORIGINAL), key=lambda r: r["id"]
        )
        wanted = max(0, min(round(len(members) / 3) - held, len(drawable)))
        chosen = {id(row) for row in random.Random(f"{seed}:{category}").sample(drawable, wanted)}
        for row in open_rows:
            row["split"] = "heldout" if id(row) in chosen else "dev"
            changed += 1
    return changed


def question_groups(questions: Sequence[Question]) -> dict[str, set[str]]:
    """The slices the benchmark reports apart, in report order, as sets of question ids:
    all, each split, each batch, each category, each trait. Empty slices are left out."""
    slices: dict[str, list[bool]] = {
        "all": [True] * len(questions),
        "dev": [q.split == "dev" for q in questions],
        "held-out": [q.split == "heldout" for q in questions],
        "original 58": [q.batch == ORIGINAL for q in questions],
        "new (issue 9)": [q.batch not in ("", ORIGINAL) for q in questions],
    }
    present = {q.category for q in questions}
    categories = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
    slices |= {c: [q.category == c for q in questions] for c in categories}
    slices |= {f"trait: {t}": [t in q.traits for q in questions] for t in TRAITS}
    groups = {
        name: {q.id for q, member in zip(questions, members, strict=True) if member}
        for name, members in slices.items()
    }
    return {name: ids for name, ids in groups.items() if ids}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.retrieval.questions", description=__doc__
    )
    parser.add_argument("command", choices=("check", "split"))
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    args = parser.parse_args(argv)
    rows = read_rows(args.questions)
    if args.command == "split":
        changed = assign_splits(rows)
        write_rows(rows, args.questions)
        print(f"{changed} rows given a split", file=sys.stderr)
    notes = vault_notes()
    found = problems(rows, notes) + missing_query_vectors(rows)
    for row in rows:
        original = row.get("category") == "paraphrase" and row.get("batch") == ORIGINAL
        if original and (shared := shared_terms(row, notes)):
            print(f"note: {row['id']} (original) shares {', '.join(shared)}", file=sys.stderr)
    for problem in found:
        print(problem, file=sys.stderr)
    counts = Counter((row.get("category"), row.get("split")) for row in rows)
    summary = ", ".join(
        f"{category} {counts[(category, 'dev')]}+{counts[(category, 'heldout')]}"
        for category in CATEGORIES
    )
    print(f"{len(rows)} questions (dev+heldout): {summary}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
