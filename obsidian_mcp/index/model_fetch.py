# pyright: strict
"""Fetch an embedding model by name into the cache, for users with internet access.

The server itself never downloads: it starts offline with the bundled model, or with a
model fetched here beforehand (`obsidian-mcp model fetch NAME`, then `OBSIDIAN_MODEL=NAME`).
Files come from the Hugging Face hub's URL layout, `<hub>/<name>/resolve/main/<file>`: the
ONNX export (`onnx/model.onnx`, as the Xenova/* and sentence-transformers/* repos publish
it, else `model.onnx` at the root) and `tokenizer.json`; `sentence_bert_config.json`, when
the repo has one, gives the sequence limit.

A fetch is all or nothing: files go to a temporary folder beside the cache entry, the model
is loaded once to prove it works, and only then does the folder take the entry's place.
"""

import json
import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, cast

import httpx

from obsidian_mcp.index.embedder import (
    DEFAULT_MAX_TOKENS,
    MODEL_CONFIG,
    ONNX_FILE,
    TOKENIZER_FILE,
    OnnxEmbedder,
    cached_model_folder,
    folder_model_files,
)

logger = logging.getLogger(__name__)

# Where repos keep the ONNX export, tried in order.
ONNX_CANDIDATES = ("onnx/model.onnx", "model.onnx")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class ModelFetchError(Exception):
    """A fetch failed; the message says what to do. Nothing was written to the cache."""


def _download(client: httpx.Client, url: str, target: Path) -> bool:
    """Stream `url` into `target`; False on 404 (the file is not in this repo)."""
    with client.stream("GET", url) as response:
        if response.status_code == 404:
            return False
        if response.status_code in (401, 403):
            raise ModelFetchError(
                f"{url} needs authorisation ({response.status_code}): the model is private or "
                "gated; pick a public model, or download it yourself and set OBSIDIAN_MODEL_PATH"
            )
        if response.status_code != 200:
            raise ModelFetchError(
                f"{url} answered {response.status_code}: try again later, or set "
                "OBSIDIAN_MODEL_HUB_URL to a mirror"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            for chunk in response.iter_bytes(1 << 20):
                out.write(chunk)
    return True


def _max_tokens(client: httpx.Client, base: str, staging: Path) -> int:
    config = staging / "sentence_bert_config.json"
    if not _download(client, f"{base}/sentence_bert_config.json", config):
        return DEFAULT_MAX_TOKENS
    try:
        data = json.loads(config.read_text("utf-8"))
    except ValueError:
        return DEFAULT_MAX_TOKENS
    limit = cast(dict[str, Any], data).get("max_seq_length") if isinstance(data, dict) else None
    return limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_TOKENS


def fetch_model(name: str, *, cache_dir: Path, hub_url: str) -> Path:
    """Download model `name` (e.g. `Xenova/all-MiniLM-L6-v2`) into the cache; its folder."""
    if not _NAME_RE.match(name) or ".." in name:
        raise ModelFetchError(
            f"{name!r} is not a model name: use the hub's owner/name, e.g. Xenova/all-MiniLM-L6-v2"
        )
    folder = cached_model_folder(cache_dir, name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    base = f"{hub_url.rstrip('/')}/{name}/resolve/main"
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=folder.parent))
    try:
        with httpx.Client(timeout=_TIMEOUT, follow_redirects=True) as client:
            if not _download(client, f"{base}/{TOKENIZER_FILE}", staging / TOKENIZER_FILE):
                raise ModelFetchError(
                    f"{name} has no {TOKENIZER_FILE} at {base}: check the name on the hub, "
                    "and pick a repo with a fast tokenizer and an ONNX export "
                    "(Xenova/* repos have both)"
                )
            if not any(
                _download(client, f"{base}/{path}", staging / ONNX_FILE) for path in ONNX_CANDIDATES
            ):
                raise ModelFetchError(
                    f"{name} has no ONNX export ({' or '.join(ONNX_CANDIDATES)}) at {base}: "
                    "pick a repo that publishes one (e.g. Xenova/all-MiniLM-L6-v2)"
                )
            config = {"model_id": name, "max_tokens": _max_tokens(client, base, staging)}
        (staging / MODEL_CONFIG).write_text(json.dumps(config) + "\n", "utf-8")
        _check_loads(staging, name)
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    except httpx.HTTPError as exc:
        raise ModelFetchError(
            f"could not download {name} from {hub_url} ({type(exc).__name__}: {exc}): check "
            "the connection, or set OBSIDIAN_MODEL_HUB_URL to a mirror"
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("fetched %s into %s", name, folder)
    return folder


def _check_loads(folder: Path, name: str) -> None:
    try:
        OnnxEmbedder(folder_model_files(folder, name))
    # Whatever ONNX Runtime or tokenizers raise, the download is not a usable model.
    except Exception as exc:
        raise ModelFetchError(
            f"{name} downloaded but does not load as a sentence-embedding model "
            f"({type(exc).__name__}: {str(exc)[:160]}): pick another model"
        ) from exc
