# pyright: strict
"""Smart Connections' stored vectors, read from `<vault>/.smart-env/` without Obsidian.

Two layouts (reference `local-rest-api.md` §2.4 and its November 2026 update):

- legacy: `multi/*.ajson`, append-only lines `"smart_sources:<path>": {...},` and
  `"smart_blocks:<path>#H1##H2": {...},` with the vector inline at
  `embeddings.<model key>.vec`;
- Smart Environment v3: records in `smart_sources/smart_sources.ajson` then shards
  `smart_sources_1.ajson`, … (same line format; blocks nested in `blocks_data`), vectors in
  flat little-endian float32 files `smart_sources/mf_<hash>` and `smart_blocks/mf_<hash>`.
  A record points at its row with `embedding.default[mf_<hash>] = {file, file_i, at,
  read_hash}` (older records: `embedding.default = {file, …}`); the row starts at float
  index `file_i * dims`, and the files carry no header, so `dims` is found from the rows.

In both, later lines win and `null` deletes. v3 wins when both exist: Smart Connections
leaves `multi/` in place, frozen, after it migrates.

A vector is used only while it is fresh: its record's `read_hash` equals the item's
`last_read.hash` (else Smart Connections knows the item changed and has not re-embedded it
yet), and the note on disk still hashes to its source's `last_read.hash` (else the note was
edited while Obsidian was closed). Which model made the vectors is decided by their
dimension and a parity check against the local model (`same_model`), not by the name in
`smart_env.json`, which can be stale.
"""

import json
import logging
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import anyio.to_thread
import numpy as np
import numpy.typing as npt

from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.smart_blocks import block_text, hash_matches, read_note

if TYPE_CHECKING:  # the model's runtime is loaded only where a model is used
    from obsidian_mcp.index.embedder import Embedder

logger = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]
Layout = Literal["v3", "legacy"]

# How long a loaded set of vectors is trusted before the files' stats are checked again.
# Vectors only rank; the text shown always comes from the fresh note, so a few seconds of
# lag after Smart Connections re-embeds cannot show stale text.
_RECHECK_SECONDS = 5.0
_REPEAT_SUFFIX_RE = re.compile(r"\{\d+\}$")
_SHARD_RE = re.compile(r"^smart_sources(?:_(\d+))?\.ajson$")
# Vector sizes of the embedding models Smart Connections offers (reference §2.4 model table,
# plus OpenAI's 1536/3072), tried in turn when a vector file's row size must be inferred.
_COMMON_DIMS = (384, 256, 512, 768, 1024, 1536, 2048, 3072, 4096)
# Stored vectors are unit length (mean pooling with `normalize: true`); a row cut at the
# wrong size is not (two halves of unit vectors have norms far from 1).
_UNIT_NORM_TOLERANCE = 0.02
# Blocks embedded for the parity check, and their size limit in characters: short enough to
# fit every model's sequence limit (all-MiniLM-L6-v2: 256 word pieces ~ 1,000 characters of
# English), so truncation cannot make the same model disagree with itself.
PARITY_SAMPLE = 8
_PARITY_MAX_CHARS = 600
# The same model agrees with itself far above this, a different model far below: on the
# fixture vaults the int8 local model against the float vectors Smart Connections would store
# gives a median cosine of 0.999 (tests/test_smart_env.py), while unrelated texts under one
# model score 0.0-0.4, and vectors of two different models are unrelated directions.
PARITY_MIN_COSINE = 0.95


@dataclass(frozen=True, slots=True)
class VectorItem:
    key: str
    path: str
    # Heading path of a block; () for a whole note.
    headings: tuple[str, ...]
    # 1-indexed inclusive line range of a block; None for a whole note.
    lines: tuple[int, int] | None
    # The note's `last_read.hash` when Smart Connections last read it: the note is unchanged
    # since while it still hashes to this. "" when the record does not say.
    note_hash: str = ""


@dataclass(frozen=True, slots=True)
class BlockVector:
    """A stored block vector, as the passage index takes it."""

    path: str
    headings: tuple[str, ...]
    lines: tuple[int, int]
    vector: Matrix


def parse_ajson(text: str) -> dict[str, Any]:
    """The items of one AJSON log: later lines win, `null` deletes, torn lines are skipped."""
    items: dict[str, Any] = {}
    _replay(items, text)
    return items


