# pyright: strict
"""The embedding model as ONNX Runtime optimizes it, saved once in the cache and loaded from
there on later starts, because it takes far less resident memory that way.

Creating a session from the bundled int8 model folds its quantized weights into float32
copies on the heap. Saved once with those weights in a file of their own, the optimized
model loads with the weights memory-mapped: pages of the file, shared with other processes
and given back under memory pressure, and never read at all for the rows of the word
embedding table no text has used. The bundled all-MiniLM-L6-v2 in `OnnxEmbedder`, loaded
and then asked 60 questions one at a time (x86-64, onnxruntime 1.32, one thread): the
process grew by 167 MB from the bundled file and by 86 MB from the saved copy (53 MB of it
on the heap, the rest mapped file pages); the session was ready in 0.05 s instead of
0.24 s; a question took 11-12 ms either way; and 50 texts embedded alone, in batches of 4
and of 32 gave the very same vectors. Writing the copy (90 MB) made the first load 0.15-0.3 s
longer, and that process grew by 97-143 MB: its heap keeps part of what the session that
wrote the copy freed.

A copy lives in a folder named after everything that makes it valid (`_entry_name`). It is
written to a `.write-` folder beside it and renamed into place, so a crash or another
process writing at the same time never leaves a partial copy under that name (a crash
leaves the `.write-` folder, which nothing reads). Any failure to write or read a copy
returns None, and the caller loads the original model.
"""

import hashlib
import json
import logging
import platform
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs]

logger = logging.getLogger(__name__)

# The optimized graph, its weights (named in the graph, relative to it), and the original
# model's output for the check input.
MODEL_FILE = "model.onnx"
WEIGHTS_FILE = "weights.bin"
CHECK_FILE = "check.npy"
# ONNX Runtime warns that a model saved at ORT_ENABLE_ALL may hold operators tuned to the
# machine that saved it; the extended level holds only portable ones. Loaded again with
# ORT_ENABLE_ALL, the copy answered no faster (11.3 ms a question either way, measured as in
# the module docstring) and took 5 ms longer to load, so it loads as saved. Prepacking (MLAS
# rearranging the matrices it multiplies, a 42 MB heap copy) stays on: with
# session.disable_prepacking the heap held 6 MB instead of 46 MB, but a question took 16-24
# ms instead of 11-12, and the vectors moved by 1.7e-7.
_LEVELS = cast(Any, ort.GraphOptimizationLevel)  # pyright: ignore[reportUnknownMemberType]
SAVE_LEVEL = _LEVELS.ORT_ENABLE_EXTENDED
LOAD_LEVEL = _LEVELS.ORT_DISABLE_ALL
# The copy's output on the check input may differ from the original's by this much.
CHECK_TOLERANCE = 1e-6

NewSessionOptions = Callable[[], Any]
# The session's first output for a fixed input.
Probe = Callable[[Any], npt.NDArray[np.float32]]


def optimized_session(
    source: Path, cache: Path, options: NewSessionOptions, probe: Probe
) -> tuple[Any, Path] | None:
    """A session on the optimized copy of `source` in `cache` and the file it loaded, the
    copy first written if there is none; None (and a log line) when that fails.

    `options` makes the session options (each session needs its own); `probe` runs a
    session on a fixed input, where the copy must give the original's output to within
    CHECK_TOLERANCE. A copy that fails to load or to match is deleted and written again;
    if the new one fails too, it is deleted, and the next start tries once more.
    """
    try:
        entry = cache / _entry_name(source)
        if entry.is_dir():
            session = _load_checked(entry, options, probe)
            if session is not None:
                return session, entry / MODEL_FILE
            _delete(entry)
        _write(source, entry, options, probe)
        session = _load_checked(entry, options, probe)
        if session is None:
            _delete(entry)
            return None
        return session, entry / MODEL_FILE
    # ONNX Runtime raises its own untyped errors; a full, read-only or broken cache folder
    # raises OSError. Either way the original model still works.
    except Exception as exc:
        logger.warning(
            "no optimized copy of %s in %s (loading the original): %s", source, cache, exc
        )
        return None


def _entry_name(source: Path) -> str:
    """`<source>-<build>`: the first part hashes the model file's path, the second what the
    copy was made from and by (the file's size and modification time, ONNX Runtime's version, the
    processor, the optimization level), so a reinstalled model or a new ONNX Runtime gets a
    new entry rather than loading a stale one. Hashing the file itself would read 23 MB at
    every start."""
    resolved = source.resolve()
    stat = resolved.stat()
    build = [stat.st_size, stat.st_mtime_ns, ort.__version__, platform.machine(), str(SAVE_LEVEL)]
    return f"{_digest(str(resolved))}-{_digest(json.dumps(build))}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _load_checked(entry: Path, options: NewSessionOptions, probe: Probe) -> Any | None:
    """The session on `entry`'s copy if it loads and passes the check, else None."""
    try:
        session_options = options()
        session_options.graph_optimization_level = LOAD_LEVEL
        session: Any = ort.InferenceSession(
            str(entry / MODEL_FILE), session_options, providers=["CPUExecutionProvider"]
        )
        expected = np.load(entry / CHECK_FILE, allow_pickle=False)
        got = probe(session)
        if got.shape != expected.shape or not np.allclose(
            got, expected, rtol=0, atol=CHECK_TOLERANCE
        ):
            logger.warning("the optimized model in %s gives other outputs; discarding it", entry)
            return None
    # A truncated file fails in ONNX Runtime's loader or in numpy's; garbled weights, the
    # comparison above.
    except Exception as exc:
        logger.warning("the optimized model in %s does not load (%s); discarding it", entry, exc)
        return None
    logger.debug("loaded the optimized model from %s", entry)
    return session


def _write(source: Path, entry: Path, options: NewSessionOptions, probe: Probe) -> None:
    """Save the optimized copy of `source` as `entry`, with the original's output for the
    check; when another process renamed its copy into place first, keep that one."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".write-", dir=entry.parent))
    try:
        session_options = options()
        session_options.graph_optimization_level = SAVE_LEVEL
        session_options.optimized_model_filepath = str(staging / MODEL_FILE)
        session_options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", WEIGHTS_FILE
        )
        original: Any = ort.InferenceSession(
            str(source), session_options, providers=["CPUExecutionProvider"]
        )
        np.save(staging / CHECK_FILE, probe(original), allow_pickle=False)
        try:
            staging.rename(entry)
        except OSError:
            if not entry.is_dir():
                raise
            logger.debug("another process wrote %s first", entry)
            return
        logger.info("saved the optimized model of %s in %s", source, entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _delete_older_copies(entry)


def _delete_older_copies(entry: Path) -> None:
    """Delete the copies of the same model file made before it changed or ONNX Runtime
    did: no process of this installation loads them again. A process still running on one
    keeps its memory-mapped weights until it ends (on Windows the files stay until then)."""
    same_source = entry.name.split("-")[0] + "-"
    for other in entry.parent.iterdir():
        if other.name.startswith(same_source) and other != entry:
            _delete(other)


def _delete(entry: Path) -> None:
    """Rename `entry` out of the way, at once, then delete it. A folder that cannot be
    renamed (gone already, or a read-only cache) stays; a broken copy is then only skipped."""
    doomed = entry.with_name(f".delete-{uuid.uuid4().hex}")
    try:
        entry.rename(doomed)
    except OSError as exc:
        logger.debug("could not delete %s: %s", entry, exc)
        return
    shutil.rmtree(doomed, ignore_errors=True)
