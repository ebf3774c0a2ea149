"""The memory files of a vault folder as tests see them: every file the store reads (the
legacy single file, each writer's file, conflict copies), merged as the store merges them."""

import json
from pathlib import Path
from typing import Any

from obsidian_mcp.memory.files import MemoryFiles

MEMORY = "obsidian-mcp/memory.jsonl"


def memory_paths(vault: Path, memory: str = MEMORY) -> list[Path]:
    files = MemoryFiles(memory)
    legacy = vault / files.legacy
    beside = legacy.parent.glob(f"{legacy.stem}*{legacy.suffix}") if legacy.parent.is_dir() \
        else []
    writers = (vault / files.folder).glob("*.jsonl") if (vault / files.folder).is_dir() else []
    return sorted(path for path in {*beside, *writers} if path.is_file())


def writer_paths(vault: Path, memory: str = MEMORY) -> list[Path]:
    """The writers' files alone (what this version writes)."""
    folder = vault / MemoryFiles(memory).folder
    return sorted(p for p in folder.glob("*.jsonl") if p.is_file()) if folder.is_dir() else []


def memory_bytes(vault: Path, memory: str = MEMORY) -> bytes:
    """Every file's bytes, one after the other (each file's lines stay whole)."""
    return b"".join(path.read_bytes() for path in memory_paths(vault, memory))


def memory_lines(vault: Path, memory: str = MEMORY) -> list[str]:
    """Every non-empty line of every file."""
    text = memory_bytes(vault, memory).decode("utf-8")
    return [line for line in text.split("\n") if line.strip()]


def memory_entries(vault: Path, memory: str = MEMORY) -> list[dict[str, Any]]:
    """Every line that parses as a JSON object."""
    entries: list[dict[str, Any]] = []
    for line in memory_lines(vault, memory):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            entries.append(value)
    return entries


def live_ids(vault: Path, memory: str = MEMORY) -> set[str]:
    """Ids with a memory line and no tombstone in any file."""
    entries = memory_entries(vault, memory)
    forgotten = {e["id"] for e in entries if e.get("forgotten") is True}
    return {e["id"] for e in entries if e.get("forgotten") is not True} - forgotten
