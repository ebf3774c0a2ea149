# pyright: strict
"""Passage vectors for search, and the background work that makes them.

`PassageVectors` is the stored vectors of one model as one int8 matrix in memory, grown by
what was stored since it last looked (by this process or another one sharing the file), so a
query costs one matrix product. `EmbeddingBuilder` embeds, in a background thread, every
passage text that has no vector yet, a batch per transaction, so a first build of a large
vault never holds up a query and a process that stops half-way loses one batch at most.
"""

import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from itertools import islice
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from obsidian_mcp.index import shortlist
from obsidian_mcp.index.bulk import collector_paused
from obsidian_mcp.index.coding import Codes
from obsidian_mcp.index.embedder import Embedder, Matrix
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.shortlist import SHORTLIST_SIZE, Projection, Shortlisted, shortlisted
from obsidian_mcp.index.store import IndexStore

logger = logging.getLogger(__name__)

Row = TypeVar("Row", bound=np.generic)

# Texts embedded and committed together. Queries share the model with the build and wait
# for the batch in hand: with 16, the warm query median during a build was 850 ms on this
# 2-core machine under load (python -m bench.speed.index, 1,000 notes); texts are short
# runs of sentences, so smaller batches cost little throughput and bound that wait.
BUILD_BATCH = 4
# How much lower the background build's thread runs than the server's other threads
# (Linux gives each thread its own nice value; 10 weighs it at about a tenth of a call's
# thread when both want a core). A question embeds its best keyword passages beside the
# build (`index_on_demand_passages`); on two cores the build's thread took the time that
# needed (python -m bench.speed.first_day).
BUILD_NICENESS = 10
# Texts taken per look-up of what is left to embed. A look-up reads on from where the last
# one stopped (`IndexStore.unembedded`), so its cost is that of the texts it returns and
# the size only sets how often the builder asks.
PENDING_PER_LOOKUP = 256
# Texts ranked by a partial sort before the rest is sorted at all (the order is the same
# either way). A query reads texts until it has search's _DENSE_DEPTH (20) passages in
# its folder, so only a narrow folder reads past this. At 159,646 scores: 1.5 ms against
# 12.3 ms for a full argsort, the same at 512 or 2,048 (numpy, loaded machine).
RANKED_FIRST = 512
# Stored vectors read per look-up while loading (1.6 MB of codes): one SQLite query and
# one join per batch, not per row.
LOAD_BATCH = 4096
# Room a first load leaves beside the stored rows, as a share of them: an edit's few new
# vectors, and stale ones up to the share that prunes them (candidates.STALE_VECTORS_SHARE),
# fit without a copy. Reserving only the stored rows, the first edit on a built
# 10,000-note index copied the 61 MB matrix into one twice its size (136 ms of the
# question after it, 61 MB more resident).
LOAD_HEADROOM = 0.1
# Growth past the room: by a quarter, so a build that loads batch by batch copies each
# row a bounded number of times (linear) while the unused tail stays under a fifth.
GROWTH = 1.25
# Coded values turned to float32 per matrix product when scoring: 4,096 rows of 384 (6 MB)
# took 7.4 ms a query at 160,000 rows, 16,384 took 10.3 ms (cache-sized blocks; loaded
# machine). Counted in values, so the shortlist's narrower rows go four times as many a block.
SCORE_BLOCK_VALUES = 4096 * 384


