"""Smart Connections' stored vectors on the fixture vaults: the v3 layout, the legacy one,
both together, stale vectors, and which model made them.

`fixtures/vault-v3` is written by `scripts/embed_fixtures.py --layout v3` with the real
all-MiniLM-L6-v2; its module doc lists what each of its notes exercises.
"""

import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from obsidian_mcp.index.embedder import Matrix, OnnxEmbedder
from obsidian_mcp.index.recipe import ASSUMED_RECIPE, Pooling, TextRole
from obsidian_mcp.index.smart_blocks import murmur_hash, read_note, sha256_hash
from obsidian_mcp.index.smart_env import (
    NoteHashes,
    SmartEnvCache,
    VectorItem,
    fresh_vectors,
    load_vectors,
    read_legacy,
    read_v3,
    same_model,
)
from tests.fixture_vault import REPO_ROOT
from tests.test_memory_meaning import CountingEmbedder

V3_VAULT = REPO_ROOT / "fixtures" / "vault-v3"
NOTES = {
    "Characters/Kettle.md",
    "Characters/Rook.md",
    "Characters/Élodie Brûlé.md",
    "Items/Tide-Compass.md",
    "Lore/Calendar.md",
    "Lore/Magic/Schools/Threadsong.md",
    "Places/Vellmouth.md",
}
DELETED = "Inbox/Scrapped idea.md"  # in the frozen legacy folder; deleted by a v3 `null`
STALE = "Characters/Rook.md"  # edited after Smart Connections embedded it
REREAD = "Lore/Calendar.md"  # its first block re-read but not re-embedded


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    copy = tmp_path / "vault"
    shutil.copytree(V3_VAULT, copy)
    return copy


def block_keys(items: Sequence[VectorItem], path: str) -> set[str]:
    return {item.key for item in items if item.path == path and item.lines is not None}


def current_block_keys(vault: Path, path: str) -> set[str]:
    note = read_note(path, (vault / path).read_text("utf-8"))
    return {path + block.key for block in note.blocks}


def test_murmur_hash_is_smart_environments() -> None:
    # Expected values printed by jsbrains' own `murmur_hash_32_alphanumeric` under node.
    texts = ["", "a", "abcd", "hello world", "Élodie Brûlé — café ÆÞ 🌊 x", "line\n\nnext   "]
    expected = ["0", "gos6uq", "iui9nu", "q8np5b", "1dzlavn", "q2tkda"]
    assert [murmur_hash(text) for text in texts] == expected


def test_v3_alone(vault: Path) -> None:
    shutil.rmtree(vault / ".smart-env" / "multi")
    vectors = load_vectors(vault / ".smart-env")
    assert vectors is not None
    assert vectors.layout == "v3"
    assert vectors.dims == 384
    assert np.allclose(np.linalg.norm(vectors.matrix, axis=1), 1.0, atol=1e-4)
    assert set(vectors.by_path) == NOTES  # the `null` line deleted the scrapped note
    for path in NOTES - {STALE, REREAD}:
        assert vectors.note_row(path) is not None
        assert block_keys(vectors.items, path) == current_block_keys(vault, path), path
    # The superseded record's blocks are gone; the later record's are read.
    assert "Places/Vellmouth.md#Vellmouth##Getting out" in block_keys(
        vectors.items, "Places/Vellmouth.md"
    )
    # A block whose read_hash is not its last_read.hash is stale in Smart Connections' eyes.
    first, *rest = read_note(REREAD, (vault / REREAD).read_text("utf-8")).blocks
    assert block_keys(vectors.items, REREAD) == {REREAD + block.key for block in rest}
    assert REREAD + first.key not in block_keys(vectors.items, REREAD)


def test_v3_rows_are_the_vectors_of_their_items(vault: Path) -> None:
    """Each v3 record points at its own row (`file_i * dims`): the same unchanged note's
    vectors in the v3 files and inline in the legacy files are the same model output."""
    v3 = read_v3(vault / ".smart-env")
    legacy = read_legacy(vault / ".smart-env")
    assert v3 is not None and legacy is not None
    legacy_rows = {item.key: row for row, item in enumerate(legacy.items)}
    compared = 0
    for row, item in enumerate(v3.items):
        if item.path in {STALE, "Places/Vellmouth.md"}:
            continue  # embedded from older texts in v3 on purpose
        other = legacy_rows[item.key]
        assert float(v3.matrix[row] @ legacy.matrix[other]) > 0.9999, item.key
        compared += 1
    assert compared > 20


def test_legacy_alone(vault: Path) -> None:
    shutil.rmtree(vault / ".smart-env" / "smart_sources")
    shutil.rmtree(vault / ".smart-env" / "smart_blocks")
    vectors = load_vectors(vault / ".smart-env")
    assert vectors is not None
    assert vectors.layout == "legacy"
    assert vectors.model == "Xenova/all-MiniLM-L6-v2"
    assert set(vectors.by_path) == NOTES | {DELETED}
    for path in NOTES:
        assert block_keys(vectors.items, path) == current_block_keys(vault, path), path
    fresh = fresh_vectors(vault / ".smart-env")
    assert fresh is not None
    assert DELETED not in fresh.by_path  # its note is not on disk


def test_both_layouts_v3_wins(vault: Path) -> None:
    vectors = load_vectors(vault / ".smart-env")
    assert vectors is not None
    assert vectors.layout == "v3"
    assert DELETED not in vectors.by_path  # only the frozen legacy folder still has it


