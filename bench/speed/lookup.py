"""The index builder's look-up of what is left to embed, alone (issue 38's first step).

    python -m bench.speed.lookup --notes 2000 4000 8000    # about a minute

Stores generated notes the shape of the 10,000-note vault's (seven passages of one to
three texts: 13 texts a note) in a real index file, then runs the builder to the end with a
model that costs nothing, so what is timed is the builder's own work: the look-ups, the
writes. A look-up used to scan every passage text (a build's look-ups grew with the square
of the vault: 103 s of a 113 s build at 8,000 notes, at commit 5138bb0); it now reads on
from where the last one stopped, so twice the notes take about twice the time.
"""

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.shared.harness import markdown_table
from obsidian_mcp.index.store import IndexStore, Note, PassageRow
from obsidian_mcp.index.vectors import EmbeddingBuilder

# Writes of notes per transaction while the store is filled (as the bulk read writes).
_NOTES_PER_WRITE = 500


class _FreeModel:
    """The model's slot with a model that costs nothing: its vectors mean nothing."""

    model_id = "free"

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        return np.full((len(texts), 384), 0.05, dtype=np.float32)

    def get(self) -> "_FreeModel":
        return self


def _notes(count: int) -> list[Note[PassageRow]]:
    return [
        Note(
            f"Generated/{i:05d}.md",
            0,
            100,
            "",
            (),
            None,
            tuple(
                PassageRow((f"Heading {j}",), j * 100, j * 100 + 90, ("w",), ("h",), texts)
                for j in range(7)
                for texts in [
                    tuple(
                        f"note {i} passage {j} text {k} " + "words " * 16 for k in range(1 + j % 3)
                    )
                ]
            ),
        )
        for i in range(count)
    ]


def measure(notes: int) -> list[object]:
    """[notes, texts, build wall s, build CPU s, look-ups s] for a store of `notes` notes."""
    with tempfile.TemporaryDirectory() as folder:
        store = IndexStore(Path(folder) / "index.sqlite")
        generated = _notes(notes)
        for first in range(0, notes, _NOTES_PER_WRITE):
            store.put_notes(generated[first : first + _NOTES_PER_WRITE])
        looked = 0.0
        look_up = store.unembedded

        def timed(
            model: str, limit: int, after: int = 0, *, firsts_only: bool = False
        ) -> tuple[list[tuple[str, str]], int]:
            nonlocal looked
            started = time.perf_counter()
            try:
                return look_up(model, limit, after, firsts_only=firsts_only)
            finally:
                looked += time.perf_counter() - started

        store.unembedded = timed  # type: ignore[method-assign]
        wall, cpu = time.perf_counter(), time.process_time()
        texts = EmbeddingBuilder(store, _FreeModel()).run_until_done()  # type: ignore[arg-type]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        store.close()
    return [f"{notes:,}", f"{texts:,}", f"{wall:.1f}", f"{cpu:.1f}", f"{looked:.1f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description="The index builder's own work, no model.")
    parser.add_argument("--notes", type=int, nargs="+", default=[2000, 4000, 8000])
    args = parser.parse_args()
    rows = [measure(count) for count in args.notes]
    header = ["notes", "texts", "build wall s", "build CPU s", "look-ups s"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
