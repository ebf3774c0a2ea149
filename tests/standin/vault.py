"""The vault side of the stand-in: what Obsidian's ``Vault`` and ``MetadataCache`` provide.

* Indexed files (``vault.getFiles()``) are every file under the vault folder whose path
  has no segment starting with ``.``; hidden folders such as ``.obsidian``, ``.smart-env``
  and ``.trash`` are never listed or searched (but, as with the plugin's adapter reads,
  ``GET /vault/.obsidian/app.json`` still serves the file).
* Caching (answers are byte-identical to recomputing from disk on every request): the
  scan (an ``os.scandir`` walk) is kept and refreshed from inotify events (see
  ``watch``): only changed names are re-stat'ed, and a full re-scan follows folder
  events, a queue overflow, symlinks or hard links. Without inotify every request
  re-scans. Per file, metadata, text and search text are cached by (mtime, size) and
  dropped on an event for that name; per scan generation, the link graph (a note's
  resolution is reused until it changes or a path with a matching basename comes or
  goes), listings, folders and tag counts; per note, the note JSON object.
* Link resolution (``resolvedLinks``/``unresolvedLinks``): a link resolves to the exact
  vault path (``.md`` optional, ``./``/``../`` relative to the note), else to a file whose
  path ends with the link text, compared case-insensitively, ``.md`` optional; several
  candidates prefer the linking note's folder, then the shortest path.
* Simple search emulates ``prepareSimpleSearch``: whitespace-separated words,
  case-insensitive substring matches, a file qualifies only if every word occurs. The
  score is the stand-in's own: ``-1 / (1 + number of matches)`` (Obsidian's scale is
  undocumented; only the sign convention, negative and higher-is-better, is kept).
* Writes are as unforgiving as the plugin's (coddingtonbear/obsidian-local-rest-api,
  ``src/vaultOperations.ts`` at 0042c0998cb32a5451efbae79a2b3b17de5e964e): PUT
  (``writeFileContent``) is Obsidian's ``adapter.write``, which is Node's
  ``fs.promises.writeFile``: open with truncation, then write, with the event loop
  running other requests in between; POST (``appendFileContent``) reads the whole file,
  and after another such gap writes the whole file back the same way. Nothing serialises
  them: two overlapping appends keep one text, and a read during a write can see a short
  or empty file. Each gap is a pause of 0-3 ms, or exactly ``yield_ms`` when a test fixes
  it (the ``write_yield_ms`` fault). Only DELETE and single-file reads hold the vault
  lock, so a read never meets a file deleted between its check and its read.
"""

from __future__ import annotations

import os
import posixpath
import random
import stat as stat_module
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsstring import code_unit_key, js_lower, utf16_units
from .markdown import NoteMetadata, parse_note
from .watch import IN_IGNORED, RESCAN_MASK, Watcher

# One await of the plugin's write path lets other requests run for about this long (ms,
# drawn uniformly): enough for two appends from different clients to overlap and one to
# be lost, as on the real plugin, without slowing the suites that write a lot.
YIELD_MS = (0.0, 3.0)


def _yield(yield_ms: float | None) -> None:
    """An ``await`` in the plugin: a pause of ``yield_ms``, or a random one from YIELD_MS."""
    time.sleep((random.uniform(*YIELD_MS) if yield_ms is None else yield_ms) / 1000)


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


def _link_names(link: str, source: str) -> frozenset[str]:
    """The basenames whose appearance or disappearance can change how ``link`` resolves:
    the target's last segment as written and lower-cased, ``.md`` optional (see
    :func:`_resolve_link`, which consults only exact paths and the basename index)."""
    target = link.strip().lstrip("/")
    if target.startswith(("./", "../")):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    segment = target.rsplit("/", 1)[-1]
    last = target.lower().rsplit("/", 1)[-1]
    return frozenset((segment, segment + ".md", last, last + ".md"))


def _changed_names(paths: set[str]) -> frozenset[str]:
    """Log entry for added or removed ``paths``: each basename as is and lower-cased."""
    names: set[str] = set()
    for path in paths:
        base = path.rsplit("/", 1)[-1]
        names.add(base)
        names.add(base.lower())
    return frozenset(names)


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


@dataclass(frozen=True)
class Snapshot:
    """The indexed files at one moment; ``generation`` changes whenever ``files`` does and
    ``names`` whenever the set of paths does. Never mutate ``files``."""

    generation: int
    names: int
    files: dict[str, FileEntry]


