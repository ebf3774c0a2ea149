"""Fetching a model by name, from a real HTTP server on loopback laid out like the hub
(`<url>/<name>/resolve/main/<file>`); never the internet."""

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import (
    OnnxEmbedder,
    cached_model_folder,
    default_model_files,
    load_embedder,
)
from obsidian_mcp.index.model_fetch import ModelFetchError, fetch_model
from tests.test_cli import run_cli

NAME = "Xenova/all-MiniLM-L6-v2"


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


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
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_then_load_by_name(
    hub: tuple[str, Path], tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    url, _ = hub
    cache = tmp_path / "cache"
    folder = fetch_model(NAME, cache_dir=cache, hub_url=url)
    assert folder == cached_model_folder(cache, NAME)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["model.json", "model.onnx", "sentence_bert_config.json", "tokenizer.json"]
    assert '"max_tokens": 128' in (folder / "model.json").read_text()
    loaded, note = load_embedder(Settings(model=NAME, cache_dir=cache))
    assert loaded is not None, note
    assert loaded.model_id == NAME
    texts = ["the ferryman's coin", "lamps along the quay"]
    assert np.allclose(loaded.embed(texts), embedder.embed(texts), atol=1e-5)


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
    failed = run_cli("model", "fetch", "Nobody/nothing", env=env)
    assert failed.returncode == 1
    assert "has no tokenizer.json" in failed.stderr
