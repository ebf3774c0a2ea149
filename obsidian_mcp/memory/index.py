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
# A query word found in a tag counts more: a tag is a deliberate label. Order: (tags, text).
_FIELD_WEIGHTS = (3.0, 1.0)


def terms(text: str) -> set[str]:
    """The distinct words of `text` a query can match: lower-cased, common words dropped,
    plural and singular merged ("dragons" finds "dragon"); nothing fancier is needed for
    short memories."""
    return {
        w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] != "s" else w
        for w in set(_WORD.findall(text.casefold())) - _STOPWORDS
    }


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
        # Live ids per dedup key, in file order; the first is the memory, the rest repeats,
        # whose slots recall skips.
        self._by_key: dict[tuple[str, frozenset[str]], list[str]] = {}
        self._repeats: set[int] = set()
        self._tag_slots: dict[str, set[int]] = {}
        self._retired: set[int] = set()
        # Each slot's time as epoch seconds: time filters and recency order without objects.
        self._epoch = array("d")
        # Per word, the slots holding it in tags, and in content or context (compact
        # arrays: 100,000 memories make millions of postings).
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
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
        if same:
            self._repeats.add(slot)
            self.dead_lines += 1
        same.append(memory.id)
        for tag in memory.tags:
            self._tag_slots.setdefault(tag, set()).add(slot)
        self._epoch.append(memory.ts.timestamp())
        fields = (" ".join(memory.tags).replace("/", " "), memory.content + " " + memory.context)
        for field_number, text in enumerate(fields):
            for term in terms(text):
                posting = self._postings.get(term)
                if posting is None:
                    posting = self._postings[term] = (array("I"), array("I"))
                posting[field_number].append(slot)

    def _retire(self, memory: Memory) -> None:
        slot = self._slot_of.pop(memory.id)
        self._slots[slot] = None
        self._retired.add(slot)
        self._live -= 1
        same = self._by_key[memory.dedup_key]
        if len(same) > 1:
            self.dead_lines -= 1  # one repeat fewer; the retired line is counted by apply
            if same[0] == memory.id:
                self._repeats.discard(self._slot_of[same[1]])  # the next one takes over
        self._repeats.discard(slot)
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
        return self._live_slot(self._slot_of[same[0]]) if same else None

    def repeats_of(self, memory: Memory) -> list[str]:
        """Ids of live memories with the same content and tags, this one included."""
        return list(self._by_key.get(memory.dedup_key, ()))

    def tag_counts(self) -> list[tuple[str, int]]:
        """Known tags with their live memory counts, most used first."""
        counts = ((tag, len(slots)) for tag, slots in self._tag_slots.items())
        return sorted(counts, key=lambda item: (-item[1], item[0]))

    def primaries(self) -> Iterator[Memory]:
        """Live memories in file order, each repeat left out."""
        for slot, memory in enumerate(self._slots):
            if memory is not None and slot not in self._repeats:
                yield memory

    def recent(self, limit: int) -> list[Memory]:
        return heapq.nlargest(limit, self.primaries(), key=lambda m: (m.ts, m.id))

    # -- recall ----------------------------------------------------------------------------

    def _text_scores(self, text: str) -> dict[int, float]:
        """Slots holding any word of `text`, scored by the words' rarity (idf) and where
        each occurs (tags over content and context)."""
        scores: dict[int, float] = {}
        score_of = scores.get
        total = max(self._live, 1)
        for term in terms(text):
            fields = self._postings.get(term)
            if fields is None:
                continue
            frequency = max(len(slots) for slots in fields)
            idf = math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))
            for weight, slots in zip(_FIELD_WEIGHTS, fields, strict=True):
                gain = idf * weight
                for slot in slots:
                    scores[slot] = score_of(slot, 0.0) + gain
        return scores

    def select(self, query: Query, limit: int) -> Selection:
        """The memories matching `query`: the best `limit` (by score, then recency; by
        recency alone without text), and how many matched in all, over which span."""
        # Set operations over slot numbers keep the per-memory work in C: a recall over
        # 100,000 memories must stay well under 50 ms.
        scores = self._text_scores(query.text) if query.text else None
        pool = set(scores) if scores is not None else set(range(len(self._slots)))
        if query.tags:
            tagged = [self._tag_slots.get(tag, set[int]()) for tag in query.tags]
            pool &= tagged[0].intersection(*tagged[1:]) if query.all_tags else set[int]().union(
                *tagged
            )
        pool -= self._retired
        pool -= self._repeats
        epoch = self._epoch
        if query.start is not None or query.end is not None:
            low = query.start.timestamp() if query.start is not None else -math.inf
            high = query.end.timestamp() if query.end is not None else math.inf
            pool = {slot for slot in pool if low <= epoch[slot] < high}
        if query.type is not None:
            pool = {slot for slot in pool if self._type_of(slot) == query.type}
        if not pool:
            return Selection([], 0, None, None)
        # Equal times (one clock tick) fall back to file order: the later line is newer.
        if scores is None:
            best = heapq.nlargest(limit, pool, key=lambda slot: (epoch[slot], slot))
        else:
            best = heapq.nlargest(
                limit, pool, key=lambda slot: (scores[slot], epoch[slot], slot)
            )
        return Selection(
            ranked=[self._live_slot(slot) for slot in best],
            total=len(pool),
            newest=self._live_slot(max(pool, key=epoch.__getitem__)).ts,
            oldest=self._live_slot(min(pool, key=epoch.__getitem__)).ts,
        )

    def _live_slot(self, slot: int) -> Memory:
        memory = self._slots[slot]
        assert memory is not None
        return memory

    def _type_of(self, slot: int) -> str | None:
        return self._live_slot(slot).type


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
