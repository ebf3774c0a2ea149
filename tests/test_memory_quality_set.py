"""The shape of the memory quality set (`bench/memory/sets/`, read by `bench.memory.sets`):
counts, keys, golds, and the held-out split that must not move once figures have been seen."""

import hashlib
from collections import Counter

from bench.memory.sets import (
    CHANGES,
    MEMORIES,
    NEAR_DUPLICATES,
    PARAPHRASES,
    RELATED,
    SCOPE_QUERIES,
    UNANSWERABLE,
    split,
)
from obsidian_mcp.memory.model import normalize_scope, validate_memory

QUERY_LISTS: dict[str, list[str]] = {
    "paraphrases": list(PARAPHRASES),
    "changes": list(CHANGES),
    "near duplicates": list(NEAR_DUPLICATES),
    "related": list(RELATED),
    "unanswerable": list(UNANSWERABLE),
    "scope queries": list(SCOPE_QUERIES),
}

# The held-out third of every list, as first drawn (before any run of the benchmark) and now
# written in the data (`heldout`): a change that moves it must be deliberate, with a new digest.
SPLIT_DIGEST = "0dc900acb004e114b22bf7f1a4ae4dfdba8796ef54c55f3de3cb15a61870b497"


def every_content() -> list[str]:
    return [
        *(fact.content for fact in MEMORIES.values()),
        *(change.old.content for change in CHANGES.values()),
        *(change.new.content for change in CHANGES.values()),
        *(pair.content for pair in NEAR_DUPLICATES.values()),
        *(pair.content for pair in RELATED.values()),
    ]


def test_counts() -> None:
    shared = [fact for fact in MEMORIES.values() if fact.scope is None]
    assert len(shared) >= 200
    assert len(PARAPHRASES) == 100
    assert len(CHANGES) == 30
    assert len(NEAR_DUPLICATES) == 30
    assert len(RELATED) == 30
    assert len(UNANSWERABLE) == 30
    assert len(SCOPE_QUERIES) >= 30


def test_every_memory_could_be_stored() -> None:
    facts = [*MEMORIES.values(), *(c.old for c in CHANGES.values()),
             *(c.new for c in CHANGES.values())]
    for fact in facts:
        assert 1 <= len(fact.tags) <= 3, fact
        validate_memory(fact.content, fact.tags, "", fact.type, None)
        assert normalize_scope(fact.scope) == fact.scope


def test_contents_and_keys_are_unique() -> None:
    contents = every_content()
    assert len(set(contents)) == len(contents)
    pair_keys = [*NEAR_DUPLICATES, *RELATED]
    query_keys = [*CHANGES, *UNANSWERABLE, *SCOPE_QUERIES, *pair_keys]
    assert len(set(query_keys)) == len(query_keys)
    assert not set(query_keys) & set(MEMORIES)


def test_every_gold_exists() -> None:
    for key in PARAPHRASES:
        assert MEMORIES[key].scope is None, key
    for item in UNANSWERABLE.values():
        assert item.near in MEMORIES
    # Each pair's stored memory is a different one, so that one pair's restatement is never
    # what another pair's stored memory is judged against.
    existing = [pair.existing for pair in [*NEAR_DUPLICATES.values(), *RELATED.values()]]
    assert len(set(existing)) == len(existing)
    for key in existing:
        assert MEMORIES[key].scope is None, key


def test_scopes() -> None:
    owners = Counter(fact.scope for fact in MEMORIES.values() if fact.scope is not None)
    assert len(owners) >= 3
    assert 25 <= sum(owners.values()) <= 40
    for item in SCOPE_QUERIES.values():
        assert item.scope in owners
        tempting = MEMORIES[item.tempts].scope
        assert tempting is not None and tempting != item.scope, item


def test_changes_keep_their_kind() -> None:
    for change in CHANGES.values():
        assert change.old.scope == change.new.scope
        assert change.old.content != change.new.content


def test_split_is_disjoint_and_a_third() -> None:
    for name, keys in QUERY_LISTS.items():
        dev, held = split(keys)
        assert not set(dev) & set(held), name
        assert sorted(dev + held) == sorted(keys), name
        assert len(held) == len(keys) // 3, name


def test_split_is_stable() -> None:
    # Neither the order the items were written in nor a second call moves the split.
    for keys in QUERY_LISTS.values():
        assert split(keys) == split(keys)
        assert set(split(reversed(keys))[1]) == set(split(keys)[1])
    drawn = "\n".join(f"{name}: {' '.join(sorted(split(keys)[1]))}"
                      for name, keys in QUERY_LISTS.items())
    assert hashlib.sha256(drawn.encode()).hexdigest() == SPLIT_DIGEST
