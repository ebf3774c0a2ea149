"""Fetching a model by name, from a real HTTP server on loopback laid out like the hub
(`<url>/<name>/resolve/main/<file>`); never the internet."""

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import (
    OnnxEmbedder,
    cached_model_folder,
    default_model_files,
    folder_model_files,
    load_embedder,
)
from obsidian_mcp.index.model_fetch import DESCRIPTION_BYTES, ModelFetchError, fetch_model
from obsidian_mcp.index.recipe import TextRole
from tests.test_cli import run_cli

NAME = "Xenova/all-MiniLM-L6-v2"


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves the hub's files, logging nothing; each request's path is kept in
    `requested` when one is given."""

    def __init__(self, *args: Any, requested: list[str] | None = None, **kwargs: Any) -> None:
        self.requested = requested
        super().__init__(*args, **kwargs)

    def log_message(self, format: str, *args: object) -> None:
        if self.requested is not None and format.startswith('"%s"'):
            self.requested.append(self.path)


@contextmanager
def serving(root: Path, requested: list[str] | None = None) -> Iterator[str]:
    """A hub on loopback over the folder `root`; its URL."""
    handler = partial(QuietHandler, directory=str(root), requested=requested)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A hub over `tmp_path/hub` serving NAME (ONNX under onnx/, a sentence-bert config)."""
    root = tmp_path / "hub"
    repo = root / NAME / "resolve" / "main"
    (repo / "onnx").mkdir(parents=True)
    files = default_model_files()
    shutil.copy(files.onnx, repo / "onnx" / "model.onnx")
    shutil.copy(files.tokenizer, repo / "tokenizer.json")
    (repo / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    with serving(root) as url:
        yield url, root


def test_fetch_then_load_by_name(
    hub: tuple[str, Path], tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    url, _ = hub
    cache = tmp_path / "cache"
    folder = fetch_model(NAME, cache_dir=cache, hub_url=url).folder
    assert folder == cached_model_folder(cache, NAME)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["model.json", "model.onnx", "tokenizer.json"]
    assert '"max_tokens": 128' in (folder / "model.json").read_text()
    loaded, note = load_embedder(Settings(model=NAME, cache_dir=cache))
    assert loaded is not None, note
    assert loaded.model_id == NAME
    texts = ["the ferryman's coin", "lamps along the quay"]
    assert np.allclose(
        loaded.embed(texts, TextRole.DOCUMENT), embedder.embed(texts, TextRole.DOCUMENT), atol=1e-5
    )


def test_fetch_failures_leave_nothing_behind(hub: tuple[str, Path], tmp_path: Path) -> None:
    url, root = hub
    cache = tmp_path / "cache"
    with pytest.raises(ModelFetchError, match=r"has no tokenizer\.json"):
        fetch_model("Nobody/no-such-model", cache_dir=cache, hub_url=url)
    with pytest.raises(ModelFetchError, match="not a model name"):
        fetch_model("../escape", cache_dir=cache, hub_url=url)
    (root / NAME / "resolve" / "main" / "onnx" / "model.onnx").write_bytes(b"garbage" * 64)
    with pytest.raises(ModelFetchError, match="does not load"):
        fetch_model(NAME, cache_dir=cache, hub_url=url)
    with pytest.raises(ModelFetchError, match="OBSIDIAN_MODEL_HUB_URL"):
        fetch_model(NAME, cache_dir=cache, hub_url="http://127.0.0.1:9")  # nothing listens
    assert list((cache / "models").iterdir()) == []


def test_model_fetch_command(hub: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = hub
    env = {"OBSIDIAN_CACHE_DIR": str(tmp_path / "cache"), "OBSIDIAN_MODEL_HUB_URL": url}
    done = run_cli("model", "fetch", NAME, env=env)
    assert done.returncode == 0, done.stderr
    assert f"Use it with OBSIDIAN_MODEL={NAME}" in done.stdout
    assert f"Run with mean pooling, no prompts, read from the family table's entry for {NAME}" in (
        done.stdout
    )
    failed = run_cli("model", "fetch", "Nobody/nothing", env=env)
    assert failed.returncode == 1
    assert "has no tokenizer.json" in failed.stderr


# What the hub's repositories hold, modelled on real ones: sentence-transformers repos
# (sentence-transformers/all-MiniLM-L6-v2, BAAI/bge-small-en-v1.5) list their modules and
# pooling; ONNX ports (Xenova/bge-small-en-v1.5) hold config.json, a model card naming the
# upstream repository, the tokenizer and onnx/ only.
RETRIEVAL = "Represent this sentence for searching relevant passages: "


def _modules(*extra: str) -> list[dict[str, object]]:
    kinds = ["Transformer", "Pooling", "Normalize", *extra]
    paths = ["", "1_Pooling", "2_Normalize", *(f"{n + 3}_{kind}" for n, kind in enumerate(extra))]
    return [
        {"idx": n, "name": str(n), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for n, (kind, path) in enumerate(zip(kinds, paths, strict=True))
    ]


def _pooling(mode: str) -> dict[str, object]:
    # The older format, without pooling_mode_lasttoken or include_prompt (all-MiniLM-L6-v2's).
    modes = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")
    config: dict[str, object] = {"word_embedding_dimension": 384}
    return config | {f"pooling_mode_{m}": m == mode for m in modes}


def _sentence_transformers(
    mode: str, prompts: dict[str, str] | None = None, *extra: str, default: str | None = None
) -> dict[str, object]:
    return {
        "modules.json": _modules(*extra),
        "1_Pooling/config.json": _pooling(mode),
        "config_sentence_transformers.json": {
            "__version__": {"sentence_transformers": "3.0.1"},
            "prompts": prompts or {},
            "default_prompt_name": default,
        },
        "sentence_bert_config.json": {"max_seq_length": 512, "do_lower_case": False},
    }


def _publish(root: Path, name: str, files: dict[str, object], *, model: bool = True) -> None:
    repo = root / name / "resolve" / "main"
    repo.mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content if isinstance(content, str) else json.dumps(content))
    if model:
        bundled = default_model_files()
        (repo / "onnx").mkdir(exist_ok=True)
        (repo / "onnx" / "model.onnx").symlink_to(bundled.onnx)
        (repo / "tokenizer.json").symlink_to(bundled.tokenizer)


def _card(base_model: str) -> str:
    return f"---\nlibrary_name: transformers.js\nbase_model: {base_model}\n---\n\nAn ONNX port.\n"


# (repository fetched, what the hub holds by repository, model.json's description keys)
DESCRIBED = [
    pytest.param(
        "Org/retriever",
        {"Org/retriever": _sentence_transformers("cls_token", {"query": "q: ", "passage": "p: "})},
        {
            "pooling": "cls",
            "prompts": {"query": "q: ", "document": "p: "},
            "normalize": True,
            "described_by": "Org/retriever's sentence-transformers files",
            "max_tokens": 512,
        },
        id="own files",
    ),
    pytest.param(
        "Xenova/bge-small-en-v1.5",
        {
            "Xenova/bge-small-en-v1.5": {
                "README.md": _card("BAAI/bge-small-en-v1.5"),
                "config.json": {"_name_or_path": "BAAI/bge-small-en-v1.5"},
            },
            # BAAI's own files name no prompt; its model card asks for the instruction.
            "BAAI/bge-small-en-v1.5": _sentence_transformers("cls_token"),
        },
        {
            "pooling": "cls",
            "prompts": {"query": RETRIEVAL, "document": ""},
            "described_by": "BAAI/bge-small-en-v1.5's sentence-transformers files (named by "
            "Xenova/bge-small-en-v1.5's model card's base_model); prompts from the family "
            "table's entry for Xenova/bge-small-en-v1.5 "
            "(https://huggingface.co/BAAI/bge-small-en-v1.5)",
            "max_tokens": 512,
        },
        id="upstream named by the model card, prompts from the family table",
    ),
    pytest.param(
        "Org/upstream-query-only",
        {
            "Org/upstream-query-only": {"README.md": _card("Org/asymmetric")},
            "Org/asymmetric": _sentence_transformers("cls_token", {"query": RETRIEVAL}),
        },
        {"pooling": "cls", "prompts": {"query": RETRIEVAL, "document": ""}},
        id="upstream with a query prompt only: documents get none",
    ),
    pytest.param(
        "Port/nomic-port",
        {
            "Port/nomic-port": {"config.json": {"_name_or_path": "nomic-ai/nomic-embed-text-v1.5"}},
            "nomic-ai/nomic-embed-text-v1.5": _sentence_transformers(
                "mean_tokens",
                {"search_query": "search_query: ", "search_document": "search_document: "},
            ),
        },
        {
            "pooling": "mean",
            "prompts": {"query": "search_query: ", "document": "search_document: "},
            "described_by": "nomic-ai/nomic-embed-text-v1.5's sentence-transformers files (named "
            "by Port/nomic-port's config.json's _name_or_path)",
        },
        id="upstream named by config.json",
    ),
    pytest.param(
        "Org/instructed",
        {
            "Org/instructed": _sentence_transformers(
                "mean_tokens", {"retrieval": "Find: "}, default="retrieval"
            )
        },
        {"pooling": "mean", "prompts": {"query": "Find: ", "document": "Find: "}},
        id="a default prompt for both roles",
    ),
    pytest.param(
        "Someone/e5-small-v2",
        {"Someone/e5-small-v2": {}},
        {
            "pooling": "mean",
            "prompts": {"query": "query: ", "document": "passage: "},
            "described_by": "the family table's entry for Someone/e5-small-v2 "
            "(https://huggingface.co/intfloat/e5-small-v2)",
        },
        id="the family table by name",
    ),
    pytest.param(
        "Org/port",
        {"Org/port": {"README.md": _card("thenlper/gte-small")}},
        {"pooling": "mean", "prompts": {"query": "", "document": ""}},
        id="the family table by the upstream's name",
    ),
    pytest.param(
        "Org/long",
        {
            "Org/long": _sentence_transformers("mean_tokens")
            | {
                "sentence_bert_config.json": {"max_seq_length": 8192},
                "config.json": {"model_type": "bert", "max_position_embeddings": 512},
            }
        },
        {"max_tokens": 512},
        id="a sequence limit beyond the position table is cut to it",
    ),
]


@pytest.mark.parametrize(("name", "repos", "recorded"), DESCRIBED)
def test_fetch_records_how_the_model_is_run(
    tmp_path: Path, name: str, repos: dict[str, dict[str, object]], recorded: dict[str, object]
) -> None:
    root = tmp_path / "hub"
    for repo, files in repos.items():
        _publish(root, repo, files, model=repo == name)
    requested: list[str] = []
    with serving(root, requested) as url:
        folder = fetch_model(name, cache_dir=tmp_path / "cache", hub_url=url).folder
    config = json.loads((folder / "model.json").read_text())
    assert {key: config[key] for key in recorded} == recorded
    assert len(requested) == len(set(requested)), "a file was downloaded twice"
    files = folder_model_files(folder, name)
    assert files.recipe.described_by == config["described_by"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "model.json",
        "model.onnx",
        "tokenizer.json",
    ]


def test_a_model_nothing_describes_is_fetched_and_said_to_be_assumed(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    # A modules.json that does not parse is no description, nor is a model card larger than
    # any real one (it is not read to its end): the fetch looks further.
    card = _card("BAAI/bge-small-en-v1.5") + "x" * DESCRIPTION_BYTES
    _publish(root, "Org/mystery", {"modules.json": "[{not json", "README.md": card})
    cache = tmp_path / "cache"
    with serving(root) as url:
        folder = fetch_model("Org/mystery", cache_dir=cache, hub_url=url).folder
        env = {"OBSIDIAN_CACHE_DIR": str(cache), "OBSIDIAN_MODEL_HUB_URL": url}
        said = run_cli("model", "fetch", "Org/mystery", env=env)
    config = json.loads((folder / "model.json").read_text())
    assert set(config) == {"model_id", "max_tokens"}
    assert said.returncode == 0 and "mean pooling, no prompts are assumed" in said.stdout
    loaded, note = load_embedder(Settings(model="Org/mystery", cache_dir=cache))
    assert loaded is not None and loaded.vector_space == "Org/mystery"
    assert "ASSUMED" in note and "measured on all-MiniLM-L6-v2's cosines" in note


def test_a_pipeline_the_export_leaves_out_is_refused(tmp_path: Path) -> None:
    """A Dense layer after pooling, or a Router between a query and a document encoder, is
    not in an export of the transformer: the vectors would not be the model's, so nothing
    is fetched. Nor is a model that cannot read as far as its sequence limit says."""
    root = tmp_path / "hub"
    _publish(root, "Org/dense", _sentence_transformers("mean_tokens", None, "Dense"))
    router = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Router"}]
    _publish(root, "Org/router", {"modules.json": router})
    unread = _sentence_transformers("mean_tokens")
    _publish(root, "Org/unread", unread | {"sentence_bert_config.json": {"max_seq_length": 4096}})
    cache = tmp_path / "cache"
    with serving(root) as url:
        with pytest.raises(ModelFetchError, match=r"Dense \(3_Dense\)"):
            fetch_model("Org/dense", cache_dir=cache, hub_url=url)
        with pytest.raises(ModelFetchError, match=r"Router \(top level\)"):
            fetch_model("Org/router", cache_dir=cache, hub_url=url)
        with pytest.raises(ModelFetchError, match="cannot read 1024 word pieces"):
            fetch_model("Org/unread", cache_dir=cache, hub_url=url)
    assert list((cache / "models").iterdir()) == []
