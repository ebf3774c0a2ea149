"""``POST /search/smart`` of the mcp-tools extension, ranked from ``.smart-env/`` on disk.

What it reads (reference §2.4): ``<vault>/.smart-env/smart_env.json`` names the model at
``smart_sources.embed_model.<adapter>.model_key``; every ``multi/*.ajson`` file holds
lines ``"smart_sources:<path>": {...},`` and ``"smart_blocks:<path>#H##S": {...},``
(trailing comma stripped, wrapped in braces, later lines win, ``null`` deletes); each
item's vector is ``embeddings[<model_key>].vec``; a block's ``lines`` ``[start, end]``
(1-indexed, inclusive) slice its text out of the note.

Scoring is cosine similarity between the query vector and every source and block vector
(as Smart Connections' ``lookup`` does); results are merged, sorted by score descending
and cut at ``filter.limit`` (default 10). ``folders``/``excludeFolders`` are key prefixes.

The stand-in cannot run the embedding model, so the query vector is looked up in a
JSON-lines file (``--query-vectors``, default ``<vault>/../query_vectors.jsonl``) of
``{"query": ..., "model": ..., "vec": [...]}`` rows, matched on the stripped query text
(and the model key, when a row names one). **Approximation** for an unknown query: the
normalised mean of the vectors of the sources whose note text contains the largest
number of distinct query words (case-insensitive); if no note contains any of them the
answer is ``{"results": []}``.
"""

from __future__ import annotations

import json
import math
import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .vault import FileEntry, Vault
from .watch import Watcher

Vector = list[float]


@dataclass(frozen=True)
class SmartItem:
    key: str
    source_path: str
    vec: Vector
    #: 1-indexed inclusive line range for blocks, None for whole sources.
    lines: tuple[int, int] | None
    #: ``_norm(vec)``, computed once.
    norm: float = field(default=0.0, compare=False)

    @property
    def breadcrumbs(self) -> str:
        if self.lines is None:
            return self.key
        path, _, headings = self.key.partition("#")
        return " > ".join(p for p in path.split("/") + headings.split("#") if p)


def _norm(vec: Vector) -> float:
    return math.sqrt(sum(x * x for x in vec))


def _norm_fast(vec: Vector) -> float:
    """Bit-identical to :func:`_norm` (same products, summed in the same order)."""
    return math.sqrt(sum(map(operator.mul, vec, vec)))


def cosine(a: Vector, b: Vector) -> float:
    na, nb = _norm(a), _norm(b)
    if not na or not nb or len(a) != len(b):
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def _cosine_normed(a: Vector, na: float, b: Vector, nb: float) -> float:
    """:func:`cosine` with both norms given; bit-identical to it."""
    if not na or not nb or len(a) != len(b):
        return 0.0
    return sum(map(operator.mul, a, b)) / (na * nb)


