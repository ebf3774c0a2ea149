"""The vault side of the stand-in: what Obsidian's ``Vault`` and ``MetadataCache`` provide.

* Indexed files (``vault.getFiles()``) are every file under the vault folder whose path
  has no segment starting with ``.``; hidden folders such as ``.obsidian``, ``.smart-env``
  and ``.trash`` are never listed or searched (but, as with the plugin's adapter reads,
  ``GET /vault/.obsidian/app.json`` still serves the file).
* Metadata is parsed per markdown file and cached by (mtime, size), so repeated
  JsonLogic queries over a 10,000-note vault only stat the files.
* Link resolution (``resolvedLinks``/``unresolvedLinks``): a link resolves to the exact
  vault path (``.md`` optional, ``./``/``../`` relative to the note), else to a file whose
  path ends with the link text, compared case-insensitively, ``.md`` optional; several
  candidates prefer the linking note's folder, then the shortest path.
* Simple search emulates ``prepareSimpleSearch``: whitespace-separated words,
  case-insensitive substring matches, a file qualifies only if every word occurs. The
  score is the stand-in's own: ``-1 / (1 + number of matches)`` (Obsidian's scale is
  undocumented; only the sign convention, negative and higher-is-better, is kept).
* Every mutation and every single-file read holds one vault lock, so concurrent appends
  from many clients never interleave; PUT writes a temp file and renames it.
"""

from __future__ import annotations

import os
import posixpath
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsstring import code_unit_key, js_lower, utf16_units
from .markdown import NoteMetadata, parse_note


class OutsideVault(Exception):
    """A path that would resolve outside the vault folder."""


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    mtime_ns: int
    ctime_ms: int
    mtime_ms: int

    @property
    def is_markdown(self) -> bool:
        return self.path.endswith(".md")

    @property
    def basename(self) -> str:
        """Obsidian's ``TFile.basename``: the name without its extension."""
        name = self.path.rsplit("/", 1)[-1]
        return name.rsplit(".", 1)[0] if "." in name else name


@dataclass
class LinkGraph:
    """``metadataCache.resolvedLinks``/``unresolvedLinks`` plus the backlinks index."""

    links: dict[str, list[str]] = field(default_factory=dict)
    unresolved: dict[str, list[str]] = field(default_factory=dict)
    backlinks: dict[str, list[str]] = field(default_factory=dict)


def _entry(path: str, st: os.stat_result) -> FileEntry:
    ctime = getattr(st, "st_birthtime", None) or st.st_ctime
    return FileEntry(
        path=path,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        ctime_ms=int(ctime * 1000),
        mtime_ms=st.st_mtime_ns // 1_000_000,
    )


def _resolve_link(
    link: str, source: str, files: dict[str, FileEntry], by_name: dict[str, list[str]]
) -> str | None:
    target = link.strip().lstrip("/")
    if target.startswith(("./", "../")):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    for candidate in (target, target + ".md"):
        if candidate in files:
            return candidate
    wanted = target.lower()
    last = wanted.rsplit("/", 1)[-1]
    candidates = [
        path
        for path in by_name.get(last, []) + by_name.get(last + ".md", [])
        if any(
            path.lower() in (w, "/" + w) or path.lower().endswith("/" + w)
            for w in (wanted, wanted + ".md")
        )
    ]
    if not candidates:
        return None
    folder = posixpath.dirname(source)
    return min(candidates, key=lambda p: (posixpath.dirname(p) != folder, len(p), p))


