# pyright: strict
"""A narrow copy of the passage vectors, scored first to shortlist a query's nearest texts.

Exact scoring reads every stored row: at the 801,960 texts of a 50,000-note vault that is
308 MB of int8 codes a query, 67-320 ms on this 2-core machine, and 200-420 ms while the
background listing holds the interpreter between blocks. The rows' principal directions
carry most of a cosine similarity, so scoring their projection on the first
`SHORTLIST_DIMS` of them (a quarter of the bytes) and scoring exactly only the best
`SHORTLIST_SIZE` finds the same nearest texts in a fraction of the time: 24-31 ms alone
and 57-80 ms beside a listing at 50,000 notes, against 70-340 and 223-279 ms (in process,
on `python -m bench.speed.index --prebuilt`'s 50,000-note index, three alternating rounds).
Below SHORTLIST_FROM_ROWS every row is scored. A model's vector snapshot holds the
shortlist of its rows, so a new process takes it in instead of fitting it (the store finds
it when it writes the snapshot, and a vault that grows gets new directions with each).
"""

from dataclasses import dataclass

import numpy as np

from obsidian_mcp.index.coding import Codes, Matrix, quantized

# Directions kept, and texts scored exactly after the shortlist's pass. The nearest 20
# texts found among the exact ranking's nearest 20, at 50,000 notes over 50 planted and 126
# fixture questions (share of texts; of questions with all 20):
#   48 dims: 0.954 / 0.614 with 4,096; 64: 0.986 / 0.841; 96: 0.999 / 0.983;
#   96 with 1,024: 0.993 / 0.898, with 8,192: 0.9994 / 0.989; 128 with 1,024: 0.999 / 0.983.
# 96 and 4,096 are the least memory (77 MB at 801,960 rows) for 0.999; the exact pass over
# 4,096 rows takes about a millisecond.
SHORTLIST_DIMS = 96
SHORTLIST_SIZE = 4096
# Rows held before a query is scored against the shortlist first, and a model's vector
# snapshot stores one (`store.VectorSnapshot`): exact scoring took 7-14 ms at the 160,000
# texts of 10,000 notes, so the development vaults, alone or inside 10,000 notes, keep the
# exact ranking; at the 801,960 texts of 50,000 notes it took 67-320 ms against the
# shortlist's 24-31.
SHORTLIST_FROM_ROWS = 300_000
# Rows the directions are found from: a sample, not every row (the figures above were
# measured with it). A fit at 801,960 rows took 1.2 s, most of it projecting every row.
BASIS_SAMPLE = 20_000
# Rows projected per matrix product while fitting (12 MB of float32 at 384 dimensions).
PROJECT_BLOCK = 8192


@dataclass(frozen=True)
class Projection:
    """The stored rows' mean and first principal directions (one column each)."""

    mean: Matrix
    basis: Matrix

    def project(self, codes: Codes, scales: Matrix, into: Codes, into_scales: Matrix) -> None:
        """Coded rows (int8 with a scale each) projected, then coded the same way, into
        `into` and `into_scales` (as many rows). Centred first: a score then lacks the
        query's dot product with the mean, the same for every row, and the centred values
        fill the int8 range better."""
        for first in range(0, len(codes), PROJECT_BLOCK):
            block = slice(first, min(first + PROJECT_BLOCK, len(codes)))
            floats = codes[block].astype(np.float32) * scales[block, None] - self.mean
            projected = (floats @ self.basis).astype(np.float32, copy=False)
            into[block], into_scales[block] = quantized(projected)

    def query(self, query: Matrix) -> Matrix:
        """The query in the directions' terms: its score against a projected row is its
        cosine similarity to the row, less the same amount for every row."""
        return (query @ self.basis).astype(np.float32)


@dataclass(frozen=True)
class Shortlisted:
    """A projection and the rows it was found from, projected and coded (a row each)."""

    projection: Projection
    codes: Codes
    scales: Matrix


def shortlisted(codes: Codes, scales: Matrix) -> Shortlisted:
    """The shortlist of these coded rows: their projection, and each of them projected."""
    projection = fitted(codes, scales)
    short_codes = np.zeros((len(codes), projection.basis.shape[1]), dtype=np.int8)
    short_scales = np.zeros(len(codes), dtype=np.float32)
    projection.project(codes, scales, short_codes, short_scales)
    return Shortlisted(projection, short_codes, short_scales)


def fitted(codes: Codes, scales: Matrix) -> Projection:
    """The projection of these coded rows on their first SHORTLIST_DIMS principal
    directions, found from a fixed sample (the same rows give the same projection)."""
    sample_rows = np.random.default_rng(0).choice(
        len(codes), min(BASIS_SAMPLE, len(codes)), replace=False
    )
    sample_rows.sort()
    sample = codes[sample_rows].astype(np.float32) * scales[sample_rows, None]
    mean = sample.mean(axis=0)
    centred = sample - mean
    _, directions = np.linalg.eigh(centred.T @ centred)  # ascending by variance
    kept = min(SHORTLIST_DIMS, directions.shape[1])
    basis = np.ascontiguousarray(directions[:, ::-1][:, :kept], dtype=np.float32)
    return Projection(mean.astype(np.float32), basis)
