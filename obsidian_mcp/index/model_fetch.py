# pyright: strict
"""Fetch an embedding model by name into the cache, for users with internet access.

The server itself never downloads: it starts offline with the bundled model, or with a
model fetched here beforehand (`obsidian-mcp model fetch NAME`, then `OBSIDIAN_MODEL=NAME`).
Files come from the Hugging Face hub's URL layout, `<hub>/<name>/resolve/main/<file>`: the
ONNX export (`onnx/model.onnx`, as the Xenova/* and sentence-transformers/* repos publish
it, else `model.onnx` at the root) and `tokenizer.json`. How the model is run (its pooling
and prompts, `describe`) and its sequence limit (`sentence_bert_config.json`) go to the
folder's model.json.

A fetch is all or nothing: files go to a temporary folder beside the cache entry, the model
is loaded once to prove it works, and only then does the folder take the entry's place.
"""

import json
import logging
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
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
from obsidian_mcp.index.model_families import family_recipe
from obsidian_mcp.index.recipe import ASSUMED_RECIPE, ModelRecipe, Pooling, TextRole
from obsidian_mcp.text.markdown import parse_note

logger = logging.getLogger(__name__)

# Where repos keep the ONNX export, tried in order.
ONNX_CANDIDATES = ("onnx/model.onnx", "model.onnx")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
# A module's folder inside its repository (modules.json), as sentence-transformers names them
# ("1_Pooling"); anything else is not fetched.
_FOLDER_RE = re.compile(
    r"[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*(/[A-Za-z0-9_][A-Za-z0-9_-]*)*"
)
# The most read of a file that describes a model (a model card, a JSON configuration; the
# largest real ones are tens of kilobytes).
DESCRIPTION_BYTES = 1 << 20
# Where a fetch downloads before its folder takes the cache entry's place; a fetch killed
# midway leaves one, and one older than STALE_FETCH_SECONDS is no fetch under way.
_STAGING_PREFIX = ".fetch-"
STALE_FETCH_SECONDS = 3600
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class ModelFetchError(Exception):
    """A fetch failed; the message says what to do. Nothing was written to the cache."""


def _unanswered(url: str, status: int) -> ModelFetchError:
    return ModelFetchError(
        f"{url} answered {status}: try again later, or set OBSIDIAN_MODEL_HUB_URL to a mirror"
    )


class _Hub:
    """The hub's files by repository and path (`<hub>/<repo>/resolve/main/<path>`)."""

    def __init__(self, client: httpx.Client, hub_url: str) -> None:
        self._client = client
        self._url = hub_url.rstrip("/")
        self._texts: dict[str, str | None] = {}

    def url(self, repo: str, path: str) -> str:
        return f"{self._url}/{repo}/resolve/main/{path}"

    def download(self, repo: str, path: str, target: Path) -> bool:
        """Stream the file into `target`; False on 404 (the file is not in this repo)."""
        url = self.url(repo, path)
        with self._client.stream("GET", url) as response:
            if response.status_code == 404:
                return False
            if response.status_code in (401, 403):
                raise ModelFetchError(
                    f"{url} needs authorisation ({response.status_code}): the hub answers so "
                    "for a name it does not have as for a private or gated model; check the "
                    "name on the hub, pick a public model, or download it yourself and set "
                    "OBSIDIAN_MODEL_PATH"
                )
            if response.status_code != 200:
                raise _unanswered(url, response.status_code)
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
        return True

    def text(self, repo: str, path: str) -> str | None:
        """A small text file of the repo; None when it has none, or one that is not text or
        larger than DESCRIPTION_BYTES (no description file is; the rest is not read). Each
        is downloaded once a fetch (config.json names the upstream and the position table)."""
        url = self.url(repo, path)
        if url not in self._texts:
            self._texts[url] = self._download_text(url)
        return self._texts[url]

    def _download_text(self, url: str) -> str | None:
        with self._client.stream("GET", url) as response:
            if response.status_code in (401, 403, 404):
                return None
            if response.status_code != 200:
                raise _unanswered(url, response.status_code)
            read = bytearray()
            for chunk in response.iter_bytes():
                read += chunk
                if len(read) > DESCRIPTION_BYTES:
                    logger.warning("%s is over %d bytes: not read", url, DESCRIPTION_BYTES)
                    return None
        try:
            return read.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def json_object(self, repo: str, path: str) -> dict[str, Any] | None:
        """A JSON file of the repo that holds an object; None when it has none, or one that
        does not parse (logged: the fetch then describes the model from elsewhere)."""
        text = self.text(repo, path)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            logger.warning("%s is not valid JSON: not read", self.url(repo, path))
            return None
        return cast(dict[str, Any], value) if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class Description:
    """What a fetch records of how to run a model."""

    recipe: ModelRecipe
    # Word pieces the model reads (sentence_bert_config.json), None where nothing says.
    max_tokens: int | None
    # Steps of its authors' pipeline after pooling that this server does not run (a Dense
    # layer): only an export that outputs one vector per text holds them.
    not_run: tuple[str, ...] = ()


