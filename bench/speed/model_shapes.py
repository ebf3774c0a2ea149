"""How fast other embedding models would run here, beside the bundled all-MiniLM-L6-v2.

    python -m bench.speed.model_shapes                       # all but L24-H1024 fp32, 5 rounds
    python -m bench.speed.model_shapes --shapes L12-H384 L12-H768 --precision int8
    python -m bench.speed.model_shapes --shapes L24-H1024    # both precisions of the largest
    python -m bench.speed.model_shapes --rounds 3 --out /var/tmp/model-shapes

This machine reaches package registries but no model hub, so the other models' ONNX files
cannot be had. Their speed does not need them: it depends on the architecture, not on the
weights (a dense matrix product does the same work whatever the values). So this builds
BERT encoders of each model's shape (`SHAPES`: layers, width, heads, feed-forward width;
vocabulary and positions as BERT's) with random weights, in float32 and as dynamic int8
(`onnxruntime.quantization.quantize_dynamic`, the way the hub's `model_quantized.onnx`
exports are made), and times them beside the bundled model, each through the project's own
`OnnxEmbedder` with one thread, as the server runs a model (without its optimized copy,
which saves memory, not time: optimized_model.py). Texts are the index's: fixture
vault passages cut to 200 characters (a build embeds windows of at most that), sent in calls
of `vectors.BUILD_BATCH`, in the document role.

Round after round, every model embeds the same passages; the order reverses each round, so
a shared, noisy machine weighs on every model alike. The table gives medians of passages per
CPU-second (what a model would reach with a core to itself) and per wall-second, and each
model's ratio to the bundled model, the median of its ratios to the bundled model's rate in
the same round. A ratio below 1 is slower than the bundled model.

The L6-H384 rows are the bundled model's own shape. Given all-MiniLM-L6-v2's real weights,
the L6-H384 graph built here gives vectors at cosine >= 0.9995 to the bundled model's; yet
it runs 1.1 times as fast in float32, because the bundled "int8" file computes in float32
and dequantizes its weights as it runs (no MatMulInteger).

Without --shapes or --precision, L24-H1024 fp32 is left out (`LEFT_OUT_BY_DEFAULT`): at
0.04 times the bundled model's speed it took 26 s of each 59 s round, and its file is half
the disk the stand-ins take. Five rounds of the default took 3 minutes here (2 cores,
shared).

The built files are kept in `--out` (default `model-shapes/` in the system temp folder) and
reused, so only the first run builds them (a minute): float32 / int8, L6-H384 90 / 23 MB,
L12-H384 133 / 34 MB, L12-H768 436 / 109 MB, L24-H1024 1,336 / 335 MB; 1.2 GB by default,
2.5 GB with L24-H1024 fp32. A run holds the models it times in memory at once, about as
much again. Delete the folder when done. Building needs `onnx` (the bench extra).

Only approximate for models whose layers differ from BERT's: nomic-embed-text-v1.5
(rotary positions, SwiGLU feed-forward) and all-mpnet-base-v2 (relative position bias) are
timed as L12-H768. Prompts some models read before a text (e5's "passage: ") add a few word
pieces that are not counted here.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.shared.harness import markdown_table
from bench.speed.embedding import realistic_passages
from obsidian_mcp.index.embedder import ModelFiles, OnnxEmbedder, default_model_files
from obsidian_mcp.index.recipe import TextRole
from obsidian_mcp.index.vectors import BUILD_BATCH

logger = logging.getLogger("bench.speed.model_shapes")


@dataclass(frozen=True, slots=True)
class Shape:
    """A BERT encoder's size, and the published models built that way."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    models: str