class PassageVectors:
    """Stored vectors of one model, as rows of one int8 matrix, by passage text hash.

    The rows are held as stored, int8 codes with a scale each (`coding.quantized`), a
    quarter of float32: at the 159,646 texts of the generated 10,000-note vault, 62 MB
    instead of 245 MB of a server's 661 MB (python -m bench.speed.index --prebuilt). A
    score is off by at most 0.002 of cosine similarity there, and a query costs 7 ms
    instead of 4 (codes turned to float32 a block at a time, then one matrix product per
    block)."""

    def __init__(self, model: str, dims: int) -> None:
        self.model = model
        self._seq = 0
        self._loaded = False
        self._rows: dict[str, int] = {}
        self._hashes: list[str] = []
        self._codes: Codes = np.zeros((0, dims), dtype=np.int8)
        self._scales: Matrix = np.zeros(0, dtype=np.float32)
        # The shortlist (`shortlist`), once SHORTLIST_FROM_ROWS rows are held: each row's
        # projection, coded, in the same places and with the same room as `_codes`.
        self._projection: Projection | None = None
        self._short_codes: Codes = np.zeros((0, 0), dtype=np.int8)
        self._short_scales: Matrix = np.zeros(0, dtype=np.float32)
        # Counts `keep_only`'s reorderings: a fit that saw rows in an older order is void.
        self._layout = 0
        self._fitting = threading.Lock()
        self._fit_thread: threading.Thread | None = None
        # One refresh, drop or ranking at a time (each takes what it needs and lets go).
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, digest: str) -> bool:
        return digest in self._rows

    def lacking(self, digests: Collection[str]) -> set[str]:
        """Those of the texts with no vector held."""
        with self._lock:
            rows = self._rows
            # Twice as fast as set(digests).difference(rows) on 160,000 texts (no copy).
            return {digest for digest in digests if digest not in rows}

    def refresh(self, store: IndexStore) -> int:
        """Take in the vectors stored since the last refresh; how many arrived."""
        # Queries refresh from worker threads: two at once would read the same new rows
        # and take them in twice (1 of 500 calls failed so under python -m bench.speed.http_load).
        with self._lock, collector_paused():
            # A first load takes the model's snapshot (`IndexStore.save_vector_snapshot`),
            # then the rows stored after it, which may hold a text it holds (pruned from the
            # rows since, then embedded again).
            # Whether this is the first refresh, not whether rows are held: after `keep_only`
            # dropped every row, the snapshot would bring them back.
            first_load = not self._loaded
            self._loaded = True
            arrived = self._take_snapshot(store) if first_load else 0
            known_possible = not first_load or arrived > 0
            while True:
                seq, hashes, codes, scales = store.vectors_since(self.model, self._seq, LOAD_BATCH)
                self._seq = seq
                if codes is None:
                    break
                arrived += self._take_in(hashes, codes, scales, known_possible=known_possible)
            self._shortlist_when_large()
            return arrived

    def _shortlist_when_large(self) -> None:
        """Fit the shortlist in a background thread once enough rows are held: 1.2 s at
        801,960 rows, which a query would otherwise wait for; queries meanwhile score
        every row."""
        fitting = self._fit_thread is not None and self._fit_thread.is_alive()
        if (
            self._projection is None
            and len(self._hashes) >= shortlist.SHORTLIST_FROM_ROWS
            and not fitting
        ):
            self._fit_thread = threading.Thread(
                target=self.fit_shortlist, name="vector-shortlist", daemon=True
            )
            self._fit_thread.start()

    def fit_shortlist(self) -> bool:
        """Find the shortlist's projection from the rows held and project every row;
        whether it is in place (not if `keep_only` reordered the rows meanwhile: the next
        refresh fits again)."""
        with self._fitting:
            with self._lock:
                if self._projection is not None:
                    return True
                fitted_rows, layout = len(self._hashes), self._layout
                codes, scales = self._codes[:fitted_rows], self._scales[:fitted_rows]
            if not fitted_rows:
                return False
            found = shortlisted(codes, scales)
            with self._lock:
                if self._layout != layout:
                    return False
                self._put_shortlist(found)
                return True

    def _put_shortlist(self, found: Shortlisted) -> None:
        """Put in place a shortlist found from the first rows held (the rows stored since
        are projected now), in the room `_codes` has. Under `_lock`, or before any ranking."""
        done, held, room = len(found.codes), len(self._hashes), len(self._scales)
        self._short_codes = _regrown(found.codes, room, done)
        self._short_scales = _regrown(found.scales, room, done)
        found.projection.project(
            self._codes[done:held],
            self._scales[done:held],
            self._short_codes[done:held],
            self._short_scales[done:held],
        )
        self._projection = found.projection

    def _take_snapshot(self, store: IndexStore) -> int:
        """Room for every stored row at once, then the rows of the model's snapshot, if it
        has one; how many."""
        snapshot = store.vector_snapshot(self.model)
        through_seq = 0 if snapshot is None else snapshot.through_seq
        stored = store.vector_count(self.model, after_seq=through_seq)
        if snapshot is not None:
            stored += len(snapshot.hashes)
        self._reserve(stored + math.ceil(stored * LOAD_HEADROOM))
        if snapshot is None:
            return 0
        self._seq = through_seq
        taken = self._take_in(
            snapshot.hashes, snapshot.codes, snapshot.scales, known_possible=False
        )
        if snapshot.shortlisted is not None:  # its rows are the snapshot's, the first held
            self._put_shortlist(snapshot.shortlisted)
        return taken

    def _reserve(self, rows: int) -> None:
        """Room for `rows` rows in all (never less than is held)."""
        held = len(self._hashes)
        if rows <= len(self._scales):
            return
        # New objects, not grown ones: a ranking under way keeps reading the old.
        self._codes = _regrown(self._codes, rows, held)
        self._scales = _regrown(self._scales, rows, held)
        if self._projection is not None:
            self._short_codes = _regrown(self._short_codes, rows, held)
            self._short_scales = _regrown(self._short_scales, rows, held)

    def _take_in(
        self, hashes: list[str], codes: Codes, scales: Matrix, *, known_possible: bool
    ) -> int:
        """Add rows; with `known_possible`, skip texts held already. The index stores a
        text once per model, but a text whose vector was pruned and then embedded again
        (edited away and back) arrives again under a new seq; a first load needs no check."""
        if known_possible:
            fresh = [i for i, digest in enumerate(hashes) if digest not in self._rows]
            if len(fresh) < len(hashes):
                hashes, codes, scales = [hashes[i] for i in fresh], codes[fresh], scales[fresh]
        held = len(self._hashes)
        needed = held + len(hashes)
        if needed > len(self._scales):
            self._reserve(max(needed, math.ceil(GROWTH * len(self._scales))))
        self._codes[held:needed], self._scales[held:needed] = codes, scales
        if self._projection is not None:
            self._projection.project(
                codes, scales, self._short_codes[held:needed], self._short_scales[held:needed]
            )
        self._rows.update(zip(hashes, range(held, needed), strict=True))
        self._hashes.extend(hashes)
        return len(hashes)

    def keep_only(self, digests: Collection[str], rows_seen: int) -> int:
        """Drop the rows of texts not among `digests` (no passage has them any more), of the
        first `rows_seen` rows (those held when `digests` was taken; later ones are new);
        how many were dropped."""
        with self._lock:
            kept = [
                row
                for row, digest in enumerate(self._hashes)
                if row >= rows_seen or digest in digests
            ]
            dropped = len(self._hashes) - len(kept)
            if dropped:
                hashes = [self._hashes[row] for row in kept]
                self._rows = {digest: row for row, digest in enumerate(hashes)}
                # New objects, not changed ones: a ranking under way keeps reading the old.
                self._hashes = hashes
                self._codes, self._scales = self._codes[kept], self._scales[kept]
                if self._projection is not None:
                    self._short_codes = self._short_codes[kept]
                    self._short_scales = self._short_scales[kept]
                self._layout += 1
            return dropped

    def ranked(self, query: Matrix) -> Iterator[tuple[str, float]]:
        """Every stored text by cosine similarity to the query vector (unit length), nearest
        first. Past SHORTLIST_FROM_ROWS rows the nearest come from the shortlist (its
        SHORTLIST_SIZE best, scored exactly), and a caller reading past them gets the rest
        scored exactly; a text the shortlist missed comes after it, out of order."""
        # The rows and the hashes they belong to are taken together; a refresh adds rows
        # after them or swaps in new arrays, and `keep_only` swaps in new objects, so they
        # stay in step without the lock.
        with self._lock:
            hashes = self._hashes
            held = len(hashes)
            codes, scales = self._codes[:held], self._scales[:held]
            projection = self._projection
            short_codes, short_scales = self._short_codes[:held], self._short_scales[:held]
        if projection is None or held <= SHORTLIST_SIZE:
            scores = _similarities(codes, scales, query)
            for row in _best_first(scores):
                yield hashes[row], float(scores[row])
            return
        near = _similarities(short_codes, short_scales, projection.query(query))
        shortlist = np.argpartition(-near, SHORTLIST_SIZE)[:SHORTLIST_SIZE]
        scores = _similarities(codes[shortlist], scales[shortlist], query)
        for rank in np.argsort(-scores):
            yield hashes[shortlist[rank]], float(scores[rank])
        rest = _similarities(codes, scales, query)
        rest[shortlist] = -np.inf
        for row in islice(_best_first(rest), held - SHORTLIST_SIZE):
            yield hashes[row], float(rest[row])

    def centroid(self, digests: Collection[str]) -> Matrix | None:
        """The unit-length mean of these texts' vectors (a note's, standing for the note);
        None unless every one has a vector."""
        with self._lock:
            rows = [self._rows.get(digest) for digest in digests]
            found = [row for row in rows if row is not None]
            if not found or len(found) < len(rows):
                return None
            mean = (self._codes[found].astype(np.float32) * self._scales[found, None]).mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return None if norm == 0 else mean / norm

    def similarity(self, query: Matrix, digests: Iterable[str]) -> dict[str, float]:
        """Cosine similarity of the query vector to those of the given texts that have one."""
        with self._lock:
            rows = {digest: self._rows[digest] for digest in digests if digest in self._rows}
            if not rows:
                return {}
            picked = list(rows.values())
            scores = _similarities(self._codes[picked], self._scales[picked], query)
        return dict(zip(rows, scores.tolist(), strict=True))


