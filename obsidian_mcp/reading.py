"""Reading the vault within a budget: a note or a window of it, an outline, the tree, a
match map, and the scratch note. Plain domain code: it returns data, the server formats it.
"""

import contextlib
import posixpath
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio.to_thread

from obsidian_mcp.attachments import (
    PDF,
    NoTextToRead,
    PdfText,
    UnreadablePdf,
    attachment_kind,
    pdf_text,
)
from obsidian_mcp.editing.targets import TargetUnresolved, resolve_target, structure_of
from obsidian_mcp.errors import InvalidArgument, NoteNotFound, NotText
from obsidian_mcp.limits import PATH_EXCERPT_CHARS, excerpt
from obsidian_mcp.paths import is_markdown, normalize_vault_path, note_name
from obsidian_mcp.retrieval.exact import check_query_terms
from obsidian_mcp.sources.base import FileBytes, NoteData, TextSearchHit
from obsidian_mcp.text.markdown import (
    LinkResolver,
    ParsedNote,
    Section,
    gist,
    heading_reference,
)
from obsidian_mcp.text.snippets import truncate_at_word
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.text.versions import window_version
from obsidian_mcp.text.wording import plural
from obsidian_mcp.vault import Vault

# A window ends at a line break when one falls in its last part, so a cut read rarely
# splits a sentence; this is how far back from the budget we look for one.
_LINE_BREAK_SEARCH = 0.35
MAX_SCRATCH_CHARS = 20_000
# Notes of one name listed when a bare name is ambiguous.
_NAMESAKES_SHOWN = 5
# A PDF's gist: the start of its first page, about what a note's gist holds.
_PDF_GIST_CHARS = 200


@dataclass(frozen=True, slots=True)
class NoteWindow:
    path: str
    title: str
    tags: tuple[str, ...]
    note_tokens: int
    modified: str  # '' when not known
    section: str | None
    # Offsets into the text that was selected (the section, or the whole note).
    offset: int
    end: int
    total_chars: int
    text: str
    next_offset: int | None
    # For vault_edit_note(version=...): the whole note's; a cut read of a section or a
    # block names its window too (`versions.window_version`); '' for a PDF.
    version: str
    # Where the text came from when it is not a note's ("text of a 3-page PDF ...").
    extracted: str = ""


