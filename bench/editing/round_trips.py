"""Round trips on whole vaults, as an agent makes them through the tools (issue 34).

    python -m bench.editing.round_trips [--vault DIR ...] [--sources folder,3.2.0,6.0.0]
                                [--window 1500] [--out bench/out]

For every heading and every block id of every note of each vault (default: the fixture
vault and fixtures/ledgerline), through a real MCP client and the server over the vault
folder or the stand-in Local REST API at each plugin version:

* **unchanged**: vault_read_note(heading=T), then vault_edit_note(replace, T) with the text
  as read and the read's version: the note's bytes are unchanged;
* **one word**: read T, change one word of it, replace: the note differs from before by
  that word alone (the text read is found once in the note, and only there changes);
* **cut window**: for a target longer than `--window` characters, read its second window
  (`offset`), change one word in it, replace with the window's version: only that word
  changes, and nothing outside the window is lost.

Prints per vault and source the counts (targets, each check, failures) and writes them,
with every failure, to ``<out>/round_trips.json``. A vault nobody here wrote works as
well: `--vault /path/to/a/public/vault` (a copy is edited, never the folder given).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.editing.lens import Outcome
from obsidian_mcp.config import Settings
from obsidian_mcp.editing.lines import split_lines
from obsidian_mcp.editing.targets import NoteStructure, TargetUnresolved, resolve_target
from obsidian_mcp.server import build_server
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

REPO = Path(__file__).resolve().parents[2]
VAULTS = (REPO / "fixtures" / "vault", REPO / "fixtures" / "ledgerline" / "vault")
_ID_RE = re.compile(r"(?:^|[ \t>]|(?<=\]\]))\^([A-Za-z0-9-]+)[ \t]*\r?$", re.MULTILINE)
_WORD_RE = re.compile(r"(?<![\w^#\[/.-])[A-Za-z]{4,}(?![\w\]])")
_LONG_AGO = time.time() - 3600
# Characters of the window a long target is read in, for the cut-window check.
WINDOW = 1500


def targets_of(path: str, text: str) -> list[str]:
    """Every heading (by its full path, or the line-numbered label where two share one)
    and every block id the resolver finds in the note."""
    structure = NoteStructure.of(path, split_lines(text))
    headings = structure.headings()
    paths = [h.reference for h in headings]
    found = [h.reference if paths.count(h.reference) == 1 else h.label() for h in headings]
    for block_id in dict.fromkeys(_ID_RE.findall(text)):
        try:
            resolve_target(structure, "^" + block_id)
        except TargetUnresolved:
            continue  # inside code, a comment or a heading: not an id
        found.append("^" + block_id)
    return found


async def _read(client: Client, path: str, target: str, **extra: object) -> dict[str, Any]:
    result = await client.call_tool(
        "vault_read_note", {"path": path, "heading": target, "format": "json", **extra}
    )
    if result.is_error:
        raise RuntimeError(text_of(result))
    return json.loads(text_of(result))


async def _replace(client: Client, path: str, target: str, content: str, version: str) -> str:
    result = await client.call_tool(
        "vault_edit_note",
        {
            "path": path,
            "operation": "replace",
            "target": target,
            "content": content,
            "version": version,
        },
    )
    if result.is_error:
        raise RuntimeError(text_of(result))
    return text_of(result)


def _one_word(text: str) -> tuple[str, str] | None:
    """The text with its first plain word after its first line changed, and that word."""
    first_break = text.find("\n") + 1
    found = _WORD_RE.search(text, first_break if first_break else 0)
    if found is None:
        return None
    return text[: found.start()] + "Zanzibar" + text[found.end() :], found.group()


async def _check_target(
    client: Client, file: Path, path: str, target: str, window: int, counts: Outcome
) -> None:
    def raw() -> str:
        return file.read_bytes().decode("utf-8")

    def check(check: str, wanted: str, detail: str) -> None:
        """Count the check, then put the note back as it was, written an hour ago."""
        if raw() == wanted:
            counts.passed(check)
        else:
            counts.failed(check, path, target, detail)
        file.write_bytes(before.encode())
        os.utime(file, (_LONG_AGO, _LONG_AGO))

    before = raw()
    read = await _read(client, path, target, max_chars=100_000)
    await _replace(client, path, target, read["text"], read["version"])
    if raw() == before:
        counts.passed("unchanged")
    else:
        counts.failed("unchanged", path, target, "the note changed")
        file.write_bytes(before.encode())
        return
    changed = _one_word(read["text"])
    if changed is not None and before.count(read["text"]) == 1:
        content, _ = changed
        read = await _read(client, path, target, max_chars=100_000)
        await _replace(client, path, target, content, read["version"])
        wanted = before.replace(read["text"], content, 1)
        check("one word", wanted, "the note changed elsewhere too")
    if len(read["text"]) > window:
        first = await _read(client, path, target, max_chars=window)
        second = await _read(client, path, target, offset=first["next_offset"], max_chars=window)
        changed = _one_word("\n" + second["text"])
        if changed is None or before.count(second["text"]) != 1:
            return
        content = changed[0][1:]
        await _replace(client, path, target, content, second["version"])
        wanted = before.replace(second["text"], content, 1)
        check("cut window", wanted, "text outside the window changed")


def _settle(vault: Path) -> None:
    for file in vault.rglob("*.md"):
        os.utime(file, (_LONG_AGO, _LONG_AGO))


def _label(vault: Path) -> str:
    return vault.name if vault.name != "vault" else vault.parent.name


async def _through(vault: Path, source: str, window: int, work: Path) -> Outcome:
    copy = work / f"{_label(vault)}-{source}"
    shutil.copytree(vault, copy, ignore=shutil.ignore_patterns(".smart-env", ".obsidian"))
    _settle(copy)
    counts = Outcome()
    values: dict[str, object] = {
        "config_dir": work / "config",
        "cache_dir": work / "cache",
        "index_embeddings": False,
        "memory_meaning": False,
    }
    # Hidden folders (.trash, .obsidian) are not the vault's notes to any tool.
    notes = sorted(
        f
        for f in copy.rglob("*.md")
        if not any(part.startswith(".") for part in f.relative_to(copy).parts)
    )
    standin = (
        StandinProcess(copy, plugin_version=source, smart="off") if source != "folder" else None
    )
    try:
        if standin is not None:
            standin.start()
            values |= {
                "api_key": standin.api_key,
                "port": standin.port,
                "cert": Path(standin.cert),
                "request_timeout": 10.0,
            }
        else:
            values["vault_path"] = copy
        async with Client(build_server(Settings.model_validate(values))) as client:
            for file in notes:
                path = file.relative_to(copy).as_posix()
                for target in targets_of(path, file.read_bytes().decode("utf-8")):
                    counts.targets += 1
                    try:
                        await _check_target(client, file, path, target, window, counts)
                    except RuntimeError as exc:
                        counts.failed("refused", path, target, str(exc)[:300])
    finally:
        if standin is not None:
            standin.stop()
    return counts


async def run_vaults(
    vaults: Sequence[Path], sources: Sequence[str], window: int
) -> dict[str, Any]:
    """Counts per vault and source (\"fixtures/folder\"), with the first 50 failures."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="round-trips-") as work:
        for vault in vaults:
            for source in sources:
                started = time.perf_counter()
                counts = await _through(vault, source, window, Path(work))
                key = f"{_label(vault)}/{source}"
                results[key] = {
                    "targets": counts.targets,
                    "checks": counts.checks,
                    "failures": len(counts.failures),
                    "failed": counts.failures[:50],
                    "seconds": round(time.perf_counter() - started, 1),
                }
                print(key, json.dumps({k: v for k, v in results[key].items() if k != "failed"}))
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--vault", type=Path, action="append", help="a vault folder (repeat)")
    parser.add_argument("--sources", default="folder,3.2.0,6.0.0")
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args(argv)
    vaults = args.vault or list(VAULTS)
    results = anyio.run(run_vaults, vaults, args.sources.split(","), args.window)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "round_trips.json").write_text(json.dumps(results, indent=1), "utf-8")
    return results


if __name__ == "__main__":
    sys.exit(1 if any(r["failures"] for r in main().values()) else 0)
