"""The index builder's look-up of what is left to embed, alone (issue 38's first step).

    python -m bench.speed.lookup --notes 2000 4000 8000    # about a minute
    python -m bench.speed.lookup --notes 10000 20000 --code DIR   # another checkout's builder

Stores generated notes the shape of the 10,000-note vault's (seven passages of one to
three texts: 13 texts a note) in a real index file, then runs the builder to the end with a
model that costs nothing, so what is timed is the builder's own work: the look-ups, the
writes. A look-up used to scan every passage text (a build's look-ups grew with the square
of the vault: 103 s of a 113 s build at 8,000 notes, at commit 5138bb0); it now reads on
from where the last one stopped, so twice the notes take about twice the time. `--code DIR`
times the builder and index of another checkout, in a child process that imports its
package (a worktree of 6981f1e^ for the look-up before it read on: that look-up takes no
start row, so the wrapper passes on what it is given).
"""

import argparse
import dataclasses
import importlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

# Writes of notes per transaction while the store is filled (as the bulk read writes).
_NOTES_PER_WRITE = 500


class _FreeModel:
    """The model's slot with a model that costs nothing: its vectors mean nothing."""

    # An older checkout's builder (--code) reads model_id and calls embed(texts); this
    # one's reads vector_space and passes the texts' role.
    model_id = vector_space = "free"

    def embed(self, texts: Sequence[str], role: object = None) -> np.ndarray[Any, Any]:
        return np.full((len(texts), 384), 0.05, dtype=np.float32)

    def get(self) -> "_FreeModel":
        return self


def _notes(store_module: ModuleType, count: int) -> list[Any]:
    # `Note` (optional links and title) up to schema 5; `NoteRow` (both required) since.
    note_row = getattr(store_module, "Note", None) or store_module.NoteRow
    given = {field.name for field in dataclasses.fields(note_row)}
    facts = {"links": (), "title": ""}
    PassageRow = store_module.PassageRow
    return [
        note_row(
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
            **{name: value for name, value in facts.items() if name in given},
        )
        for i in range(count)
    ]


def measure(notes: int) -> list[object]:
    """[notes, texts, build wall s, build CPU s, look-ups s] for a store of `notes` notes,
    with the `obsidian_mcp` this process imports."""
    store_module = importlib.import_module("obsidian_mcp.index.store")
    vectors_module = importlib.import_module("obsidian_mcp.index.vectors")
    with tempfile.TemporaryDirectory() as folder:
        store = store_module.IndexStore(Path(folder) / "index.sqlite")
        generated = _notes(store_module, notes)
        for first in range(0, notes, _NOTES_PER_WRITE):
            store.put_notes(generated[first : first + _NOTES_PER_WRITE])
        looked = 0.0
        look_up = store.unembedded

        def timed(*args: Any, **kwargs: Any) -> Any:
            nonlocal looked
            started = time.perf_counter()
            try:
                return look_up(*args, **kwargs)
            finally:
                looked += time.perf_counter() - started

        store.unembedded = timed
        wall, cpu = time.perf_counter(), time.process_time()
        texts = vectors_module.EmbeddingBuilder(store, _FreeModel()).run_until_done()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        store.close()
    return [f"{notes:,}", f"{texts:,}", f"{wall:.1f}", f"{cpu:.1f}", f"{looked:.1f}"]


def measure_in(code: Path, notes: int) -> list[object]:
    """`measure` in a child process whose `obsidian_mcp` is the checkout `code`'s."""
    script = "\n".join(
        [
            "import importlib.util, json, sys",
            f"sys.path.insert(0, {str(code.resolve())!r})",
            f"spec = importlib.util.spec_from_file_location('lookup', {__file__!r})",
            "module = importlib.util.module_from_spec(spec)",
            "spec.loader.exec_module(module)",
            f"print(json.dumps(module.measure({notes})))",
        ]
    )
    child = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    )
    return json.loads(child.stdout)


def main() -> None:
    from bench.shared.harness import markdown_table  # not in a child: it imports this package

    parser = argparse.ArgumentParser(description="The index builder's own work, no model.")
    parser.add_argument("--notes", type=int, nargs="+", default=[2000, 4000, 8000])
    parser.add_argument(
        "--code", type=Path, help="a checkout whose obsidian_mcp is timed instead of this one"
    )
    args = parser.parse_args()
    rows = [
        measure(count) if args.code is None else measure_in(args.code, count)
        for count in args.notes
    ]
    header = ["notes", "texts", "build wall s", "build CPU s", "look-ups s"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