# sentence-transformers' pooling modes (its Pooling module's config.json), as run here. The
# mean times the square root of the length points the same way as the mean, and vectors
# are compared by cosine.
_POOLING_MODES = {
    "pooling_mode_cls_token": Pooling.CLS,
    "pooling_mode_mean_tokens": Pooling.MEAN,
    "pooling_mode_mean_sqrt_len_tokens": Pooling.MEAN,
    "pooling_mode_max_tokens": Pooling.MAX,
    "pooling_mode_lasttoken": Pooling.LAST_TOKEN,
    "pooling_mode_weightedmean_tokens": None,
}
# The prompt names sentence-transformers models give each role, first found first: its own
# encode_query and encode_document use "query", and "document", "passage" or "corpus";
# nomic-embed names them "search_query" and "search_document".
_PROMPT_NAMES = {
    TextRole.QUERY: ("query", "search_query"),
    TextRole.DOCUMENT: ("document", "passage", "search_document", "corpus"),
}
_MODULES_RUN = ("Transformer", "Pooling", "Normalize")


def _max_tokens(hub: _Hub, repo: str) -> int | None:
    config = hub.json_object(repo, "sentence_bert_config.json")
    limit = config.get("max_seq_length") if config is not None else None
    return limit if isinstance(limit, int) and limit > 0 else None


def _prompts(config: dict[str, Any] | None) -> dict[TextRole, str]:
    """Each role's prompt from config_sentence_transformers.json, by the names in
    _PROMPT_NAMES, else its default prompt, else none."""
    prompts = config.get("prompts") if config is not None else None
    named = (
        {str(key).lower(): value for key, value in cast(dict[object, object], prompts).items()}
        if isinstance(prompts, dict)
        else {}
    )
    default_name = config.get("default_prompt_name") if config is not None else None
    default = named.get(default_name.lower()) if isinstance(default_name, str) else None
    chosen: dict[TextRole, str] = {}
    for role, names in _PROMPT_NAMES.items():
        found = next((named[name] for name in names if isinstance(named.get(name), str)), default)
        chosen[role] = found if isinstance(found, str) else ""
    return chosen


def sentence_transformers_description(hub: _Hub, repo: str, *, via: str = "") -> Description | None:
    """How `repo`'s own sentence-transformers files say to run it (modules.json, its
    Pooling module's config.json, config_sentence_transformers.json); None without
    modules.json, or when it lists only modules this server runs and no pooling config can
    be read (the fetch then looks further). `via` says how the repo was found."""
    modules = hub.text(repo, "modules.json")
    try:
        listed: object = json.loads(modules) if modules is not None else None
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        return None
    entries = [
        cast(dict[str, Any], entry)
        for entry in cast(list[object], listed)
        if isinstance(entry, dict)
    ]
    kinds = [
        (str(entry.get("type", "")).rsplit(".", 1)[-1], str(entry.get("path", "")))
        for entry in entries
    ]
    not_run = [
        f"{kind} ({path or 'top level'})" for kind, path in kinds if kind not in _MODULES_RUN
    ]
    pooling_folder = next((path.strip("/") for kind, path in kinds if kind == "Pooling"), None)
    pooling_config = (
        hub.json_object(repo, f"{pooling_folder}/config.json")
        if pooling_folder is not None and _FOLDER_RE.fullmatch(pooling_folder)
        else None
    )
    if pooling_config is None:
        if not not_run:
            return None
        # A pipeline this server does not run (a Router of a query and a document encoder,
        # say): described, so that the fetch refuses it.
        pooling_config = {}
    chosen = [key for key, on in pooling_config.items() if key.startswith("pooling_mode") and on]
    if pooling_config.get("include_prompt") is False:
        not_run.append("pooling that leaves the prompt's word pieces out (include_prompt: false)")
    # Two modes at once are concatenated by sentence-transformers: not run here.
    pooling = _POOLING_MODES.get(chosen[0]) if len(chosen) == 1 else None
    if pooling is None:
        not_run.append(f"pooling by {' + '.join(chosen) or 'no mode'}")
    prompts = _prompts(hub.json_object(repo, "config_sentence_transformers.json"))
    return Description(
        ModelRecipe(
            pooling or Pooling.MEAN,
            prompts[TextRole.QUERY],
            prompts[TextRole.DOCUMENT],
            normalize=any(kind == "Normalize" for kind, _ in kinds),
            described_by=f"{repo}'s sentence-transformers files{via}",
        ),
        _max_tokens(hub, repo),
        tuple(not_run),
    )