def test_stale_vectors_are_skipped(vault: Path) -> None:
    fresh = fresh_vectors(vault / ".smart-env")
    assert fresh is not None
    assert STALE not in fresh.by_path
    assert set(fresh.by_path) == NOTES - {STALE}
    text = (vault / "Characters/Kettle.md").read_text("utf-8")
    blocks = fresh.fresh_blocks("Characters/Kettle.md", text)
    assert {(b.headings, b.lines) for b in blocks} == {
        (tuple(h for h in b.key.split("#") if h), (b.start, b.end))
        for b in read_note("Characters/Kettle.md", text).blocks
    }
    assert fresh.fresh_blocks("Characters/Kettle.md", text + "\nEdited.") == []


def test_legacy_hash_is_sha256_of_the_trimmed_note() -> None:
    vectors = read_legacy(REPO_ROOT / "fixtures" / "vault" / ".smart-env")
    assert vectors is not None
    path = "Characters/Kettle.md"
    stored = vectors.items[vectors.by_path[path][0]].note_hash
    text = (REPO_ROOT / "fixtures" / "vault" / path).read_text("utf-8")
    assert stored == sha256_hash(text)
    assert NoteHashes(REPO_ROOT / "fixtures" / "vault").matches(path, stored)


@pytest.mark.anyio
async def test_cache_drops_a_note_edited_on_disk(vault: Path) -> None:
    now = [0.0]
    cache = SmartEnvCache(vault / ".smart-env", clock=lambda: now[0])
    before = await cache.vectors()
    assert before is not None and "Characters/Kettle.md" in before.by_path
    with (vault / "Characters/Kettle.md").open("a", encoding="utf-8") as note:
        note.write("\nA line written while Obsidian was closed.\n")
    now[0] += 10.0
    after = await cache.vectors()
    assert after is not None
    assert "Characters/Kettle.md" not in after.by_path
    assert set(after.by_path) == NOTES - {STALE, "Characters/Kettle.md"}


def test_row_size_found_from_unit_rows(tmp_path: Path) -> None:
    """A headerless vector file of 512-d rows is read as 512-d, not as 256-d halves."""
    env = tmp_path / ".smart-env"
    (env / "smart_sources").mkdir(parents=True)
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(3, 512)).astype("<f4")
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows.tofile(env / "smart_sources" / "mf_x")
    lines = [
        f'"smart_sources:n{i}.md": {{"last_read": {{"hash": "h{i}"}}, "embedding": {{"default": '
        f'{{"file": "mf_x", "file_i": {i}, "read_hash": "h{i}"}}}}}},'
        for i in range(3)
    ]
    (env / "smart_sources" / "smart_sources.ajson").write_text("\n".join(lines))
    vectors = read_v3(env)
    assert vectors is not None
    assert vectors.dims == 512
    assert np.allclose(vectors.matrix, rows, atol=1e-6)


class OtherModel:
    """Stands in for a different embedding model: unrelated directions, same dimension."""

    def __init__(self, dims: int) -> None:
        self._dims = dims
        self._rng = np.random.default_rng(0)

    model_id = vector_space = "other"
    recipe = ASSUMED_RECIPE
    pooling = Pooling.MEAN

    @property
    def dims(self) -> int:
        return self._dims

    def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        rows = self._rng.normal(size=(len(texts), self._dims)).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_same_model_by_dimension_and_parity(vault: Path, embedder: OnnxEmbedder) -> None:
    vectors = fresh_vectors(vault / ".smart-env")
    assert vectors is not None
    assert same_model(vectors, embedder, vault)
    assert not same_model(vectors, OtherModel(384), vault)
    assert not same_model(vectors, OtherModel(256), vault)


@pytest.mark.anyio
async def test_the_cache_tells_which_model_made_its_vectors_once_per_change(
    vault: Path, embedder: OnnxEmbedder
) -> None:
    now = [0.0]
    cache = SmartEnvCache(vault / ".smart-env", clock=lambda: now[0])
    assert await cache.vectors() is not None
    counting = CountingEmbedder(embedder)
    assert await cache.made_by(counting)
    checked = counting.texts
    assert checked > 0
    assert await cache.made_by(counting)
    assert counting.texts == checked  # the answer is kept while the files are unchanged
    assert not await cache.made_by(OtherModel(384))
    with (vault / ".smart-env" / "smart_env.json").open("a", encoding="utf-8") as settings:
        settings.write("\n")
    now[0] += 10.0
    assert await cache.vectors() is not None
    assert await cache.made_by(counting)
    assert counting.texts > checked  # the files changed: checked again


@pytest.mark.anyio
async def test_settle_waits_for_a_model_check_under_way(
    vault: Path, embedder: OnnxEmbedder
) -> None:
    """The model check runs ONNX Runtime in a thread of its own; a closing server waits for
    it rather than exit under it."""
    cache = SmartEnvCache(vault / ".smart-env")
    assert await cache.vectors() is not None
    assert await cache.made_by_if_known(CountingEmbedder(embedder)) is None  # started, not done
    cache.settle()
    assert not [t for t in threading.enumerate() if t.name == "checking Smart Connections' model"]
    assert await cache.made_by_if_known(CountingEmbedder(embedder)) is True
