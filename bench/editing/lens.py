"""The lens laws of reading and editing one target, checked on generated notes.

    python -m bench.editing.lens [--cases 10000] [--seed 34] [--out bench/out]

A read of a target (`vault_read_note(heading=T)`) and `vault_edit_note(replace, T)` name
one span (docs/editing.md, "Read and edit agree"). For every heading and block id of a
generated note that mixes the shapes Obsidian users write (ATX and setext headings,
callouts, quotes, bullet and task lists nested with tabs and spaces, tables with ids,
footnotes, `%%` comments, `$$` math, fences, embeds with glued ids; LF or CRLF, a byte
order mark, frontmatter), the laws:

* **GetPut**: replacing T with what a read of T returned leaves the note byte-identical;
* **one-word round trip**: read T, change one word of it, replace T with that: the note
  differs from before by exactly that word, at that place;
* **PutGet**: after replacing T with x, a read of T returns x, up to the normalisation
  docs/editing.md lists per target form (`expected_read` is that list, as code): here
  x is the read with one word changed (returned exactly), and a new one-line paragraph
  (given the heading line, the item's marker, the quote's frame and the block's id);
* **same span**: every form of a reference the read accepts (the full path, its last
  heading, `A::B`, `A#B`, the line-numbered label a refusal lists) the edit accepts, and
  where a reference names several targets, both refuse.

Prints the counts and writes them, with every failure's note, target and law, to
``<out>/lens.json``. tests/test_lens.py runs the same laws on notes hypothesis draws.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from obsidian_mcp.editing.lines import split_lines
from obsidian_mcp.editing.operations import EditRequest, apply_edit
from obsidian_mcp.editing.targets import (
    CALLOUT_HEADER_RE,
    BlockTarget,
    EditRefused,
    HeadingTarget,
    NoteStructure,
    Target,
    TargetUnresolved,
    resolve_target,
)
from obsidian_mcp.text.markdown import heading_reference

# The generated notes of the report's run: the same 10,000 every time.
SEED = 34
PATH = "Notes/Lens.md"
_WORDS = (
    *("lamp", "harbour", "mira", "rook", "tide", "ledger", "invoice", "quiet", "signal"),
    *("north", "ember", "cedar", "vow", "lantern", "orchard", "copper", "meadow", "pilot"),
)
# The word a one-word round trip writes in place of one of the note's.
NEW_WORD = "zanzibar"
PIECES = (
    "heading",
    "heading",
    "setext",
    "paragraph",
    "paragraph-id",
    "id-alone",
    "bullets",
    "tasks-tabs",
    "ordered",
    "table-id",
    "callout",
    "quote-id",
    "fence",
    "comment",
    "math",
    "footnote",
    "embed-id",
)


@dataclass(frozen=True)
class NoteSpec:
    """What a generated note is made of: its pieces in order, each with the seed that
    fills it, and how the file is written."""

    pieces: tuple[tuple[str, int], ...]
    crlf: bool = False
    bom: bool = False
    frontmatter: bool = False


@dataclass
class _Builder:
    rng: random.Random
    ids: list[str] = field(default_factory=list[str])

    def word(self) -> str:
        return self.rng.choice(_WORDS)

    def words(self, count: int) -> str:
        return " ".join(self.word() for _ in range(count))

    def new_id(self) -> str:
        block_id = f"b{len(self.ids) + 1}{self.rng.choice('xyz')}"
        self.ids.append(block_id)
        return block_id

    def piece(self, kind: str) -> list[str]:
        rng = self.rng
        if kind == "heading":
            return ["#" * rng.randint(1, 4) + " " + self.words(rng.randint(1, 2)).title()]
        if kind == "setext":
            return [self.words(2).title(), rng.choice(["===", "---"])]
        if kind == "paragraph":
            return [self.words(4) for _ in range(rng.randint(1, 3))]
        if kind == "paragraph-id":
            lines = [self.words(4) for _ in range(rng.randint(1, 2))]
            return [*lines[:-1], f"{lines[-1]} ^{self.new_id()}"]
        if kind == "id-alone":
            return [self.words(5), "", f"^{self.new_id()}"]
        if kind == "bullets":
            indent = rng.choice(["  ", "    ", "\t"])
            return [
                f"- {self.words(3)}",
                f"- {self.words(3)} ^{self.new_id()}",
                f"{indent}- {self.words(2)}",
                f"{indent}- {self.words(2)} ^{self.new_id()}",
                f"- {self.words(2)}",
            ]
        if kind == "tasks-tabs":
            return [
                f"- [ ] {self.words(3)}",
                f"\t- [x] {self.words(3)} ^{self.new_id()}",
                f"\t\t- [ ] {self.words(2)}",
                f"- [ ] {self.words(2)}",
            ]
        if kind == "ordered":
            return [f"1. {self.words(3)}", f"2. {self.words(3)} ^{self.new_id()}", "3. done"]
        if kind == "table-id":
            return [
                f"| {self.word()} | {self.word()} |",
                "|---|---|",
                f"| {self.word()} | {rng.randint(1, 99)} |",
                f"^{self.new_id()}",
            ]
        if kind == "callout":
            return [
                f"> [!{rng.choice(['note', 'tip', 'warning'])}] {self.words(2).title()}",
                f"> {self.words(4)} ^{self.new_id()}",
                ">",
                f"> {self.words(3)}",
            ]
        if kind == "quote-id":
            return [f"> {self.words(3)}", f"> {self.words(3)} ^{self.new_id()}"]
        if kind == "fence":
            return ["```", f"# {self.words(2)}", "", self.words(2), "```"]
        if kind == "comment":
            return ["%%", self.words(3), "%%"]
        if kind == "math":
            return ["$$", f"x = {rng.randint(1, 9)}", "$$"]
        if kind == "footnote":
            return [
                f"{self.words(3)}[^{len(self.ids)}]",
                "",
                f"[^{len(self.ids)}]: {self.words(3)}",
            ]
        if kind == "embed-id":
            return [f"![[{self.word()}.png]]^{self.new_id()}"]
        raise ValueError(kind)


def build_note(spec: NoteSpec) -> tuple[str, list[str]]:
    """The note's text and the block ids it holds."""
    builder = _Builder(random.Random(0))
    lines: list[str] = []
    if spec.frontmatter:
        lines += ["---", "title: Lens", "tags: [a, b]", "---"]
    for kind, seed in spec.pieces:
        builder.rng = random.Random(seed)
        if lines and lines[-1] != "---":
            lines.append("")
        lines += builder.piece(kind)
    newline = "\r\n" if spec.crlf else "\n"
    text = newline.join(lines) + newline
    return ("\ufeff" if spec.bom else "") + text, builder.ids