class SmartEnv:
    """Loads and caches ``.smart-env`` and answers searches."""

    def __init__(self, vault: Vault, query_vectors: Path | None) -> None:
        self.vault = vault
        self.env_dir = vault.root / ".smart-env"
        self.query_vectors = query_vectors or vault.root.parent / "query_vectors.jsonl"
        self._lock = threading.Lock()
        self._cache: tuple[tuple[tuple[str, int, int], ...], str, list[SmartItem]] | None = None
        #: The last signature, reused while inotify reports nothing in the watched folders.
        self._watcher = Watcher.create()
        self._sig: tuple[tuple[str, int, int], ...] | None = None
        self._scores: OrderedDict[tuple[float, ...], tuple[list[SmartItem], list[float]]] = (
            OrderedDict()
        )
        self._rows: tuple[bytes, list[Any]] | None = None
        self._approx: tuple[tuple[str, int], list[SmartItem], Vector | None] | None = None

    @property
    def available(self) -> bool:
        return self.env_dir.is_dir()

    def _signature(self) -> tuple[tuple[str, int, int], ...]:
        watcher = self._watcher
        if watcher is None:
            return self._compute_signature()
        with self._lock:
            if self._sig is not None and watcher.read() == []:
                return self._sig
            self._sig = None
            watched = watcher.add(str(self.env_dir)) >= 0  # watch first, then stat
            if watched and (self.env_dir / "multi").is_dir():
                watched = watcher.add(str(self.env_dir / "multi")) >= 0
            sig = self._compute_signature()
            if watched:
                self._sig = sig
            return sig

    def _compute_signature(self) -> tuple[tuple[str, int, int], ...]:
        paths = [self.env_dir / "smart_env.json"]
        multi = self.env_dir / "multi"
        if multi.is_dir():
            paths += sorted(multi.glob("*.ajson"))
        sig: list[tuple[str, int, int]] = []
        for p in paths:
            try:
                st = p.stat()
            except OSError:
                continue
            sig.append((str(p), st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def _model_key(self) -> str | None:
        try:
            settings = json.loads((self.env_dir / "smart_env.json").read_text("utf-8"))
            embed = settings["smart_sources"]["embed_model"]
            return str(embed[embed["adapter"]]["model_key"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def load(self) -> tuple[str, list[SmartItem]]:
        """The model key and every item that has a vector for it."""
        sig = self._signature()
        with self._lock:
            if self._cache is not None and self._cache[0] == sig:
                return self._cache[1], self._cache[2]
        raw: dict[str, Any] = {}
        multi = self.env_dir / "multi"
        for path in sorted(multi.glob("*.ajson")) if multi.is_dir() else []:
            for line in path.read_text("utf-8").splitlines():
                line = line.strip().rstrip(",")
                if not line:
                    continue
                try:
                    raw.update(json.loads("{" + line + "}"))
                except ValueError:
                    continue
        model = self._model_key() or _first_model(raw)
        items: list[SmartItem] = []
        for full_key, data in raw.items():
            collection, _, key = full_key.partition(":")
            if not isinstance(data, dict):
                continue  # null deletes the item
            vec = ((data.get("embeddings") or {}).get(model) or {}).get("vec")
            if not isinstance(vec, list) or not vec:
                continue
            if collection == "smart_sources":
                floats = [float(x) for x in vec]
                items.append(SmartItem(key, key, floats, None, _norm_fast(floats)))
            elif collection == "smart_blocks" and isinstance(data.get("lines"), list):
                start, end = data["lines"][:2]
                floats = [float(x) for x in vec]
                items.append(
                    SmartItem(
                        key,
                        key.split("#", 1)[0],
                        floats,
                        (int(start), int(end)),
                        _norm_fast(floats),
                    )
                )
        with self._lock:
            self._cache = (sig, model, items)
        return model, items

    def _query_rows(self) -> list[Any] | None:
        """The parsed lines of the query-vector file (None: unreadable); an unparsable line
        is ``None``. Re-read every time, re-parsed only when its bytes change."""
        try:
            data = self.query_vectors.read_bytes()
        except OSError:
            return None
        cached = self._rows
        if cached is not None and cached[0] == data:
            return cached[1]
        # Path.read_text("utf-8"): strict UTF-8 and universal newlines.
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        rows: list[Any] = []
        for line in text.splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                rows.append(None)
        self._rows = (data, rows)
        return rows

    def _stored_query_vector(self, query: str, model: str) -> Vector | None:
        rows = self._query_rows()
        for row in rows or []:
            if (
                isinstance(row, dict)
                and str(row.get("query", "")).strip() == query
                and row.get("model", model) == model
                and isinstance(row.get("vec"), list)
            ):
                return [float(x) for x in row["vec"]]
        return None

    def _approximate_query_vector(self, query: str, items: list[SmartItem]) -> Vector | None:
        snap = self.vault.snapshot()
        memo = self._approx
        if memo is not None and memo[0] == (query, snap.generation) and memo[1] is items:
            return memo[2]
        cacheable = self.vault.trusted  # the snapshot generation then vouches for the texts
        words = {w for w in query.lower().split() if w}
        best = 0
        chosen: list[Vector] = []
        for item in items:
            if item.lines is not None:
                continue
            entry = snap.files.get(item.source_path)
            if entry is None:
                cacheable = False
                text = self.vault.read_text(item.source_path).lower()
            else:
                text = self.vault.text(entry).lower()
            hits = sum(1 for w in words if w in text)
            if hits > best:
                best, chosen = hits, [item.vec]
            elif hits == best and hits:
                chosen.append(item.vec)
        result: Vector | None = None
        if chosen:
            mean = [sum(col) / len(chosen) for col in zip(*chosen, strict=True)]
            n = _norm(mean)
            result = [x / n for x in mean] if n else None
        if cacheable:
            self._approx = ((query, snap.generation), items, result)
        return result

    def _text(self, item: SmartItem, indexed: dict[str, FileEntry]) -> str:
        entry = indexed.get(item.source_path)
        content = (
            self.vault.read_text(item.source_path) if entry is None else self.vault.text(entry)
        )
        if item.lines is None:
            return content
        start, end = item.lines
        return "\n".join(content.split("\n")[start - 1 : end])

    def _scores_for(self, qvec: Vector, items: list[SmartItem]) -> list[float]:
        """``cosine(qvec, item.vec)`` for every item, memoised per query vector."""
        key = tuple(qvec)
        with self._lock:
            hit = self._scores.get(key)
            if hit is not None and hit[0] is items:
                self._scores.move_to_end(key)
                return hit[1]
        qnorm = _norm_fast(qvec)
        scores = [_cosine_normed(qvec, qnorm, item.vec, item.norm) for item in items]
        with self._lock:
            self._scores[key] = (items, scores)
            while len(self._scores) > 32:
                self._scores.popitem(last=False)
        return scores

    def search(
        self,
        query: str,
        folders: list[str] | None,
        exclude_folders: list[str] | None,
        limit: float | None,
    ) -> list[dict[str, Any]]:
        model, items = self.load()
        query = query.strip()
        qvec = self._stored_query_vector(query, model)
        if qvec is None:
            qvec = self._approximate_query_vector(query, items)
        if qvec is None:
            return []
        scored: list[tuple[float, SmartItem]] = []
        indexed = self.vault.snapshot().files
        scores = self._scores_for(qvec, items)
        for item, score in zip(items, scores, strict=True):
            if folders and not item.key.startswith(tuple(folders)):
                continue
            if exclude_folders and item.key.startswith(tuple(exclude_folders)):
                continue
            if item.source_path not in indexed and self.vault.stat(item.source_path) is None:
                continue
            scored.append((score, item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        count = 10 if limit is None else int(limit)  # JS slice(0, limit) truncates
        return [
            {
                "path": item.key,
                "text": self._text(item, indexed),
                "score": score,
                "breadcrumbs": item.breadcrumbs,
            }
            for score, item in scored[:count]
        ]


def _first_model(raw: dict[str, Any]) -> str:
    for data in raw.values():
        if isinstance(data, dict) and isinstance(data.get("embeddings"), dict):
            for key in data["embeddings"]:
                return str(key)
    return ""
