"""Soak: one server, a client calling tools without pause, the vault edited underneath.

    python -m bench --soak 30            # 30 minutes; REPORT.md section "Soak"

The server runs as a stdio subprocess on the stand-in Local REST API with the vault folder
configured too (the richest set-up: REST live, the folder beside it, an API key to leak),
over a generated 500-note vault. Every ``EDIT_SECONDS`` a note under ``Soak/`` is added,
changed, renamed or deleted on disk, in turn; right after each edit the client checks that
the answers show the vault as it is now (the note reads with its newest marker, a search
for the marker finds it, a renamed or deleted note is gone). Between edits it makes mixed
calls of every other tool. The server's RSS and open descriptors are sampled every
``SAMPLE_SECONDS`` from ``/proc``; every response and the server's log are searched for
the API key.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bench.shared.generate_vault import generate
from bench.shared.harness import (
    CallResult,
    Session,
    markdown_table,
    server_env,
    server_pid,
    stdio_session,
)
from tests.standin.process import StandinProcess

EDIT_SECONDS = 3.0
SAMPLE_SECONDS = 30.0
SOAK_NOTES = 500
SOAK_FOLDER = "Soak"
# Between calls: about 1,000 calls a minute instead of 3,300, which leaves the second core
# of the shared 2-core bench machine to others (measured on the first 1-minute run).
CALL_PAUSE = 0.05
REMEMBERED = re.compile(r"Remembered as (\S+?)\.")


@dataclass
class Sample:
    minute: float
    rss_kib: int
    fds: int


@dataclass
class SoakResult:
    minutes: float
    notes: int
    calls: int = 0
    edits: int = 0
    checks: int = 0
    stale: list[str] = field(default_factory=list[str])  # checks that saw an old vault
    unexpected_errors: list[str] = field(default_factory=list[str])
    secret_hits: int = 0
    samples: list[Sample] = field(default_factory=list[Sample])


def marker(n: int) -> str:
    """A word found nowhere else in the vault, letters only so every tokenizer keeps it."""
    return "soakmark" + "".join(chr(ord("a") + int(d)) for d in f"{n:06d}")


def sample(pid: int, minute: float) -> Sample:
    rss = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    return Sample(minute, rss, len(os.listdir(f"/proc/{pid}/fd")))


class Editor:
    """Edits ``Soak/`` on disk in a fixed cycle and knows what each note holds now."""

    def __init__(self, vault: Path) -> None:
        self.folder = vault / SOAK_FOLDER
        self.folder.mkdir(exist_ok=True)
        self.notes: dict[str, str] = {}  # vault path -> its newest marker
        self.counter = itertools.count()
        self.cycle = itertools.cycle(("add", "add", "change", "rename", "delete"))

    def _write(self, path: str, mark: str) -> None:
        text = f"# {Path(path).stem}\n\nThe soak wrote {mark} here at {time.time():.3f}.\n"
        (self.folder.parent / path).write_text(text, "utf-8")

    def edit(self) -> tuple[str, str, str | None]:
        """One edit: (kind, the path to check, the old path for a rename or delete)."""
        kind = next(self.cycle)
        if kind != "add" and not self.notes:
            kind = "add"
        n = next(self.counter)
        if kind == "add":
            path = f"{SOAK_FOLDER}/Note {n}.md"
            self.notes[path] = marker(n)
            self._write(path, self.notes[path])
            return kind, path, None
        path = random.choice(sorted(self.notes))
        if kind == "change":
            self.notes[path] = marker(n)
            self._write(path, self.notes[path])
            return kind, path, None
        if kind == "rename":
            new = f"{SOAK_FOLDER}/Renamed {n}.md"
            os.rename(self.folder.parent / path, self.folder.parent / new)
            self.notes[new] = self.notes.pop(path)
            return kind, new, path
        (self.folder.parent / path).unlink()
        del self.notes[path]
        return kind, path, path


class Soak:
    def __init__(self, session: Session, editor: Editor, secret: str, result: SoakResult):
        self.session = session
        self.editor = editor
        self.secret = secret
        self.result = result
        # Ids stored and not yet forgotten: the soak forgets what it remembers, so the
        # store stays the same size and compaction runs now and then.
        self.remembered: list[str] = []

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallResult:
        answer = await self.session.call(tool, arguments)
        self.result.calls += 1
        if self.secret in answer.text:
            self.result.secret_hits += 1
        return answer

    def expect(self, ok: bool, what: str) -> None:
        self.result.checks += 1
        if not ok:
            self.result.stale.append(what)

    async def check_edit(self, kind: str, path: str, old: str | None) -> None:
        if kind == "delete":
            gone = await self.call("vault_read_note", {"path": path})
            self.expect(gone.is_error, f"deleted {path} still reads")
            return
        mark = self.editor.notes[path]
        read = await self.call("vault_read_note", {"path": path})
        self.expect(not read.is_error and mark in read.text, f"{kind} {path}: read misses {mark}")
        found = await self.call("vault_smart_search", {"query": mark})
        self.expect(path in found.text, f"{kind} {path}: search for {mark} misses it")
        if old is not None:
            gone = await self.call("vault_read_note", {"path": old})
            self.expect(gone.is_error, f"renamed-away {old} still reads")

    async def mixed_call(self, n: int) -> None:
        paths = sorted(self.editor.notes) or ["Home.md"]
        path = paths[n % len(paths)]
        calls: list[tuple[str, dict[str, Any]]] = [
            ("vault_tree", {}),
            ("vault_search_map", {"query": "harbour lantern"}),
            ("vault_quick_context", {"topic": "ledger tide"}),
            ("vault_find_related", {"path": path}),
            ("vault_peek_file", {"path": path}),
            ("vault_recall", {"query": "soak"}),
            (
                "vault_remember",
                {"content": f"soak memory {n}", "tags": ["soak"], "context": "soak"},
            ),
            ("vault_forget", {"id": self.remembered.pop()})
            if self.remembered
            else ("vault_tree", {}),
            ("vault_scratch_append", {"text": f"soak scratch {n}"}),
            ("vault_semantic_query", {"query": "who mended the bell"}),
        ]
        tool, arguments = calls[n % len(calls)]
        answer = await self.call(tool, arguments)
        if tool == "vault_remember" and (stored := REMEMBERED.search(answer.text)):
            self.remembered.append(stored.group(1))
        # A path read while the editor renames it may be gone: that error is the truth.
        if answer.is_error and tool not in ("vault_find_related", "vault_peek_file"):
            self.result.unexpected_errors.append(f"{tool}: {answer.text.splitlines()[0][:200]}")


async def soak(minutes: float, work: Path, log: Path | None) -> SoakResult:
    """Run the soak; ``log`` is where the server's stderr goes, searched for the key after."""
    planted = work / "soak-vault"
    if planted.exists():
        shutil.rmtree(planted)
    generate(planted, SOAK_NOTES, vectors=True)
    vault = planted / "vault"
    result = SoakResult(minutes, SOAK_NOTES)
    editor = Editor(vault)
    async with StandinProcess(vault, query_vectors=planted / "query_vectors.jsonl") as standin:
        env = server_env(standin=standin, vault=vault, config_dir=work / "soak-config")
        async with stdio_session(env, timeout=120) as session:
            pid = server_pid(os.getpid())
            if pid is None:
                raise RuntimeError("the server process was not found among this one's children")
            runner = Soak(session, editor, standin.api_key, result)
            started = time.monotonic()
            next_edit = next_sample = started
            for n in itertools.count():
                now = time.monotonic()
                if now - started >= minutes * 60:
                    break
                if now >= next_sample:
                    result.samples.append(sample(pid, (now - started) / 60))
                    next_sample += SAMPLE_SECONDS
                if now >= next_edit:
                    kind, path, old = editor.edit()
                    result.edits += 1
                    await runner.check_edit(kind, path, old)
                    next_edit += EDIT_SECONDS
                await runner.mixed_call(n)
                await anyio.sleep(CALL_PAUSE)
            result.samples.append(sample(pid, (time.monotonic() - started) / 60))
        if log is not None and log.exists():
            result.secret_hits += log.read_text("utf-8", errors="replace").count(standin.api_key)
    return result


