"""A model runs as its folder's model.json says (pooling, prompts per role), checked against
a reference computed with ONNX Runtime directly; vectors made another way are never read as
this way's (the passage index and the memory cache both re-embed)."""

import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs]
import pytest
from mcp import Client
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import (
    DEFAULT_MODEL_ID,
    ModelUnavailable,
    OnnxEmbedder,
    default_model_files,
    folder_model_files,
    load_embedder,
    model_status,
)
from obsidian_mcp.index.recipe import BUNDLED_RECIPE, ModelRecipe, Pooling, TextRole, vector_space
from obsidian_mcp.memory import meaning
from obsidian_mcp.memory import store as memory_store
from obsidian_mcp.memory.render import render_remembered
from obsidian_mcp.memory.store import NEAR_DUPLICATE
from obsidian_mcp.retrieval import strength
from obsidian_mcp.server import build_server
from tests.conftest import folder_settings
from tests.test_index import retriever_on, small_vault
from tests.test_memory_meaning import PARAPHRASED, CountingEmbedder, store_at
from tests.test_status import read_status

QUESTIONS = ["who rows the ferry at night?", "lamps"]
PASSAGES = [
    "The ferryman will not cross after dark, whatever the fare.",
    "Tomatoes along the south wall ripen first; the north bed stays green until October.",
    "eels",
]


def model_folder(root: Path, config: dict[str, object]) -> Path:
    """The bundled weights and tokenizer in a model folder of their own, with `config` as
    its model.json."""
    bundled = default_model_files()
    root.mkdir(parents=True)
    (root / "model.onnx").symlink_to(bundled.onnx)
    (root / "tokenizer.json").symlink_to(bundled.tokenizer)
    (root / "model.json").write_text(json.dumps(config))
    return root


@cache
def reference_model() -> tuple[Tokenizer, Any]:
    bundled = default_model_files()
    tokenizer = Tokenizer.from_file(str(bundled.tokenizer))
    tokenizer.no_padding()
    return tokenizer, ort.InferenceSession(str(bundled.onnx), providers=["CPUExecutionProvider"])


def reference(text: str, pooling: Pooling) -> np.ndarray[Any, Any]:
    """One text's vector computed directly: its word pieces alone (no padding) through ONNX
    Runtime, pooled as sentence-transformers pools, normalised."""
    tokenizer, session = reference_model()
    ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "token_type_ids" in {i.name for i in session.get_inputs()}:
        feeds["token_type_ids"] = np.zeros_like(ids)
    hidden = session.run(None, feeds)[0][0]
    pooled = {
        Pooling.CLS: hidden[0],
        Pooling.MEAN: hidden.mean(axis=0),
        Pooling.MAX: hidden.max(axis=0),
        Pooling.LAST_TOKEN: hidden[-1],
    }[pooling]
    return pooled / np.linalg.norm(pooled)


@pytest.mark.parametrize("pooling", list(Pooling))
def test_vectors_equal_a_reference_run_with_the_recorded_pooling_and_prompts(
    tmp_path: Path, pooling: Pooling
) -> None:
    """Texts of different lengths in one batch: the padding of the shorter is never pooled."""
    prompts = {"query": "search the notes for: "}
    folder = model_folder(tmp_path / "model", {"pooling": pooling.value, "prompts": prompts})
    model = OnnxEmbedder(folder_model_files(folder))
    questions = model.embed(QUESTIONS, TextRole.QUERY)
    passages = model.embed(PASSAGES, TextRole.DOCUMENT)
    for text, vector in zip(QUESTIONS, questions, strict=True):
        assert np.allclose(vector, reference(prompts["query"] + text, pooling), atol=1e-5)
    for text, vector in zip(PASSAGES, passages, strict=True):
        assert np.allclose(vector, reference(text, pooling), atol=1e-5)
    # One question alone (the recent-questions path) is the same vector, its prompt and all.
    assert np.allclose(model.embed(QUESTIONS[:1], TextRole.QUERY)[0], questions[0], atol=1e-6)
    assert not np.allclose(model.embed(QUESTIONS[:1], TextRole.DOCUMENT)[0], questions[0])