class Vault:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.lock = threading.RLock()
        self._meta: dict[str, tuple[tuple[int, int], NoteMetadata]] = {}
        self._graph: tuple[tuple[tuple[str, int, int], ...], LinkGraph] | None = None

    # --- files -------------------------------------------------------------------

    def abs_path(self, rel: str) -> Path:
        """The absolute path of a vault path; raises :class:`OutsideVault`."""
        root = str(self.root)
        candidate = os.path.normpath(os.path.join(root, rel))
        if candidate != root and not candidate.startswith(root + os.sep):
            raise OutsideVault(rel)
        return Path(candidate)

    def scan(self) -> dict[str, FileEntry]:
        """Indexed files by vault path, sorted by path."""
        found: dict[str, FileEntry] = {}
        stack = [("", str(self.root))]
        while stack:
            prefix, folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for de in entries:
                if de.name.startswith("."):
                    continue
                rel = prefix + de.name
                if de.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", de.path))
                elif de.is_file():
                    found[rel] = _entry(rel, de.stat())
        return dict(sorted(found.items()))

    def stat(self, rel: str) -> FileEntry | None:
        """The file at ``rel`` (hidden files included, as the adapter sees them)."""
        try:
            path = self.abs_path(rel)
        except OutsideVault:
            return None
        return _entry(rel, path.stat()) if path.is_file() else None

    def read_bytes(self, rel: str) -> bytes | None:
        with self.lock:
            path = self.abs_path(rel)
            return path.read_bytes() if path.is_file() else None

    def read_text(self, rel: str) -> str:
        data = self.read_bytes(rel)
        return "" if data is None else data.decode("utf-8", errors="replace")

    def list_dir(self, folder: str) -> list[str]:
        """Immediate children of ``folder`` ("" = root), folders as ``name/``, JS-sorted."""
        prefix = folder + "/" if folder else ""
        children = {
            sub[: sub.index("/") + 1] if "/" in sub else sub
            for sub in (p[len(prefix) :] for p in self.scan() if p.startswith(prefix))
        }
        return sorted(children, key=code_unit_key)

    def write(self, rel: str, data: bytes) -> None:
        with self.lock:
            path = self.abs_path(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.parent / f".standin-tmp-{threading.get_ident()}-{path.name}"
            tmp.write_bytes(data)
            tmp.replace(path)

    def append(self, rel: str, text: str) -> None:
        """Append as the plugin does: one ``\\n`` first unless the file ends with one."""
        body = text.encode("utf-8")
        with self.lock:
            path = self.abs_path(rel)
            if not path.is_file():
                self.write(rel, body)
                return
            with path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                if size:
                    fh.seek(size - 1)
                ends_with_newline = size > 0 and fh.read(1) == b"\n"
            with path.open("ab") as fh:
                fh.write(body if ends_with_newline else b"\n" + body)

    def delete(self, rel: str, *, to_trash: bool) -> bool:
        """Delete a file (or move it under ``.trash/``); False if there is none."""
        with self.lock:
            path = self.abs_path(rel)
            if not path.is_file():
                return False
            if not to_trash:
                path.unlink()
                return True
            dest = self.root / ".trash" / rel
            n = 0
            while dest.exists():
                n += 1
                stem, dot, ext = rel.rpartition(".")
                dest = self.root / ".trash" / (f"{stem} {n}.{ext}" if dot else f"{rel} {n}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            path.replace(dest)
            return True

    # --- metadata ----------------------------------------------------------------

    def metadata(self, entry: FileEntry) -> NoteMetadata:
        if not entry.is_markdown:
            return parse_note("")
        key = (entry.mtime_ns, entry.size)
        cached = self._meta.get(entry.path)
        if cached is not None and cached[0] == key:
            return cached[1]
        meta = parse_note(self.read_text(entry.path))
        self._meta[entry.path] = (key, meta)
        return meta

    def link_graph(self, files: dict[str, FileEntry]) -> LinkGraph:
        signature = tuple((e.path, e.mtime_ns, e.size) for e in files.values())
        with self.lock:
            if self._graph is not None and self._graph[0] == signature:
                return self._graph[1]
        by_name: dict[str, list[str]] = {}
        for path in files:
            by_name.setdefault(path.rsplit("/", 1)[-1].lower(), []).append(path)
        graph = LinkGraph()
        for entry in files.values():
            if not entry.is_markdown:
                continue
            resolved: dict[str, None] = {}
            unresolved: dict[str, None] = {}
            for link in self.metadata(entry).links:
                target = _resolve_link(link, entry.path, files, by_name)
                if target is None:
                    unresolved[link] = None
                else:
                    resolved[target] = None
            graph.links[entry.path] = list(resolved)
            graph.unresolved[entry.path] = list(unresolved)
            for target in resolved:
                graph.backlinks.setdefault(target, []).append(entry.path)
        with self.lock:
            self._graph = (signature, graph)
        return graph

    def note_json(
        self,
        entry: FileEntry,
        *,
        graph: LinkGraph | None,
        unresolved: bool,
        content: str | None,
    ) -> dict[str, Any]:
        """``getFileMetadataObject``: links/backlinks when ``graph`` is given (≥4.0)."""
        meta = self.metadata(entry)
        tags = list(
            dict.fromkeys(
                t.lstrip("#") for t in meta.frontmatter_tag_list + meta.inline_tags if t.lstrip("#")
            )
        )
        note: dict[str, Any] = {
            "tags": tags,
            "frontmatter": meta.frontmatter,
            "stat": {"ctime": entry.ctime_ms, "mtime": entry.mtime_ms, "size": entry.size},
            "path": entry.path,
            "content": self.read_text(entry.path) if content is None else content,
        }
        if graph is not None:
            note["links"] = graph.links.get(entry.path, [])
            note["backlinks"] = graph.backlinks.get(entry.path, [])
            if unresolved:
                note["unresolvedLinks"] = graph.unresolved.get(entry.path, [])
        return note

    def tag_counts(self) -> list[dict[str, Any]]:
        counts: dict[str, int] = {}
        for entry in self.scan().values():
            if not entry.is_markdown:
                continue
            for tag in self.metadata(entry).all_tags:
                parts = tag.split("/")
                for name in [tag] + ["/".join(parts[:i]) for i in range(1, len(parts))]:
                    if name:
                        counts[name] = counts.get(name, 0) + 1
        return [{"name": name, "count": count} for name, count in counts.items()]

    # --- simple search -----------------------------------------------------------

    def simple_search(
        self, query: str, context_length: int | None, *, with_filename: bool
    ) -> list[dict[str, Any]]:
        """Unsorted results; ``context_length=None`` reproduces the ≤3.2 NaN bug."""
        words = [js_lower(utf16_units(w)) for w in query.split()]
        if not words:
            return []
        results: list[dict[str, Any]] = []
        for entry in self.scan().values():
            if not entry.is_markdown:
                continue
            content = utf16_units(self.read_text(entry.path))
            base = utf16_units(entry.basename)
            offset = len(base) + 2 if with_filename else 0
            text = base + "\n\n" + content if with_filename else content
            spans = _find_all(js_lower(text), words)
            if spans is None:
                continue
            matches: list[dict[str, Any]] = []
            for start, end in spans:
                if not with_filename:
                    ctx = (
                        ""
                        if context_length is None
                        else content[max(start - context_length, 0) : end + context_length]
                    )
                    matches.append({"match": {"start": start, "end": end}, "context": ctx})
                elif end <= offset:
                    matches.append(
                        {
                            "match": {
                                "start": start,
                                "end": min(end, len(base)),
                                "source": "filename",
                            },
                            "context": base,
                        }
                    )
                elif start >= offset:
                    s, e = start - offset, end - offset
                    length = 100 if context_length is None else context_length
                    matches.append(
                        {
                            "match": {"start": s, "end": e, "source": "content"},
                            "context": content[max(s - length, 0) : e + length],
                        }
                    )
            results.append(
                {
                    "filename": entry.path,
                    "score": -1.0 / (1 + len(spans)),
                    "matches": matches,
                }
            )
        return results


def _find_all(haystack: str, words: list[str]) -> list[tuple[int, int]] | None:
    """Every non-overlapping occurrence of every word, or None if a word is absent."""
    spans: list[tuple[int, int]] = []
    for word in words:
        pos = haystack.find(word)
        if pos == -1:
            return None
        while pos != -1:
            spans.append((pos, pos + len(word)))
            pos = haystack.find(word, pos + len(word))
    return sorted(spans)