SHAPES = {
    "L6-H384": Shape(6, 384, 12, 1536, "arctic-embed-xs; the bundled all-MiniLM-L6-v2's shape"),
    "L12-H384": Shape(
        12,
        384,
        12,
        1536,
        "bge-small-en-v1.5, e5-small-v2, gte-small, arctic-embed-s, all-MiniLM-L12-v2",
    ),
    "L12-H768": Shape(
        12,
        768,
        12,
        3072,
        "bge-base-en-v1.5, arctic-embed-m; about nomic-embed-text-v1.5, all-mpnet-base-v2",
    ),
    "L24-H1024": Shape(24, 1024, 16, 4096, "mxbai-embed-large-v1"),
}
PRECISIONS = ("fp32", "int8")
# Slow to time (26 s a round of 64 passages, nearly half the round) and 1.3 GB on disk;
# nobody would run a 335M-parameter model in float32 on a laptop CPU when its int8 exists.
LEFT_OUT_BY_DEFAULT = {("L24-H1024", "fp32")}
# Every model above shares BERT's uncased word pieces and 512 positions; the bundled
# tokenizer cuts texts at 256 pieces, so the position table is never read past that.
VOCABULARY = 30522
MAX_POSITIONS = 512
# The spread BERT initialises its weights with: values of a trained model's size, so no
# activation overflows or sinks into slow denormal floats; speed does not see the values.
WEIGHT_STD = 0.02
LAYER_NORM_EPSILON = 1e-12
# LayerNormalization is an ONNX operator from opset 17; IR 8 is one every supported
# onnxruntime reads.
OPSET = 17
IR_VERSION = 8
# The same weights every build, so a rebuilt file is the same file.
SEED = 0
# Characters per text: the index build embeds windows of at most this many.
TEXT_CHARS = 200
# Texts per call, as the index's background build sends them.
CALL_SIZE = BUILD_BATCH
BUNDLED = "bundled all-MiniLM-L6-v2"


