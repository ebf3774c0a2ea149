# pyright: strict
"""A note's neighbourhood: what it links to, what links to it, and similar notes that are
not linked yet, each with the reason (the sentence holding the link, shared tags and
links, or the passage that matches)."""

import posixpath
from collections import Counter
from dataclasses import dataclass
from functools import partial

from obsidian_mcp.errors import NoteNotFound, VaultError
from obsidian_mcp.index.vectors import RANKED_FIRST
from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.reading import read_named
from obsidian_mcp.retrieval.corpus import (
    Chunk,
    NoteRecord,
    ProgressCallback,
    run_again_while_gone,
)
from obsidian_mcp.retrieval.links import is_attachment_target
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.retrieval.semantic import normalise_hits
from obsidian_mcp.text.snippets import snippet_around

# Characters of the sentence quoted to show why a link is there.
WHY_CHARS = 160
# Distinctive terms of a note that stand in for it as a keyword query.
_PROFILE_TERMS = 12
# Texts nearest a note's meaning looked through for its similar notes, at most: the first
# RANKED_FIRST come without sorting the rest; a vault of near-copies of one note may need
# more, and past this the list is shorter rather than slower.
_NEAREST_TEXTS = 2 * RANKED_FIRST


@dataclass(frozen=True, slots=True)
class Neighbour:
    """One related note. `path` is None for a link to a note that does not exist."""

    path: str | None
    name: str
    why: str
    # "passage" when `why` quotes the note, "summary" when this server wrote it.
    why_label: str
    score: float | None = None


@dataclass(frozen=True, slots=True)
class Related:
    path: str
    title: str
    outlinks: tuple[Neighbour, ...]
    backlinks: tuple[Neighbour, ...]
    similar: tuple[Neighbour, ...]
    similar_source: str
    total_outlinks: int
    total_backlinks: int
    attachments: int
    # Where the links and similar notes come from when it is not the obvious source (a
    # first build's notes read so far, the notes' text while Obsidian's link index is
    # pending); "" when nothing to say.
    links_note: str = ""


LINK_INDEX_PENDING = (
    "Obsidian's link index is not ready yet (it resolves links after start-up), so these "
    "links and backlinks are read from the notes' text; call again later for Obsidian's own."
)


def _quote(record: NoteRecord, start: int, end: int) -> str:
    return snippet_around(record.parsed.content, start, end, WHY_CHARS).text


def _shared(a: NoteRecord, b: NoteRecord, retriever: Retriever) -> str:
    """Why two notes belong together, from what they share."""
    tags = sorted(set(a.parsed.tags) & set(b.parsed.tags), key=str.lower)
    resolver = retriever.links.resolver_for(retriever.corpus)

    def targets(record: NoteRecord) -> set[str]:
        resolved = (resolver.resolve(link.target, record.path) for link in record.parsed.links)
        return {path for path in resolved if path is not None and path != record.path}

    links = sorted(targets(a) & targets(b))
    reasons: list[str] = []
    if tags:
        reasons.append("shared tags " + ", ".join("#" + t for t in tags[:4]))
    if links:
        names = ", ".join(posixpath.basename(p).removesuffix(".md") for p in links[:4])
        reasons.append("both link to " + names)
    return "; ".join(reasons)


async def _resolve_note(retriever: Retriever, raw_path: str) -> NoteRecord:
    path = normalize_vault_path(raw_path)
    corpus = retriever.corpus
    for candidate in (path, path + ".md"):
        # A note a first build has not read yet is read now.
        record = corpus.record(candidate) or await corpus.read_if_unread(candidate)
        if record is not None:
            return record
    # Not in the corpus: its name alone (`[[Rook]]`), or reading it says why not (a link
    # out of the vault, a pipe, missing).
    note = await read_named(retriever.vault, path)
    record = corpus.record(note.path) or await corpus.read_if_unread(note.path)
    if record is not None:
        return record
    raise NoteNotFound(path, await retriever.vault.closest_paths(path))


