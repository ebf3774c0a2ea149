# pyright: strict
"""Attachments: the files of a vault that are not notes. A PDF's text is extracted (with
pypdf) so an agent can read it as it reads a note; images, audio, video and archives have
no text to read, and reading one is refused with what the file is and where it is used.
Kinds by extension, as Obsidian itself tells them apart (its accepted file formats).
"""

import io
import posixpath
import warnings
from dataclasses import dataclass
from functools import lru_cache

from obsidian_mcp.errors import VaultError
from obsidian_mcp.limits import PATH_EXCERPT_CHARS, excerpt

PDF = "a PDF document"
_KINDS = {
    ".pdf": PDF,
    **dict.fromkeys(
        (
            ".png",
            ".jpg",
            ".jpeg",
            ".gif",
            ".bmp",
            ".svg",
            ".webp",
            ".avif",
            ".tif",
            ".tiff",
            ".ico",
            ".heic",
        ),
        "an image",
    ),
    **dict.fromkeys(
        (".mp3", ".wav", ".m4a", ".ogg", ".flac", ".3gp", ".aac", ".opus"), "an audio file"
    ),
    **dict.fromkeys((".mp4", ".mov", ".mkv", ".ogv", ".webm", ".avi"), "a video"),
    **dict.fromkeys((".zip", ".gz", ".tar", ".7z", ".rar"), "an archive"),
    **dict.fromkeys((".docx", ".xlsx", ".pptx", ".odt", ".ods", ".epub"), "an office document"),
    **dict.fromkeys((".exe", ".dll", ".so", ".dylib", ".bin", ".wasm"), "a program file"),
}
# A PDF longer than this many pages is read up to it: pypdf extracts about 20-50 pages a
# second on one core, and a reply is read a window at a time anyway.
MAX_PDF_PAGES = 300


def attachment_kind(path: str) -> str | None:
    """What a file is by its extension, when it is an attachment; None for a note or
    another text file (.md, .txt, .canvas, .csv)."""
    return _KINDS.get(posixpath.splitext(path)[1].lower())


class NoTextToRead(VaultError):
    def __init__(self, path: str, kind: str) -> None:
        name = posixpath.basename(path)
        super().__init__(
            f"{excerpt(path, PATH_EXCERPT_CHARS)} is an attachment ({kind}), not a note: "
            f"it has no text to read. Notes show it with ![[{name}]]; "
            f'vault_smart_search(query="{name}") finds the notes that use it.'
        )


class UnreadablePdf(VaultError):
    def __init__(self, path: str, why: str) -> None:
        super().__init__(
            f"{excerpt(path, PATH_EXCERPT_CHARS)} could not be read as a PDF ({why}); it may "
            "be damaged or encrypted. Open it in Obsidian, or read the notes about it."
        )


@dataclass(frozen=True, slots=True)
class PdfText:
    """A PDF's text, page by page, each page led by a `--- page N ---` line."""

    text: str
    pages: int
    # Pages read (fewer than `pages` past MAX_PDF_PAGES).
    pages_read: int
    title: str


# PDFs whose text is kept: an agent reads a long one window by window, a call each, and
# the file is parsed once; a cached PDF keeps its bytes (the key) in memory, so only two.
_PDFS_KEPT = 2


@lru_cache(maxsize=_PDFS_KEPT)
def pdf_text(data: bytes) -> PdfText:
    """The text pypdf extracts from a PDF's pages. Raises ValueError with the reason when
    the file cannot be read."""
    # Imported at the first PDF, not at start: every server process would pay its 0.1 s.
    from pypdf import PdfReader

    with warnings.catch_warnings():
        # pypdf warns about every odd object of a real-world PDF; what it could read is
        # what the agent gets.
        warnings.simplefilter("ignore")
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise ValueError("it is encrypted with a password")
            pages = len(reader.pages)
            parts = [
                f"--- page {number} ---\n{(page.extract_text() or '').strip()}"
                for number, page in enumerate(reader.pages[:MAX_PDF_PAGES], start=1)
            ]
            title = reader.metadata.title if reader.metadata is not None else None
        except Exception as exc:  # a damaged file makes pypdf raise many kinds of error
            raise ValueError(str(exc) or type(exc).__name__) from exc
    return PdfText("\n\n".join(parts) + "\n", pages, min(pages, MAX_PDF_PAGES), str(title or ""))