def upstream_of(hub: _Hub, repo: str) -> tuple[str, str] | None:
    """The repository a port names as the one it was made from, and where it names it:
    its model card's `base_model` (the hub's front matter key), else the `_name_or_path`
    its config.json was saved from."""
    readme = hub.text(repo, "README.md")
    if readme is not None:
        base: object = parse_note("README.md", readme).frontmatter.get("base_model")
        if isinstance(base, list) and base:
            base = cast(list[object], base)[0]
        if isinstance(base, str) and _is_name(base) and base != repo:
            return base, "model card's base_model"
    config = hub.json_object(repo, "config.json")
    saved_from = config.get("_name_or_path") if config is not None else None
    if (
        isinstance(saved_from, str)
        and "/" in saved_from
        and _is_name(saved_from)
        and saved_from != repo
    ):
        return saved_from, "config.json's _name_or_path"
    return None


def describe(hub: _Hub, name: str) -> Description:
    """How to run `name`, from the first that says: its own sentence-transformers files;
    those of the upstream repository it names; the family table (model_families.py) by
    its name or its upstream's; else assumed (mean pooling, no prompts). Files that give
    no prompt take the family's: BAAI's and intfloat's own files name none, though their
    model cards ask for BGE's instruction and E5's "query: " / "passage: "."""
    own = sentence_transformers_description(hub, name)
    upstream = None if own is not None else upstream_of(hub, name)
    family = next(
        (
            recipe
            for repo in (name, *(upstream[:1] if upstream else ()))
            if (recipe := family_recipe(repo)) is not None
        ),
        None,
    )
    found = own
    if found is None and upstream is not None:
        repo, where = upstream
        found = sentence_transformers_description(hub, repo, via=f" (named by {name}'s {where})")
        if found is not None:
            found = replace(found, max_tokens=_max_tokens(hub, name) or found.max_tokens)
    if found is None:
        return Description(family or ASSUMED_RECIPE, _max_tokens(hub, name))
    recipe = found.recipe
    if family is not None and not (recipe.query_prompt or recipe.document_prompt):
        recipe = replace(
            recipe,
            query_prompt=family.query_prompt,
            document_prompt=family.document_prompt,
            described_by=f"{recipe.described_by}; prompts from {family.described_by}",
        )
    return replace(found, recipe=recipe)


# Architectures whose position ids start after the padding id (RoBERTa's scheme): they read
# max_position_embeddings - pad_token_id - 1 word pieces (514 - 1 - 1 = 512).
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "camembert", "mpnet", "longformer"})


def _position_limit(hub: _Hub, repo: str) -> int | None:
    """The most word pieces the model's position table holds, from its config.json; a
    sequence limit above it (sentence_bert_config.json says 8192 for some 512-position
    ports) would load, then fail on the first long text."""
    config = hub.json_object(repo, "config.json") or {}
    positions = config.get("max_position_embeddings")
    if isinstance(positions, bool) or not isinstance(positions, int) or positions <= 0:
        return None
    pad = config.get("pad_token_id")
    if config.get("model_type") in _OFFSET_POSITIONS and isinstance(pad, int) and pad >= 0:
        return max(positions - pad - 1, 1)
    return positions