def _profile_terms(retriever: Retriever, record: NoteRecord) -> list[str]:
    """The note as a keyword query: its name and tags, then its most distinctive terms."""
    counts: Counter[str] = Counter()
    for terms_of in record.passage_terms():
        counts.update(terms_of)
    index = retriever.corpus.index
    distinctive = sorted(counts, key=lambda t: -counts[t] * index.idf(t))[:_PROFILE_TERMS]
    return [*record.label_terms, *distinctive]


async def _similar(
    retriever: Retriever, record: NoteRecord, exclude: set[str], limit: int
) -> tuple[list[Neighbour], str]:
    rest = retriever.vault.rest
    route = retriever.settings.related_route
    if rest is not None and route:
        try:
            hits = normalise_hits(await rest.post_json(route, {"path": record.path}))
        except VaultError:
            hits = []
        found = [
            Neighbour(h.path, posixpath.basename(h.path), h.text or "", "passage", h.score)
            for h in hits
            if h.path not in exclude and retriever.corpus.record(h.path) is not None
        ]
        if found:
            return found[:limit], f"custom route {route}"
    env = retriever.semantic.smart_env
    vectors = await env.vectors() if env is not None else None
    row = vectors.note_row(record.path) if vectors is not None else None
    if vectors is not None and row is not None:
        neighbours: list[Neighbour] = []
        nearest = vectors.nearest(vectors.matrix[row], limit=limit + len(exclude) + 1, blocks=False)
        for other_row, score in nearest:
            other = retriever.corpus.record(vectors.items[other_row].path)
            if other is None or other.path in exclude:
                continue
            why = _shared(record, other, retriever) or "similar meaning (stored vectors)"
            neighbours.append(Neighbour(other.path, other.title, why, "summary", score))
        return neighbours[:limit], "stored Smart Connections vectors"
    near = await _near_in_meaning(retriever, record, exclude, limit)
    if near is not None:
        return near, "meaning (the local passage index: the note's passages against every other)"
    scores = retriever.corpus.scores(_profile_terms(retriever, record))
    best: dict[str, tuple[float, int]] = {}
    for chunk_id, score in scores.items():
        path = retriever.corpus.chunk(chunk_id).path
        if path not in exclude and score > best.get(path, (0.0, 0))[0]:
            best[path] = (score, chunk_id)
    ranked = sorted(best.items(), key=lambda item: -item[1][0])[:limit]
    top = ranked[0][1][0] if ranked else 1.0
    found = [
        _neighbour(retriever, record, retriever.corpus.chunk(chunk_id), round(score / top, 2))
        for _, (score, chunk_id) in ranked
    ]
    return [n for n in found if n is not None], (
        "keywords (the note's name, tags and most distinctive words)"
    )


async def _near_in_meaning(
    retriever: Retriever, record: NoteRecord, exclude: set[str], limit: int
) -> list[Neighbour] | None:
    """The notes whose passages come nearest the note's meaning (the mean of its passages'
    vectors), each with its nearest passage; None while the local index lacks any of the
    note's vectors, or is off. At 10,000 notes the keyword profile took 310-570 ms a call
    (python -m bench.speed.index: its terms' postings, tens of thousands each); one pass
    over the vectors takes about 10."""
    vectors = await retriever.candidates.passage_vectors()
    if vectors is None:
        return None
    centre = vectors.centroid([d for chunk in record.chunks for d in chunk.text_hashes])
    if centre is None:
        return None
    corpus = retriever.corpus
    best: dict[str, tuple[float, Chunk]] = {}
    for seen, (digest, score) in enumerate(vectors.ranked(centre)):
        if len(best) >= limit or seen >= _NEAREST_TEXTS:
            break
        for chunk_id in sorted(corpus.chunks_of_text(digest)):
            chunk = corpus.chunk(chunk_id)
            if chunk.path not in exclude:  # nearest first: a note's first is its best
                best.setdefault(chunk.path, (score, chunk))
    found = [
        _neighbour(retriever, record, chunk, round(score, 2))
        for score, chunk in list(best.values())[:limit]
    ]
    return [n for n in found if n is not None]


def _neighbour(
    retriever: Retriever, record: NoteRecord, chunk: Chunk, score: float
) -> Neighbour | None:
    """A similar note, by its passage `chunk`: why, what the two share, else that passage."""
    other = retriever.corpus.record(chunk.path)
    if other is None:
        return None
    shared = _shared(record, other, retriever)
    if shared:
        return Neighbour(other.path, other.title, shared, "summary", score)
    why = _quote(other, chunk.start, chunk.start)
    return Neighbour(other.path, other.title, why, "passage", score)