def random_spec(rng: random.Random) -> NoteSpec:
    count = rng.randint(1, 9)
    return NoteSpec(
        tuple((rng.choice(PIECES), rng.randrange(1 << 30)) for _ in range(count)),
        crlf=rng.random() < 0.25,
        bom=rng.random() < 0.1,
        frontmatter=rng.random() < 0.3,
    )


# -- the laws ---------------------------------------------------------------------------


def structure_of(text: str) -> NoteStructure:
    return NoteStructure.of(PATH, split_lines(text.removeprefix("\ufeff")))


def read(text: str, reference: str) -> str:
    """What vault_read_note(heading=reference) returns, whole (reading.read_note_window)."""
    structure = structure_of(text)
    return structure.text_of(resolve_target(structure, reference))


def replace(text: str, reference: str, content: str) -> str:
    return apply_edit(PATH, text, EditRequest("replace", reference, content)).text


def expected_read(structure: NoteStructure, target: Target, paragraph: str) -> str:
    """What a read of `target` returns after `replace(target, paragraph)`, for a one-line
    paragraph without markup: docs/editing.md's normalisation list, as code."""
    lines = structure.lines
    newline = lines[0].ending or "\n" if lines else "\n"

    def raw(first: int, end: int) -> str:
        return "".join(line.text + line.ending for line in lines[first:end])

    if isinstance(target, HeadingTarget):
        # The heading line(s), and the blank lines between it and its first block.
        return raw(target.heading_line, target.first_block_line) + paragraph
    own = lines[target.first_line].text
    text = paragraph
    if target.kind == "item":
        marker = re.match(r"(?:[-*+]|[0-9]+[.)])(?:[ \t]+\[.\])?[ \t]+", own[len(target.prefix) :])
        text = (marker.group() if marker else "") + text
    head = ""
    if target.kind == "quote":
        frame = re.match(r"[ \t]*>[ \t]?", own[len(target.prefix) :])
        text = (frame.group() if frame else "> ") + text
        if CALLOUT_HEADER_RE.match(own[len(target.prefix) + (frame.end() if frame else 0) :]):
            head = own + newline
    text = target.prefix + text
    if not target.id_alone:
        return head + text + f" ^{target.block_id}"
    # The id keeps its own line, and the blank lines above it, below the new text.
    above = target.id_line
    while above > target.first_line and not lines[above - 1].text.strip(" \t>"):
        above -= 1
    return head + text + newline + raw(above, target.id_line) + lines[target.id_line].text


def _one_word(view: str, skip_lines: int) -> tuple[int, str] | None:
    """A word of the generated vocabulary in `view` past its first `skip_lines` lines
    (a heading's own line: changing it is a rename), and not part of a block id."""
    start = 0
    for _ in range(skip_lines):
        start = view.find("\n", start) + 1
        if start == 0:
            return None
    for found in re.finditer(r"[A-Za-z]+", view[start:]):
        at = start + found.start()
        if found.group().lower() in _WORDS and view[at - 1 : at] not in ("^", "[", "!"):
            return at, found.group()
    return None