def _best_first(scores: Matrix) -> Iterator[int]:
    """The rows by score, best first: the best RANKED_FIRST picked without sorting the
    rest, which is sorted only if the caller reads on (`scores` is spent)."""
    if len(scores) <= RANKED_FIRST:
        yield from np.argsort(-scores).tolist()
        return
    nearest = np.argpartition(-scores, RANKED_FIRST)[:RANKED_FIRST]
    nearest = nearest[np.argsort(-scores[nearest])]
    yield from nearest.tolist()
    scores[nearest] = -np.inf
    for row in np.argsort(-scores)[: len(scores) - RANKED_FIRST]:  # one at a time, as read
        yield int(row)


def _regrown(rows: npt.NDArray[Row], room: int, held: int) -> npt.NDArray[Row]:
    """A new array of `room` rows, zeros past the first `held`, which are these."""
    grown = np.zeros((room, *rows.shape[1:]), dtype=rows.dtype)
    grown[:held] = rows[:held]
    return grown


def _similarities(codes: Codes, scales: Matrix, query: Matrix) -> Matrix:
    """Each coded row's dot product with the query, a block of rows at a time: numpy has no
    fast int8 product, and turning all 159,646 rows to float32 at once would take back
    the 183 MB the codes save."""
    block_rows = max(1, SCORE_BLOCK_VALUES // max(1, codes.shape[1]))
    scores = np.empty(len(codes), dtype=np.float32)
    block = np.empty((min(block_rows, len(codes)), codes.shape[1]), dtype=np.float32)
    for first in range(0, len(codes), block_rows):
        rows = codes[first : first + block_rows]
        floats = block[: len(rows)]
        np.copyto(floats, rows, casting="unsafe")
        np.matmul(floats, query, out=scores[first : first + len(rows)])
    return scores * scales


class EmbedderSlot:
    """An embedding model loaded once, in a worker thread, the first time it is wanted; the
    ONNX session takes a second or more to load, which must not hold up start-up."""

    def __init__(self, load: Callable[[], Embedder]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._embedder: Embedder | None = None
        self._preloading: threading.Thread | None = None

    def preload(self) -> None:
        """Start loading the model in a background thread."""
        self._preloading = threading.Thread(target=self.get, name="embedding-model", daemon=True)
        self._preloading.start()

    def settle(self) -> None:
        """Wait for a load under way: a process must not exit while ONNX Runtime is loading
        in another thread (its C++ runtime aborts the process)."""
        if self._preloading is not None:
            self._preloading.join()

    @property
    def loaded(self) -> Embedder | None:
        """The model if it is loaded; never waits."""
        return self._embedder

    def get(self) -> Embedder:
        """The model, loaded now if needed (blocking: call it from a worker thread)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = self._load()
            return self._embedder


class EmbeddingBuilder:
    """Embeds every passage text without a vector, in one background thread at a time."""

    def __init__(self, store: IndexStore, embedder: EmbedderSlot) -> None:
        self._store = store
        self._embedder = embedder
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.failure: str | None = None

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Start the background build if it is not running; it stops when all is embedded."""
        with self._lock:
            if self.running or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="passage-embedding", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        lower_this_threads_priority(BUILD_NICENESS)
        try:
            self.run_until_done()
        except Exception as exc:  # the thread's last word: logged and shown in the status
            logger.exception("embedding passages failed")
            self.failure = f"{type(exc).__name__}: {exc}"

    def run_until_done(
        self, on_batch: Callable[[int], None] | None = None, *, side_by_side: int = 1
    ) -> int:
        """Embed batch after batch until nothing is left; how many texts were embedded.
        Every passage's first text goes first, the rest after: a passage is found by
        meaning once any of its texts has a vector, so a first build makes the whole vault
        searchable by meaning in the time of one text a passage (at 10,000 generated
        notes 66,690 of 159,646 texts), then sharpens it.

        `side_by_side` batches are embedded at once, each on a thread of its own (one ONNX
        thread each), for a build in the foreground (`obsidian-mcp index`), which has no
        calls to leave a core for: on two cores the model alone embedded 116-120 of the
        index's texts a second so, against 63-65 one batch at a time. The server's
        background build keeps to one."""
        embedder = self._embedder.get()
        done = 0
        # One batch at a time runs on this thread, at its priority (`BUILD_NICENESS`).
        with (
            ThreadPoolExecutor(side_by_side, thread_name_prefix="passage-embedding")
            if side_by_side > 1
            else nullcontext()
        ) as pool:
            for firsts_only in (True, False):
                after = 0
                while not self._stop.is_set():
                    pending, after_these = self._store.unembedded(
                        embedder.vector_space, PENDING_PER_LOOKUP, after, firsts_only=firsts_only
                    )
                    if not pending:
                        if after == 0:
                            break
                        after = 0  # once more from the start, for texts stored behind it
                        continue
                    after = after_these
                    done += self._embed(embedder, pending, on_batch, pool)
        if done and not self._stop.is_set():
            self._store.save_vector_snapshot(embedder.vector_space)
        return done

    def _embed(
        self,
        embedder: Embedder,
        pending: list[tuple[str, str]],
        on_batch: Callable[[int], None] | None,
        pool: ThreadPoolExecutor | None,
    ) -> int:
        """Embed and store `pending` a batch at a time (until stopped), on this thread or
        side by side on `pool`'s; how many were. `on_batch` is told on this thread."""
        batches = [
            pending[first : first + BUILD_BATCH] for first in range(0, len(pending), BUILD_BATCH)
        ]
        embed = partial(self._embed_batch, embedder)
        done = 0
        for count in map(embed, batches) if pool is None else pool.map(embed, batches):
            done += count
            if on_batch is not None and count:
                on_batch(count)
        return done

    def _embed_batch(self, embedder: Embedder, batch: list[tuple[str, str]]) -> int:
        """Embed and store one batch; 0 once the build is stopped."""
        if self._stop.is_set():
            return 0
        vectors = embedder.embed([text for _, text in batch], TextRole.DOCUMENT)
        self._store.put_vectors(embedder.vector_space, [digest for digest, _ in batch], vectors)
        return len(batch)

    def stop(self) -> None:
        """Stop after the batch in hand (its vectors are kept). Waits for it: a process must
        not exit while ONNX Runtime runs in another thread (its C++ runtime aborts)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join()


def lower_this_threads_priority(by: int) -> None:
    """Raise the calling thread's nice value by `by` (at most to 19). Only on Linux, where a
    thread's own id names it to setpriority; elsewhere that id is no process's, and the
    build runs at the server's priority."""
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    try:
        niceness = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, niceness + by))
    except OSError as exc:  # a sandbox that forbids it: the build runs as it is
        logger.debug("the embedding build keeps its priority: %s", exc)