def _is_name(name: str) -> bool:
    return bool(_NAME_RE.match(name)) and ".." not in name


@dataclass(frozen=True, slots=True)
class FetchedModel:
    folder: Path
    recipe: ModelRecipe
    # The export outputs one vector per text: the recipe's pooling is not used.
    pooled_by_model: bool


def fetch_model(name: str, *, cache_dir: Path, hub_url: str) -> FetchedModel:
    """Download model `name` (e.g. `Xenova/all-MiniLM-L6-v2`) into the cache, with how to
    run it (`describe`) in its model.json."""
    if not _is_name(name):
        raise ModelFetchError(
            f"{name!r} is not a model name: use the hub's owner/name, e.g. Xenova/all-MiniLM-L6-v2"
        )
    folder = cached_model_folder(cache_dir, name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    for leftover in folder.parent.glob(f"{_STAGING_PREFIX}*"):
        if time.time() - leftover.stat().st_mtime > STALE_FETCH_SECONDS:
            shutil.rmtree(leftover, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=folder.parent))
    try:
        with httpx.Client(timeout=_TIMEOUT, follow_redirects=True) as client:
            hub = _Hub(client, hub_url)
            if not hub.download(name, TOKENIZER_FILE, staging / TOKENIZER_FILE):
                raise ModelFetchError(
                    f"{name} has no {TOKENIZER_FILE} at {hub.url(name, '')}: check the name on "
                    "the hub, and pick a repo with a fast tokenizer and an ONNX export "
                    "(Xenova/* repos have both)"
                )
            if not any(hub.download(name, path, staging / ONNX_FILE) for path in ONNX_CANDIDATES):
                raise ModelFetchError(
                    f"{name} has no ONNX export ({' or '.join(ONNX_CANDIDATES)}) at "
                    f"{hub.url(name, '')}: pick a repo that publishes one (e.g. "
                    "Xenova/all-MiniLM-L6-v2)"
                )
            description = describe(hub, name)
            limit = _position_limit(hub, name)
            if limit is not None and (description.max_tokens or DEFAULT_MAX_TOKENS) > limit:
                description = replace(description, max_tokens=limit)
        (staging / MODEL_CONFIG).write_text(
            json.dumps(model_config(name, description), indent=2) + "\n", "utf-8"
        )
        pooled_by_model = _check_runs(staging, name, description)
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
    return FetchedModel(folder, description.recipe, pooled_by_model)


def model_config(name: str, description: Description) -> dict[str, object]:
    """model.json's keys (embedder.folder_model_files reads them); pooling and prompts
    are left out where they were assumed, which is how the folder says so."""
    recipe = description.recipe
    config: dict[str, object] = {
        "model_id": name,
        "max_tokens": description.max_tokens or DEFAULT_MAX_TOKENS,
    }
    if recipe.described_by is not None:
        config |= {
            "pooling": recipe.pooling.value,
            "prompts": {role.value: recipe.prompt(role) for role in TextRole},
            "normalize": recipe.normalize,
            "described_by": recipe.described_by,
        }
    return config


def _check_runs(folder: Path, name: str, description: Description) -> bool:
    """Load the fetched model once: it must load, read texts as long as its sequence limit,
    and give the vectors its authors' pipeline gives (an export of the transformer alone
    leaves out a Dense layer after it). Whether the export pools itself."""
    try:
        embedder = OnnxEmbedder(folder_model_files(folder, name))
        embedder.check_longest_text()
    # Whatever ONNX Runtime or tokenizers raise, the download is not a usable model.
    except Exception as exc:
        raise ModelFetchError(
            f"{name} downloaded but does not load as a sentence-embedding model "
            f"({type(exc).__name__}: {str(exc)[:160]}): pick another model"
        ) from exc
    if description.not_run and embedder.pooling is not None:
        raise ModelFetchError(
            f"{name}'s authors run {', '.join(description.not_run)} on the model's output "
            "(as its sentence-transformers files say), and this server does not: its vectors "
            "would not be the ones it was trained to give. Pick an ONNX export that outputs "
            "one vector per text, or another model"
        )
    return embedder.pooling is None
