"""The local embedding model: parity with Smart Connections' stored vectors, loading from the
settings without ever raising, and running off the event loop."""

import importlib.util
import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import anyio
import numpy as np
import pytest
from tokenizers import Tokenizer

from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import (
    DEFAULT_MODEL_ID,
    AsyncEmbedder,
    Matrix,
    OnnxEmbedder,
    cached_model_folder,
    default_model_files,
    embed_side_by_side,
    folder_model_files,
    load_embedder,
    optimized_model_cache,
)
from obsidian_mcp.index.optimized_model import CHECK_FILE, MODEL_FILE, WEIGHTS_FILE
from obsidian_mcp.index.recipe import ASSUMED_RECIPE, Pooling, TextRole
from obsidian_mcp.index.smart_blocks import block_text, note_text, read_vault
from obsidian_mcp.index.smart_env import read_legacy
from tests.fixture_vault import FIXTURE_VAULT, REPO_ROOT
from tests.test_cli import run_cli


def fixture_script() -> ModuleType:
    """scripts/embed_fixtures.py as a module (torch is imported only when it embeds)."""
    path = REPO_ROOT / "scripts" / "embed_fixtures.py"
    spec = importlib.util.spec_from_file_location("embed_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PARITY_LONGEST = 40


@pytest.mark.timeout(600)  # ~10 s alone; minutes when the 2 cores are shared
def test_parity_with_the_stored_smart_connections_vectors(embedder: OnnxEmbedder) -> None:
    """The fixture texts the script embedded in one window (no longer than its MAX_PIECES
    word pieces) get from the local int8 model the vector Smart Connections stores for
    them, to cosine >= 0.98: the stored vectors and ours share one space."""
    stored = read_legacy(FIXTURE_VAULT / ".smart-env")
    assert stored is not None
    row_of = {item.key: row for row, item in enumerate(stored.items)}
    tokenizer = Tokenizer.from_file(str(default_model_files().tokenizer))
    tokenizer.no_truncation()  # count every piece: tokenizer.json truncates by default
    limit = fixture_script().MAX_PIECES
    keys: list[str] = []
    texts: list[str] = []
    for note in read_vault(FIXTURE_VAULT):
        candidates = [(note.path, note_text(note))]
        candidates += [(note.path + block.key, block_text(block)) for block in note.blocks]
        for key, text in candidates:
            if len(tokenizer.encode(text, add_special_tokens=False).ids) <= limit:
                keys.append(key)
                texts.append(text)
    assert len(keys) >= 250
    # The longest texts (where a truncation or pooling slip would show first) and every
    # third of the rest: all of them took a third of a minute of the suite's time.
    by_length = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    chosen = by_length[:PARITY_LONGEST] + by_length[PARITY_LONGEST::3]
    ours = embedder.embed([texts[i] for i in chosen], TextRole.DOCUMENT)
    theirs = stored.matrix[[row_of[keys[i]] for i in chosen]]
    cosines = (ours * theirs).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.98, (keys[chosen[worst]], float(cosines[worst]))


def test_vectors_are_unit_length_in_input_order(embedder: OnnxEmbedder) -> None:
    texts = ["short", "a much longer sentence about the lighthouse keeper " * 8, "short"]
    vectors = embedder.embed(texts, TextRole.DOCUMENT)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[2], atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.9
    assert embedder.embed([], TextRole.DOCUMENT).shape == (0, 384)


@pytest.mark.anyio
async def test_texts_embedded_side_by_side_are_those_of_one_call_in_order(
    embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question's on-demand texts are embedded in shares on several threads at once: the
    model's runs overlap (no lock between them), and each row is the one call's, in the
    caller's order."""
    texts = [
        f"note {n}: the keeper lit the lamp " + "and watched the tide " * (n % 7) for n in range(30)
    ]
    together = embedder.embed(texts, TextRole.DOCUMENT)
    monkeypatch.setattr("obsidian_mcp.index.embedder.cores_available", lambda: 3)
    running, most = 0, 0
    guard = threading.Lock()
    run = embedder._run  # pyright: ignore[reportPrivateUsage]

    def counted(token_ids: list[list[int]]) -> Matrix:
        nonlocal running, most
        with guard:
            running += 1
            most = max(most, running)
        try:
            time.sleep(0.05)  # every share's run starts before the first ends
            return run(token_ids)
        finally:
            with guard:
                running -= 1

    monkeypatch.setattr(embedder, "_run", counted)
    apart = await embed_side_by_side(embedder, texts, TextRole.DOCUMENT)
    assert most == 3
    assert apart.shape == together.shape == (30, 384)
    assert np.allclose(apart, together, atol=1e-5)
    most = 0
    few = await embed_side_by_side(embedder, texts[:15], TextRole.DOCUMENT)
    assert most == 1 and np.allclose(few, together[:15], atol=1e-5)  # too few to share


def test_load_embedder_default(tmp_path: Path) -> None:
    settings = Settings(cache_dir=tmp_path)
    embedder, note = load_embedder(settings)
    assert embedder is not None
    assert embedder.model_id == DEFAULT_MODEL_ID and embedder.dims == 384
    assert DEFAULT_MODEL_ID in note
    assert embedder.loaded_from.is_relative_to(optimized_model_cache(settings))


def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-model"
    folder.mkdir()
    files = default_model_files()
    shutil.copy(files.onnx, folder / "model.onnx")
    shutil.copy(files.tokenizer, folder / "tokenizer.json")
    return folder


def test_load_embedder_from_a_model_folder(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    (folder / "model.json").write_text('{"model_id": "mine", "max_tokens": 8}')
    embedder, note = load_embedder(Settings(model_path=folder, cache_dir=tmp_path))
    assert embedder is not None, note
    assert embedder.model_id == "mine"
    # max_tokens=8 from model.json: two texts that differ only after the 8th piece are equal.
    same_start = "one two three four five six seven eight"
    a, b = embedder.embed(
        [same_start + " nine ten", same_start + " lamps and eels"], TextRole.DOCUMENT
    )
    assert np.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ("no onnx", "has no model.onnx"),
        ("garbage onnx", "could not be loaded"),
        ("garbage tokenizer", "could not be loaded"),
        ("bad model.json", "is not valid JSON"),
    ],
)
def test_load_embedder_never_raises_on_a_broken_model(
    tmp_path: Path, broken: str, expected: str
) -> None:
    folder = model_folder(tmp_path)
    if broken == "no onnx":
        (folder / "model.onnx").unlink()
    elif broken == "garbage onnx":
        (folder / "model.onnx").write_bytes(b"not a model" * 100)
    elif broken == "garbage tokenizer":
        (folder / "tokenizer.json").write_text("{}")
    else:
        (folder / "model.json").write_text("{oops")
    embedder, reason = load_embedder(Settings(model_path=folder, cache_dir=tmp_path))
    assert embedder is None
    assert expected in reason
    assert "OBSIDIAN_MODEL_PATH" in reason  # says what to change


def test_load_embedder_names_the_fetch_command_for_an_unfetched_model(tmp_path: Path) -> None:
    embedder, reason = load_embedder(Settings(model="Xenova/bge-small-en-v1.5", cache_dir=tmp_path))
    assert embedder is None
    assert "obsidian-mcp model fetch Xenova/bge-small-en-v1.5" in reason
    assert str(cached_model_folder(tmp_path, "Xenova/bge-small-en-v1.5")) in reason


def test_doctor_names_the_model_or_why_there_is_none(tmp_path: Path) -> None:
    env = {"OBSIDIAN_VAULT_PATH": str(FIXTURE_VAULT), "OBSIDIAN_CACHE_DIR": str(tmp_path)}
    healthy = run_cli("doctor", env=env)
    assert f"[ok  ] embedding model: {DEFAULT_MODEL_ID} (384-d" in healthy.stdout
    broken = run_cli("doctor", env={**env, "OBSIDIAN_MODEL_PATH": str(tmp_path)})
    assert "[WARN] embedding model: none: search by meaning falls back to keywords" in broken.stdout
    assert "has no model.onnx or tokenizer.json" in broken.stdout


# Texts of every kind the model meets: prose, markup, other scripts, an empty one, one
# beyond the 256 pieces the model reads.
VARIED_TEXTS = [
    "Who keeps the lighthouse at Vellmouth?",
    "eels",
    "",
    "# Harbour ledger\n- [ ] count the ships\n- [x] pay the pilot",
    "```python\nprint('the lamp is lit')\n```",
    "é ü 漢字 🚀 ложка",
    "The harbour master kept a ledger of every ship that came in. " * 20,
    "[[Vellmouth]] #lighthouse ^block-id",
    "1234567890",
    "a",
]


def embedding_calls() -> list[list[str]]:
    """Each text alone, in batches of 4, and 32 at once: batches pad to their longest text."""
    # The long text is left out of the 32: padded to its 256 pieces, they took seconds.
    short = [text for text in VARIED_TEXTS if len(text) < 100]
    thirty_two = [f"{text} {copy}" for copy in range(5) for text in short][:32]
    alone = [[text] for text in VARIED_TEXTS]
    return [*alone, *(VARIED_TEXTS[i : i + 4] for i in range(0, len(VARIED_TEXTS), 4)), thirty_two]


@pytest.fixture(scope="module")
def uncached_vectors() -> list[tuple[list[str], Matrix]]:
    """The embedding calls and their vectors from the bundled model as it loads without a
    cache of optimized copies."""
    model = OnnxEmbedder(default_model_files())
    return [(texts, model.embed(texts, TextRole.DOCUMENT)) for texts in embedding_calls()]


def assert_same_vectors(model: OnnxEmbedder, expected: list[tuple[list[str], Matrix]]) -> None:
    for texts, vectors in expected:
        assert float(np.abs(model.embed(texts, TextRole.DOCUMENT) - vectors).max()) <= 1e-6, texts


def cache_entry(cache: Path) -> Path:
    """The one entry in a cache of optimized copies."""
    (entry,) = [path for path in cache.iterdir() if not path.name.startswith(".")]
    return entry


def test_a_second_embedder_loads_the_optimized_copy_the_first_wrote(
    tmp_path: Path, uncached_vectors: list[tuple[list[str], Matrix]]
) -> None:
    cache = tmp_path / "optimized"
    first = OnnxEmbedder(default_model_files(), optimized_cache=cache)
    entry = cache_entry(cache)
    assert first.loaded_from == entry / MODEL_FILE
    written = (entry / WEIGHTS_FILE).stat()
    second = OnnxEmbedder(default_model_files(), optimized_cache=cache)
    assert second.loaded_from == entry / MODEL_FILE
    assert cache_entry(cache) == entry
    assert (entry / WEIGHTS_FILE).stat().st_ino == written.st_ino  # read, not written again
    assert_same_vectors(second, uncached_vectors)


TAIL = 1 << 16


@pytest.mark.parametrize(
    ("damaged", "damage"),
    [
        (MODEL_FILE, "truncated"),
        (WEIGHTS_FILE, "truncated"),
        (CHECK_FILE, "truncated"),
        # The last 64 KiB of weights as NaNs: the copy loads and runs, only its check fails.
        (WEIGHTS_FILE, "garbled"),
    ],
)
def test_a_damaged_optimized_copy_is_replaced(
    tmp_path: Path,
    uncached_vectors: list[tuple[list[str], Matrix]],
    caplog: pytest.LogCaptureFixture,
    damaged: str,
    damage: str,
) -> None:
    cache = tmp_path / "optimized"
    OnnxEmbedder(default_model_files(), optimized_cache=cache)
    path = cache_entry(cache) / damaged
    size = path.stat().st_size
    tail = path.read_bytes()[-TAIL:]
    if damage == "truncated":
        os.truncate(path, size // 2)
    else:
        with path.open("r+b") as file:
            file.seek(size - TAIL)
            file.write(b"\xff" * TAIL)
    with caplog.at_level(logging.WARNING):
        model = OnnxEmbedder(default_model_files(), optimized_cache=cache)
    assert f"the optimized model in {path.parent}" in caplog.text
    assert model.loaded_from == path.parent / MODEL_FILE
    assert path.stat().st_size == size and path.read_bytes()[-TAIL:] == tail
    assert_same_vectors(model, uncached_vectors)


def test_a_cache_that_cannot_be_written_leaves_the_original_model(
    tmp_path: Path, uncached_vectors: list[tuple[list[str], Matrix]]
) -> None:
    settings = Settings(cache_dir=tmp_path)
    optimized_model_cache(settings).parent.mkdir(parents=True)
    optimized_model_cache(settings).write_text("a file where the cache wants a folder")
    model, note = load_embedder(settings)
    assert model is not None, note
    assert model.loaded_from == default_model_files().onnx
    assert_same_vectors(model, uncached_vectors)


def test_a_changed_model_file_gets_a_new_optimized_copy(tmp_path: Path) -> None:
    """Another size or modification time means another model: its copy is written anew, and
    the old one, which no start would load again, is deleted."""
    folder = model_folder(tmp_path)
    files = folder_model_files(folder)
    cache = tmp_path / "optimized"
    OnnxEmbedder(files, optimized_cache=cache)
    old = cache_entry(cache)
    changed = (folder / "model.onnx").stat().st_mtime_ns + 1_000_000_000
    os.utime(folder / "model.onnx", ns=(changed, changed))
    model = OnnxEmbedder(files, optimized_cache=cache)
    new = cache_entry(cache)
    assert new != old and model.loaded_from == new / MODEL_FILE


class CountingEmbedder:
    """Records how many `embed` calls overlap and on which threads they run."""

    def __init__(self) -> None:
        self.running = 0
        self.most_at_once = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    model_id = vector_space = "counting"
    dims = 2
    recipe = ASSUMED_RECIPE
    pooling = Pooling.MEAN

    def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.threads.add(threading.get_ident())
        time.sleep(0.05)  # long enough for a second call to arrive while this one runs
        with self._lock:
            self.running -= 1
        return np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2)


@pytest.mark.anyio
async def test_async_embedder_runs_in_a_worker_one_call_at_a_time() -> None:
    counting = CountingEmbedder()
    embedder = AsyncEmbedder(counting)
    results: list[Matrix] = []

    async def one(text: str) -> None:
        results.append(await embedder.embed([text], TextRole.QUERY))

    async with anyio.create_task_group() as group:
        for text in ("a", "b", "c"):
            group.start_soon(one, text)
    assert len(results) == 3
    assert counting.most_at_once == 1
    assert threading.get_ident() not in counting.threads


@pytest.mark.anyio
async def test_async_embedder_gives_the_models_vectors(embedder: OnnxEmbedder) -> None:
    texts = ["the lighthouse at Vellmouth", "eels"]
    assert np.allclose(
        await AsyncEmbedder(embedder).embed(texts, TextRole.DOCUMENT),
        embedder.embed(texts, TextRole.DOCUMENT),
    )


class RunCountingEmbedder(OnnxEmbedder):
    """The real model, counting the texts it runs through the network."""

    def __init__(self) -> None:
        self.texts_run = 0
        super().__init__(default_model_files())

    def _run(self, token_ids: list[list[int]]) -> Matrix:
        self.texts_run += len(token_ids)
        return super()._run(token_ids)


@pytest.mark.anyio
async def test_a_question_asked_of_every_vault_at_once_is_embedded_once() -> None:
    """A search over several vaults embeds its question per vault and again to weigh them,
    at once from several worker threads: the model runs it once, and each caller gets the
    vector a batch gives it, its own copy."""
    model = RunCountingEmbedder()
    question = "Who keeps the lighthouse at Vellmouth?"
    before = model.texts_run
    vectors: list[Matrix] = []

    async def ask() -> None:
        vectors.append(await AsyncEmbedder(model).embed([question], TextRole.QUERY))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(ask)
    assert model.texts_run - before == 1
    batch = model.embed([question, "eels"], TextRole.QUERY)
    assert all(np.allclose(vector[0], batch[0], atol=1e-5) for vector in vectors)
    vectors[0][0] *= 0  # a caller's copy is its own
    assert np.allclose(model.embed([question], TextRole.QUERY)[0], batch[0], atol=1e-5)
