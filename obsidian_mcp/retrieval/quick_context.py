# pyright: strict
"""An extractive overview of a topic: which notes hold it, who and what they link to,
which tags run through them, and a few key passages. Nothing is invented: counts and
lists are labelled `summary`, quotes are labelled `passage`."""

from collections import Counter
from dataclasses import dataclass
from functools import partial

from obsidian_mcp.errors import InvalidArgument
from obsidian_mcp.retrieval.corpus import ProgressCallback, run_again_while_gone
from obsidian_mcp.retrieval.cutting import PassageHit, focus_window, passage_hit
from obsidian_mcp.retrieval.links import is_attachment_target
from obsidian_mcp.retrieval.packing import FileContext, shorten
from obsidian_mcp.retrieval.search import Retriever, file_context

# Passages read to build the overview; more than a search shows, fewer than a note holds.
_DEPTH = 15
_MAIN_FILES = 5
_ENTITIES = 8
_THEMES = 8
_PREVIEWS = 3
_PREVIEW_CHARS = 240
# Folder names and tags that mark a note as a character, person, place or thing.
ENTITY_MARKERS = frozenset(
    {
        "character", "characters", "people", "person", "npc", "npcs", "companion",
        "place", "places", "location", "locations", "faction", "factions", "item",
        "items", "creature", "creatures", "god", "gods", "deity",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Entity:
    path: str
    name: str
    kind: str
    mentions: int


@dataclass(frozen=True, slots=True)
class QuickContext:
    topic: str
    source: str
    passages_found: int
    files_found: int
    main_files: tuple[FileContext, ...]
    entities: tuple[Entity, ...]
    themes: tuple[tuple[str, int], ...]
    previews: tuple[PassageHit, ...]
    # The reply's budget; `render_topics.within_budget` cuts the overview to it.
    max_tokens: int


def entity_kind(path: str, tags: tuple[str, ...]) -> str | None:
    """What kind of entity a note is, by its folders or tags; None for other notes."""
    for part in reversed(path.lower().split("/")[:-1]):
        if part in ENTITY_MARKERS:
            return part
    for tag in tags:
        for piece in tag.lower().split("/"):
            if piece in ENTITY_MARKERS:
                return piece
    return None


async def quick_context(
    retriever: Retriever,
    topic: str,
    *,
    max_tokens: int | None = None,
    progress: ProgressCallback | None = None,
) -> QuickContext:
    """The topic's overview; made again when a note it ranked is read again meanwhile
    (`run_again_while_gone`)."""
    if not topic.strip():
        raise InvalidArgument("topic is empty; name a person, place, event or idea.")
    budget = max_tokens or retriever.settings.max_tokens
    return await run_again_while_gone(
        partial(_overview, retriever, topic, budget=budget, progress=progress)
    )


async def _overview(
    retriever: Retriever, topic: str, *, budget: int, progress: ProgressCallback | None
) -> QuickContext:
    found = await retriever.ranked_passages(topic, folder="", progress=progress)
    ranked = found.ranked
    corpus = retriever.corpus
    resolver = retriever.links.resolver_for(corpus)
    weighted = retriever.weighted_terms(topic)

    top = found.top_score
    hits: list[PassageHit] = []
    for chunk_id, score in ranked[:_DEPTH]:
        chunk = corpus.chunk(chunk_id)
        record = corpus.record(chunk.path)
        if record is not None:
            start, end = focus_window(record, chunk, weighted)
            hits.append(passage_hit(record, start, end, round(score / top, 2)))

    files = list(dict.fromkeys(hit.path for hit in hits))
    records = [r for r in (corpus.record(path) for path in files) if r is not None]
    themes: Counter[str] = Counter(tag for record in records for tag in record.parsed.tags)

    mentions: Counter[str] = Counter()
    for hit in hits:
        record = corpus.record(hit.path)
        if record is None:
            continue
        for link in record.parsed.links:
            if hit.start <= link.start < hit.end and not is_attachment_target(link.target):
                target = resolver.resolve(link.target, hit.path)
                if target is not None and target != hit.path:
                    mentions[target] += 1
    for record in records:  # a hit note that is itself an entity counts too
        mentions[record.path] += 1
    entities: list[Entity] = []
    for path, count in mentions.most_common():
        record = corpus.record(path)
        kind = entity_kind(path, record.parsed.tags) if record is not None else None
        if record is not None and kind is not None:
            entities.append(Entity(path, record.title, kind, count))
        if len(entities) >= _ENTITIES:
            break

    previews: list[PassageHit] = []
    for hit in hits:
        if len(previews) >= _PREVIEWS:
            break
        if any(p.path == hit.path for p in previews):
            continue
        short = shorten(hit, _PREVIEW_CHARS)
        if short is not None:
            previews.append(short)

    main = [file_context(record) for record in records[:_MAIN_FILES]]
    return QuickContext(
        topic=topic,
        source=found.source,
        passages_found=found.total,
        files_found=len({corpus.chunk(c).path for c, _ in ranked}),
        main_files=tuple(main),
        entities=tuple(entities),
        themes=tuple(themes.most_common(_THEMES)),
        previews=tuple(previews),
        max_tokens=budget,
    )
