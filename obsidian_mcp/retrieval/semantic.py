# pyright: strict
"""Semantic sources, tried in order; the first that answers wins and names itself.

1. `POST /search/smart` (the mcp-tools extension), when `GET /` lists it.
2. A custom route configured by the user (`semantic_route`), whose result shape varies.
3. Smart Connections' stored vectors: ranked by the query embedded with the local model
   when Smart Connections used that same model (`smart-env`; its block vectors are reused,
   never computed again), else by pseudo-relevance feedback from the best keyword hits.
4. Nothing: the caller ranks by keywords alone (`lexical-fallback`).

A source that fails (404, 503, unreachable) is skipped for a while instead of being asked
again on every query.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import anyio

from obsidian_mcp.errors import VaultError
from obsidian_mcp.index.embedder import Embedder, Matrix
from obsidian_mcp.index.smart_env import SmartEnvCache, StoredVectors, split_block_key
from obsidian_mcp.paths import is_markdown
from obsidian_mcp.sources.rest import RestSource

logger = logging.getLogger(__name__)

SourceName = Literal[
    "smart-search", "custom-route", "smart-env", "smart-env-prf", "lexical-fallback"
]
# How long a failed source is left alone before it is tried again.
_RETRY_AFTER_SECONDS = 60.0
# Keyword hits whose vectors make up the feedback query.
PRF_SEEDS = 5


@dataclass(frozen=True, slots=True)
class SemanticHit:
    """One ranked note or block. `text` is what the source returned, if anything."""

    path: str
    headings: tuple[str, ...]
    score: float
    text: str | None = None
    # 1-indexed inclusive line range, when the source gives one (stored vectors).
    lines: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class SemanticAnswer:
    source: SourceName
    hits: tuple[SemanticHit, ...]
    # Why earlier sources were skipped, for the response's source line.
    note: str = ""


@dataclass(frozen=True, slots=True)
class Seed:
    """A keyword hit offered for pseudo-relevance feedback: a note path and a line in it."""

    path: str
    line: int
    weight: float


def _first(row: dict[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if row.get(key) is not None:
            return row[key]
    return None


def normalise_hits(body: object) -> list[SemanticHit]:
    """Hits from the shapes bridges return: a list, or `{"results"|"hits"|"data": [...]}`,
    of rows naming the note as `path`/`filename`/`key`/`file` (a `#...` suffix is a block's
    heading path), the score as `score`/`similarity`/`relevance`, the text as
    `text`/`content`/`snippet`. Rows without a usable path are dropped."""
    rows: object = body
    if isinstance(body, dict):
        envelope = cast(dict[str, Any], body)
        rows = _first(envelope, ("results", "hits", "data", "matches"))
    if not isinstance(rows, list):
        return []
    hits: list[SemanticHit] = []
    for entry in cast(list[object], rows):
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, dict):
            continue
        row = cast(dict[str, Any], entry)
        raw_path = _first(row, ("path", "filename", "key", "file"))
        if not isinstance(raw_path, str) or not raw_path.strip():
            continue
        path, headings = split_block_key(raw_path.strip())
        if not is_markdown(path):
            path += ".md"
        score = _first(row, ("score", "similarity", "relevance"))
        text = _first(row, ("text", "content", "snippet"))
        hits.append(
            SemanticHit(
                path=path,
                headings=headings,
                score=float(score) if isinstance(score, int | float) else 0.0,
                text=text if isinstance(text, str) else None,
            )
        )
    return hits


@dataclass(frozen=True, slots=True)
class LocalQuery:
    """The query as the local model embeds it, and that model (to tell whether Smart
    Connections' vectors share its space)."""

    embedder: Embedder
    vector: Matrix


def nearest_blocks(
    vectors: StoredVectors, query: Matrix, *, limit: int, folder: str
) -> list[SemanticHit]:
    """The stored blocks nearest to a query vector, within the folder."""
    prefix = folder + "/" if folder else ""
    hits: list[SemanticHit] = []
    for row, score in vectors.nearest(query, limit=limit, blocks=True, prefix=prefix):
        item = vectors.items[row]
        hits.append(SemanticHit(item.path, item.headings, score, lines=item.lines))
    return hits


def prf_hits(
    vectors: StoredVectors, seeds: Sequence[Seed], *, limit: int, folder: str
) -> list[SemanticHit]:
    """Blocks nearest to the weighted mean of the seed passages' block vectors."""
    weighted: list[tuple[int, float]] = []
    for seed in seeds[:PRF_SEEDS]:
        row = vectors.row_for_line(seed.path, seed.line)
        if row is not None:
            weighted.append((row, seed.weight))
    query = vectors.centroid(weighted)
    if query is None:
        return []
    return nearest_blocks(vectors, query, limit=limit, folder=folder)


class SemanticSources:
    """The semantic sources of one vault, with the memory of which ones failed lately."""

    def __init__(
        self, rest: RestSource | None, custom_route: str | None, smart_env: SmartEnvCache | None
    ) -> None:
        self._rest = rest
        self._custom_route = custom_route
        self._smart_env = smart_env
        self._failed_until: dict[SourceName, float] = {}

    def _usable(self, name: SourceName) -> bool:
        return time.monotonic() >= self._failed_until.get(name, 0.0)

    def _failed(self, name: SourceName, exc: Exception) -> str:
        self._failed_until[name] = time.monotonic() + _RETRY_AFTER_SECONDS
        logger.info("semantic source %s failed: %s", name, exc)
        return f"{name} failed ({str(exc)[:80]})"

    @property
    def smart_env(self) -> SmartEnvCache | None:
        return self._smart_env

    async def search(
        self,
        query: str,
        *,
        folder: str,
        limit: int,
        seeds: Sequence[Seed],
        local: LocalQuery | None = None,
        read_wait: float = 0.0,
    ) -> SemanticAnswer:
        """The first semantic source that answers. Smart Connections' stored vectors are
        read, and their model checked, in threads of their own: a question waits for that
        at most `read_wait` seconds (beside a first build's reading of 10,000 notes it took
        14 s) and goes on without them, saying so."""
        notes: list[str] = []
        rest = self._rest
        if rest is not None and self._usable("smart-search"):
            try:
                if (await rest.server_info()).has_smart_search:
                    rows = await rest.smart_search(
                        query, folders=[folder + "/"] if folder else None, limit=limit
                    )
                    return SemanticAnswer("smart-search", tuple(normalise_hits(rows)))
            except VaultError as exc:
                notes.append(self._failed("smart-search", exc))
        if rest is not None and self._custom_route and self._usable("custom-route"):
            try:
                body = await rest.post_json(self._custom_route, {"query": query})
                prefix = folder + "/" if folder else ""
                hits = [h for h in normalise_hits(body) if h.path.startswith(prefix)]
                return SemanticAnswer("custom-route", tuple(hits[:limit]), "; ".join(notes))
            except VaultError as exc:
                notes.append(self._failed("custom-route", exc))
        env = self._smart_env
        if env is not None:
            with anyio.move_on_after(read_wait):
                await env.until_loaded()
                if local is not None:
                    await env.made_by(local.embedder)
        if env is not None and not env.loaded():
            notes.append("Smart Connections' vectors are being read")
        elif env is not None:
            vectors = await env.vectors()
            # Until its model is known, as if it were another.
            if (
                vectors is not None
                and local is not None
                and await env.made_by_if_known(local.embedder)
            ):
                hits = nearest_blocks(vectors, local.vector, limit=limit, folder=folder)
                return SemanticAnswer("smart-env", tuple(hits), "; ".join(notes))
            if vectors is not None and seeds:
                hits = prf_hits(vectors, seeds, limit=limit, folder=folder)
                return SemanticAnswer("smart-env-prf", tuple(hits), "; ".join(notes))
        return SemanticAnswer("lexical-fallback", (), "; ".join(notes))