def test_the_bundled_model_keeps_its_name_and_a_recipe_change_names_new_vectors(
    embedder: OnnxEmbedder,
) -> None:
    """No user of the bundled model re-embeds; vectors made another way get another name."""
    assert embedder.recipe == BUNDLED_RECIPE and embedder.vector_space == DEFAULT_MODEL_ID
    assert model_status(embedder)["thresholds"] == f"measured on {DEFAULT_MODEL_ID}"
    spaces = {
        vector_space("m", Pooling.MEAN, ModelRecipe()),
        vector_space("m", Pooling.CLS, ModelRecipe(Pooling.CLS)),
        vector_space("m", None, ModelRecipe()),
        vector_space("m", Pooling.MEAN, ModelRecipe(query_prompt="query: ")),
        vector_space("m", Pooling.MEAN, ModelRecipe(document_prompt="query: ")),
    }
    assert len(spaces) == 5 and "m" in spaces
    assert vector_space("m", Pooling.CLS, ModelRecipe(Pooling.CLS)) == "m (cls pooling)"


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"pooling": "average"}, "pooling is 'average', but must be one of mean, cls"),
        ({"prompts": ["query: "]}, "prompts is ['query: ']"),
        ({"prompts": {"question": "q: "}}, 'keys "query" and "document"'),
        ({"normalize": "yes"}, "normalize is 'yes', but must be true or false"),
        ({"max_tokens": True}, "max_tokens is True, but must be a whole number"),
        ({"max_tokens": "512"}, "max_tokens is '512', but must be a whole number"),
    ],
)
def test_a_model_json_that_cannot_be_run_as_written_is_refused(
    tmp_path: Path, config: dict[str, object], says: str
) -> None:
    folder = model_folder(tmp_path / "model", config)
    with pytest.raises(ModelUnavailable, match=r"model\.json: ") as refused:
        folder_model_files(folder)
    assert says in str(refused.value) and "delete the key" in str(refused.value)
    model, note = load_embedder(Settings(model_path=folder))
    assert model is None and says in note and "OBSIDIAN_MODEL_PATH" in note


