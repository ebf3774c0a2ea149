"""The whole edit corpus (tests/edit_corpus/) through every source: the vault folder
(with undo after a change in and near the edit) and the stand-in Local REST API at plugin
3.2.0, 4.1.7, 5.1.0 and 6.0.0. The suite runs it all through the engine and the folder, and
a slice through the REST API (tests/test_edit_corpus.py); this runs every case everywhere.

    python -m bench.editing.corpus [--out bench/out]

Prints, per source, the cases run and the failures (each with what went wrong), writes
them to ``<out>/edit_corpus.json``, and exits 1 when any case failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from tests.edit_cases import corpus_editors, load_cases, run_cases

logger = logging.getLogger("bench.editing.corpus")

PLUGIN_VERSIONS = ("3.2.0", "4.1.7", "5.1.0", "6.0.0")


async def _through(plugin_version: str | None) -> dict[str, Any]:
    cases = load_cases()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="edit-corpus-") as work:
        vault_dir = Path(work) / "vault"
        vault_dir.mkdir()
        async with corpus_editors(vault_dir, Path(work), plugin_version) as editor_for:
            failures = await run_cases(
                editor_for, vault_dir, cases, undo_after_changes=plugin_version is None
            )
    return {
        "source": "folder" if plugin_version is None else f"rest {plugin_version}",
        "cases": len(cases),
        "failures": failures,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def run() -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for plugin_version in (None, *PLUGIN_VERSIONS):
        result = await _through(plugin_version)
        logger.info(
            "%s: %d cases, %d failures, %.1f s",
            result["source"],
            result["cases"],
            len(result["failures"]),
            result["seconds"],
        )
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(
        prog="python -m bench.editing.corpus", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    results = anyio.run(run)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "edit_corpus.json").write_text(
        json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8"
    )
    for result in results:
        for name, problems in result["failures"].items():
            logger.error("%s %s: %s", result["source"], name, "; ".join(problems))
    if any(result["failures"] for result in results):
        sys.exit(1)
    return results


if __name__ == "__main__":
    main()
