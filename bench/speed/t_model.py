"""*T_model* of an index built elsewhere (issue 38): the model alone on a seeded sample of
2,000 of the index's first texts (a passage's first run of sentences) and 2,000 of all its
texts, a build's batch at a time, one batch at once (as a server builds) and side by side
on every core (as ``obsidian-mcp index`` builds), scaled to the index's counts: the floor
a build that was stopped and resumed, so never timed whole, is set against.

    python -m bench.speed.t_model VAULT_PARENT CACHE_DIR

VAULT_PARENT holds ``vault/`` and CACHE_DIR is the ``OBSIDIAN_CACHE_DIR`` an
``obsidian-mcp index --vault VAULT_PARENT/vault`` filled (as ``bench.speed.index
--prebuilt``). The index is only read.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from bench.speed.index import model_rate, sample_texts
from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import cores_available
from obsidian_mcp.index.location import index_path
from obsidian_mcp.opening import model_loader


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="T_model of a built passage index.")
    parser.add_argument("vault_parent", type=Path)
    parser.add_argument("cache_dir", type=Path)
    args = parser.parse_args(argv)
    settings = Settings.model_validate(
        {"vault_path": args.vault_parent / "vault", "cache_dir": args.cache_dir}
    )
    with sqlite3.connect(f"file:{index_path(settings)}?mode=ro", uri=True) as db:
        passages = db.execute("SELECT count(*) FROM passages").fetchone()[0]
        texts = db.execute("SELECT count(DISTINCT text_hash) FROM passage_texts").fetchone()[0]
        every: list[tuple[str, str]] = db.execute(
            "SELECT text_hash, text FROM passage_texts"
        ).fetchall()
        # As `IndexStore.unembedded(firsts_only=True)`: each passage's lowest text row.
        firsts: list[tuple[str, str]] = db.execute(
            "SELECT text_hash, text FROM passage_texts WHERE rowid IN "
            "(SELECT min(rowid) FROM passage_texts GROUP BY passage_id)"
        ).fetchall()
    load = model_loader(settings)
    assert load is not None, "the index's model is not installed"
    embedder = load()
    # The same seeded samples as a build run of `bench.speed.index` draws.
    sample_first, sample_all = sample_texts(firsts), sample_texts(every)
    print(f"{passages:,} passages, {texts:,} texts ({texts / passages:.2f} a passage)")
    for side_by_side in sorted({1, cores_available()}, reverse=True):
        first = model_rate(embedder, sample_first, side_by_side)
        whole = model_rate(embedder, sample_all, side_by_side)
        print(
            f"{side_by_side} batch(es) at once: first texts {first:.1f}/s, T_model "
            f"{passages / first:,.0f} s; all texts {whole:.1f}/s, T_model {texts / whole:,.0f} s"
        )


if __name__ == "__main__":
    main()
