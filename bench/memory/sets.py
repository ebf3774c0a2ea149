"""The memory benchmarks' question sets, read from the JSON lines in ``bench/memory/sets/``.

**Quality** (``bench.memory.quality``): a companion's view of one user's life and of the
roleplay campaign they play together. The user is Sam; the companion keeps what Sam tells
it about family, pets, work, health, tastes, plans and places, and what happened in "The
Drowned Crown", the campaign in which Sam plays the thief Tamsin. The sentences are short,
as an agent writes them. One file a list, one row an item, each with its ``key``:

- ``memories``: what is stored before anything is asked (``topic`` groups them). The few
  with a ``scope`` are one character's private knowledge (tamsin, bram, wren, odile).
- ``paraphrases``: a question asked later, keyed by the memory that answers it. The
  questions name people by role ("my sister", "the innkeeper") and use other words, as a
  user or agent would weeks later.
- ``changes``: a fact that changed: the old memory, the newer one that replaces it, and a
  question whose right answer is the newer.
- ``near_duplicates``: a stored memory (``existing``) and a reworded restatement of the
  same fact; ``related``: a stored memory and a different fact about the same people.
- ``unanswerable``: questions about the same world that no memory answers, with the stored
  memory each comes closest to in topic (``near``).
- ``off_topic``: questions about nothing in this world at all (no shared name or topic).
- ``scope_queries``: a character's question whose words or meaning lead to another
  character's private memory (``tempts``).

Every question row says whether it is in the held-out third (``heldout``): a threshold is
chosen on the development part only and then reported on the held-out third. The third
was drawn once, by a seeded shuffle of each list's sorted keys, before any result was seen;
``tests/test_memory_quality_set.py`` pins it.

**Recall by meaning** (``python -m bench.memory.recall --meaning``): ``recall_pairs``, a
memory an agent could have saved (user preferences, project facts, lore of a fiction vault)
and a question asked later in other words, as a new session would ask it; most share no
content word with their memory. The distractors are generated from the templates' words
in ``recall_distractor_words.json`` over the same topics, so words alone are tempted by the
wrong memories.
"""

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

SETS = Path(__file__).resolve().parent / "sets"


class Fact(NamedTuple):
    content: str
    tags: tuple[str, ...]
    type: str | None = None
    scope: str | None = None


class Change(NamedTuple):
    old: Fact
    new: Fact
    query: str


class Pair(NamedTuple):
    existing: str  # the key of the stored memory
    content: str  # what is remembered next, with the same tags


class Unanswerable(NamedTuple):
    query: str
    near: str  # the key of the stored memory closest in topic


class ScopeQuery(NamedTuple):
    scope: str  # who asks
    query: str
    tempts: str  # the key of another character's memory the question leads to


def rows(name: str) -> list[dict[str, Any]]:
    """The rows of ``sets/<name>.jsonl``, in file order."""
    text = (SETS / f"{name}.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _fact(row: dict[str, Any]) -> Fact:
    return Fact(row["content"], tuple(row["tags"]), row.get("type"), row.get("scope"))


MEMORIES = {row["key"]: _fact(row) for row in rows("memories")}
PARAPHRASES: dict[str, str] = {row["key"]: row["query"] for row in rows("paraphrases")}
CHANGES = {
    row["key"]: Change(_fact(row["old"]), _fact(row["new"]), row["query"])
    for row in rows("changes")
}
NEAR_DUPLICATES = {
    row["key"]: Pair(row["existing"], row["content"]) for row in rows("near_duplicates")
}
RELATED = {row["key"]: Pair(row["existing"], row["content"]) for row in rows("related")}
UNANSWERABLE = {
    row["key"]: Unanswerable(row["query"], row["near"]) for row in rows("unanswerable")
}
OFF_TOPIC: dict[str, str] = {row["key"]: row["query"] for row in rows("off_topic")}
SCOPE_QUERIES = {
    row["key"]: ScopeQuery(row["scope"], row["query"], row["tempts"])
    for row in rows("scope_queries")
}
# Every question list's held-out keys; the lists' keys are distinct from one another.
HELD_OUT = frozenset(
    row["key"]
    for name in (
        "paraphrases",
        "changes",
        "near_duplicates",
        "related",
        "unanswerable",
        "off_topic",
        "scope_queries",
    )
    for row in rows(name)
    if row["heldout"]
)


def split(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """The keys of one list in its development part and its held-out third, each in the
    given order."""
    given = list(keys)
    return [k for k in given if k not in HELD_OUT], [k for k in given if k in HELD_OUT]


# (memory content, tags, paraphrased query)
PAIRS = [(row["content"], tuple(row["tags"]), row["query"]) for row in rows("recall_pairs")]
_WORDS: dict[str, list[str]] = json.loads(
    (SETS / "recall_distractor_words.json").read_text("utf-8")
)


def distractors(count: int, seed: int = 11) -> list[tuple[str, tuple[str, ...]]]:
    """`count` distinct memories built from templates, with tags from their subject."""
    rng = random.Random(seed)
    made: dict[str, tuple[str, ...]] = {}
    while len(made) < count:
        subject = rng.choice(_WORDS["subjects"])
        sentence = (
            f"{subject} {rng.choice(_WORDS['verbs'])} {rng.choice(_WORDS['objects'])} "
            f"{rng.choice(_WORDS['details'])}."
        )
        tag = subject.removeprefix("the ").lower()
        made[sentence[0].upper() + sentence[1:]] = (tag.replace(" ", "-"),)
    return list(made.items())
