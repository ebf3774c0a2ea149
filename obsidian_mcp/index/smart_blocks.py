# pyright: strict
"""How Smart Connections cuts a note into blocks, what text it embeds, and how it hashes.

Shared by the runtime (to check that Smart Connections' stored vectors come from our model,
and which of them are stale) and by `scripts/embed_fixtures.py` (which writes the fixture
vectors), so both build exactly the same texts. Standard library and mmh3 only: the fixture
script imports this module from a venv that has torch but not this project's dependencies.

Sources (reference `local-rest-api.md` §2.4; `jsbrains@ba80525`): a block's embedded text is
its breadcrumbs, a newline, then its lines (`smart-blocks/actions/get_embed_input/
markdown.js`); block keys are the note path then each heading prefixed by as many `#` as its
level, a repeated heading path gets `#{n}`; line ranges are 1-indexed and inclusive.
"""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import mmh3

# Smart Connections' `smart_blocks.min_chars` default: shorter sections get no block.
MIN_BLOCK_CHARS = 30
# `create_hash` hashes at most this many characters.
_HASHED_CHARS = 100_000
HEADING = re.compile(r"^(#{1,6})\s+(.+)$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Block:
    key: str  # the part after the note path, e.g. "#Backstory##Childhood"
    start: int  # 1-indexed, inclusive
    end: int
    text: str  # the section's lines
    breadcrumb: str  # "Folder > Note > Backstory > Childhood"


@dataclass(frozen=True, slots=True)
class Note:
    path: str
    content: str
    body: str  # the content without its frontmatter
    blocks: tuple[Block, ...]

    @property
    def title(self) -> str:
        return Path(self.path).stem


def note_text(note: Note) -> str:
    """What is embedded for a whole note: its title, a blank line, its body."""
    return f"{note.title}\n\n{note.body}"


def block_text(block: Block) -> str:
    """What Smart Connections embeds for a block: breadcrumbs, newline, the block's lines."""
    return f"{block.breadcrumb}\n{block.text}"


def sha256_hash(text: str) -> str:
    """`create_hash` of Smart Connections up to 3.x: SHA-256 hex of the trimmed text."""
    return hashlib.sha256(text[:_HASHED_CHARS].strip().encode("utf-8")).hexdigest()


def murmur_hash(text: str) -> str:
    """`murmur_hash_32_alphanumeric` of Smart Environment v3 (the hash in `last_read`).

    MurmurHash3 x86 32-bit, seed 0, over the low byte of each UTF-16 code unit (JavaScript's
    `charCodeAt(i) & 0xff`), printed unsigned in base 36. mmh3 does it in C: 7 us for a
    5 KB note against 2.8 ms in pure Python (`python -m timeit`), which over a 10,000-note
    vault is the difference between a blink and half a minute.
    """
    return _base36(mmh3.hash(text.encode("utf-16-le")[::2], 0, signed=False))


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


def hash_matches(stored: str, text: str) -> bool:
    """Whether `stored` (a `last_read.hash`) is the hash of `text`, in either scheme."""
    if _SHA256_HEX.match(stored):
        return sha256_hash(text) == stored
    return murmur_hash(text) == stored


def frontmatter_end(lines: list[str]) -> int:
    """How many lines the frontmatter takes (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return i + 1
    return 0


def parse_blocks(path: str, content: str) -> tuple[Block, ...]:
    """The heading sections of a note, as Smart Connections keys them, in document order.

    A section runs from its heading to the line before the next heading of the same or a
    higher level, so a parent covers its subsections; headings in fenced code are ignored;
    text before the first heading gets no block (the note vector covers it), nor does a
    section whose text without its heading lines is under MIN_BLOCK_CHARS characters.
    """
    lines = content.split("\n")
    opened: list[tuple[int, str, int]] = []  # (level, key, start line)
    ranges: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    counts: dict[str, int] = {}
    in_code = False
    for index in range(frontmatter_end(lines), len(lines)):
        number = index + 1
        line = lines[index]
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        match = None if in_code else HEADING.match(line)
        if match is None:
            continue
        level, title = len(match.group(1)), match.group(2).strip()
        while opened and opened[-1][0] >= level:
            _, key, start = opened.pop()
            ranges[key] = (start, number - 1)
        parent_key = opened[-1][1] if opened else ""
        key = parent_key + "#" * level + title
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > 1:
            key += f"#{{{counts[key]}}}"
        opened.append((level, key, number))
        order.append(key)
    while opened:
        _, key, start = opened.pop()
        ranges[key] = (start, len(lines))
    stem = path.removesuffix(".md")
    blocks: list[Block] = []
    for key in order:
        start, end = ranges[key]
        section = lines[start - 1 : end]
        prose = "".join(line for line in section if not HEADING.match(line))
        if len("".join(prose.split())) < MIN_BLOCK_CHARS:
            continue
        headings = [h for h in re.split(r"#+", key) if h]
        breadcrumb = " > ".join([*stem.split("/"), *headings])
        blocks.append(Block(key, start, end, "\n".join(section), breadcrumb))
    return tuple(blocks)


def read_note(path: str, content: str) -> Note:
    lines = content.split("\n")
    body = "\n".join(lines[frontmatter_end(lines) :]).strip()
    return Note(path, content, body, parse_blocks(path, content))


def read_vault(vault: Path) -> list[Note]:
    """Every markdown note of the vault outside hidden folders, sorted by path."""
    notes: list[Note] = []
    for file in sorted(vault.rglob("*.md")):
        rel = file.relative_to(vault).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        notes.append(read_note(rel, file.read_text("utf-8")))
    return notes