def references(structure: NoteStructure, target: Target) -> list[str]:
    """The forms of a reference to `target` a read accepts."""
    if isinstance(target, BlockTarget):
        return [target.reference, target.reference.upper()]
    forms = [heading_reference(target.path), target.label()]
    if len(target.path) > 1:
        forms += ["::".join(target.path), "#".join(target.path), target.path[-1]]
    return forms


@dataclass
class Outcome:
    targets: int = 0
    checks: dict[str, int] = field(default_factory=dict[str, int])
    failures: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    def passed(self, law: str) -> None:
        self.checks[law] = self.checks.get(law, 0) + 1

    def failed(self, check: str, where: str, target: str, detail: str) -> None:
        """`where`: the note's text (generated notes) or its path (a vault's)."""
        self.failures.append({"check": check, "where": where, "target": target, "detail": detail})


def check_laws(text: str, block_ids: Sequence[str], outcome: Outcome) -> None:
    """Every law on every target of `text` (its headings and `block_ids`)."""
    structure = structure_of(text)
    candidates = [heading_reference(h.path) for h in structure.headings()]
    candidates += ["^" + block_id for block_id in block_ids]
    for reference in dict.fromkeys(candidates):
        try:
            target = resolve_target(structure, reference)
        except TargetUnresolved:
            _both_refuse(text, reference, outcome)
            continue
        outcome.targets += 1
        _laws_of(text, structure, target, reference, outcome)


def _both_refuse(text: str, reference: str, outcome: Outcome) -> None:
    try:
        replace(text, reference, "anything")
    except EditRefused:
        outcome.passed("same span")
        return
    outcome.failed("same span", text, reference, "the read refused it, the edit did not")


def _laws_of(
    text: str, structure: NoteStructure, target: Target, reference: str, outcome: Outcome
) -> None:
    view = structure.text_of(target)
    for form in references(structure, target):
        # Whatever the form names (a last heading may name another, shallower one), the
        # read and the edit resolve it alike: both refuse, or the read's text sent back
        # through that form changes nothing.
        try:
            named = read(text, form)
        except TargetUnresolved:
            _both_refuse(text, form, outcome)
            continue
        try:
            same = replace(text, form, named) == text
        except EditRefused as exc:
            outcome.failed("same span", text, form, f"the read took it, the edit refused: {exc}")
            continue
        if same:
            outcome.passed("same span")
        else:
            outcome.failed("same span", text, form, "the edit changed another span")
    try:
        if replace(text, reference, view) == text:
            outcome.passed("GetPut")
        else:
            outcome.failed("GetPut", text, reference, replace(text, reference, view))
    except EditRefused as exc:
        outcome.failed("GetPut", text, reference, f"refused: {exc}")
    heading_lines = (
        target.body_line - target.heading_line if isinstance(target, HeadingTarget) else 0
    )
    word = _one_word(view, heading_lines)
    if word is not None:
        at, old = word
        changed = view[:at] + NEW_WORD + view[at + len(old) :]
        start = structure.view(target)[0] + (1 if text.startswith("\ufeff") else 0)
        wanted = text[: start + at] + NEW_WORD + text[start + at + len(old) :]
        _check(outcome, "one-word round trip", text, reference, changed, wanted)
        _check(outcome, "PutGet (one word)", text, reference, changed, changed, read_back=True)
    paragraph = "Fresh lens words."
    wanted = expected_read(structure, target, paragraph)
    _check(outcome, "PutGet (new paragraph)", text, reference, paragraph, wanted, read_back=True)


def _check(
    outcome: Outcome,
    law: str,
    text: str,
    reference: str,
    content: str,
    wanted: str,
    *,
    read_back: bool = False,
) -> None:
    """Replace `reference` with `content`: the note (or, `read_back`, a read of the target
    after) must be `wanted`."""
    try:
        got = replace(text, reference, content)
        if read_back:
            got = read(got, reference)
    except (EditRefused, TargetUnresolved) as exc:
        outcome.failed(law, text, reference, f"refused: {exc}")
        return
    if got == wanted:
        outcome.passed(law)
    else:
        outcome.failed(law, text, reference, f"{content!r} gave {got!r}, wanted {wanted!r}")


def run(cases: int, seed: int) -> Outcome:
    rng = random.Random(seed)
    outcome = Outcome()
    for _ in range(cases):
        text, ids = build_note(random_spec(rng))
        check_laws(text, ids, outcome)
    return outcome


def summary(cases: int, seed: int) -> dict[str, Any]:
    """`run`'s counts, with the first 200 failures."""
    started = time.perf_counter()
    outcome = run(cases, seed)
    return {
        "cases": cases,
        "seed": seed,
        "targets": outcome.targets,
        "checks": outcome.checks,
        "failures": len(outcome.failures),
        "seconds": round(time.perf_counter() - started, 1),
        "failed": outcome.failures[:200],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args(argv)
    found = summary(args.cases, args.seed)
    print(json.dumps({k: v for k, v in found.items() if k != "failed"}, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lens.json").write_text(json.dumps(found, indent=1), "utf-8")
    return found


if __name__ == "__main__":
    sys.exit(1 if main()["failures"] else 0)