class _NoteRecord:
    """A cached note JSON object and the graph lists it was built from."""

    __slots__ = ("backlinks", "entry", "fragments", "links", "note", "unresolved")

    def __init__(
        self,
        entry: FileEntry,
        links: list[str] | None,
        backlinks: list[str] | None,
        unresolved: list[str] | None,
        note: dict[str, Any],
    ) -> None:
        self.entry = entry
        self.links = links
        self.backlinks = backlinks
        self.unresolved = unresolved
        self.note = note
        #: JsonLogic ``{"var": key}`` answers: key -> (kept, encoded result item).
        self.fragments: dict[str, tuple[bool, str]] = {}


_NO_LINKS: list[str] = []  # shared, never mutated


class Vault:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._root = str(self.root)
        self.lock = threading.RLock()
        self._meta: dict[str, tuple[tuple[int, int], NoteMetadata]] = {}
        self._text: dict[str, tuple[tuple[int, int], str]] = {}
        self._search_text: dict[str, tuple[tuple[int, int], bool, str, str]] = {}
        #: path -> (entry, names version, links, unresolved links, names they depend on)
        self._resolved: dict[str, tuple[FileEntry, int, list[str], list[str], frozenset[str]]] = {}
        #: names version -> basenames added or removed to reach it (see _link_names).
        self._names_log: dict[int, frozenset[str]] = {}
        self._by_name: tuple[int, dict[str, list[str]]] | None = None
        self._notes: dict[tuple[str, bool, bool, bool], _NoteRecord] = {}
        self._last_graph: LinkGraph | None = None
        # The scan: refreshed from inotify events when trusted, else by a full re-stat.
        self._watcher = Watcher.create()
        self._wd_prefix: dict[int, str] = {}
        self._trusted = False
        self._scan_lock = threading.Lock()
        self._files: dict[str, FileEntry] | None = None
        self._generation = 0
        self._names = 0
        self._derived: tuple[int, dict[str, Any]] = (-1, {})
        self._derived_lock = threading.Lock()
        self._graph_lock = threading.Lock()

    # --- files -------------------------------------------------------------------

    def abs_path(self, rel: str) -> Path:
        """The absolute path of a vault path; raises :class:`OutsideVault`."""
        root = self._root
        candidate = os.path.normpath(os.path.join(root, rel))
        if candidate != root and not candidate.startswith(root + os.sep):
            raise OutsideVault(rel)
        return Path(candidate)

    def snapshot(self) -> Snapshot:
        """The indexed files now (sorted by path), from cache when nothing changed."""
        with self._scan_lock:
            self._refresh()
            assert self._files is not None
            return Snapshot(self._generation, self._names, self._files)

    @property
    def trusted(self) -> bool:
        """Whether inotify currently vouches for the cached scan (else every call re-stats)."""
        return self._trusted

    def scan(self) -> dict[str, FileEntry]:
        """Indexed files by vault path, sorted by path (do not mutate)."""
        return self.snapshot().files

    def _forget(self, rel: str) -> None:
        self._meta.pop(rel, None)
        self._text.pop(rel, None)
        self._search_text.pop(rel, None)

    def _refresh(self) -> None:
        if self._files is None or not self._trusted or self._watcher is None:
            self._full_scan()
            return
        events = self._watcher.read()
        if events is None:
            self._full_scan()
            return
        touched: set[str] = set()
        rescan = False
        for wd, mask, name in events:
            prefix = self._wd_prefix.get(wd)
            if prefix is None or name.startswith("."):
                continue  # a folder no longer watched, or a hidden name (never indexed)
            if mask & (RESCAN_MASK | IN_IGNORED):
                rescan = True
            if name:
                touched.add(prefix + name)
        for rel in touched:
            self._forget(rel)
        if rescan:
            self._full_scan()
        elif touched:
            self._apply(touched)

    def _apply(self, touched: set[str]) -> None:
        """Re-stat only the changed names (regular files; anything else re-scans)."""
        assert self._files is not None
        files = dict(self._files)
        changed: set[str] = set()
        for rel in touched:
            try:
                st = os.lstat(os.path.join(self._root, rel))
            except (FileNotFoundError, NotADirectoryError):
                if files.pop(rel, None) is not None:
                    changed.add(rel)
                continue
            except OSError:
                self._full_scan()
                return
            if stat_module.S_ISLNK(st.st_mode) or stat_module.S_ISDIR(st.st_mode):
                self._full_scan()
                return
            if not stat_module.S_ISREG(st.st_mode):
                if files.pop(rel, None) is not None:
                    changed.add(rel)
                continue
            if st.st_nlink > 1:
                self._full_scan()  # a hard link can change from outside the vault
                return
            if rel not in files:
                changed.add(rel)
            files[rel] = _entry(rel, st)
        if changed:
            files = dict(sorted(files.items()))
            self._names += 1
            self._names_log[self._names] = _changed_names(changed)
        self._files = files
        self._generation += 1

    def _full_scan(self) -> None:
        watcher = self._watcher
        trusted = watcher is not None
        if watcher is not None:
            for wd, _mask, name in watcher.read() or []:  # the scan sees their effects
                prefix = self._wd_prefix.get(wd)
                if prefix is not None and name:
                    self._forget(prefix + name)
        found: dict[str, FileEntry] = {}
        wds: dict[int, str] = {}
        stack = [("", self._root)]
        while stack:
            prefix, folder = stack.pop()
            if watcher is not None:
                wd = watcher.add(folder)  # before listing, so later changes are reported
                if wd < 0:
                    trusted = False
                else:
                    wds[wd] = prefix
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for de in entries:
                if de.name.startswith("."):
                    continue
                rel = prefix + de.name
                if de.is_symlink():
                    trusted = False  # its target may change without an event here
                if de.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", de.path))
                elif de.is_file():
                    st = de.stat()
                    if st.st_nlink > 1:
                        trusted = False
                    found[rel] = _entry(rel, st)
        if watcher is not None:
            for wd in self._wd_prefix.keys() - wds.keys():
                watcher.remove(wd)
            self._wd_prefix = wds
        self._trusted = trusted
        old = self._files
        if old is not None and found == old:
            return
        if old is None or found.keys() != old.keys():
            self._names += 1
            if old is not None:
                self._names_log[self._names] = _changed_names(set(found.keys() ^ old.keys()))
        self._files = dict(sorted(found.items()))
        self._generation += 1

    def _derived_for(self, snap: Snapshot) -> dict[str, Any]:
        """A cache dict for values computed from ``snap`` (dropped when it changes)."""
        with self._derived_lock:
            generation, store = self._derived
            if generation == snap.generation:
                return store
            if snap.generation > generation:
                self._derived = (snap.generation, {})
                return self._derived[1]
            return {}  # an older snapshot than the cache: compute, keep nothing

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

    def text(self, entry: FileEntry) -> str:
        """``read_text`` of an indexed file, cached while the watcher vouches for it."""
        if not self._trusted:
            return self.read_text(entry.path)
        key = (entry.mtime_ns, entry.size)
        cached = self._text.get(entry.path)
        if cached is not None and cached[0] == key:
            return cached[1]
        text = self.read_text(entry.path)
        self._text[entry.path] = (key, text)
        return text

    def list_dir(self, folder: str) -> list[str]:
        """Immediate children of ``folder`` ("" = root), folders as ``name/``, JS-sorted."""
        snap = self.snapshot()
        store = self._derived_for(snap)
        listings: dict[str, list[str]] = store.setdefault("listings", {})
        cached = listings.get(folder)
        if cached is not None:
            return cached
        prefix = folder + "/" if folder else ""
        children = {
            sub[: sub.index("/") + 1] if "/" in sub else sub
            for sub in (p[len(prefix) :] for p in snap.files if p.startswith(prefix))
        }
        listing = sorted(children, key=code_unit_key)
        listings[folder] = listing
        return listing

    def has_folder(self, folder: str) -> bool:
        """Whether some indexed path starts with ``folder + "/"``."""
        snap = self.snapshot()
        store = self._derived_for(snap)
        folders: set[str] | None = store.get("folders")
        if folders is None:
            folders = set()
            for path in snap.files:
                pos = path.find("/")
                while pos != -1:
                    folders.add(path[:pos])
                    pos = path.find("/", pos + 1)
            store["folders"] = folders
        return folder in folders

    def write(self, rel: str, data: bytes, *, yield_ms: float | None = None) -> None:
        """``adapter.write`` (``writeFileContent``, and the end of ``appendFileContent``):
        Node's ``fs.promises.writeFile`` opens with flag ``'w'``, which truncates at once,
        and writes only after an ``await``; no lock and no temporary file, so a read in the
        gap sees an empty file and two writers' bytes can mix."""
        path = self.abs_path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as fh:
            _yield(yield_ms)
            fh.write(data)

    def append(self, rel: str, text: str, *, yield_ms: float | None = None) -> None:
        """``appendFileContent``: ``await vault.read(file)``, a ``\\n`` unless the file
        ends with one, the new text, then ``await adapter.write`` of the whole file. Not
        atomic: an append that overlaps another writes back a text without the other's."""
        path = self.abs_path(rel)
        contents = ""
        if path.is_file():
            # vault.read gives a string: invalid UTF-8 comes back as U+FFFD on write-back.
            contents = path.read_bytes().decode("utf-8", errors="replace")
            if not contents.endswith("\n"):
                contents += "\n"
        _yield(yield_ms)
        self.write(rel, (contents + text).encode("utf-8"), yield_ms=yield_ms)

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
        meta = parse_note(self.text(entry))
        self._meta[entry.path] = (key, meta)
        return meta

    def _name_index(self, snap: Snapshot) -> dict[str, list[str]]:
        cached = self._by_name
        if cached is not None and cached[0] == snap.names:
            return cached[1]
        by_name: dict[str, list[str]] = {}
        for path in snap.files:
            by_name.setdefault(path.rsplit("/", 1)[-1].lower(), []).append(path)
        self._by_name = (snap.names, by_name)
        return by_name

    def link_graph(self, snap: Snapshot | None = None) -> LinkGraph:
        """Resolved links, unresolved links and backlinks of ``snap`` (default: now).

        Built once per snapshot generation; a note's own resolution is reused until the
        note changes or a path is added or removed."""
        snap = snap or self.snapshot()
        store = self._derived_for(snap)
        graph: LinkGraph | None = store.get("graph")
        if graph is not None:
            return graph
        with self._graph_lock:
            graph = store.get("graph")
            if graph is not None:
                return graph
            graph = self._build_graph(snap, self._last_graph)
            store["graph"] = graph
            self._last_graph = graph
        return graph

    def _build_graph(self, snap: Snapshot, previous: LinkGraph | None) -> LinkGraph:
        files = snap.files
        by_name = self._name_index(snap)
        graph = LinkGraph()
        log = self._names_log
        for entry in files.values():
            if not entry.is_markdown:
                continue
            cached = self._resolved.get(entry.path)
            if (
                cached is not None
                and (cached[0] is entry or cached[0] == entry)
                and (
                    cached[1] == snap.names
                    or all(
                        v in log and log[v].isdisjoint(cached[4])
                        for v in range(cached[1] + 1, snap.names + 1)
                    )
                )
            ):
                links, unresolved_links = cached[2], cached[3]
                if cached[1] != snap.names:
                    self._resolved[entry.path] = (
                        cached[0],
                        snap.names,
                        cached[2],
                        cached[3],
                        cached[4],
                    )
            else:
                resolved: dict[str, None] = {}
                unresolved: dict[str, None] = {}
                depends: set[str] = set()
                for link in self.metadata(entry).links:
                    depends |= _link_names(link, entry.path)
                    target = _resolve_link(link, entry.path, files, by_name)
                    if target is None:
                        unresolved[link] = None
                    else:
                        resolved[target] = None
                links, unresolved_links = list(resolved), list(unresolved)
                self._resolved[entry.path] = (
                    entry,
                    snap.names,
                    links,
                    unresolved_links,
                    frozenset(depends),
                )
            graph.links[entry.path] = links
            graph.unresolved[entry.path] = unresolved_links
            for target in links:
                graph.backlinks.setdefault(target, []).append(entry.path)
        if previous is not None:  # keep unchanged lists identical, so note caches hold
            for target, sources in graph.backlinks.items():
                old = previous.backlinks.get(target)
                if old is not None and old == sources:
                    graph.backlinks[target] = old
        if len(self._resolved) > len(files):
            for path in self._resolved.keys() - files.keys():
                del self._resolved[path]
        if len(self._notes) > 4 * len(files):
            for key in [k for k in self._notes if k[0] not in files]:
                del self._notes[key]
        return graph

    def _tags(self, meta: NoteMetadata) -> list[str]:
        return list(
            dict.fromkeys(
                t.lstrip("#") for t in meta.frontmatter_tag_list + meta.inline_tags if t.lstrip("#")
            )
        )

    def note_json(
        self,
        entry: FileEntry,
        *,
        graph: LinkGraph | None,
        unresolved: bool,
        content: str | None,
        links_pending: bool = False,
    ) -> dict[str, Any]:
        """``getFileMetadataObject``: links/backlinks when ``graph`` is given (≥4.0), null
        while ``links_pending`` (6.0: Obsidian has not resolved the vault's links yet)."""
        meta = self.metadata(entry)
        note: dict[str, Any] = {
            "tags": self._tags(meta),
            "frontmatter": meta.frontmatter,
            "stat": {"ctime": entry.ctime_ms, "mtime": entry.mtime_ms, "size": entry.size},
            "path": entry.path,
            "content": self.read_text(entry.path) if content is None else content,
        }
        if graph is not None:
            note["links"] = None if links_pending else graph.links.get(entry.path, _NO_LINKS)
            note["backlinks"] = (
                None if links_pending else graph.backlinks.get(entry.path, _NO_LINKS)
            )
            if unresolved:
                note["unresolvedLinks"] = (
                    None if links_pending else graph.unresolved.get(entry.path, _NO_LINKS)
                )
        return note

    def note_record(
        self,
        entry: FileEntry,
        *,
        graph: LinkGraph | None,
        unresolved: bool,
        content: bool,
        links_pending: bool = False,
    ) -> _NoteRecord:
        """The note JSON of an indexed markdown file, cached (never mutate it);
        ``content=False`` gives ``"content": ""`` as the plugin's lazy JsonLogic does."""
        key = (entry.path, unresolved, content, links_pending)
        links = backlinks = unresolved_links = None
        if graph is not None and not links_pending:
            links = graph.links.get(entry.path, _NO_LINKS)
            backlinks = graph.backlinks.get(entry.path, _NO_LINKS)
            if unresolved:
                unresolved_links = graph.unresolved.get(entry.path, _NO_LINKS)
        record = self._notes.get(key)
        if (
            record is not None
            and (record.entry is entry or record.entry == entry)
            and record.links is links
            and record.backlinks is backlinks
            and record.unresolved is unresolved_links
            and (not content or self._trusted)
        ):
            return record
        note = self.note_json(
            entry,
            graph=graph,
            unresolved=unresolved,
            content=self.text(entry) if content else "",
            links_pending=links_pending,
        )
        record = _NoteRecord(entry, links, backlinks, unresolved_links, note)
        self._notes[key] = record
        return record

    def tag_counts(self) -> list[dict[str, Any]]:
        snap = self.snapshot()
        store = self._derived_for(snap)
        cached: list[dict[str, Any]] | None = store.get("tags")
        if cached is not None:
            return cached
        counts: dict[str, int] = {}
        for entry in snap.files.values():
            if not entry.is_markdown:
                continue
            for tag in self.metadata(entry).all_tags:
                parts = tag.split("/")
                for name in [tag] + ["/".join(parts[:i]) for i in range(1, len(parts))]:
                    if name:
                        counts[name] = counts.get(name, 0) + 1
        result = [{"name": name, "count": count} for name, count in counts.items()]
        store["tags"] = result
        return result

    # --- simple search -----------------------------------------------------------

    def _searchable(self, entry: FileEntry, with_filename: bool) -> tuple[str, str]:
        """The note's text in UTF-16 units and the lower-cased text simple search scans
        (prefixed by the basename and a blank line when ``with_filename``)."""
        key = (entry.mtime_ns, entry.size)
        cached = self._search_text.get(entry.path)
        if self._trusted and cached is not None and cached[0] == key and cached[1] == with_filename:
            return cached[2], cached[3]
        content = utf16_units(self.text(entry))
        text = utf16_units(entry.basename) + "\n\n" + content if with_filename else content
        lowered = js_lower(text)
        if self._trusted:
            self._search_text[entry.path] = (key, with_filename, content, lowered)
        return content, lowered

    def simple_search(
        self,
        query: str,
        context_length: int | None,
        *,
        with_filename: bool,
        snapshot: Snapshot | None = None,
    ) -> list[dict[str, Any]]:
        """Unsorted results; ``context_length=None`` reproduces the ≤3.2 NaN bug."""
        words = [js_lower(utf16_units(w)) for w in query.split()]
        if not words:
            return []
        results: list[dict[str, Any]] = []
        for entry in (snapshot or self.snapshot()).files.values():
            if not entry.is_markdown:
                continue
            content, lowered = self._searchable(entry, with_filename)
            base = utf16_units(entry.basename)
            offset = len(base) + 2 if with_filename else 0
            spans = _find_all(lowered, words)
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