def _iso_from_ms(mtime_ms: int) -> str:
    if mtime_ms <= 0:
        return "unknown"
    return datetime.fromtimestamp(mtime_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def window_end(text: str, offset: int, max_chars: int) -> int:
    """Where a window of at most `max_chars` starting at `offset` should end."""
    hard_end = min(len(text), offset + max_chars)
    if hard_end == len(text):
        return hard_end
    earliest = hard_end - int(max_chars * _LINE_BREAK_SEARCH)
    line_break = text.rfind("\n", max(offset, earliest), hard_end)
    if line_break > offset:
        return line_break + 1
    space = text.rfind(" ", max(offset, earliest), hard_end)
    return space + 1 if space > offset else hard_end


def _window(text: str, offset: int, max_chars: int) -> tuple[int, int | None]:
    """Where the window of `text` read from `offset` ends, and where the next one starts
    (None: this one reaches the end)."""
    if offset > len(text):
        raise InvalidArgument(
            f"offset {offset} is past the end ({len(text)} characters) of the text; "
            "start again from offset 0."
        )
    end = window_end(text, offset, max_chars)
    return end, end if end < len(text) else None


def _section_label(section: Section) -> str:
    return heading_reference(section.path)


def notes_named(name: str, paths: Iterable[str]) -> list[str]:
    """The notes a bare note name stands for, as a wikilink to it resolves: those whose name
    is `name` (ignoring case, `.md` optional). A name with a folder in it names nothing
    here: the vault path is then what was meant."""
    if "/" in name.replace("\\", "/"):
        return []
    wanted = note_name(name.strip()).lower()
    return sorted(path for path in paths if is_markdown(path) and note_name(path).lower() == wanted)


async def read_named(vault: Vault, path: str) -> NoteData:
    """A note by its vault path, or by its name alone when one note has that name (what
    `[[Rook]]` opens in Obsidian); several of that name are named in the refusal."""
    try:
        return await vault.read_note(path)
    except NoteNotFound as missing:
        named = notes_named(path, await vault.note_stats())
        if len(named) == 1:
            return await vault.read_note(named[0])
        if named:
            raise NoteNotFound(missing.path, named[:_NAMESAKES_SHOWN]) from missing
        raise


async def attachment_text(vault: Vault, path: str) -> tuple[FileBytes, PdfText]:
    """A PDF's text; the refusal of any other attachment (an image has no text)."""
    kind = attachment_kind(path)
    if kind != PDF:
        with contextlib.suppress(NotText):  # missing, or a folder, is said as such
            await vault.read_note(path)
        raise NoTextToRead(path, kind or "a binary file")
    file = await vault.read_bytes(path)
    try:
        return file, await anyio.to_thread.run_sync(pdf_text, file.data)
    except ValueError as exc:
        raise UnreadablePdf(file.path, str(exc)) from exc


def _pdf_source(pdf: PdfText) -> str:
    read = f", the first {pdf.pages_read:,} read" if pdf.pages_read < pdf.pages else ""
    return f"text extracted from a PDF of {plural(pdf.pages, 'page')}{read} (not its layout)"


async def _pdf_window(
    vault: Vault, path: str, *, heading: str | None, offset: int, max_chars: int
) -> NoteWindow:
    if heading:
        raise InvalidArgument(
            f"{excerpt(path, PATH_EXCERPT_CHARS)} is a PDF: it has pages, not headings. Read "
            "it without heading, by offset."
        )
    file, pdf = await attachment_text(vault, path)
    text = pdf.text
    end, next_offset = _window(text, offset, max_chars)
    return NoteWindow(
        path=file.path,
        title=pdf.title or posixpath.basename(file.path),
        tags=(),
        note_tokens=estimate_tokens(text),
        # Not every source knows an attachment's time (REST gives none): said by none.
        modified="",
        section=None,
        offset=offset,
        end=end,
        total_chars=len(text),
        text=text[offset:end],
        next_offset=next_offset,
        version="",
        extracted=_pdf_source(pdf),
    )


async def read_note_window(
    vault: Vault, path: str, *, heading: str | None, offset: int, max_chars: int
) -> NoteWindow:
    if attachment_kind(path) is not None:
        return await _pdf_window(vault, path, heading=heading, offset=offset, max_chars=max_chars)
    note = await read_named(vault, path)
    structure = structure_of(note.path, note.content)
    parsed = structure.note
    selected, label = note.content, None
    if heading and heading.strip():
        # The edit's own resolver: what this returns is what replace changes.
        try:
            target = resolve_target(structure, heading)
        except TargetUnresolved as exc:
            raise InvalidArgument(f"In {note.path!r}: {exc}") from None
        selected, label = structure.text_of(target), target.reference
    end, next_offset = _window(selected, offset, max_chars)
    version = vault.handed_out(note.content)
    if label is not None and (offset > 0 or next_offset is not None):
        version = window_version(version, offset, end)
    return NoteWindow(
        path=note.path,
        title=parsed.title,
        tags=parsed.tags,
        note_tokens=estimate_tokens(note.content),
        modified=_iso_from_ms(note.stat.mtime_ms),
        section=label,
        offset=offset,
        end=end,
        total_chars=len(selected),
        text=selected[offset:end],
        next_offset=next_offset,
        version=version,
    )


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    level: int
    heading: str
    path: str
    tokens: int


@dataclass(frozen=True, slots=True)
class NoteOutline:
    path: str
    title: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    tokens: int
    frontmatter_keys: tuple[str, ...]
    frontmatter_error: str | None
    gist: str
    outline: tuple[OutlineEntry, ...]
    links: int
    unresolved_links: int
    version: str
    # Where the text came from when it is not a note's (a PDF's extracted text).
    extracted: str = ""


def outline_of(parsed: ParsedNote) -> tuple[OutlineEntry, ...]:
    """Each heading with the size of its whole subtree, which is what reading it costs."""
    return tuple(
        OutlineEntry(
            level=s.level,
            heading=s.heading,
            path=_section_label(s),
            tokens=estimate_tokens(parsed.content[s.start : s.subtree_end]),
        )
        for s in parsed.sections
        if s.heading is not None
    )


async def _peek_pdf(vault: Vault, path: str) -> NoteOutline:
    file, pdf = await attachment_text(vault, path)
    first_page = pdf.text.partition("\n")[2].partition("--- page ")[0]
    return NoteOutline(
        path=file.path,
        title=pdf.title or posixpath.basename(file.path),
        aliases=(),
        tags=(),
        tokens=estimate_tokens(pdf.text),
        frontmatter_keys=(),
        frontmatter_error=None,
        gist=truncate_at_word(" ".join(first_page.split()), _PDF_GIST_CHARS),
        outline=(),
        links=0,
        unresolved_links=0,
        version="",
        extracted=_pdf_source(pdf),
    )


async def peek_note(
    vault: Vault, path: str, links: Callable[[], Awaitable[LinkResolver]]
) -> NoteOutline:
    """A note's (or PDF's) outline; `links` gives the vault's link resolver, asked for
    only when the note links somewhere."""
    if attachment_kind(path) is not None:
        return await _peek_pdf(vault, path)
    note = await read_named(vault, path)
    parsed = structure_of(note.path, note.content).note
    note_links = [link for link in parsed.links if link.target]
    unresolved = 0
    if note_links:
        resolver = await links()
        unresolved = sum(
            1 for link in note_links if resolver.resolve(link.target, note.path) is None
        )
    return NoteOutline(
        path=note.path,
        title=parsed.title,
        aliases=parsed.aliases,
        tags=parsed.tags,
        tokens=estimate_tokens(note.content),
        frontmatter_keys=tuple(parsed.frontmatter),
        frontmatter_error=parsed.frontmatter_error,
        gist=gist(parsed),
        outline=outline_of(parsed),
        links=len(note_links),
        unresolved_links=unresolved,
        version=vault.handed_out(note.content),
    )


@dataclass
class FolderNode:
    name: str
    path: str
    folders: dict[str, "FolderNode"] = field(default_factory=dict[str, "FolderNode"])
    notes: list[str] = field(default_factory=list[str])
    attachments: list[str] = field(default_factory=list[str])

    @property
    def note_count(self) -> int:
        return len(self.notes) + sum(f.note_count for f in self.folders.values())

    @property
    def attachment_count(self) -> int:
        return len(self.attachments) + sum(f.attachment_count for f in self.folders.values())

    @property
    def folder_count(self) -> int:
        return len(self.folders) + sum(f.folder_count for f in self.folders.values())


def build_tree(entries: list[str]) -> FolderNode:
    root = FolderNode(name="", path="")
    for entry in entries:
        parts = entry.rstrip("/").split("/")
        is_folder = entry.endswith("/")
        node = root
        folder_parts = parts if is_folder else parts[:-1]
        for index, part in enumerate(folder_parts):
            if part not in node.folders:
                node.folders[part] = FolderNode(part, "/".join(parts[: index + 1]))
            node = node.folders[part]
        if not is_folder:
            (node.notes if is_markdown(entry) else node.attachments).append(entry)
    return root


async def vault_tree(vault: Vault, folder: str) -> FolderNode:
    root_path = normalize_vault_path(folder, folder=True)
    tree = build_tree(await vault.list_tree())
    if not root_path:
        return tree
    node = tree
    for part in root_path.split("/"):
        child = node.folders.get(part)
        if child is None:
            options = ", ".join(sorted(node.folders)[:15]) or "none"
            where = node.path or "the vault root"
            raise InvalidArgument(
                f"No folder {excerpt(root_path, PATH_EXCERPT_CHARS)}. Folders in {where}: "
                f"{options}."
            )
        node = child
    return node


@dataclass(frozen=True, slots=True)
class MapRow:
    path: str
    is_folder: bool
    files: int
    matches: int


@dataclass(frozen=True, slots=True)
class SearchMap:
    query: str
    folder: str
    total_files: int
    total_matches: int
    rows: tuple[MapRow, ...]


async def search_map(
    search: Callable[[str], Awaitable[list[TextSearchHit]]], query: str, folder: str
) -> SearchMap:
    """Match counts per folder and file under `folder`, of the notes `search` finds (the
    vault's simple search: every word of the query in the text)."""
    words = list(dict.fromkeys(query.lower().split()))
    if not words:
        raise InvalidArgument("query is empty; give one or more words to look for.")
    check_query_terms(words)
    scope = normalize_vault_path(folder, folder=True)
    prefix = scope + "/" if scope else ""
    files: dict[str, int] = {}
    for hit in await search(query):
        # Plugins from 3.3 also match file names; the map counts what is in the text, so
        # every source and version gives the same counts.
        in_text = sum(1 for match in hit.matches if match.source == "content")
        if in_text and hit.path.startswith(prefix):
            files[hit.path] = in_text
    grouped: dict[tuple[str, bool], list[int]] = {}
    for path, count in files.items():
        rest = path[len(prefix) :]
        child, sep, _ = rest.partition("/")
        key = (prefix + child, bool(sep))
        grouped.setdefault(key, []).append(count)
    rows = sorted(
        (
            MapRow(path, is_folder, len(counts), sum(counts))
            for (path, is_folder), counts in grouped.items()
        ),
        key=lambda row: (-row.matches, row.path),
    )
    return SearchMap(query, scope, len(files), sum(files.values()), tuple(rows))


async def append_scratch(vault: Vault, scratch_path: str, text: str, now: datetime) -> str:
    body = text.strip()
    if not body:
        raise InvalidArgument("text is empty; give the note to append.")
    if len(body) > MAX_SCRATCH_CHARS:
        raise InvalidArgument(
            f"text is {len(body)} characters; the scratch note takes at most "
            f"{MAX_SCRATCH_CHARS} per entry. Split it, or write a proper note."
        )
    stamp = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return await vault.append_entry(scratch_path, f"\n### {stamp}\n\n{body}\n")
