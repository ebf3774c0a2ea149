"""Memories by meaning: their vectors, cached by content hash, searched as one matrix.

Vectors are stored in the memory cache (`vectors` table), never in the memory file, keyed by
the model and a hash of the content, so they outlive rebuilds of the index and are shared by
every process on the cache. In memory they form one float32 matrix, one row per distinct
content; a query is one matrix product.
"""

import logging
import sqlite3
from collections.abc import Callable, Sequence, Set

import anyio
import anyio.to_thread
import numpy as np

from obsidian_mcp.index.embedder import AsyncEmbedder, Embedder, Matrix
from obsidian_mcp.index.recipe import TextRole

logger = logging.getLogger(__name__)

# Cosine similarity from which a memory counts as close in meaning to a query, and how many
# of the closest take part in the fusion with words (`index.WORDS_CONFIDENT` says on what
# development set). Meaning weight 1, no period: the 30 nearest from 0.30 gave LoCoMo
# any@5 / any@10 / MRR@10 56.3 / 62.7 / 0.422, the 100 nearest 58.5 / 66.3 / 0.432 from
# 0.20 as from 0.0. With the period, WORDS_CONFIDENT 0.5: 50 nearest 60.7 / 68.8 / 0.449,
# 100 61.1 / 69.7 / 0.451, 200 61.5 / 71.4 / 0.454 (paraphrase hit@1 17 of 34 for all
# three; not yet tried at WORDS_CONFIDENT 0.6, where 100 gives 18); from 0.30, 61.0 / 69.6 /
# 0.450 and paraphrase hit@5 23 (25 from 0.20).
MEANING_FLOOR = 0.20
MOST_SIMILAR = 100


class MemoryVectors:
    """The embedder (loaded on first need) and the vectors of the memories seen so far."""

    def __init__(self, load: Callable[[], Embedder] | None) -> None:
        self._load = load
        # One inference at a time, in a worker thread (AsyncEmbedder).
        self._model: AsyncEmbedder | None = None
        # Why there is no meaning (the model failed to load), or None.
        self.problem: str | None = None if load is not None else "no embedding model is set up"
        self._loading = anyio.Lock()
        self._row_of: dict[bytes, int] = {}
        self._chunks: list[Matrix] = []
        self._matrix: Matrix | None = None
        # Index slots below this have their vectors here, for the index generation below.
        self.through_slot = 0
        self.generation = -1

    # -- the model -------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """Whether a model is set up and has not failed to load."""
        return self._load is not None and self.problem is None

    @property
    def embedder(self) -> Embedder | None:
        """The model if it is loaded; never waits."""
        return self._model.embedder if self._model is not None else None

    def describe(self) -> str:
        if self._model is not None:
            return f"{self._model.model_id}, {len(self._row_of):,} memory vectors"
        return f"unavailable: {self.problem}" if self.problem else "loading"

    async def load(self) -> Embedder | None:
        """The model, loaded in a worker thread on the first call; None if it cannot be."""
        async with self._loading:
            if self._model is None and self.problem is None and self._load is not None:
                try:
                    self._model = AsyncEmbedder(await anyio.to_thread.run_sync(self._load))
                except Exception as exc:  # any failure to load leaves recall by words
                    self.problem = f"the embedding model did not load ({exc})"
                    logger.warning("memory recall by meaning is off: %s", self.problem)
        return self.embedder

    async def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        assert self._model is not None
        return await self._model.embed(list(texts), role)

    # -- the matrix ------------------------------------------------------------------------

    def __contains__(self, content_hash: bytes) -> bool:
        return content_hash in self._row_of

    def __len__(self) -> int:
        return len(self._row_of)

    def keep_only(self, live: Set[bytes]) -> int:
        """Drop the vectors of contents no live memory has (forgotten ones); how many."""
        matrix = self._stacked()
        kept = [(h, row) for h, row in self._row_of.items() if h in live]
        dropped = len(self._row_of) - len(kept)
        if dropped and matrix is not None:
            self._matrix = matrix[[row for _, row in kept]]
            self._row_of = {h: n for n, (h, _) in enumerate(kept)}
        return dropped

    def add(self, hashes: Sequence[bytes], vectors: Matrix) -> None:
        fresh = [n for n, h in enumerate(hashes) if h not in self._row_of]
        for n in fresh:
            self._row_of[hashes[n]] = len(self._row_of)
        if fresh:
            self._chunks.append(vectors[fresh])

    def _stacked(self) -> Matrix | None:
        if self._chunks:
            parts = [self._matrix, *self._chunks] if self._matrix is not None else self._chunks
            self._matrix = np.concatenate(parts)
            self._chunks = []
        return self._matrix

    def nearest(
        self, query: Matrix, among: Set[bytes] | None = None, *, floor: float = MEANING_FLOOR
    ) -> dict[bytes, float]:
        """Cosine similarity of the closest memories to `query` (one row), by content hash,
        from `floor` up; only those `among` these content hashes when given (what a recall's
        filters keep: the closest of all may be none of them)."""
        matrix = self._stacked()
        if matrix is None:
            return {}
        similarity = matrix @ query[0]
        if among is None:
            rows = np.arange(len(similarity))
        else:
            held = self._row_of
            rows = np.fromiter((held[h] for h in among if h in held), dtype=np.intp)
        if not len(rows):
            return {}
        most = min(MOST_SIMILAR, len(rows))
        top = rows[np.argpartition(-similarity[rows], most - 1)[:most]]
        hashes = list(self._row_of)
        return {hashes[row]: float(similarity[row]) for row in top if similarity[row] >= floor}


def cached_vectors(
    db: sqlite3.Connection, model_id: str, hashes: Sequence[bytes]
) -> dict[bytes, Matrix]:
    """The vectors the cache holds for these content hashes."""
    found: dict[bytes, Matrix] = {}
    for first in range(0, len(hashes), 500):  # in parts: SQLite limits the parameters
        part = hashes[first : first + 500]
        rows = db.execute(
            f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN "
            f"({', '.join('?' * len(part))})",
            [model_id, *part],
        )
        for content_hash, blob in rows:
            found[content_hash] = np.frombuffer(blob, dtype=np.float32)
    return found


def drop_stale_vectors(db: sqlite3.Connection) -> set[bytes]:
    """Delete the cached vectors of contents no live memory has; the live contents."""
    db.execute("DELETE FROM vectors WHERE hash NOT IN (SELECT meaning FROM memories)")
    return {row[0] for row in db.execute("SELECT DISTINCT meaning FROM memories")}


def save_vectors(
    db: sqlite3.Connection, model_id: str, hashes: Sequence[bytes], vectors: Matrix
) -> None:
    db.executemany(
        "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
        [(model_id, h, vectors[n].astype(np.float32).tobytes()) for n, h in enumerate(hashes)],
    )
