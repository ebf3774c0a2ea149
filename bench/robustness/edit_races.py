"""Lost updates: a user typing in a note while an agent edits it and the notes beside it.

    python -m bench.robustness.edit_races [--edits 200] [--period-ms 100] [--versions 5.1.0]
                               [--sources folder,rest] [--modes default,force]
                               [--styles in-place,rename] [--repeat 10]
                               [--user-gap-ms 0] [--keep DIR] [--out bench/out]

Prints the table (one row per source, mode and save style, summed over ``--repeat``
runs), and writes it and every run's outcome into ``--out``; ``python -m bench
--edit-races`` runs the same and puts it in its section of REPORT.md.

Issue 18's "lost updates" must-show. A simulated user, in a process of its own as Obsidian
is, saves ``races/typing.md`` every ``--period-ms``: it reads the note from disk, adds one
numbered line (``- user change 17``) at the end of its ``## User`` section and writes the
whole file back at once (no pause between the read and the write, as an editor's save).
Two ways to write, the two a user's tools use: ``in-place`` opens the file with truncation
and then writes it (Node's ``fs.writeFile``, so Obsidian's); ``rename`` writes a sibling
and renames it over the note. Meanwhile an agent makes ``--edits`` edits back to back
through :class:`obsidian_mcp.editing.service.Editor`, every other one to the user's note
and the rest over three other notes: append to a section (``Log``; in the user's note also
its ``User`` section), replace a section (``Status``), set a frontmatter field (``agent``)
and ``replace_text`` (a ``- slot NN open`` line), each carrying its own token ``aNNNN``.
Sources: the vault folder (``FolderSource``: the checked swap of ``sources/swap.py``), the
stand-in Local REST API alone (``RestSource``: a note changed in the last 5 s is left
alone, even with force, since a PUT cannot be checked), and the stand-in with the vault
folder known (``rest+folder``: written on disk with the swap, the guard asking Obsidian
which note is open), at each plugin version of ``--versions``. Modes: ``default``
(``force=False``: the user-typing guard refuses edits to a note changed in the last 5 s
by someone else) and ``force``
(``force=True``, no ``version``: the check of the write is all that protects the user).
Through REST the note is the one open in Obsidian (``GET /active/``), as a note being
typed in is. ``--user-gap-ms`` (a stress setting, 0 by default) makes the in-place save
pause between its truncating open and its write, as Node's may between two awaits.

What is counted, per run:

* user changes lost: lines the user wrote that the final file lacks. The user re-reads
  before each save and carries forward every line it read, so a line disappears only when
  an agent write based on a text from before it lands over it. Must be 0.
* agent edits applied: a receipt whose write (recorded by a ``Vault`` that only watches
  ``replace_if``) is exactly the edit applied to the text it replaced, has the receipt's
  version, was made on a text holding every user line saved before the write began, and
  is on disk right after the call (or a user save has replaced it since). Anything else
  with a receipt is an error, printed.
* agent edits refused, by reason: the user is typing (the guard), changed while editing
  (the swap's or the compare's conflict, in the edit's target), other.
* agent edits lost to a later user save: applied, absent from the final file, and not
  replaced by a later agent edit of the same field or section: the user's save was based
  on a text from before the agent's write (the user winning; not a loss).

Each lost user change is explained by the agent write that overlapped its save on a text
without it (through REST: a save between the compare's read and the PUT, the window
``RestSource.replace_if`` documents), or listed as not explained.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from obsidian_mcp.config import Settings
from obsidian_mcp.editing.journal import EditJournal
from obsidian_mcp.editing.operations import EditRequest, apply_edit
from obsidian_mcp.editing.service import Editor, Receipt
from obsidian_mcp.editing.targets import EditRefused
from obsidian_mcp.errors import VaultError
from obsidian_mcp.sources import swap
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.recovery import RecoveryLog
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.sources.swap import NoteChanged
from obsidian_mcp.text.versions import version_of
from obsidian_mcp.vault import Vault
from tests.standin.process import REPO_ROOT, StandinProcess, terminate

OUT_DIR = REPO_ROOT / "bench" / "out"
USER_NOTE = "races/typing.md"
OTHER_NOTES = ("races/other-1.md", "races/other-2.md", "races/other-3.md")
USER_HEADING = "## User"
ALL_VERSIONS = ("3.2.0", "4.1.7", "5.1.0", "6.0.0")
SOURCES = ("folder", "rest", "rest+folder")
MODES = ("default", "force")
STYLES = ("in-place", "rename")
# The agent's operations, in turn, per note.
USER_NOTE_OPS = ("append Log", "replace Status", "set agent", "replace_text", "append User")
OTHER_NOTE_OPS = ("append Log", "replace Status", "set agent", "replace_text")
# Operations a later one of the same kind replaces (the field, the section's body).
SUPERSEDING = ("replace Status", "set agent")
# Notes are written this long before the run, so only the user's saves make one "recent".
LONG_AGO_SECONDS = 3600
# The user re-reads a note it caught half-written (a PUT truncates, then writes) after
# this pause, at most TORN_TRIES times (0.2 s: a write's gap is a few ms); a note still
# not whole then is what an agent wrote, and the user goes on from it.
TORN_PAUSE = 0.0005
TORN_TRIES = 400
START_TIMEOUT = 30.0
TOKEN = re.compile(r"\ba\d{4}\b")


@dataclass(frozen=True)
class Plan:
    edits: int = 200
    period: float = 0.1  # seconds between two user saves
    versions: tuple[str, ...] = ("5.1.0",)
    sources: tuple[str, ...] = SOURCES
    modes: tuple[str, ...] = MODES
    styles: tuple[str, ...] = STYLES
    repeat: int = 10
    # Seconds the user's in-place save waits between the truncating open and the write:
    # 0, a save as tight as Python makes it; Node awaits between the two.
    user_gap: float = 0.0

    @property
    def slots(self) -> int:
        return self.edits // 4 + 2


@dataclass(frozen=True)
class Step:
    index: int
    path: str
    op: str
    token: str
    request: EditRequest


@dataclass(frozen=True)
class Attempt:
    """One `Vault.replace_if` the editor made: what it expected, what it wrote, when."""

    path: str
    expected: str | None
    content: str
    started: float
    ended: float
    ok: bool


@dataclass
class Done:
    """One agent edit as the run saw it, judged afterwards against the user's log."""

    step: Step
    started: float
    ended: float
    attempts: list[Attempt]
    receipt: Receipt | None
    refusal: str | None
    error: str | None
    disk: str  # the note's bytes right after the call