@pytest.mark.anyio
async def test_the_index_embeds_again_when_the_recorded_pooling_changes(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    folder = model_folder(tmp_path / "model", {"model_id": "minilm-copy"})
    first, _ = retriever_on(vault, tmp_path, model_path=folder)
    await first.build_index()
    store = first.corpus.store
    assert store.count_unembedded("minilm-copy") == 0
    texts = store.count_unembedded("minilm-copy (cls pooling)")
    assert texts > 0
    first.close()

    (folder / "model.json").write_text(json.dumps({"model_id": "minilm-copy", "pooling": "cls"}))
    again, _ = retriever_on(vault, tmp_path, model_path=folder)
    await again.build_index()
    store = again.corpus.store
    assert store.count_unembedded("minilm-copy (cls pooling)") == 0
    assert store.stats().model == "minilm-copy (cls pooling)"
    _, hashes, codes, scales = store.vectors_since("minilm-copy (cls pooling)", 0, texts)
    assert len(hashes) == texts and codes is not None
    stored = codes.astype(np.float32) * scales[:, None]
    text = dict(store.texts_of(hashes[:1]))[hashes[0]]
    assert again.embedder is not None
    status = again.index_status()["embedding_model"]
    assert isinstance(status, dict) and status["pooling"] == "cls"
    # The meaning floor was measured on the bundled model's cosines: this one's match is
    # weighed by words.
    found = await again.semantic_query("who rows the ferry at night?", limit=3)
    assert found.strength is not None and found.strength.measure == "words"
    cls_vector = reference(text, Pooling.CLS)
    mean_vector = reference(text, Pooling.MEAN)
    cosine = stored[0] @ cls_vector / np.linalg.norm(stored[0])
    assert cosine > 0.99 > float(stored[0] @ mean_vector / np.linalg.norm(stored[0]))
    again.close()


@pytest.mark.anyio
async def test_the_memory_cache_embeds_again_for_a_model_run_another_way(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    cache = tmp_path / "cache.sqlite"
    writer = store_at(vault, cache, embedder)
    for content, tags, _ in PARAPHRASED[:3]:
        await writer.remember(content, tags, "")
    await writer.catch_up_meaning()

    bundled = default_model_files()
    cls_files = folder_model_files(model_folder(tmp_path / "model", {"pooling": "cls"}))
    assert cls_files.onnx.resolve() == bundled.onnx.resolve()
    again = CountingEmbedder(OnnxEmbedder(cls_files))
    await store_at(vault, cache, again).catch_up_meaning()
    assert again.texts == 3  # none of the mean-pooled vectors was taken for its own
    same = CountingEmbedder(embedder)
    await store_at(vault, cache, same).catch_up_meaning()
    assert same.texts == 0


def test_a_prompt_that_leaves_too_little_of_each_text_is_refused(tmp_path: Path) -> None:
    prompt = "read this carefully before you embed it " * 30
    folder = model_folder(tmp_path / "model", {"max_tokens": 128, "prompts": {"query": prompt}})
    model, note = load_embedder(Settings(model_path=folder))
    assert model is None and "its query prompt is" in note and "shorten it" in note


@pytest.mark.anyio
async def test_status_shows_how_the_model_runs_through_a_real_client(tmp_path: Path) -> None:
    vault = small_vault(tmp_path / "vault")
    prompts = {"query": "search the notes for: ", "document": ""}
    folder = model_folder(
        tmp_path / "model", {"model_id": "mine", "pooling": "cls", "prompts": prompts}
    )
    settings = folder_settings(
        vault, tmp_path / "config", index_dir=tmp_path / "index", model_path=folder
    )
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("vault_semantic_query", {"query": "ferry at night"})
        assert not result.is_error
        index = (await read_status(client))["index"]
    assert isinstance(index, dict)
    shown = cast(dict[str, Any], index)["embedding_model"]
    assert {key: shown[key] for key in ("id", "dims", "pooling", "prompts")} == {
        "id": "mine",
        "dims": 384,
        "pooling": "cls",
        "prompts": prompts,
    }
    assert shown["described_by"] == str(folder / "model.json")
    # The floors it names are the ones in force.
    for floor in (
        strength.MEANING_FLOOR,
        meaning.MEANING_FLOOR,
        memory_store.SIMILAR_FLOOR,
        memory_store.NEAR_DUPLICATE,
    ):
        assert (
            f"from cosine {floor:.2f}" in shown["thresholds"]
            or f"from {floor:.2f}" in (shown["thresholds"])
        )
    assert shown["vectors_stored_as"].startswith("mine (cls pooling, prompts ")
    assert "measured on all-MiniLM-L6-v2's cosines" in shown["thresholds"]


@pytest.mark.anyio
async def test_remember_calls_nothing_nearly_the_same_on_a_scale_it_was_not_measured_on(
    tmp_path: Path,
) -> None:
    """ "Nearly the same" asks the agent to forget the new memory; another model's cosines
    may put unrelated memories above the bundled model's floor, so it lists the closest
    with their scores instead."""
    vault = tmp_path / "vault"
    vault.mkdir()
    folder = model_folder(tmp_path / "model", {"prompts": {"document": "note: "}})
    prompted = OnnxEmbedder(folder_model_files(folder))
    memories = store_at(vault, tmp_path / "cache.sqlite", prompted)
    first = await memories.remember("Hobb Marrow hides the guild money in a mutton pie.", ["hobb"])
    again = await memories.remember("Hobb Marrow hides the guild's money in a mutton pie.", ["pie"])
    assert again.similar[0].memory.id == first.memory.id
    assert again.similar[0].score >= NEAR_DUPLICATE and again.near_duplicate is None
    text = render_remembered(again, datetime.now(UTC))
    assert "Nearly the same" not in text and "vault_forget" not in text
    assert f"- {again.short_ids[first.memory.id]} ({again.similar[0].score:.2f})" in text


def test_an_export_of_a_few_values_per_text_is_no_embedding_model(tmp_path: Path) -> None:
    """A classifier's logits or a cross-encoder's score come out one row per text, as a
    pooled embedding does: too few values to be one, it is refused."""
    folder = model_folder(tmp_path / "model", {})
    (folder / "model.onnx").unlink()
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "pieces"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "pieces"])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node("Slice", ["as_float", "starts", "ends", "axes"], ["logits"]),
    ]
    constants = [
        numpy_helper.from_array(np.array([value], dtype=np.int64), name)
        for name, value in (("starts", 0), ("ends", 2), ("axes", 1))
    ]
    graph = helper.make_graph(nodes, "logits", [ids, mask], [logits], constants)
    classifier = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(classifier, folder / "model.onnx")
    loaded, note = load_embedder(Settings(model_path=folder))
    assert loaded is None and "outputs 2 values per text" in note and "classifier" in note