async def _obsidian_backlinks(
    retriever: Retriever, record: NoteRecord
) -> tuple[tuple[str, ...] | None, bool]:
    """Obsidian's backlinks of the note, and whether its link index is still pending.

    A cached record can predate the index becoming ready, so a record without backlinks is
    asked for again from plugins that have an index that may be pending (6.0 on)."""
    if record.backlinks is not None:
        return record.backlinks, False
    rest = retriever.vault.rest
    if rest is None:
        return None, False
    try:
        if (await rest.server_info()).link_index_ready is None:
            return None, False  # before 6.0 links are never pending; 3.x has none
        note = await rest.read_note(record.path)
    except VaultError:
        return None, False  # Obsidian closed: the text is all there is, as with the folder
    return note.backlinks, note.link_index_pending


async def find_related(
    retriever: Retriever, raw_path: str, *, limit: int, progress: ProgressCallback | None = None
) -> Related:
    """The note's links, backlinks and similar notes; found again when a note it ranked is
    read again meanwhile (`run_again_while_gone`)."""
    return await run_again_while_gone(
        partial(_related, retriever, raw_path, limit=limit, progress=progress)
    )


async def _related(
    retriever: Retriever, raw_path: str, *, limit: int, progress: ProgressCallback | None
) -> Related:
    corpus = retriever.corpus
    # Not the whole of a first build's read: at 10,000 notes the first call waited 33 s for
    # it (python -m bench.speed.scale). The note is read now; its backlinks and similar
    # notes come from the notes read, and the answer says so.
    await corpus.sync(read_all=True, progress=progress, wait_seconds=retriever.first_read_wait())
    record = await _resolve_note(retriever, raw_path)
    resolver = retriever.links.resolver_for(corpus)

    outlinks: dict[str, Neighbour] = {}
    attachments = 0
    for link in record.parsed.links:
        if is_attachment_target(link.target):
            attachments += 1
            continue
        path = resolver.resolve(link.target, record.path)
        if path == record.path:
            continue
        key = path or link.target
        if key not in outlinks:
            outlinks[key] = Neighbour(
                path, link.target, _quote(record, link.start, link.end), "passage"
            )

    backlinks: dict[str, Neighbour] = {}
    obsidian_backlinks, pending = await _obsidian_backlinks(retriever, record)
    if obsidian_backlinks is not None:
        # Obsidian's own backlinks (REST 4.0+); the sentence comes from our copy.
        sites = {site.source: site for site in retriever.links.backlinks(corpus, record.path)}
        for source in obsidian_backlinks:
            site = sites.get(source)
            linking = corpus.record(source)
            why = _quote(linking, site.start, site.end) if site and linking else ""
            backlinks[source] = Neighbour(source, source, why, "passage")
    else:
        for site in retriever.links.backlinks(corpus, record.path):
            linking = corpus.record(site.source)
            if site.source not in backlinks and linking is not None:
                backlinks[site.source] = Neighbour(
                    site.source,
                    linking.parsed.title,
                    _quote(linking, site.start, site.end),
                    "passage",
                )

    linked = {record.path, *backlinks, *(n.path for n in outlinks.values() if n.path)}
    similar, source = await _similar(retriever, record, linked, limit)
    # Obsidian's own backlinks are whole; ours come from the notes read.
    partial = "similar notes" if obsidian_backlinks is not None else "backlinks and similar notes"
    reading = retriever.answered_unread(
        f"{partial} come from the notes read so far; ask again in a minute for all of them"
    )
    return Related(
        path=record.path,
        title=record.parsed.title,
        outlinks=tuple(list(outlinks.values())[:limit]),
        backlinks=tuple(list(backlinks.values())[:limit]),
        similar=tuple(similar),
        similar_source=source,
        total_outlinks=len(outlinks),
        total_backlinks=len(backlinks),
        attachments=attachments,
        links_note="; ".join(n for n in (reading, LINK_INDEX_PENDING if pending else "") if n),
    )