@dataclass
class Outcome:
    source: str
    mode: str
    style: str
    user_writes: int
    user_lost: list[int]
    edits: int
    applied: int
    applied_user_note: int
    remade: int  # applied after a conflict, on the new text
    conflicts: int  # replace_if calls that found the note changed
    refused: dict[str, int]
    overwritten_by_user: int
    superseded: int
    torn_reads: int
    errors: list[str]
    seconds: float
    # Lost user lines saved while an agent write checked and wrote (through REST: between
    # its read and its PUT), and the edits that wrote over them (each also an error).
    window: list[int] = field(default_factory=list[int])
    window_edits: int = 0
    others: list[str] = field(default_factory=list[str])  # "other" refusals, in full
    # Applied edits a later agent write made on an emptied read took away.
    wiped: int = 0
    notes: list[str] = field(default_factory=list[str])
    runs: int = 1

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.mode, self.style)


def merged(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """One outcome per source, mode and style: counts and seconds summed over the runs."""
    by_key: dict[tuple[str, str, str], Outcome] = {}
    for o in outcomes:
        total = by_key.get(o.key)
        if total is None:
            by_key[o.key] = replace(
                o,
                user_lost=list(o.user_lost),
                window=list(o.window),
                others=list(o.others),
                refused=dict(o.refused),
                errors=list(o.errors),
                notes=list(o.notes),
            )
            continue
        for f in fields(Outcome):
            mine, theirs = getattr(total, f.name), getattr(o, f.name)
            if isinstance(mine, list):
                mine += theirs
            elif isinstance(mine, dict):
                setattr(
                    total, f.name, {k: mine.get(k, 0) + theirs.get(k, 0) for k in mine | theirs}
                )
            elif isinstance(mine, int | float):
                setattr(total, f.name, mine + theirs)
    return list(by_key.values())


# --- the notes ----------------------------------------------------------------------


def note_text(title: str, slots: int, *, user: bool) -> str:
    lines = ["---", f"title: {title}", "agent: none", "---", f"# {title}", ""]
    lines += ["## Log", "- start", "", "## Status", "nothing yet", ""]
    if user:
        lines += [USER_HEADING, "- user start", ""]
    lines += ["## Slots", *(f"- slot {n:02d} open" for n in range(slots)), ""]
    return "\n".join(lines)


def user_line(number: int) -> str:
    return f"- user change {number}"


def add_user_line(text: str, line: str) -> str | None:
    """``text`` with ``line`` after the last non-blank line of the User section."""
    lines = text.split("\n")
    try:
        heading = lines.index(USER_HEADING)
    except ValueError:
        return None
    end = next((j for j in range(heading + 1, len(lines)) if lines[j].startswith("#")), len(lines))
    last = max([heading, *(j for j in range(heading + 1, end) if lines[j].strip())])
    lines.insert(last + 1, line)
    return "\n".join(lines)


def whole(text: str, slots: int) -> bool:
    """The note as a writer left it, not caught between a truncation and its write."""
    return text.endswith("\n") and f"\n- slot {slots - 1:02d} " in text and USER_HEADING in text


def agent_plan(plan: Plan) -> list[Step]:
    steps: list[Step] = []
    turns: Counter[str] = Counter()
    slots: Counter[str] = Counter()
    for index in range(plan.edits):
        token = f"a{index:04d}"
        path = USER_NOTE if index % 2 == 0 else OTHER_NOTES[(index // 2) % len(OTHER_NOTES)]
        ops = USER_NOTE_OPS if path == USER_NOTE else OTHER_NOTE_OPS
        op = ops[turns[path] % len(ops)]
        turns[path] += 1
        if op.startswith("append"):
            section = op.split()[1]
            request = EditRequest("append", section, f"- agent {token} in {section}")
        elif op == "replace Status":
            request = EditRequest("replace", "Status", f"agent status {token}")
        elif op == "set agent":
            request = EditRequest("set", "agent", token)
        else:
            slot = slots[path]
            slots[path] += 1
            request = EditRequest(
                "replace_text", f"- slot {slot:02d} open", f"- slot {slot:02d} done {token}"
            )
        steps.append(Step(index, path, op, token, request))
    return steps


# --- the user, in a process of its own -----------------------------------------------


def _read_whole(file: Path, slots: int) -> tuple[str, int]:
    """The note's text, and how many reads caught it half-written first."""
    text = ""
    for tries in range(TORN_TRIES):
        try:
            text = file.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        if whole(text, slots):
            return text, tries
        time.sleep(TORN_PAUSE)
    return text, TORN_TRIES


def _save(file: Path, data: bytes, style: str, gap: float) -> float:
    """Write the note as the user's editor does; the time the write began."""
    if style == "rename":
        sibling = file.with_name(f".{file.name}.user-save")
        descriptor = os.open(sibling, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(descriptor, data)
        finally:
            os.close(descriptor)
        began = time.monotonic()
        os.replace(sibling, file)
        return began
    began = time.monotonic()
    descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if gap:
            time.sleep(gap)
        _write_all(descriptor, data)
    finally:
        os.close(descriptor)
    return began


def _write_all(descriptor: int, data: bytes) -> None:
    written = 0
    while written < len(data):
        written += os.write(descriptor, data[written:])


def user_main(args: Sequence[str]) -> None:
    """The simulated user: ``FILE PERIOD STYLE GAP SLOTS STOPFILE LOG``. Prints
    ``started`` after its first save; stops once STOPFILE exists; writes LOG (JSON)."""
    file, stop, log = Path(args[0]), Path(args[5]), Path(args[6])
    period, style, gap, slots = float(args[1]), args[2], float(args[3]), int(args[4])
    records: list[dict[str, Any]] = []
    written: list[str] = []
    due = time.monotonic()
    while not stop.exists():
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        due = max(due + period, time.monotonic())
        number = len(records) + 1
        read_at = time.monotonic()
        text, torn = _read_whole(file, slots)
        present = set(text.split("\n"))
        missing = [n for n, line in enumerate(written, start=1) if line not in present]
        line = user_line(number)
        new = add_user_line(text, line)
        if new is None:  # the section is gone: the user starts it again at the end
            new = (
                text
                + ("" if text.endswith("\n") or not text else "\n")
                + (f"{USER_HEADING}\n{line}\n")
            )
        began = _save(file, new.encode("utf-8"), style, gap)
        done = time.monotonic()
        written.append(line)
        records.append(
            {
                "n": number,
                "read": read_at,
                "began": began,
                "done": done,
                "torn": torn,
                "missing": missing,
            }
        )
        if number == 1:
            print("started", flush=True)
    log.write_text(json.dumps(records), "utf-8")


class User:
    """The user's process: started, then stopped once the agent is done."""

    def __init__(self, file: Path, work: Path, plan: Plan, style: str) -> None:
        self.stop_file = work / "user.stop"
        self.log = work / "user.json"
        self.args = [
            str(file),
            str(plan.period),
            style,
            str(plan.user_gap),
            str(plan.slots),
            str(self.stop_file),
            str(self.log),
        ]
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.robustness.edit_races", "--as-user", *self.args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "started", or "" if it died
        if line.strip() != "started":
            self.finish()
            raise RuntimeError(f"the simulated user did not start (exit {self.proc.returncode})")

    def finish(self) -> list[dict[str, Any]]:
        proc = self.proc
        if proc is None:
            return []
        self.stop_file.touch()
        try:
            proc.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            terminate(proc, grace_seconds=1)
        if proc.stdout is not None:
            proc.stdout.close()
        self.proc = None
        if proc.returncode != 0 or not self.log.exists():
            raise RuntimeError(f"the simulated user failed (exit {proc.returncode})")
        records: list[dict[str, Any]] = json.loads(self.log.read_text("utf-8"))
        return records


# --- the agent ------------------------------------------------------------------------


class RecordingVault(Vault):
    """A vault that notes every checked write the editor makes, and changes nothing."""

    def __init__(self, live: RestSource | None, disk: FolderSource | None) -> None:
        super().__init__(live, disk)
        self.attempts: list[Attempt] = []

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        started = time.monotonic()
        try:
            await super().replace_if(path, expected, content)
        except NoteChanged:
            self.attempts.append(
                Attempt(path, expected, content, started, time.monotonic(), ok=False)
            )
            raise
        self.attempts.append(Attempt(path, expected, content, started, time.monotonic(), True))


REASONS = ("user typing", "half saved", "changed while editing", "other")


def refusal_reason(message: str) -> str:
    # The guard: the user may be typing, or (through Obsidian alone) a recently changed
    # note cannot be written safely; apart, a note read empty in the middle of an in-place
    # save, which even force leaves alone.
    if "half done" in message:
        return "half saved"
    if any(said in message for said in ("could be typing", "even with force")):
        return "user typing"
    if "while this edit was made" in message:
        return "changed while editing"
    return "other"


async def agent(
    editor: Editor, vault: RecordingVault, vault_dir: Path, steps: Sequence[Step], force: bool
) -> list[Done]:
    done: list[Done] = []
    for step in steps:
        first = len(vault.attempts)
        receipt = refusal = error = None
        started = time.monotonic()
        try:
            receipt = await editor.edit(step.path, step.request, force=force)
        except EditRefused as refused:
            refusal = str(refused)
        except VaultError as failed:
            error = f"{type(failed).__name__}: {failed}"
        ended = time.monotonic()
        disk = (vault_dir / step.path).read_bytes().decode("utf-8", errors="replace")
        done.append(
            Done(step, started, ended, vault.attempts[first:], receipt, refusal, error, disk)
        )
    return done


# --- judging ------------------------------------------------------------------------


def _lines(text: str | None) -> set[str]:
    return set((text or "").split("\n"))


def _fate(edit: Done, later: Sequence[Done]) -> str:
    """Why an applied edit's token is not in the final note. "superseded": a later agent
    write read it and replaced it (the next set of the field, the next replace of the
    section); "agent": a later agent write made on a text without it although no user save
    had removed it (one made on a read that caught the note emptied); "user": a user save
    based on a text from before the edit's write landed after it (the user winning)."""
    token = edit.step.token
    for other in later:
        ok = [a for a in other.attempts if a.ok]
        if other.step.path != edit.step.path or not ok:
            continue
        base, content = ok[-1].expected or "", ok[-1].content
        if token in base:
            if token not in content:
                return "superseded"
            continue
        # The token was gone from what this write read: a user save took it since the
        # last agent write that kept it, unless this write read the note half-written.
        return "agent" if not base.strip() else "user"
    return "user"


def _overlap(save: dict[str, Any], write: Attempt) -> bool:
    """Whether a user save and an agent write overlapped in time. A save spans from just
    before its truncating open (or its rename) to just after it returned: the process can
    be descheduled in between, so the end alone can come after the write it met."""
    return save["began"] <= write.ended and save["done"] >= write.started


def judge_edit(
    edit: Done,
    user: Sequence[dict[str, Any]],
    lost: set[int],
    gone: set[int],
    window: list[int],
) -> list[str]:
    """What is wrong with an edit that returned a receipt (nothing: an empty list).
    `gone`: user lines an earlier agent write took away (each already an error); a later
    edit is not blamed again for not having them, and lines this one takes are added.
    `window`: lost user lines saved while this edit checked and wrote are added."""
    step, receipt = edit.step, edit.receipt
    assert receipt is not None
    label = f"edit {step.index} ({step.op} on {step.path})"
    ok = [a for a in edit.attempts if a.ok]
    if len(ok) != 1 or not edit.attempts[-1].ok:
        return [f"{label}: a receipt after {len(ok)} writes ({len(edit.attempts)} attempts)"]
    write = ok[0]
    base = write.expected or ""
    problems: list[str] = []
    try:
        derived = apply_edit(step.path, base, step.request).text
    except EditRefused as refused:
        derived = f"(refused: {refused})"
    if derived != write.content:
        problems.append(f"{label}: what it wrote is not the edit applied to what it replaced")
    if version_of(write.content) != receipt.version:
        problems.append(f"{label}: the receipt's version is not that of what it wrote")
    if step.path == USER_NOTE:
        present = _lines(base)
        before = [
            r["n"]
            for r in user
            if r["done"] < write.started and r["n"] not in gone and user_line(r["n"]) not in present
        ]
        if before:
            problems.append(
                f"{label}: made on a text without user changes {before}, saved "
                "before its write began"
                + (
                    " (it read the note empty: caught between a save's truncating open and "
                    "its write)"
                    if not base.strip()
                    else ""
                )
            )
        over = [
            r["n"]
            for r in user
            if _overlap(r, write) and r["n"] in lost and user_line(r["n"]) not in present
        ]
        gone.update(over, before)
        window += over
        if over:
            problems.append(
                f"{label}: wrote over user changes {over}, saved while it checked and wrote"
            )
    if edit.disk != write.content:
        saved_since = any(r["done"] > write.started for r in user) and step.path == USER_NOTE
        if not saved_since:
            problems.append(f"{label}: the note right after the call is not what it wrote")
    return problems


def judge(
    source: str,
    mode: str,
    style: str,
    user: Sequence[dict[str, Any]],
    done: Sequence[Done],
    finals: dict[str, str],
    seconds: float,
    origin: float,
) -> Outcome:
    final_user = _lines(finals[USER_NOTE])
    lost = {r["n"] for r in user if user_line(r["n"]) not in final_user}
    errors: list[str] = []
    refused: Counter[str] = Counter(dict.fromkeys(REASONS, 0))
    applied = applied_user = remade = overwritten = superseded = wiped = 0
    others: list[str] = []
    gone: set[int] = set()
    window: list[int] = []
    window_edits = 0
    for position, edit in enumerate(done):
        if edit.error is not None:
            errors.append(f"edit {edit.step.index} ({edit.step.op}): {edit.error}")
            continue
        if edit.refusal is not None:
            reason = refusal_reason(edit.refusal)
            refused[reason] += 1
            if reason == "other":
                others.append(f"edit {edit.step.index} ({edit.step.op}): {edit.refusal}")
            continue
        taken = len(window)
        problems = judge_edit(edit, user, lost, gone, window)
        if problems:
            errors += problems
            window_edits += len(window) > taken
            continue
        applied += 1
        applied_user += edit.step.path == USER_NOTE
        assert edit.receipt is not None
        remade += bool(edit.receipt.note.startswith("The note changed elsewhere"))
        if edit.step.token in finals[edit.step.path]:
            continue
        fate = _fate(edit, done[position + 1 :])
        if fate == "superseded":
            superseded += 1
        elif fate == "agent":
            wiped += 1
        elif edit.step.path == USER_NOTE:
            overwritten += 1
        else:
            errors.append(
                f"edit {edit.step.index} ({edit.step.op} on {edit.step.path}): "
                "gone from the note, and no later edit replaced it"
            )
    outcome = Outcome(
        source=source,
        mode=mode,
        style=style,
        user_writes=len(user),
        user_lost=sorted(lost),
        edits=len(done),
        applied=applied,
        applied_user_note=applied_user,
        remade=remade,
        conflicts=sum(not a.ok for edit in done for a in edit.attempts),
        refused=dict(refused),
        overwritten_by_user=overwritten,
        superseded=superseded,
        torn_reads=sum(1 for r in user if r["torn"]),
        errors=errors,
        seconds=seconds,
        window=window,
        window_edits=window_edits,
        wiped=wiped,
    )
    outcome.notes += [explain_loss(n, user, done, origin) for n in sorted(lost)]
    outcome.others = others
    return outcome


def explain_loss(
    number: int, user: Sequence[dict[str, Any]], done: Sequence[Done], origin: float
) -> str:
    """Which agent write took a lost user line away, with the timings in ms."""
    saved = next(r for r in user if r["n"] == number)
    line = user_line(number)

    def ms(t: float) -> str:
        return f"{(t - origin) * 1000:.1f}"

    noticed = next((r for r in user if number in r["missing"]), None)
    culprits = [
        (edit, a)
        for edit in done
        for a in edit.attempts
        if a.ok and a.path == USER_NOTE and line not in _lines(a.expected) and _overlap(saved, a)
    ]
    text = f"user change {number} (save {ms(saved['began'])}-{ms(saved['done'])} ms) lost; " + (
        f"first missed by the user's read at {ms(noticed['read'])} ms; " if noticed else ""
    )
    if not culprits:
        return text + "no agent write explains it"
    edit, a = culprits[0]
    return text + (
        f"agent edit {edit.step.index} ({edit.step.op}) checked and wrote "
        f"{ms(a.started)}-{ms(a.ended)} ms on a text without it"
    )


# --- runs -----------------------------------------------------------------------------


def place_notes(vault_dir: Path, plan: Plan) -> None:
    old = time.time() - LONG_AGO_SECONDS
    for path in (USER_NOTE, *OTHER_NOTES):
        file = vault_dir / path
        file.parent.mkdir(parents=True, exist_ok=True)
        title = Path(path).stem
        file.write_text(note_text(title, plan.slots, user=path == USER_NOTE), "utf-8")
        os.utime(file, (old, old))


def rest_settings(standin: StandinProcess, config_dir: Path) -> Settings:
    return Settings.model_validate(
        {
            "api_key": standin.api_key,
            "host": "127.0.0.1",
            "port": standin.port,
            "cert": Path(standin.cert),
            "config_dir": config_dir,
            "request_timeout": 10.0,
            "connect_timeout": 5.0,
            "retry_budget": 10.0,
        }
    )


async def race(
    vault: RecordingVault,
    vault_dir: Path,
    work: Path,
    plan: Plan,
    mode: str,
    style: str,
    source: str,
) -> Outcome:
    editor = Editor(vault, EditJournal(work / "journal.sqlite3"), protected=lambda _: False)
    user = User(vault_dir / USER_NOTE, work, plan, style)
    try:
        await anyio.to_thread.run_sync(user.start)
        origin = time.monotonic()
        done = await agent(editor, vault, vault_dir, agent_plan(plan), mode == "force")
        seconds = time.monotonic() - origin
    finally:
        records = await anyio.to_thread.run_sync(user.finish)
        editor.close()
    finals = {
        path: (vault_dir / path).read_bytes().decode("utf-8", errors="replace")
        for path in (USER_NOTE, *OTHER_NOTES)
    }
    return judge(source, mode, style, records, done, finals, seconds, origin)


async def run_one(
    root: Path, plan: Plan, source: str, version: str | None, mode: str, style: str
) -> Outcome:
    label = "folder" if version is None else f"REST {version}"
    if source == "rest+folder":
        label += " + folder"
    work = root / f"{label.replace(' ', '-')}-{mode}-{style}"
    vault_dir = work / "vault"
    place_notes(vault_dir, plan)
    if source == "folder":
        vault = RecordingVault(None, FolderSource(vault_dir, recovery=RecoveryLog(work / "rec")))
        return await race(vault, vault_dir, work, plan, mode, style, label)
    assert version is not None
    async with StandinProcess(vault_dir, plugin_version=version, smart="off") as standin:
        # The user types in the note, so it is the one open in Obsidian (GET /active/).
        await anyio.to_thread.run_sync(standin.set_active, USER_NOTE)
        settings = rest_settings(standin, work / "config")
        async with build_http_client(settings) as http:
            # With the folder known too (both settings, as many users run it), edits are
            # written on disk with the checked swap and the guard asks Obsidian.
            disk = (
                FolderSource(vault_dir, recovery=RecoveryLog(work / "rec"))
                if source == "rest+folder"
                else None
            )
            vault = RecordingVault(RestSource(http, settings), disk)
            return await race(vault, vault_dir, work, plan, mode, style, label)


async def run_all(root: Path, plan: Plan) -> list[Outcome]:
    outcomes: list[Outcome] = []
    targets: list[tuple[str, str | None]] = []
    for source in plan.sources:
        targets += (
            [("folder", None)] if source == "folder" else [(source, v) for v in plan.versions]
        )
    for number in range(plan.repeat):
        for source, version in targets:
            for mode in plan.modes:
                for style in plan.styles:
                    outcome = await run_one(
                        root / f"run{number}", plan, source, version, mode, style
                    )
                    if plan.repeat > 1:
                        outcome.notes = [f"run {number + 1}: {n}" for n in outcome.notes]
                        outcome.errors = [f"run {number + 1}: {e}" for e in outcome.errors]
                    print(_progress(outcome), file=sys.stderr, flush=True)
                    outcomes.append(outcome)
    return outcomes


def _progress(o: Outcome) -> str:
    return (
        f"{o.source} {o.mode} {o.style}: {o.user_writes} user saves, "
        f"{len(o.user_lost)} lost, {o.applied} applied, {o.refused}, "
        f"{len(o.errors)} errors, {o.seconds:.1f} s"
    )


# --- several server processes at once -------------------------------------------------
#
# Issue 25's second half of the race must-show: server processes of one machine writing
# one note at once, each acknowledging what it did. "scratch": one process appends scratch
# entries (`append_scratch`, on disk) while another edits the scratch note; "folder" and
# "rest": two processes edit one note, through the vault folder, or through the stand-in
# alone (no folder: read, compare, PUT). Each process is a real server's vault and editor
# (`open_vault`, `open_editor`): the vault's lock in the shared configuration folder, the
# journal in the shared cache folder. "rest-unlocked" is the control: the same through
# REST alone with each process's vault built without the lock, to show what the lock is
# for. Every acknowledged entry and edit must be in the final note (each process edits its
# own section, slot lines and frontmatter key, so nothing another process does replaces
# it), and no refused edit may have written.

RIVAL_NOTE = "races/shared.md"
SCRATCH_NOTE = "races/scratch.md"
RIVAL_SCENARIOS = ("scratch", "folder", "rest", "rest-unlocked")
RIVALS = 2  # processes per run
# Each edit's kind, in turn: append to the process's own section, replace its own slot
# line, set its own frontmatter key. The scratch editor appends to a section of its own
# above the entries, replaces the Status section and sets a key.
RIVAL_OPS = ("append", "replace_text", "set")
SCRATCH_OPS = ("append", "replace", "set")


@dataclass(frozen=True)
class RivalPlan:
    edits: int = 60  # per process
    versions: tuple[str, ...] = ("5.1.0",)
    scenarios: tuple[str, ...] = RIVAL_SCENARIOS
    repeat: int = 3


@dataclass
class RivalOutcome:
    scenario: str
    source: str
    acknowledged_edits: int = 0
    acknowledged_entries: int = 0
    lost_edits: list[str] = field(default_factory=list[str])  # false "Edited" receipts
    lost_entries: list[str] = field(default_factory=list[str])
    refused: dict[str, int] = field(default_factory=dict[str, int])
    refused_but_written: list[str] = field(default_factory=list[str])
    errors: list[str] = field(default_factory=list[str])
    seconds: float = 0.0
    runs: int = 1


def rival_note(rivals: int, edits: int) -> str:
    lines = ["---", "title: shared", *(f"rival{n}: none" for n in range(rivals)), "---"]
    lines += ["# Shared", ""]
    for n in range(rivals):
        lines += [f"## Rival {n}", "- start", ""]
    lines.append("## Slots")
    lines += [f"- slot r{n}-{s:03d} open" for n in range(rivals) for s in range(edits)]
    return "\n".join([*lines, ""])


def scratch_note() -> str:
    return "---\nagent: none\n---\n# Scratch\n\n## Status\nnothing yet\n\n## Agent\n- start\n\n"


def rival_request(role: str, number: int, index: int) -> tuple[str, EditRequest]:
    """The edit of process `number`'s `index`th turn, and its token."""
    token = f"r{number}e{index:03d}"
    if role == "scratch-editor":
        op = SCRATCH_OPS[index % len(SCRATCH_OPS)]
        if op == "append":
            return token, EditRequest("append", "Agent", f"- agent {token}")
        if op == "replace":
            return token, EditRequest("replace", "Status", f"status {token}")
        return token, EditRequest("set", "agent", token)
    op = RIVAL_OPS[index % len(RIVAL_OPS)]
    if op == "append":
        return token, EditRequest("append", f"Rival {number}", f"- {token}")
    if op == "replace_text":
        slot = f"- slot r{number}-{index:03d} open"
        return token, EditRequest("replace_text", slot, f"- slot r{number}-{index:03d} {token}")
    return token, EditRequest("set", f"rival{number}", token)


async def _rival(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """One process's run: its edits or entries, each with how it ended."""
    from obsidian_mcp.opening import open_editor, open_vault
    from obsidian_mcp.reading import append_scratch

    settings = Settings.model_validate(spec["settings"])
    role, number, go = spec["role"], int(spec["number"]), Path(spec["go"])
    records: list[dict[str, Any]] = []
    async with build_http_client(settings) as http:
        vault, _ = await open_vault(settings, http)
        assert vault is not None
        if spec.get("unlocked"):
            vault = Vault(vault.rest, vault.disk)
        editor = open_editor(settings, vault)
        try:
            while not go.exists():
                await anyio.sleep(0.001)
            for index in range(int(spec["count"])):
                record: dict[str, Any] = {"started": time.monotonic()}
                try:
                    if role == "appender":
                        record["token"] = f"appender {number} entry {index:03d}"
                        await append_scratch(
                            vault, spec["path"], record["token"], datetime.now(UTC)
                        )
                    else:
                        record["token"], request = rival_request(role, number, index)
                        record["op"] = request.operation
                        await editor.edit(spec["path"], request)
                    record["ok"] = True
                except EditRefused as refused:
                    record["refused"] = refusal_reason(str(refused))
                    record["why"] = str(refused)[:300]
                except VaultError as failed:
                    record["error"] = f"{type(failed).__name__}: {failed}"[:300]
                record["ended"] = time.monotonic()
                records.append(record)
        finally:
            editor.close()
    return records


def rival_main(args: Sequence[str]) -> None:
    """A rival process: ``SPEC OUT`` (JSON files). Prints ``ready`` once its vault is open."""
    spec = json.loads(Path(args[0]).read_text("utf-8"))
    Path(spec["ready"]).touch()
    records = anyio.run(_rival, spec)
    Path(args[1]).write_text(json.dumps(records), "utf-8")


def _rival_settings(work: Path, vault_dir: Path, standin: StandinProcess | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "config_dir": str(work / "config"),  # shared: the vault's lock files
        "cache_dir": str(work / "cache"),  # shared: the journal
        "index_embeddings": False,
        "memory_meaning": False,
        "index_meaning_wait_seconds": 0,
    }
    if standin is None:
        values["vault_path"] = str(vault_dir)
    else:
        values.update(
            {
                "api_key": standin.api_key,
                "host": "127.0.0.1",
                "port": standin.port,
                "cert": standin.cert,
                "request_timeout": 10.0,
                "retry_budget": 10.0,
            }
        )
    return values


def _run_rivals(work: Path, specs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Start every process, let them go at once, collect their records."""
    go = work / "go"
    procs: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
    try:
        for n, spec in enumerate(specs):
            spec_file, out, ready = work / f"rival{n}.json", work / f"rival{n}.out", work / f"r{n}"
            spec_file.write_text(json.dumps({**spec, "go": str(go), "ready": str(ready)}))
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.robustness.edit_races",
                    "--as-rival",
                    str(spec_file),
                    str(out),
                ],
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
            )
            procs.append((proc, out, ready))
        deadline = time.monotonic() + START_TIMEOUT
        while not all(ready.exists() for _, _, ready in procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p, _, _ in procs):
                raise RuntimeError("a rival process did not start")
            time.sleep(0.01)
        time.sleep(0.2)  # each opens its vault after saying so
        go.touch()
        results: list[list[dict[str, Any]]] = []
        for proc, out, _ in procs:
            if proc.wait(timeout=600) != 0 or not out.exists():
                raise RuntimeError(f"a rival process failed (exit {proc.returncode})")
            results.append(json.loads(out.read_text("utf-8")))
        return results
    finally:
        for proc, _, _ in procs:
            if proc.poll() is None:
                terminate(proc, grace_seconds=1)


def judge_rivals(
    scenario: str, source: str, results: list[list[dict[str, Any]]], final: str, seconds: float
) -> RivalOutcome:
    outcome = RivalOutcome(scenario, source, seconds=seconds)
    refused: Counter[str] = Counter()
    for records in results:
        last_set: dict[str, str] = {}
        for record in records:
            token = record.get("token", "?")
            if "error" in record:
                outcome.errors.append(f"{token}: {record['error']}")
            elif "refused" in record:
                refused[record["refused"]] += 1
                if token in final:
                    outcome.refused_but_written.append(f"{token}: {record['why']}")
            elif "op" not in record:
                outcome.acknowledged_entries += 1
                if f"\n\n{token}\n" not in final:
                    outcome.lost_entries.append(token)
            else:
                outcome.acknowledged_edits += 1
                if record["op"] in ("set", "replace"):
                    last_set[record["op"]] = token  # the process's later ones replace it
                elif token not in final:
                    outcome.lost_edits.append(f"{token} ({record['op']})")
        outcome.lost_edits += [f"{t} ({op})" for op, t in last_set.items() if t not in final]
    outcome.refused = {reason: refused[reason] for reason in REASONS}
    return outcome


async def run_rival_scenario(
    root: Path, plan: RivalPlan, scenario: str, version: str | None
) -> RivalOutcome:
    source = "folder" if version is None else f"REST {version}"
    work = root / f"{scenario}-{source.replace(' ', '-')}"
    vault_dir = work / "vault"
    path = SCRATCH_NOTE if scenario == "scratch" else RIVAL_NOTE
    note = vault_dir / path
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(
        scratch_note() if scenario == "scratch" else rival_note(RIVALS, plan.edits), "utf-8"
    )
    old = time.time() - LONG_AGO_SECONDS
    os.utime(note, (old, old))

    def specs(standin: StandinProcess | None) -> list[dict[str, Any]]:
        settings = _rival_settings(work, vault_dir, standin)
        roles = ["appender", "scratch-editor"] if scenario == "scratch" else ["editor"] * RIVALS
        return [
            {
                "settings": settings,
                "role": role,
                "number": n,
                "count": plan.edits,
                "path": path,
                "unlocked": scenario == "rest-unlocked",
            }
            for n, role in enumerate(roles)
        ]

    started = time.monotonic()
    if version is None:
        results = await anyio.to_thread.run_sync(_run_rivals, work, specs(None))
    else:
        async with StandinProcess(vault_dir, plugin_version=version, smart="off") as standin:
            results = await anyio.to_thread.run_sync(_run_rivals, work, specs(standin))
    seconds = time.monotonic() - started
    final = note.read_bytes().decode("utf-8", errors="replace")
    return judge_rivals(scenario, source, results, final, seconds)


async def run_rivals(root: Path, plan: RivalPlan) -> list[RivalOutcome]:
    outcomes: list[RivalOutcome] = []
    for number in range(plan.repeat):
        for scenario in plan.scenarios:
            versions: Sequence[str | None] = (
                plan.versions if scenario.startswith("rest") else (None,)
            )
            for version in versions:
                outcome = await run_rival_scenario(
                    root / f"rivals{number}", plan, scenario, version
                )
                print(
                    f"{scenario} {outcome.source}: {outcome.acknowledged_edits} edits, "
                    f"{outcome.acknowledged_entries} entries acknowledged, "
                    f"{len(outcome.lost_edits)} + {len(outcome.lost_entries)} lost, "
                    f"{outcome.refused}, {outcome.seconds:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                outcomes.append(outcome)
    return outcomes


def merged_rivals(outcomes: Sequence[RivalOutcome]) -> list[RivalOutcome]:
    by_key: dict[tuple[str, str], RivalOutcome] = {}
    for o in outcomes:
        empty = RivalOutcome(o.scenario, o.source, runs=0)
        total = by_key.setdefault((o.scenario, o.source), empty)
        total.runs += 1
        total.acknowledged_edits += o.acknowledged_edits
        total.acknowledged_entries += o.acknowledged_entries
        total.lost_edits += o.lost_edits
        total.lost_entries += o.lost_entries
        total.refused_but_written += o.refused_but_written
        total.errors += o.errors
        total.seconds += o.seconds
        total.refused = {r: total.refused.get(r, 0) + o.refused.get(r, 0) for r in REASONS}
    return list(by_key.values())


RIVAL_HEADERS = (
    "scenario",
    "source",
    "runs",
    "edits acknowledged",
    "entries acknowledged",
    "acknowledged, then lost",
    "refused: user typing",
    "refused: changed while editing",
    "refused: other",
    "refused, yet written",
    "errors",
    "seconds",
)


def rival_table(outcomes: Sequence[RivalOutcome]) -> str:
    from bench.shared.harness import markdown_table

    rows = [
        (
            o.scenario,
            o.source,
            o.runs,
            o.acknowledged_edits,
            o.acknowledged_entries,
            len(o.lost_edits) + len(o.lost_entries),
            o.refused.get("user typing", 0) + o.refused.get("half saved", 0),
            o.refused.get("changed while editing", 0),
            o.refused.get("other", 0),
            len(o.refused_but_written),
            len(o.errors),
            o.seconds,
        )
        for o in merged_rivals(outcomes)
    ]
    notes = [
        f"- {o.scenario} {o.source}: lost {', '.join((o.lost_edits + o.lost_entries)[:SHOWN])}"
        for o in merged_rivals(outcomes)
        if o.lost_edits or o.lost_entries
    ]
    notes += [
        f"- {o.scenario} {o.source}: error: {e}"
        for o in merged_rivals(outcomes)
        for e in (o.errors + o.refused_but_written)[:SHOWN]
    ]
    return "\n".join([markdown_table(RIVAL_HEADERS, rows), *([""] if notes else []), *notes])


# --- the report -----------------------------------------------------------------------


HEADERS = (
    "source",
    "runs",
    "mode",
    "user saves by",
    "user changes written",
    "user changes lost",
    "agent edits applied (to the user's note)",
    "made again on the new text",
    "refused: user typing",
    "refused: half saved",
    "refused: changed while editing",
    "refused: other",
    "applied, later overwritten by the user",
    "errors",
    "seconds",
)


def table(runs: Sequence[Outcome]) -> str:
    """Per source, mode and user save style, summed over the runs; then what went wrong."""
    # Here, not at the top: the user's process imports this module, and the harness
    # brings the MCP SDK (a second of start-up).
    from bench.shared.harness import markdown_table

    outcomes = merged(runs)
    rows = [
        (
            o.source,
            o.runs,
            o.mode,
            o.style,
            o.user_writes,
            len(o.user_lost),
            f"{o.applied} ({o.applied_user_note})",
            o.remade,
            o.refused["user typing"],
            o.refused["half saved"],
            o.refused["changed while editing"],
            o.refused["other"],
            o.overwritten_by_user,
            len(o.errors),
            o.seconds,
        )
        for o in outcomes
    ]
    notes = [note for o in outcomes for note in _notes(o)]
    torn = [f"{o.source} {o.mode} {o.style} {o.torn_reads}" for o in outcomes if o.torn_reads]
    if torn:
        notes.append(
            "- user saves whose read caught the note emptied by a PUT (truncated, not yet "
            "written) and read it again: " + ", ".join(torn)
        )
    return "\n".join([markdown_table(HEADERS, rows), *([""] if notes else []), *notes])


# Lines of each kind a combination's notes show.
SHOWN = 3


def _notes(o: Outcome) -> list[str]:
    """What went wrong in one combination, briefly: losses, errors, other refusals."""
    label = f"{o.source} {o.mode} {o.style}"
    notes: list[str] = []
    explained = [n for n in o.notes if "checked and wrote" in n]
    unexplained = [n for n in o.notes if "checked and wrote" not in n]
    if o.user_lost:
        notes.append(
            f"- {label}: {len(o.user_lost)} user changes lost; {len(o.window)} of them saved "
            f"while an agent write ({o.window_edits} edits) checked and wrote on a text "
            "without them (through REST: between its read and its PUT)"
            + (f", e.g. {explained[0]}" if explained else "")
        )
        notes += [f"  - not explained: {n}" for n in unexplained[:SHOWN]]
        if len(unexplained) > SHOWN:
            notes.append(f"  - and {len(unexplained) - SHOWN} more not explained")
    if o.wiped:
        notes.append(
            f"- {label}: {o.wiped} applied edits were later taken away by an agent write made "
            "on an emptied read (not counted as overwritten by the user)"
        )
    wrong = [e for e in o.errors if "wrote over user changes" not in e]
    notes += [f"- {label}: error: {e}" for e in wrong[:SHOWN]]
    if len(wrong) > SHOWN:
        notes.append(f"- {label}: and {len(wrong) - SHOWN} more errors")
    if o.others:
        empty = sum(
            "The note has no headings." in r or "was not found in the note" in r for r in o.others
        )
        notes.append(
            f"- {label}: refused, other: {empty} of {len(o.others)} read the note while a "
            "save had emptied it (no headings, or the slot text not found)"
            + "".join(
                f"; {r}"
                for r in o.others
                if "The note has no headings." not in r and "was not found in the note" not in r
            )[:600]
        )
    return notes


def section(
    outcomes: Sequence[Outcome],
    plan: Plan,
    rivals: Sequence[RivalOutcome] = (),
    rival_plan: RivalPlan | None = None,
) -> str:
    """The edit races' section of REPORT.md."""
    versions = ", ".join(plan.versions)
    intro = (
        f"A simulated user, a process of its own, saves `races/typing.md` every "
        f"{plan.period * 1000:.0f} ms: it reads the note, adds a numbered line at the end of "
        "its `## User` section and writes the whole file back at once, in place (open with "
        "truncation, then write: Node's `fs.writeFile`, so Obsidian's) or as a sibling renamed "
        f"over it. Meanwhile an agent makes {plan.edits} edits back to back through the "
        "`Editor`, every other one to that note and the rest over three other notes (append "
        "to a section, replace a section, set a frontmatter field, replace_text), through the "
        "vault folder (rewritten in place under a write lease, `sources/swap.py`) and through "
        f"the stand-in Local REST API alone at plugin {versions} (read, compare, PUT; the "
        "note is the one open in Obsidian). `default`: force=False, so the user-typing guard "
        "refuses edits to a note someone else changed in the last 5 s; `force`: force=True "
        "without a version, so only the check of the write protects the user. Each "
        "combination ran "
        f"{plan.repeat} times; counts and seconds are summed."
    )
    terms = (
        "User changes lost: lines the user saved that the final file lacks (must be 0); since "
        "the user re-reads before each save, only an agent write based on an older text can "
        "take one away. Applied: the receipt's write is exactly the edit applied to the text "
        "it replaced, that text held every user line saved before the write began, and the "
        "note right after the call is that write (or a later user save). Applied, later "
        "overwritten by the user: gone from the final file because a user save based on a "
        "text from before the agent's write landed after it (the user winning, not a loss). "
        "Through REST alone the check is a read right before the PUT, so a save landing "
        "between the two is overwritten (`RestSource.replace_if`): each such loss is listed "
        "below with the agent write that took it, and counted as an error of that edit. "
        "`python -m bench --edit-races` (or `python -m bench.robustness.edit_races`); a short "
        "version runs in `tests/test_edit_races.py`."
    )
    parts = [
        "## Edit races: lost updates while the user types",
        "",
        intro,
        "",
        terms,
        "",
        table(outcomes),
    ]
    if rivals and rival_plan is not None:
        parts += [
            "",
            "### Several server processes at once",
            "",
            f"{RIVALS} processes, each a server's own vault and editor (`open_vault`, "
            "`open_editor`; the vault's lock in the shared configuration folder, the journal "
            f"in the shared cache folder), {rival_plan.edits} calls each, all started at once. "
            "`scratch`: one appends scratch entries (on disk) while the other edits the scratch "
            "note (append to a section, replace a section, set a key); `folder`, `rest`: both "
            "edit one note, each its own section, slot lines and key (append, replace_text, "
            "set), through the vault folder or through the stand-in alone; `rest-unlocked`: "
            "the control, `rest` with each vault built without the lock. Acknowledged, then "
            "lost: an entry or edit a process was told was made that the final note lacks "
            '(a false "Edited"; must be 0). Edits are made without force: a note another '
            "of the server's processes changed a moment ago is not the user typing (the "
            f"journal says who wrote it). {rival_plan.repeat} runs, summed.",
            "",
            rival_table(rivals),
        ]
    return "\n".join(parts)


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--as-user"]:
        user_main(argv[1:])
        return
    if argv[:1] == ["--as-rival"]:
        rival_main(argv[1:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m bench.robustness.edit_races",
        description="User changes lost, and agent edits applied or refused, while a user "
        "types in a note the agent edits.",
    )
    parser.add_argument("--edits", type=int, default=200, help="agent edits per run")
    parser.add_argument("--period-ms", type=float, default=100, help="ms between user saves")
    parser.add_argument(
        "--versions",
        default="5.1.0",
        help=f"plugin versions of the stand-in (all: {','.join(ALL_VERSIONS)})",
    )
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--styles", default=",".join(STYLES))
    parser.add_argument(
        "--repeat",
        type=int,
        default=Plan().repeat,
        help="runs of each combination (summed in the table)",
    )
    parser.add_argument(
        "--user-gap-ms",
        type=float,
        default=0.0,
        help="pause between the user's truncating open and its write",
    )
    parser.add_argument(
        "--rivals",
        default=",".join(RIVAL_SCENARIOS),
        help="scenarios of several server processes at once ('' for none)",
    )
    parser.add_argument(
        "--rival-edits", type=int, default=RivalPlan().edits, help="calls per rival process"
    )
    parser.add_argument(
        "--rival-repeat", type=int, default=RivalPlan().repeat, help="runs of each scenario"
    )
    parser.add_argument(
        "--no-lease",
        action="store_true",
        help="the agent of the user races writes without the write lease (as on systems "
        "without one), to measure what the lease does",
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the vaults in DIR")
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        help="where the table (edit-races-<time>.md) and every run's outcome "
        "(edit-races-<time>.json) go (default bench/out/)",
    )
    args = parser.parse_args(argv)
    plan = Plan(
        edits=args.edits,
        period=args.period_ms / 1000,
        versions=_split(args.versions),
        sources=_split(args.sources),
        modes=_split(args.modes),
        styles=_split(args.styles),
        repeat=args.repeat,
        user_gap=args.user_gap_ms / 1000,
    )
    rival_plan = RivalPlan(
        edits=args.rival_edits,
        versions=plan.versions,
        scenarios=_split(args.rivals),
        repeat=args.rival_repeat,
    )
    for name, given, known in (
        ("rival scenario", rival_plan.scenarios, RIVAL_SCENARIOS),
        ("source", plan.sources, SOURCES),
        ("mode", plan.modes, MODES),
        ("style", plan.styles, STYLES),
        ("version", plan.versions, ALL_VERSIONS),
    ):
        if unknown := [g for g in given if g not in known]:
            parser.error(f"unknown {name}(s): {unknown}")
    if args.no_lease:
        swap._LEASES = False  # pyright: ignore[reportPrivateUsage]
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        outcomes, rivals = _both(args.keep, plan, rival_plan)
    else:
        with tempfile.TemporaryDirectory(prefix="edit-races-") as work:
            outcomes, rivals = _both(Path(work), plan, rival_plan)
    markdown = table(outcomes) + ("\n\n" + rival_table(rivals) if rivals else "")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    command = " ".join(["python -m bench.robustness.edit_races", *argv])
    (args.out / f"edit-races-{stamp}.md").write_text(f"`{command}`\n\n{markdown}\n", "utf-8")
    (args.out / f"edit-races-{stamp}.json").write_text(
        json.dumps([asdict(o) for o in [*outcomes, *rivals]], indent=1) + "\n", "utf-8"
    )
    sys.stdout.write(markdown + "\n")


def _both(
    root: Path, plan: Plan, rival_plan: RivalPlan
) -> tuple[list[Outcome], list[RivalOutcome]]:
    outcomes = anyio.run(run_all, root, plan) if plan.repeat > 0 else []
    rivals = anyio.run(run_rivals, root, rival_plan) if rival_plan.scenarios else []
    return outcomes, rivals


if __name__ == "__main__":
    main()