def _replay(items: dict[str, Any], text: str) -> None:
    for raw in text.splitlines():
        line = raw.strip().rstrip(",")
        if not line:
            continue
        try:
            entry = json.loads("{" + line + "}")
        except ValueError:
            continue
        for key, value in cast(dict[str, Any], entry).items():
            if value is None:
                items.pop(key, None)
            else:
                items[key] = value


def split_block_key(key: str) -> tuple[str, tuple[str, ...]]:
    """`'Note.md#Top##Sub'` -> `('Note.md', ('Top', 'Sub'))`; repeat suffixes `{n}` dropped."""
    path, _, rest = key.partition("#")
    headings = [_REPEAT_SUFFIX_RE.sub("", part).strip() for part in re.split(r"#+", rest)]
    return path, tuple(h for h in headings if h)


def model_key(env_dir: Path, items: dict[str, Any]) -> str | None:
    """The model `smart_env.json` names, else the single model the vectors use."""
    try:
        settings = json.loads((env_dir / "smart_env.json").read_text("utf-8"))
        embed = settings["smart_sources"]["embed_model"]
        return str(embed[embed["adapter"]]["model_key"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    seen: set[str] = set()
    for value in items.values():
        if not isinstance(value, dict):
            continue
        embeddings = cast(dict[str, Any], value).get("embeddings")
        if isinstance(embeddings, dict):
            seen.update(str(k) for k in cast(dict[str, Any], embeddings))
    return seen.pop() if len(seen) == 1 else None


@dataclass(frozen=True)
class StoredVectors:
    # The model's name as Smart Connections records it ("" when it does not say); whether it
    # is our model is `same_model`'s question.
    model: str
    layout: Layout
    items: tuple[VectorItem, ...]
    # One unit-length row per item.
    matrix: Matrix
    by_path: dict[str, tuple[int, ...]] = field(default_factory=dict[str, tuple[int, ...]])

    @property
    def dims(self) -> int:
        return int(self.matrix.shape[1])

    def note_row(self, path: str) -> int | None:
        for row in self.by_path.get(path, ()):
            if self.items[row].lines is None:
                return row
        return None

    def row_for_line(self, path: str, line: int) -> int | None:
        """The narrowest block of `path` holding 1-indexed `line`, else the note's vector."""
        best: tuple[int, int] | None = None
        for row in self.by_path.get(path, ()):
            lines = self.items[row].lines
            if lines is not None and lines[0] <= line <= lines[1]:
                width = lines[1] - lines[0]
                if best is None or width < best[0]:
                    best = (width, row)
        return best[1] if best is not None else self.note_row(path)

    def centroid(self, weighted_rows: list[tuple[int, float]]) -> Matrix | None:
        if not weighted_rows:
            return None
        rows = [row for row, _ in weighted_rows]
        weights = np.array([weight for _, weight in weighted_rows], dtype=np.float32)
        mean = (self.matrix[rows] * weights[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(mean))
        return cast(Matrix, mean / norm) if norm else None

    def nearest(
        self, vector: Matrix, *, limit: int, blocks: bool, prefix: str = ""
    ) -> list[tuple[int, float]]:
        """The `limit` rows most cosine-similar to `vector`: blocks (or whole notes), under
        the folder `prefix`."""
        similarities = self.matrix @ vector
        candidates = [
            row
            for row, item in enumerate(self.items)
            if (item.lines is not None) == blocks and item.path.startswith(prefix)
        ]
        if not candidates:
            return []
        chosen = np.array(candidates)
        scores = similarities[chosen]
        count = min(limit, len(candidates))
        top = np.argpartition(-scores, count - 1)[:count]
        ordered = top[np.argsort(-scores[top])]
        return [(int(chosen[i]), float(scores[i])) for i in ordered]

    def fresh_blocks(self, path: str, text: str) -> list[BlockVector]:
        """The block vectors of note `path`, if they were made from `text` (the note as it is
        now); [] when the note changed since Smart Connections read it, or has no blocks."""
        rows = self.by_path.get(path, ())
        if not rows or not hash_matches(self.items[rows[0]].note_hash, text):
            return []
        out: list[BlockVector] = []
        for row in rows:
            item = self.items[row]
            if item.lines is not None:
                out.append(BlockVector(item.path, item.headings, item.lines, self.matrix[row]))
        return out

    def without(self, paths: set[str]) -> "StoredVectors":
        """The same vectors minus every item of the notes in `paths`."""
        keep = [row for row, item in enumerate(self.items) if item.path not in paths]
        return _assemble(self.model, self.layout, [self.items[r] for r in keep], self.matrix[keep])


def _assemble(model: str, layout: Layout, items: list[VectorItem], matrix: Matrix) -> StoredVectors:
    by_path: dict[str, list[int]] = {}
    for row, item in enumerate(items):
        by_path.setdefault(item.path, []).append(row)
    return StoredVectors(
        model, layout, tuple(items), matrix, {p: tuple(rows) for p, rows in by_path.items()}
    )


def _normalised(vectors: Sequence[Matrix]) -> Matrix:
    matrix = np.array(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return cast(Matrix, matrix / np.where(norms == 0, 1, norms))


# -- legacy: multi/*.ajson, vectors inline ------------------------------------------------


def _last_read_hash(data: dict[str, Any]) -> str:
    last_read = data.get("last_read")
    if isinstance(last_read, dict):
        value = cast(dict[str, Any], last_read).get("hash")
        if isinstance(value, str):
            return value
    return ""


def _legacy_vector(data: dict[str, Any], model: str) -> Matrix | None:
    """The inline vector for `model`, unless its `last_embed.hash` shows an older text."""
    embeddings = data.get("embeddings")
    if not isinstance(embeddings, dict):
        return None
    entry = cast(dict[str, Any], embeddings).get(model)
    if not isinstance(entry, dict):
        return None
    entry = cast(dict[str, Any], entry)
    vec = entry.get("vec")
    if not isinstance(vec, list) or not vec:
        return None
    last_embed = entry.get("last_embed")
    embedded = (
        cast(dict[str, Any], last_embed).get("hash") if isinstance(last_embed, dict) else None
    )
    read = _last_read_hash(data)
    if isinstance(embedded, str) and read and embedded != read:
        return None
    return np.array(vec, dtype=np.float32)


def read_legacy(env_dir: Path) -> StoredVectors | None:
    """Every current note and block vector in `multi/*.ajson`, or None if there are none."""
    multi = env_dir / "multi"
    raw: dict[str, Any] = {}
    for file in sorted(multi.glob("*.ajson")) if multi.is_dir() else []:
        try:
            raw.update(parse_ajson(file.read_text("utf-8")))
        except OSError:
            continue
    model = model_key(env_dir, raw)
    if model is None:
        return None
    note_hashes = {
        key.partition(":")[2]: _last_read_hash(cast(dict[str, Any], value))
        for key, value in raw.items()
        if key.startswith("smart_sources:") and isinstance(value, dict)
    }
    items: list[VectorItem] = []
    vectors: list[Matrix] = []
    for full_key, value in raw.items():
        collection, _, key = full_key.partition(":")
        if not isinstance(value, dict):
            continue
        data = cast(dict[str, Any], value)
        vec = _legacy_vector(data, model)
        if vec is None or (vectors and len(vec) != len(vectors[0])):
            continue
        if collection == "smart_sources":
            items.append(VectorItem(key, key, (), None, note_hashes.get(key, "")))
        elif collection == "smart_blocks" and isinstance(data.get("lines"), list):
            path, headings = split_block_key(key)
            start, end = (int(n) for n in cast(list[Any], data["lines"])[:2])
            items.append(VectorItem(key, path, headings, (start, end), note_hashes.get(path, "")))
        else:
            continue
        vectors.append(vec)
    if not vectors:
        return None
    return _assemble(model, "legacy", items, _normalised(vectors))


# -- v3: smart_sources/*.ajson records, mf_* vector files ---------------------------------


def v3_shards(env_dir: Path) -> list[Path]:
    """The record shards in replay order; [] unless the base `smart_sources.ajson` exists
    (Smart Connections treats the base file as the mark of a committed v3 layout)."""
    folder = env_dir / "smart_sources"
    if not (folder / "smart_sources.ajson").is_file():
        return []
    numbered: list[tuple[int, Path]] = []
    for file in folder.glob("smart_sources*.ajson"):
        match = _SHARD_RE.match(file.name)
        if match:
            numbered.append((int(match.group(1) or 0), file))
    return [file for _, file in sorted(numbered)]


@dataclass(frozen=True, slots=True)
class _Ref:
    collection: Literal["smart_sources", "smart_blocks"]
    file: str
    file_i: int
    item: VectorItem


def _refs(embedding: object) -> list[dict[str, Any]]:
    """The vector references of one item: `default` is one ref, or refs by fingerprint."""
    if not isinstance(embedding, dict):
        return []
    default = cast(dict[str, Any], embedding).get("default")
    if not isinstance(default, dict):
        return []
    default = cast(dict[str, Any], default)
    if "file" in default:
        return [default]
    return [cast(dict[str, Any], ref) for ref in default.values() if isinstance(ref, dict)]


def _current_refs(
    data: dict[str, Any], collection: Literal["smart_sources", "smart_blocks"], item: VectorItem
) -> Iterable[_Ref]:
    """Refs whose `read_hash` is the item's `last_read.hash` (when the item records one)."""
    read = _last_read_hash(data)
    for ref in _refs(data.get("embedding")):
        file, file_i = ref.get("file"), ref.get("file_i")
        if not isinstance(file, str) or not isinstance(file_i, int) or file_i < 0:
            continue
        if read and ref.get("read_hash") != read:
            continue
        yield _Ref(collection, file, file_i, item)


def _v3_refs(records: dict[str, Any]) -> list[_Ref]:
    refs: list[_Ref] = []
    for full_key, value in records.items():
        collection, _, path = full_key.partition(":")
        if collection != "smart_sources" or not isinstance(value, dict):
            continue
        source = cast(dict[str, Any], value)
        note_hash = _last_read_hash(source)
        refs.extend(
            _current_refs(source, "smart_sources", VectorItem(path, path, (), None, note_hash))
        )
        refs.extend(_block_refs(path, note_hash, source.get("blocks_data")))
    return refs


def _block_refs(path: str, note_hash: str, blocks_data: object) -> list[_Ref]:
    """The current refs of a source record's `blocks_data` (sub key -> block record)."""
    if not isinstance(blocks_data, dict):
        return []
    refs: list[_Ref] = []
    for sub_key, value in cast(dict[str, Any], blocks_data).items():
        if not isinstance(value, dict):
            continue
        block = cast(dict[str, Any], value)
        lines = block.get("lines")
        if not isinstance(lines, list) or len(cast(list[Any], lines)) < 2:
            continue
        start, end = (int(n) for n in cast(list[Any], lines)[:2])
        key = path + sub_key
        item = VectorItem(key, path, split_block_key(key)[1], (start, end), note_hash)
        refs.extend(_current_refs(block, "smart_blocks", item))
    return refs


def _row_size(values: Matrix, rows: Sequence[int]) -> int | None:
    """The vector size of a headerless float32 file: the common size whose referenced rows
    are unit length."""
    sample = sorted(set(rows))[:16]
    for dims in _COMMON_DIMS:
        if values.size % dims or values.size // dims <= max(rows):
            continue
        norms = np.linalg.norm(values.reshape(-1, dims)[sample], axis=1)
        if bool(np.all(np.abs(norms - 1.0) <= _UNIT_NORM_TOLERANCE)):
            return dims
    return None


def read_v3(env_dir: Path) -> StoredVectors | None:
    """Every current note and block vector of the v3 layout, or None if there are none."""
    records: dict[str, Any] = {}
    for shard in v3_shards(env_dir):
        try:
            _replay(records, shard.read_text("utf-8"))
        except OSError:
            continue
    refs = _v3_refs(records)
    if not refs:
        return None
    # One vector file per model fingerprint; the one most items point at is the model in use.
    counts: dict[str, int] = {}
    for ref in refs:
        counts[ref.file] = counts.get(ref.file, 0) + 1
    chosen = max(counts, key=lambda name: counts[name])
    items: list[VectorItem] = []
    vectors: list[Matrix] = []
    dims_seen: set[int] = set()
    for collection in ("smart_sources", "smart_blocks"):
        mine = [r for r in refs if r.file == chosen and r.collection == collection]
        path = env_dir / collection / chosen
        if not mine or not path.is_file():
            continue
        try:
            values = np.fromfile(path, dtype="<f4")
        except (OSError, ValueError):
            continue
        dims = _row_size(values, [r.file_i for r in mine])
        if dims is None:
            logger.warning("skipping %s: its rows are not unit vectors of a known size", path)
            continue
        dims_seen.add(dims)
        table = values.reshape(-1, dims)
        for ref in mine:
            items.append(ref.item)
            vectors.append(table[ref.file_i])
    if not vectors or len(dims_seen) != 1:
        return None
    return _assemble(model_key(env_dir, {}) or "", "v3", items, _normalised(vectors))


def load_vectors(env_dir: Path) -> StoredVectors | None:
    """The vectors of the layout in use: v3 if it exists (the legacy folder is then a
    frozen leftover), else legacy."""
    if v3_shards(env_dir):
        return read_v3(env_dir)
    return read_legacy(env_dir)


# -- freshness against the notes on disk --------------------------------------------------


class NoteHashes:
    """Whether notes on disk still hash to what Smart Connections read, cached by stat, so
    a re-check reads and hashes only the notes that changed."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._seen: dict[str, tuple[int, int, str, bool]] = {}

    def matches(self, path: str, stored_hash: str) -> bool:
        file = self._root / path
        try:
            st = file.stat()
            cached = self._seen.get(path)
            if cached is not None and cached[:3] == (st.st_mtime_ns, st.st_size, stored_hash):
                return cached[3]
            same = bool(stored_hash) and hash_matches(stored_hash, file.read_text("utf-8"))
        except (OSError, UnicodeDecodeError):
            return False
        self._seen[path] = (st.st_mtime_ns, st.st_size, stored_hash, same)
        return same


def stale_paths(vectors: StoredVectors, hashes: NoteHashes) -> set[str]:
    """Notes whose stored vectors were made from a text the note no longer has."""
    stale: set[str] = set()
    for path, rows in vectors.by_path.items():
        if not hashes.matches(path, vectors.items[rows[0]].note_hash):
            stale.add(path)
    return stale


def fresh_vectors(env_dir: Path, hashes: NoteHashes | None = None) -> StoredVectors | None:
    """`load_vectors` without the vectors of notes changed since Smart Connections read
    them (the vault is the folder holding `.smart-env`)."""
    vectors = load_vectors(env_dir)
    if vectors is None:
        return None
    stale = stale_paths(vectors, hashes or NoteHashes(env_dir.parent))
    if stale:
        logger.info("%d notes changed since Smart Connections embedded them", len(stale))
    return vectors.without(stale) if stale else vectors


# -- which model made them ------------------------------------------------------------------


def parity_pairs(vectors: StoredVectors, root: Path) -> list[tuple[str, int]]:
    """Up to PARITY_SAMPLE (embedded text, row) pairs of short blocks whose note is
    unchanged, rebuilt from the notes the way Smart Connections builds a block's text."""
    pairs: list[tuple[str, int]] = []
    for path, rows in vectors.by_path.items():
        if len(pairs) >= PARITY_SAMPLE:
            break
        try:
            content = (root / path).read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not hash_matches(vectors.items[rows[0]].note_hash, content):
            continue
        blocks = {(b.start, b.end): b for b in read_note(path, content).blocks}
        for row in rows:
            lines = vectors.items[row].lines
            block = blocks.get(lines) if lines is not None else None
            if block is not None and len(block_text(block)) <= _PARITY_MAX_CHARS:
                pairs.append((block_text(block), row))
                break
    return pairs


def same_model(vectors: StoredVectors, embedder: "Embedder", root: Path) -> bool:
    """Whether Smart Connections' vectors come from `embedder`'s model: same dimension, and
    its stored vectors of a few unchanged blocks agree with ours (median cosine at least
    PARITY_MIN_COSINE). Blocking: it embeds a few texts."""
    if vectors.dims != embedder.dims:
        return False
    pairs = parity_pairs(vectors, root)
    if not pairs:
        return False
    ours = embedder.embed([text for text, _ in pairs], TextRole.DOCUMENT)
    theirs = vectors.matrix[[row for _, row in pairs]]
    cosines = (ours * theirs).sum(axis=1)
    median = statistics.median(float(c) for c in cosines)
    logger.info("Smart Connections parity with %s: median cosine %.4f", embedder.model_id, median)
    return median >= PARITY_MIN_COSINE


# -- cache for the query path ------------------------------------------------------------------


# Each file of a `.smart-env` folder: (path in the folder, modification time, size).
Signature = tuple[tuple[str, int, int], ...]


def _signature(env_dir: Path) -> Signature:
    files = [env_dir / "smart_env.json"]
    for folder in ("multi", "smart_sources", "smart_blocks"):
        if (env_dir / folder).is_dir():
            files.extend((env_dir / folder).iterdir())
    signature: list[tuple[str, int, int]] = []
    for file in files:
        try:
            st = file.stat()
        except OSError:
            continue
        signature.append((file.relative_to(env_dir).as_posix(), st.st_mtime_ns, st.st_size))
    return tuple(sorted(signature))


T = TypeVar("T")


class InThread(Generic[T]):
    """A result worked out once, in a daemon thread of its own, started by the first call
    that wants it: a question can go on without it while it is not `ready`."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._work = work
        self._name = name
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._result: T | None = None

    def ready(self) -> bool:
        """Whether the result is in; the first call starts the work."""
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        return self._done.is_set()

    @property
    def result(self) -> T | None:
        """The result once `ready` (None if the work failed: the log says why)."""
        return self._result

    async def wait(self) -> T | None:
        if not self.ready():
            await anyio.to_thread.run_sync(self._done.wait, abandon_on_cancel=True)
        return self._result

    def settle(self) -> None:
        """Wait for the work if it started."""
        with self._start:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            self._result = self._work()
        except Exception:
            logger.exception("%s failed", self._name)
        finally:
            self._done.set()


class SmartEnvCache:
    """The fresh vectors of one `.smart-env` folder, reloaded when its files change and
    re-checked against the notes every few seconds.

    The first reading of the files and the check of which model made them each read every
    note: at 10,000 notes 2.1 s and 0.6 s alone, 9 s and 5 s beside a first build that
    reads the vault. Each runs in a thread of its own, so a question during a first build
    goes on without them (`loaded`, `made_by_if_known`) instead of waiting."""

    def __init__(self, env_dir: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._env_dir = env_dir
        self._clock = clock
        self._hashes = NoteHashes(env_dir.parent)
        self._signature: Signature | None = None
        self._loaded: StoredVectors | None = None
        self._stale: set[str] = set()
        self._vectors: StoredVectors | None = None
        self._checked = -_RECHECK_SECONDS
        self._lock = anyio.Lock()
        self._first_load = InThread(self._load_first, "reading Smart Connections' vectors")
        # Whether the vectors as last loaded come from a given model: the check of (files'
        # signature, model id). It embeds a few blocks, so it runs once per change of files.
        self._model_check: tuple[tuple[Signature | None, str], InThread[bool]] | None = None

    def loaded(self) -> bool:
        """Whether the files have been read once; the first call starts reading them."""
        return self._first_load.ready()

    async def until_loaded(self) -> None:
        """Wait for the files' first reading (started if need be), and nothing else: a
        re-check cancelled half-way would leave the old vectors trusted for a while."""
        await self._first_load.wait()

    def settle(self) -> None:
        """Wait for a model check under way: it runs ONNX Runtime, which must not be running
        in another thread when the process exits (see `EmbedderSlot.settle`). Reading the
        files is Python alone and is left to end with the process."""
        if self._model_check is not None:
            self._model_check[1].settle()

    async def vectors(self) -> StoredVectors | None:
        await self._first_load.wait()
        async with self._lock:
            now = self._clock()
            if now - self._checked < _RECHECK_SECONDS:
                return self._vectors
            self._checked = now
            self._vectors = await anyio.to_thread.run_sync(self._refresh)
            return self._vectors

    async def made_by(self, embedder: "Embedder") -> bool:
        """Whether Smart Connections embedded with `embedder`'s model (`same_model`), so
        its stored block vectors and a query embedded by `embedder` share one space."""
        return bool(await (await self._check_of(embedder)).wait())

    async def made_by_if_known(self, embedder: "Embedder") -> bool | None:
        """`made_by` if it is known, else None (the first call starts the check)."""
        check = await self._check_of(embedder)
        return check.result if check.ready() else None

    async def _check_of(self, embedder: "Embedder") -> InThread[bool]:
        async with self._lock:
            key = (self._signature, embedder.vector_space)
            if self._model_check is None or self._model_check[0] != key:
                loaded = self._loaded
                work = (
                    partial(same_model, loaded, embedder, self._env_dir.parent)
                    if loaded is not None
                    else partial(bool, False)  # no vectors: made by no model
                )
                self._model_check = key, InThread(work, "checking Smart Connections' model")
            return self._model_check[1]

    def _load_first(self) -> StoredVectors | None:
        self._vectors = self._refresh()
        self._checked = self._clock()
        return self._vectors

    def _refresh(self) -> StoredVectors | None:
        signature = _signature(self._env_dir)
        reloaded = signature != self._signature
        if reloaded:
            self._loaded = load_vectors(self._env_dir)
            self._signature = signature
            logger.info(
                "loaded %d stored vectors (%s layout) from %s",
                len(self._loaded.items) if self._loaded else 0,
                self._loaded.layout if self._loaded else "no",
                self._env_dir,
            )
        if self._loaded is None:
            return None
        stale = stale_paths(self._loaded, self._hashes)
        if reloaded or stale != self._stale:
            self._stale = stale
            return self._loaded.without(stale) if stale else self._loaded
        return self._vectors