class EncoderGraph:
    """A BERT encoder (post-norm, GELU, learned positions) as an ONNX graph, node by node,
    with random weights. Inputs and output are those of the hub's ONNX exports:
    input_ids, attention_mask, token_type_ids -> last_hidden_state (batch, tokens, hidden)."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.rng = np.random.default_rng(SEED)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def constant(self, name: str, value: npt.ArrayLike) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def random(self, name: str, *dims: int) -> str:
        values = self.rng.standard_normal(dims, dtype=np.float32) * np.float32(WEIGHT_STD)
        return self.constant(name, values)

    def op(self, op_type: str, inputs: list[str], output: str, **attributes: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    def linear(self, x: str, name: str, d_in: int, d_out: int) -> str:
        weight = self.random(f"{name}.weight", d_in, d_out)
        bias = self.constant(f"{name}.bias", np.zeros(d_out, np.float32))
        return self.op("Add", [self.op("MatMul", [x, weight], f"{name}.matmul"), bias], name)

    def layer_norm(self, x: str, name: str) -> str:
        scale = self.constant(f"{name}.weight", np.ones(self.shape.hidden, np.float32))
        bias = self.constant(f"{name}.bias", np.zeros(self.shape.hidden, np.float32))
        return self.op(
            "LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=LAYER_NORM_EPSILON
        )

    def embeddings(self) -> str:
        hidden = self.shape.hidden
        words = self.op(
            "Gather", [self.random("word_embeddings", VOCABULARY, hidden), "input_ids"], "words"
        )
        tokens = self.op(
            "Gather",
            [self.op("Shape", ["input_ids"], "ids_shape"), self.constant("one", np.int64(1))],
            "tokens",
        )
        positions = self.op(
            "Range",
            [self.constant("zero", np.int64(0)), tokens, self.constant("step", np.int64(1))],
            "positions",
        )
        placed = self.op(
            "Gather",
            [self.random("position_embeddings", MAX_POSITIONS, hidden), positions],
            "placed",
        )
        types = self.op(
            "Gather",
            [self.random("token_type_embeddings", 2, hidden), "token_type_ids"],
            "types",
        )
        summed = self.op("Add", [self.op("Add", [words, placed], "words_placed"), types], "sum")
        return self.layer_norm(summed, "embeddings.norm")

    def attention_bias(self) -> str:
        """-10000 where the mask is 0, shaped (batch, 1, 1, tokens) to add to every head's
        scores, as BERT masks padding."""
        mask = self.op("Cast", ["attention_mask"], "mask_float", to=TensorProto.FLOAT)
        padding = self.op("Sub", [self.constant("one_float", np.float32(1.0)), mask], "padding")
        bias = self.op(
            "Mul", [padding, self.constant("masked_score", np.float32(-10000.0))], "padding_bias"
        )
        return self.op(
            "Unsqueeze", [bias, self.constant("head_axes", np.array([1, 2], np.int64))], "bias"
        )

    def layer(self, x: str, i: int, bias: str) -> str:
        hidden, heads = self.shape.hidden, self.shape.heads
        head_dims = hidden // heads
        name = f"layer{i}"
        split = self.constant(f"{name}.split", np.array([0, 0, heads, head_dims], np.int64))
        merge = self.constant(f"{name}.merge", np.array([0, 0, hidden], np.int64))

        def per_head(part: str, perm: list[int]) -> str:
            projected = self.linear(x, f"{name}.{part}", hidden, hidden)
            split_up = self.op("Reshape", [projected, split], f"{name}.{part}.heads")
            return self.op("Transpose", [split_up], f"{name}.{part}.by_head", perm=perm)

        query = per_head("query", [0, 2, 1, 3])
        key = per_head("key", [0, 2, 3, 1])  # transposed for query @ key
        value = per_head("value", [0, 2, 1, 3])
        scores = self.op(
            "Mul",
            [
                self.op("MatMul", [query, key], f"{name}.scores"),
                self.constant(f"{name}.scale", np.float32(1.0 / np.sqrt(head_dims))),
            ],
            f"{name}.scaled",
        )
        weights = self.op(
            "Softmax", [self.op("Add", [scores, bias], f"{name}.masked")], f"{name}.probs", axis=-1
        )
        context = self.op(
            "Transpose",
            [self.op("MatMul", [weights, value], f"{name}.context")],
            f"{name}.context.by_token",
            perm=[0, 2, 1, 3],
        )
        context = self.op("Reshape", [context, merge], f"{name}.context.merged")
        attended = self.linear(context, f"{name}.attention_out", hidden, hidden)
        x = self.layer_norm(
            self.op("Add", [attended, x], f"{name}.attention_residual"), f"{name}.attention_norm"
        )
        widened = self.linear(x, f"{name}.intermediate", hidden, self.shape.intermediate)
        # GELU as BERT computes it, exactly: x * (1 + erf(x / sqrt 2)) / 2.
        erf = self.op(
            "Erf",
            [
                self.op(
                    "Div",
                    [widened, self.constant(f"{name}.sqrt2", np.float32(np.sqrt(2.0)))],
                    f"{name}.gelu_in",
                )
            ],
            f"{name}.erf",
        )
        gelu = self.op(
            "Mul",
            [
                self.op(
                    "Mul",
                    [
                        widened,
                        self.op(
                            "Add",
                            [erf, self.constant(f"{name}.one", np.float32(1.0))],
                            f"{name}.erf1",
                        ),
                    ],
                    f"{name}.gelu_twice",
                ),
                self.constant(f"{name}.half", np.float32(0.5)),
            ],
            f"{name}.gelu",
        )
        narrowed = self.linear(gelu, f"{name}.output", self.shape.intermediate, hidden)
        return self.layer_norm(
            self.op("Add", [narrowed, x], f"{name}.output_residual"), f"{name}.output_norm"
        )

    def model(self, graph_name: str) -> onnx.ModelProto:
        x = self.embeddings()
        bias = self.attention_bias()
        for i in range(self.shape.layers):
            x = self.layer(x, i, bias)
        self.op("Identity", [x], "last_hidden_state")
        inputs = [
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ]
        output = helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", self.shape.hidden]
        )
        graph = helper.make_graph(self.nodes, graph_name, inputs, [output], self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        return model


def stand_in(out: Path, name: str, precision: str) -> Path:
    """The ONNX file of shape `name` in `precision`, in `out`: built unless already there.
    Each file is written under a temporary name and renamed into place, so an interrupted
    build leaves nothing a later run would take for a model."""
    path = out / f"{name}-{precision}.onnx"
    if path.is_file():
        return path
    out.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    started = time.perf_counter()
    if precision == "fp32":
        onnx.save(EncoderGraph(SHAPES[name]).model(name), partial)
    else:
        from onnxruntime.quantization import (  # pyright: ignore[reportMissingTypeStubs]
            QuantType,
            quantize_dynamic,
        )

        # Unsigned 8-bit weights, as the hub's model_quantized.onnx exports are made: the
        # matrix products become MatMulInteger.
        quantize_dynamic(stand_in(out, name, "fp32"), partial, weight_type=QuantType.QUInt8)
    partial.replace(path)
    logger.info(
        "built %s (%.0f MB) in %.0f s",
        path,
        path.stat().st_size / 1e6,
        time.perf_counter() - started,
    )
    return path


def texts(count: int) -> list[str]:
    """`count` fixture vault passages cut to TEXT_CHARS, rounded up to whole calls: a call
    of one text would be served from the embedder's cache of recent questions."""
    whole_calls = -(-count // CALL_SIZE) * CALL_SIZE
    return [passage[:TEXT_CHARS] for passage in realistic_passages(whole_calls)]


def passes_per_second(embedder: OnnxEmbedder, passages: list[str]) -> tuple[float, float]:
    """(passages per CPU-second, passages per wall-second) to embed `passages` once."""
    started, cpu_started = time.perf_counter(), time.process_time()
    for first in range(0, len(passages), CALL_SIZE):
        embedder.embed(passages[first : first + CALL_SIZE], TextRole.DOCUMENT)
    cpu = time.process_time() - cpu_started
    wall = time.perf_counter() - started
    return len(passages) / cpu, len(passages) / wall


def run(
    models: dict[str, ModelFiles], passages: list[str], rounds: int
) -> dict[str, dict[str, list[float]]]:
    """Each model's rate per round, and its ratio to the bundled model's in that round."""
    embedders = {label: OnnxEmbedder(files, threads=1) for label, files in models.items()}
    for embedder in embedders.values():  # warm-up: first-call allocations
        embedder.embed(passages[:CALL_SIZE], TextRole.DOCUMENT)
    found: dict[str, dict[str, list[float]]] = {
        label: {"cpu": [], "wall": [], "cpu_ratio": [], "wall_ratio": []} for label in models
    }
    for round_number in range(rounds):
        # Who goes first alternates, so that no model always runs in the same part of a
        # round, when a neighbour's load may come and go.
        order = list(embedders.items())
        if round_number % 2:
            order.reverse()
        this_round: dict[str, tuple[float, float]] = {}
        for label, embedder in order:
            this_round[label] = passes_per_second(embedder, passages)
        cpu_bundled, wall_bundled = this_round[BUNDLED]
        for label, (cpu, wall) in this_round.items():
            found[label]["cpu"].append(cpu)
            found[label]["wall"].append(wall)
            found[label]["cpu_ratio"].append(cpu / cpu_bundled)
            found[label]["wall_ratio"].append(wall / wall_bundled)
        logger.info(
            "round %d: %s",
            round_number + 1,
            ", ".join(f"{label} {cpu:.1f}" for label, (cpu, _) in this_round.items()),
        )
    return found


def table(found: dict[str, dict[str, list[float]]], models: dict[str, ModelFiles]) -> str:
    rows: list[list[object]] = []
    for label, figures in found.items():
        name = label.split()[0]
        rows.append(
            [
                label,
                SHAPES[name].models if name in SHAPES else "itself",
                f"{models[label].onnx.stat().st_size / 1e6:.0f}",
                f"{statistics.median(figures['cpu']):.1f}",
                f"{statistics.median(figures['wall']):.1f}",
                f"{statistics.median(figures['cpu_ratio']):.2f}",
                f"{statistics.median(figures['wall_ratio']):.2f}",
            ]
        )
    headers = [
        "model",
        "stands in for",
        "file MB",
        "passages / CPU-s",
        "passages / s",
        "x bundled (CPU)",
        "x bundled (wall)",
    ]
    return markdown_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--shapes", nargs="+", choices=list(SHAPES), help="default: all (see the docstring)"
    )
    parser.add_argument("--precision", nargs="+", choices=PRECISIONS, help="default: both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passages", type=int, default=64, help="texts each model embeds a round")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "model-shapes",
        help="where the built models are kept and reused",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.passages < 1:
        parser.error("--rounds and --passages must be 1 or more")
    # The root logger stays at warnings: onnxruntime's quantizer logs a line per node to it.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logger.setLevel(logging.INFO)
    left_out = LEFT_OUT_BY_DEFAULT if args.shapes is None and args.precision is None else set()
    bundled = default_model_files()
    models = {BUNDLED: bundled}
    for name in args.shapes or SHAPES:
        for precision in args.precision or PRECISIONS:
            if (name, precision) in left_out:
                continue
            label = f"{name} {precision}"
            path = stand_in(args.out, name, precision)
            models[label] = ModelFiles(f"stand-in {label}", path, bundled.tokenizer)
    passages = texts(args.passages)
    logger.info(
        "%d passages of %.0f characters on average, calls of %d, %d rounds; load average "
        "%.1f on %s cores",
        len(passages),
        statistics.mean(len(p) for p in passages),
        CALL_SIZE,
        args.rounds,
        os.getloadavg()[0],
        os.cpu_count(),
    )
    found = run(models, passages, args.rounds)
    print(table(found, models))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
