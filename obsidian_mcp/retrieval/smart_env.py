# pyright: strict
"""Smart Connections' stored vectors, read from `<vault>/.smart-env/` without Obsidian.

Layout (reference §2.4): `smart_env.json` names the embedding model at
`smart_sources.embed_model.<adapter>.model_key`; `multi/*.ajson` hold append-only lines
`"smart_sources:<path>": {...},` and `"smart_blocks:<path>#H1##H2": {...},` where later
lines win and `null` deletes. A block's `lines` is a 1-indexed inclusive line range.

There is no query embedder at run time (no model ships with the server), so vectors serve
two things: note-to-note similarity, and pseudo-relevance feedback, where the vectors of
the best keyword hits stand in for the query's own.
"""

import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio.to_thread
import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]

# How long a loaded set of vectors is trusted before the files' stats are checked again.
# Vectors only rank; the text shown always comes from the fresh note, so a few seconds of
# lag after Smart Connections re-embeds cannot show stale text.
_RECHECK_SECONDS = 5.0
_REPEAT_SUFFIX_RE = re.compile(r"\{\d+\}$")


@dataclass(frozen=True, slots=True)
class VectorItem:
    key: str
    path: str
    # Heading path of a block; () for a whole note.
    headings: tuple[str, ...]
    # 1-indexed inclusive line range of a block; None for a whole note.
    lines: tuple[int, int] | None


def parse_ajson(text: str) -> dict[str, Any]:
    """The items of one AJSON log: later lines win, `null` deletes, torn lines are skipped."""
    items: dict[str, Any] = {}
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
    return items


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


def _vector(value: dict[str, Any], model: str) -> list[float] | None:
    embeddings = value.get("embeddings")
    if not isinstance(embeddings, dict):
        return None
    entry = cast(dict[str, Any], embeddings).get(model)
    vec = cast(dict[str, Any], entry).get("vec") if isinstance(entry, dict) else None
    if not isinstance(vec, list) or not vec:
        return None
    return [float(x) for x in cast(list[Any], vec)]


@dataclass(frozen=True)
class StoredVectors:
    model: str
    items: tuple[VectorItem, ...]
    # One unit-length row per item.
    matrix: Matrix
    by_path: dict[str, tuple[int, ...]]

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


def load_vectors(env_dir: Path) -> StoredVectors | None:
    """Every note and block vector for the configured model, or None if there are none."""
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
    items: list[VectorItem] = []
    vectors: list[list[float]] = []
    for full_key, value in raw.items():
        collection, _, key = full_key.partition(":")
        if not isinstance(value, dict):
            continue
        data = cast(dict[str, Any], value)
        vec = _vector(data, model)
        if vec is None or (vectors and len(vec) != len(vectors[0])):
            continue
        if collection == "smart_sources":
            items.append(VectorItem(key, key, (), None))
        elif collection == "smart_blocks" and isinstance(data.get("lines"), list):
            path, headings = split_block_key(key)
            start, end = (int(n) for n in cast(list[Any], data["lines"])[:2])
            items.append(VectorItem(key, path, headings, (start, end)))
        else:
            continue
        vectors.append(vec)
    if not vectors:
        return None
    matrix = np.array(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms == 0, 1, norms)
    by_path: dict[str, list[int]] = {}
    for row, item in enumerate(items):
        by_path.setdefault(item.path, []).append(row)
    return StoredVectors(
        model, tuple(items), matrix, {path: tuple(rows) for path, rows in by_path.items()}
    )


def _signature(env_dir: Path) -> tuple[tuple[str, int, int], ...]:
    files = [env_dir / "smart_env.json"]
    multi = env_dir / "multi"
    if multi.is_dir():
        files.extend(multi.glob("*.ajson"))
    signature: list[tuple[str, int, int]] = []
    for file in files:
        try:
            st = file.stat()
        except OSError:
            continue
        signature.append((file.name, st.st_mtime_ns, st.st_size))
    return tuple(sorted(signature))


class SmartEnvCache:
    """The vectors of one `.smart-env` folder, reloaded when its files change."""

    def __init__(self, env_dir: Path) -> None:
        self._env_dir = env_dir
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._vectors: StoredVectors | None = None
        self._checked = -_RECHECK_SECONDS
        self._lock = anyio.Lock()

    async def vectors(self) -> StoredVectors | None:
        async with self._lock:
            now = time.monotonic()
            if now - self._checked < _RECHECK_SECONDS:
                return self._vectors
            self._checked = now
            signature = await anyio.to_thread.run_sync(_signature, self._env_dir)
            if signature != self._signature:
                self._vectors = await anyio.to_thread.run_sync(load_vectors, self._env_dir)
                self._signature = signature
                logger.info(
                    "loaded %d stored vectors from %s",
                    len(self._vectors.items) if self._vectors else 0,
                    self._env_dir,
                )
            return self._vectors
