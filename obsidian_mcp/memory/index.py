"""The store's file, read into memory once and kept current by reading only what was added.

`MemoryIndex` holds the last word for every id, the live memories, tag counts and an
inverted word index for text queries. `LogReader` feeds it: it remembers how many bytes it
has consumed and the last line it consumed (the anchor). A refresh that finds the anchor
still in place parses only the new bytes; any other change means the file was rewritten
(compacted, or replaced by sync) and the index is rebuilt. Lines are unique (each carries a
fresh id and a timestamp), so an anchor that matches proves the prefix is unchanged.
"""

import heapq
import math
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from obsidian_mcp.memory.model import Memory, Record, Tombstone, decode, dedup_key

_WORD = re.compile(r"\w+")
# Words too common to say anything about a memory; they would make every entry a match.
_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "had", "has",
        "have", "he", "her", "his", "i", "in", "is", "it", "its", "of", "on", "or", "she", "so",
        "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "what", "when",
        "where", "which", "who", "will", "with", "you", "your",
    }
)
# Where a query word is found matters: a tag is a deliberate label, context is commentary.
_WEIGHT_TAG, _WEIGHT_CONTENT, _WEIGHT_CONTEXT = 3.0, 1.0, 0.5
_BM25_K1 = 1.2


def _stem(word: str) -> str:
    # Plural and singular should meet ("dragons" finds "dragon"); nothing fancier is needed
    # for short memories.
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The words of `text` that a query can match, lower-cased and lightly stemmed."""
    return [_stem(w) for w in _WORD.findall(text.casefold()) if w not in _STOPWORDS]


def _weighted_terms(memory: Memory) -> dict[str, float]:
    weights: dict[str, float] = {}
    for text, weight in (
        (" ".join(memory.tags).replace("/", " "), _WEIGHT_TAG),
        (memory.content, _WEIGHT_CONTENT),
        (memory.context, _WEIGHT_CONTEXT),
    ):
        for term in terms(text):
            weights[term] = weights.get(term, 0.0) + weight
    return weights


@dataclass(frozen=True, slots=True)
class Query:
    """What recall filters by; every part is optional."""

    tags: frozenset[str] = frozenset()
    all_tags: bool = False
    text: str = ""
    start: datetime | None = None
    end: datetime | None = None
    type: str | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    ranked: list[Memory]
    total: int
    newest: datetime | None
    oldest: datetime | None


class MemoryIndex:
    def __init__(self) -> None:
        self._latest: dict[str, Record] = {}
        # Live memories by slot; a retired slot is None. Postings refer to slots, so a
        # retired memory costs nothing to remove and is skipped when a query meets it.
        self._slots: list[Memory | None] = []
        self._slot_of: dict[str, int] = {}
        # Live ids per dedup key, in file order; the first is the memory, the rest repeats.
        self._by_key: dict[tuple[str, frozenset[str]], list[str]] = {}
        self._tag_slots: dict[str, set[int]] = {}
        self._postings: dict[str, tuple[array[int], array[float]]] = {}
        self._live = 0
        # Lines that compaction would drop: tombstones, superseded entries and repeats.
        self.dead_lines = 0

    # -- building --------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        previous = self._latest.get(record.id)
        if previous == record:
            return  # the same line read twice (our own append, then the refresh that sees it)
        if isinstance(previous, Memory):
            self._retire(previous)
            self.dead_lines += 1
        self._latest[record.id] = record
        if isinstance(record, Tombstone):
            self.dead_lines += 1
        else:
            self._add(record)

    def _add(self, memory: Memory) -> None:
        slot = len(self._slots)
        self._slots.append(memory)
        self._slot_of[memory.id] = slot
        self._live += 1
        same = self._by_key.setdefault(memory.dedup_key, [])
        same.append(memory.id)
        if len(same) > 1:
            self.dead_lines += 1
        for tag in memory.tags:
            self._tag_slots.setdefault(tag, set()).add(slot)
        for term, weight in _weighted_terms(memory).items():
            posting = self._postings.get(term)
            if posting is None:
                posting = self._postings[term] = (array("I"), array("d"))
            posting[0].append(slot)
            posting[1].append(weight)

    def _retire(self, memory: Memory) -> None:
        slot = self._slot_of.pop(memory.id)
        self._slots[slot] = None
        self._live -= 1
        same = self._by_key[memory.dedup_key]
        if len(same) > 1:
            self.dead_lines -= 1  # one repeat fewer; the retired line is counted by apply
        same.remove(memory.id)
        if not same:
            del self._by_key[memory.dedup_key]
        for tag in memory.tags:
            slots = self._tag_slots[tag]
            slots.discard(slot)
            if not slots:
                del self._tag_slots[tag]

    # -- lookups ---------------------------------------------------------------------------

    @property
    def live_count(self) -> int:
        return self._live

    def latest(self, memory_id: str) -> Record | None:
        return self._latest.get(memory_id)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._latest

    def find_same(self, content: str, tags: Iterable[str]) -> Memory | None:
        same = self._by_key.get(dedup_key(content, tags))
        return self._memory(same[0]) if same else None

    def repeats_of(self, memory: Memory) -> list[str]:
        """Ids of live memories with the same content and tags, this one included."""
        return list(self._by_key.get(memory.dedup_key, ()))

    def _memory(self, memory_id: str) -> Memory:
        memory = self._slots[self._slot_of[memory_id]]
        assert memory is not None
        return memory

    def tag_counts(self) -> list[tuple[str, int]]:
        """Known tags with their live memory counts, most used first."""
        counts = ((tag, len(slots)) for tag, slots in self._tag_slots.items())
        return sorted(counts, key=lambda item: (-item[1], item[0]))

    def primaries(self) -> Iterator[Memory]:
        """Live memories in file order, each repeat left out."""
        for memory in self._slots:
            if memory is not None and self._by_key[memory.dedup_key][0] == memory.id:
                yield memory

    def recent(self, limit: int) -> list[Memory]:
        return heapq.nlargest(limit, self.primaries(), key=lambda m: (m.ts, m.id))

    # -- recall ----------------------------------------------------------------------------

    def _text_scores(self, text: str) -> dict[int, float]:
        """BM25 over tags, content and context, field-weighted; slots that match any word."""
        scores: dict[int, float] = {}
        total = max(self._live, 1)
        for term in dict.fromkeys(terms(text)):
            posting = self._postings.get(term)
            if posting is None:
                continue
            slots, weights = posting
            idf = math.log(1 + (total - len(slots) + 0.5) / (len(slots) + 0.5))
            for slot, weight in zip(slots, weights, strict=True):
                gain = idf * weight * (_BM25_K1 + 1) / (weight + _BM25_K1)
                scores[slot] = scores.get(slot, 0.0) + gain
        return scores

    def _candidates(self, query: Query) -> Iterable[int]:
        if not query.tags:
            return range(len(self._slots))
        sets = [self._tag_slots.get(tag, set[int]()) for tag in query.tags]
        if query.all_tags:
            return sets[0].intersection(*sets[1:])
        return set[int]().union(*sets)

    def select(self, query: Query, limit: int) -> Selection:
        scores = self._text_scores(query.text) if query.text else None
        pool = self._candidates(query)
        if scores is not None:
            pool = scores.keys() if not query.tags else [s for s in pool if s in scores]
        matches: list[Memory] = []
        for slot in pool:
            memory = self._slots[slot]
            if memory is None or self._by_key[memory.dedup_key][0] != memory.id:
                continue
            if query.start is not None and memory.ts < query.start:
                continue
            if query.end is not None and memory.ts >= query.end:
                continue
            if query.type is not None and memory.type != query.type:
                continue
            matches.append(memory)
        if not matches:
            return Selection([], 0, None, None)
        if scores is None:
            ranked = heapq.nlargest(limit, matches, key=lambda m: (m.ts, m.id))
        else:
            ranked = heapq.nlargest(
                limit, matches, key=lambda m: (round(scores[self._slot_of[m.id]], 9), m.ts, m.id)
            )
        return Selection(
            ranked=ranked,
            total=len(matches),
            newest=max(m.ts for m in matches),
            oldest=min(m.ts for m in matches),
        )


@dataclass
class LogReader:
    """Where the index stands in the file, and what the file held that was not a record."""

    index: MemoryIndex = field(default_factory=MemoryIndex)
    # Bytes consumed; the last non-empty line consumed ends at `anchor_end`.
    offset: int = 0
    anchor: bytes = b""
    anchor_end: int = 0
    invalid_lines: int = 0
    # Bytes after the last newline that do not parse: a write cut short (or in progress).
    torn_tail: bool = False
    # The raw line of each id's last record, kept only when compacting.
    lines: dict[str, bytes] | None = None

    @property
    def anchor_start(self) -> int:
        return self.anchor_end - len(self.anchor)

    def continues(self, size: int, at_anchor: bytes) -> bool:
        """Whether a file of `size` bytes, holding `at_anchor` where the anchor was, is the
        file this reader read, perhaps with lines added."""
        return size >= self.offset and at_anchor == self.anchor

    def consume(self, data: bytes) -> list[Record]:
        """Parse `data`, the file's bytes from `offset` on; returns the records read."""
        records: list[Record] = []
        position = 0
        end = len(data)
        while position < end:
            newline = data.find(b"\n", position)
            complete = newline >= 0
            stop = newline + 1 if complete else end
            line = data[position:stop]
            record = decode(line) if line.strip() else None
            if not complete and record is None:
                # A line still being written, or cut by a crash: leave it unconsumed. If it
                # is torn for good, the next append's newline closes it and it is counted.
                self.torn_tail = bool(line.strip())
                break
            if record is not None:
                self.index.apply(record)
                records.append(record)
                if self.lines is not None:
                    self.lines[record.id] = line.rstrip(b"\n") + b"\n"
            elif line.strip():
                self.invalid_lines += 1
                self.index.dead_lines += 1
            if line.strip():
                self.anchor, self.anchor_end = line, self.offset + stop
            position = stop
        else:
            self.torn_tail = False
        self.offset += position
        return records