def chart(result: SoakResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.minute for s in result.samples]
    fig, (rss, fds) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    rss.plot(minutes, [s.rss_kib / 1024 for s in result.samples], marker=".")
    rss.set_ylabel("RSS (MiB)")
    rss.set_ylim(bottom=0)
    fds.plot(minutes, [s.fds for s in result.samples], marker=".", color="tab:orange")
    fds.set_ylabel("open descriptors")
    fds.set_ylim(bottom=0)
    fds.set_xlabel("minutes")
    fig.suptitle(f"Soak: one server for {result.minutes:g} min, vault edited underneath")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def section(result: SoakResult, chart_name: str) -> str:
    """The report's markdown: samples at the start, every 5 minutes and the end."""
    shown = [s for s in result.samples if s is result.samples[0] or s is result.samples[-1]]
    for mark in range(5, int(result.minutes) + 1, 5):
        nearest = min(result.samples, key=lambda s: abs(s.minute - mark))
        if nearest not in shown:
            shown.append(nearest)
    shown.sort(key=lambda s: s.minute)
    rows = [(f"{s.minute:.1f}", f"{s.rss_kib / 1024:.1f}", s.fds) for s in shown]
    stale = "".join(f"\n  - {line}" for line in result.stale[:10])
    errors = "".join(f"\n  - {line}" for line in result.unexpected_errors[:10])
    return "\n\n".join(
        [
            "## Soak",
            f"One server (stdio) on the stand-in with the vault folder configured, "
            f"{result.notes} generated notes, {result.minutes:g} minutes; a note under "
            f"`{SOAK_FOLDER}/` added, changed, renamed or deleted on disk every "
            f"{EDIT_SECONDS:g} s, mixed calls of every tool in between.",
            f"- calls: {result.calls:,}; edits: {result.edits:,}\n"
            f"- checks that the answer shows the vault as it is now: {result.checks:,}, "
            f"of which stale: {len(result.stale)}{stale}\n"
            f"- unexpected errors: {len(result.unexpected_errors)}{errors}\n"
            f"- API key occurrences in responses and the server log: {result.secret_hits}",
            markdown_table(("minute", "RSS (MiB)", "open descriptors"), rows),
            f"![RSS and descriptors over the soak]({chart_name})",
        ]
    )
