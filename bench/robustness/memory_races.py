"""Memory races: acknowledged memories lost, and forgotten ones that come back, when several
server processes, or two devices kept in step by a sync tool, write one vault's memory.

    python -m bench.robustness.memory_races [--processes 3] [--per-process 200] [--per-device 150]
                                 [--forget-every 4] [--scenarios 1,2,3,4,5] [--keep DIR]

Every writer is a real server (``python -m obsidian_mcp serve`` over stdio, driven by the
SDK's client) with its own cache and config folders, remembering one memory after another
(``OBSIDIAN_MEMORY_MEANING=false``: the embedding model would only slow the race); the
writers of a scenario start writing together once all of them are connected. Scenarios:

1. ``rest``: the processes reach the vault through the stand-in Local REST API alone (no
   vault folder), whose appends read the file and write it back as the plugin's do.
2. ``rest-forget``: as 1, and each process forgets one of its own earlier acknowledged
   ids after every ``--forget-every`` acknowledged remembers.
3. ``folder-rest``: as 2, with every other process given the vault folder instead
   (``OBSIDIAN_VAULT_PATH``); the stand-in serves that same folder.
4. ``two-devices``: vault folders A and B, one folder-mode process per device (or
   ``--device-processes``), kept in step by :class:`SyncTool` every 0.5-1 s: whole files,
   newest modification time wins, creations and deletions carried over. Each device
   remembers ``--per-device``, pausing ``--device-pause`` seconds after each so that the
   sync runs amid the writes; device A also forgets as in 2. Once the writers stop, the
   sync runs until two rounds change nothing, and both devices are checked.
5. ``conflict-copies``: as 4, but a file changed on both sides since the last sync is
   kept on both sides beside the winner, named like Syncthing's and Dropbox's conflict
   copies, in turn; and since no file has two writers any more, three updates in ten also
   keep the version they replace as such a copy (stale lines, forgotten ones among them).

The oracle does not depend on how the store lays out its files: every ``*.jsonl`` file
under the vault's ``obsidian-mcp/`` folder (recursively, conflict copies included) is
read; an id is present when some line carries it without ``"forgotten": true`` and no line
carries it with ``"forgotten": true``. Lost: acknowledged remembers (not forgotten since)
that are not present; forgotten back: acknowledged forgets that are present. Through the
product as well: a fresh server process (per device) recalls every memory of the run, a
group of at most 100 at a time (recall's limit), and any forgotten id it returns counts as
"recall: forgotten back"; "recall: missing" counts kept memories it does not return. Ids
come from the replies ("Remembered as <id>." / "Already remembered as <id>").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import anyio
from mcp import Client
from mcp.types import CallToolResult, TextContent

from bench.shared.harness import markdown_table, server_env, stdio_params, with_endings
from tests.standin.process import StandinProcess

ACKNOWLEDGED = re.compile(r"[Rr]emembered as ([0-9a-z]+)")
MEMORY_FOLDER = "obsidian-mcp"
RECALL_LIMIT = 100
# A server answers one call within this many seconds, or the run fails.
CALL_TIMEOUT = 120
# Seconds between two sync rounds, drawn uniformly (Syncthing watches and batches changes
# for about this long; Dropbox is of the same order).
SYNC_INTERVAL = (0.5, 1.0)
# Once the writers stop, the sync has settled after this many rounds in a row that change
# nothing; it fails the run if that takes more than SETTLE_MAX_ROUNDS.
SETTLE_QUIET_ROUNDS = 2
SETTLE_MAX_ROUNDS = 20
# Share of updates after which the conflict-copies scenario keeps the replaced version as a
# conflict copy (see SyncTool._carry).
SPURIOUS_CONFLICTS = 0.3
# Short device ids in Syncthing's conflict names (seven characters of the device id).
DEVICE_IDS = ("ABCDEFG", "HIJKLMN")
SCENARIOS = {
    1: "rest",
    2: "rest-forget",
    3: "folder-rest",
    4: "two-devices",
    5: "conflict-copies",
}


@dataclass(frozen=True)
class Sizes:
    processes: int = 3
    per_process: int = 200
    per_device: int = 150
    device_processes: int = 1
    forget_every: int = 4
    # Seconds a device's writer waits after each remember: unpaced, a device writes all
    # its memories before the sync's first round, and the sync never runs amid the writes.
    device_pause: float = 0.05


@dataclass
class Writer:
    """One server process and what it was told was done."""

    name: str
    env: dict[str, str]
    count: int
    forgets: bool
    pause: float = 0.0
    remembered: list[str] = field(default_factory=list[str])  # acknowledged ids, in order
    forgotten: set[str] = field(default_factory=set[str])  # acknowledged forgets
    errors: list[str] = field(default_factory=list[str])


@dataclass
class Outcome:
    scenario: str
    writers: int
    acknowledged: int
    forgets: int
    errors: int
    lost: set[str]
    back: set[str]
    recall_missing: set[str]
    recall_back: set[str]
    seconds: float
    notes: list[str] = field(default_factory=list[str])


# --- the oracle ---------------------------------------------------------------------


def present_ids(vault: Path) -> set[str]:
    """Ids present in the vault's memory files, whatever their layout (see the module)."""
    live: set[str] = set()
    dead: set[str] = set()
    folder = vault / MEMORY_FOLDER
    for path in sorted(folder.rglob("*.jsonl")) if folder.is_dir() else []:
        for line in path.read_bytes().split(b"\n"):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                (dead if row.get("forgotten") is True else live).add(row["id"])
    return live - dead


def memory_files(vault: Path) -> list[str]:
    folder = vault / MEMORY_FOLDER
    return sorted(p.name for p in folder.rglob("*.jsonl")) if folder.is_dir() else []


# --- server processes -----------------------------------------------------------------


def process_env(
    root: Path, name: str, *, standin: StandinProcess | None = None, vault: Path | None = None
) -> dict[str, str]:
    """A server environment of its own: cache and config folders no other process uses,
    as on a device of its own; REST-only when only ``standin`` is given."""
    home = root / "processes" / name
    env = server_env(standin=standin, vault=vault, config_dir=home / "config", embeddings=False)
    env |= {"OBSIDIAN_CACHE_DIR": str(home / "cache"), "OBSIDIAN_MEMORY_MEANING": "false"}
    return env


def reply_text(answer: CallToolResult) -> str:
    return "\n".join(b.text for b in answer.content if isinstance(b, TextContent))


def group_tag(number: int, group_size: int) -> str:
    return f"g{number // group_size}"


async def run_writer(
    writer: Writer, tag: str, group_size: int, forget_every: int, rng: random.Random, start: Gate
) -> None:
    """Remember ``writer.count`` memories; a forgetting writer forgets one of its own
    earlier acknowledged ids (not the newest) after every ``forget_every`` remembers."""
    async with Client(stdio_params(writer.env), read_timeout_seconds=CALL_TIMEOUT) as client:
        await start.arrive()
        for n in range(writer.count):
            answer = await client.call_tool(
                "vault_remember",
                {
                    "content": f"{writer.name} fact {n} of {tag}: the tide turns at dusk",
                    "tags": [tag, group_tag(n, group_size)],
                    "context": "race",
                },
            )
            text = reply_text(answer)
            acknowledged = None if answer.is_error else ACKNOWLEDGED.search(text)
            if acknowledged is None:
                writer.errors.append(text)
                continue
            writer.remembered.append(acknowledged.group(1))
            await anyio.sleep(writer.pause)
            if not writer.forgets or len(writer.remembered) % forget_every:
                continue
            candidates = [i for i in writer.remembered[:-1] if i not in writer.forgotten]
            if not candidates:
                continue
            victim = rng.choice(candidates)
            answer = await client.call_tool("vault_forget", {"id": victim})
            if answer.is_error:
                writer.errors.append(reply_text(answer))
            else:
                writer.forgotten.add(victim)


class Gate:
    """Opens once every writer is connected, so the writes overlap from the first one."""

    def __init__(self, expected: int) -> None:
        self._waiting = expected
        self._open = anyio.Event()
        self.opened_at = 0.0

    async def arrive(self) -> None:
        self._waiting -= 1
        if self._waiting == 0:
            self.opened_at = time.perf_counter()
            self._open.set()
        await self._open.wait()


async def write_all(writers: Sequence[Writer], tag: str, group_size: int, sizes: Sizes) -> float:
    """Run every writer at once; the seconds from the first write to the last answer."""
    gate = Gate(len(writers))
    seed = random.Random(tag)
    async with anyio.create_task_group() as group:
        for writer in writers:
            rng = random.Random(seed.random())
            group.start_soon(run_writer, writer, tag, group_size, sizes.forget_every, rng, gate)
    return time.perf_counter() - gate.opened_at


async def recall_ids(env: dict[str, str], tag: str, groups: int) -> set[str]:
    """Every id a fresh server process recalls for the run, one group (<= 100) a call."""
    found: set[str] = set()
    async with Client(stdio_params(env), read_timeout_seconds=CALL_TIMEOUT) as client:
        for number in range(groups):
            answer = await client.call_tool(
                "vault_recall",
                {
                    "tags": [tag, f"g{number}"],
                    "match_all_tags": True,
                    "limit": RECALL_LIMIT,
                    "max_tokens": 20000,
                    "format": "json",
                },
            )
            if answer.is_error:
                raise RuntimeError(f"recall failed: {reply_text(answer)}")
            data = json.loads(reply_text(answer))
            memories = data["memories"]
            if len(memories) < data["total"]:
                raise RuntimeError(f"recall left out memories of group {number}: {data}")
            found |= {m["id"] for m in memories}
    return found


def judge(
    scenario: str,
    writers: Sequence[Writer],
    checks: Sequence[tuple[str, Path, set[str]]],
    seconds: float,
) -> Outcome:
    """Compare what the writers were told with each (name, vault, recalled ids) check."""
    acknowledged = {i for w in writers for i in w.remembered}
    forgotten = {i for w in writers for i in w.forgotten}
    kept = acknowledged - forgotten
    outcome = Outcome(
        scenario=scenario,
        writers=len(writers),
        acknowledged=len(acknowledged),
        forgets=len(forgotten),
        errors=sum(len(w.errors) for w in writers),
        lost=set(),
        back=set(),
        recall_missing=set(),
        recall_back=set(),
        seconds=seconds,
    )
    for name, vault, whole_ids in checks:
        # Receipts name each memory by the shortest ending of its id no other has.
        present, recalled = with_endings(present_ids(vault)), with_endings(whole_ids)
        lost, back = kept - present, forgotten & present
        outcome.lost |= lost
        outcome.back |= back
        outcome.recall_missing |= kept - recalled
        outcome.recall_back |= forgotten & recalled
        files = ", ".join(memory_files(vault)) or "none"
        outcome.notes.append(
            f"{name}: {len(lost)} lost, {len(back)} forgotten back, "
            f"{len(kept - recalled)} not recalled, {len(forgotten & recalled)} forgotten "
            f"recalled; files: {files}"
        )
    errors = [e for w in writers for e in w.errors]
    if errors:
        outcome.notes.append(f"first error: {errors[0][:300]}")
    return outcome


# --- the sync tool ------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """A file as one scan found it: the stat before reading, the bytes, their hash."""

    mtime_ns: int
    size: int
    data: bytes
    digest: str


def conflict_name(name: str, style: int, device: str, taken: Callable[[str], bool]) -> str:
    """Syncthing's ``<stem>.sync-conflict-<date>-<time>-<device>.<ext>`` (style 0) or
    Dropbox's ``<stem> (conflicted copy <date>).<ext>`` (style 1), numbered if taken."""
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    now = datetime.now(UTC)
    if style == 0:
        base = f"{stem}.sync-conflict-{now:%Y%m%d-%H%M%S}-{device}"
    else:
        base = f"{stem} (conflicted copy {now:%Y-%m-%d})"
    candidate, n = base, 0
    while taken(candidate + dot + ext):
        n += 1
        candidate = f"{base} ({n})"
    return candidate + dot + ext


class SyncTool:
    """Keeps two folders in step as Syncthing or Dropbox would, in whole files.

    Each round scans both sides (hidden names skipped) and compares every path with what
    the two sides held after the last round: a side that changed (created, modified or
    deleted) is carried over to the other; when both changed, the newer modification time
    wins (a deletion loses to a change) and, with ``conflict_copies``, the losing version is
    kept beside it under a conflict name. A file is replaced by a temporary file renamed
    over it, with the source's modification time, and only if the target has not changed
    since the scan (as Syncthing checks before it replaces a file), else it waits for the
    next round."""

    def __init__(self, a: Path, b: Path, *, conflict_copies: bool, rng: random.Random) -> None:
        self.sides = (a, b)
        self.conflict_copies = conflict_copies
        self.rng = rng
        #: path -> hash of the content both sides held after the last round.
        self.last: dict[str, str] = {}
        self.rounds = 0
        self.copies = 0
        self.deletions = 0
        self.conflicts = 0
        self.skipped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sync", daemon=True)
        self._failure: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._failure is not None:
            raise RuntimeError("the sync tool failed") from self._failure

    def settle(self) -> None:
        """Rounds until SETTLE_QUIET_ROUNDS in a row change nothing."""
        quiet = 0
        for _ in range(SETTLE_MAX_ROUNDS):
            quiet = quiet + 1 if self.round() == 0 else 0
            if quiet == SETTLE_QUIET_ROUNDS:
                return
        raise RuntimeError(f"the sync did not settle in {SETTLE_MAX_ROUNDS} rounds")

    def describe(self) -> str:
        return (
            f"sync: {self.rounds} rounds, {self.copies} copies, {self.deletions} deletions, "
            f"{self.conflicts} conflicts, {self.skipped} deferred (target changed)"
        )

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(*SYNC_INTERVAL)):
                self.round()
        except BaseException as exc:  # re-raised by stop(), in the caller's thread
            self._failure = exc

    @staticmethod
    def _scan(root: Path) -> dict[str, Seen]:
        found: dict[str, Seen] = {}
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [s for s in subfolders if not s.startswith(".")]
            for name in names:
                if name.startswith("."):
                    continue
                path = Path(folder) / name
                try:
                    # Stat first: a change after it makes the target check fail.
                    st = path.stat()
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                found[path.relative_to(root).as_posix()] = Seen(
                    st.st_mtime_ns, st.st_size, data, hashlib.sha256(data).hexdigest()
                )
        return found

    def round(self) -> int:
        """One pass over both sides; the number of files changed."""
        self.rounds += 1
        scans = [self._scan(side) for side in self.sides]
        changed = 0
        for rel in sorted(scans[0].keys() | scans[1].keys() | self.last.keys()):
            seen = (scans[0].get(rel), scans[1].get(rel))
            digests = [s.digest if s else None for s in seen]
            base = self.last.get(rel)
            if digests[0] == digests[1]:
                if digests[0] is None:
                    self.last.pop(rel, None)
                else:
                    self.last[rel] = digests[0]
                continue
            if digests[1] == base:
                changed += self._carry(rel, seen[0], 1, seen[1])
            elif digests[0] == base:
                changed += self._carry(rel, seen[1], 0, seen[0])
            else:
                changed += self._conflict(rel, seen)
        return changed

    def _conflict(self, rel: str, seen: tuple[Seen | None, Seen | None]) -> int:
        a, b = seen
        winner = 1 if a is None or (b is not None and b.mtime_ns > a.mtime_ns) else 0
        loser = 1 - winner
        target, lost_version = self.sides[loser] / rel, seen[loser]
        if not _unchanged(target, lost_version):
            self.skipped += 1
            return 0
        self.conflicts += 1
        if self.conflict_copies and lost_version is not None:
            name = conflict_name(
                target.name,
                self.conflicts % 2,
                DEVICE_IDS[loser],
                lambda n: (target.parent / n).exists(),
            )
            _place(target.parent / name, lost_version)
        return self._carry(rel, seen[winner], loser, lost_version)

    def _carry(self, rel: str, source: Seen | None, side: int, before: Seen | None) -> int:
        """Make ``rel`` on ``side`` what ``source`` is (None: deleted), if it still is
        ``before``. With ``conflict_copies``, some updates also keep the version replaced
        as a conflict copy: each device writes only its own files, so no file ever changes
        on both sides, but sync tools leave such copies when they cannot tell the order of
        two versions (a local change during a download, clocks that disagree), and the
        store must read them without losing or reviving anything."""
        target = self.sides[side] / rel
        if not _unchanged(target, before):
            self.skipped += 1
            return 0
        if (self.conflict_copies and source is not None and before is not None
                and self.rng.random() < SPURIOUS_CONFLICTS):
            self.conflicts += 1
            name = conflict_name(target.name, self.conflicts % 2, DEVICE_IDS[side],
                                 lambda n: (target.parent / n).exists())
            _place(target.parent / name, before)
        if source is None:
            target.unlink(missing_ok=True)
            self.last.pop(rel, None)
            self.deletions += 1
        else:
            _place(target, source)
            self.last[rel] = source.digest
            self.copies += 1
        return 1


def _unchanged(path: Path, seen: Seen | None) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return seen is None
    return seen is not None and (st.st_mtime_ns, st.st_size) == (seen.mtime_ns, seen.size)


def _place(target: Path, seen: Seen) -> None:
    """Write ``seen`` at ``target`` as sync tools do: a hidden temporary file with the
    source's modification time, renamed over the target."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.parent / f".syncing.{target.name}.tmp"
    temporary.write_bytes(seen.data)
    os.utime(temporary, ns=(seen.mtime_ns, seen.mtime_ns))
    os.replace(temporary, target)


# --- scenarios ------------------------------------------------------------------------


def groups_for(writers: Sequence[Writer]) -> tuple[int, int]:
    """(group size, number of groups): a group tag marks at most RECALL_LIMIT memories."""
    size = max(1, RECALL_LIMIT // len(writers))
    return size, -(-max(w.count for w in writers) // size)


async def one_vault(number: int, root: Path, sizes: Sizes) -> Outcome:
    """Scenarios 1-3: processes on one vault, through the stand-in (and the folder)."""
    vault = root / "vault"
    vault.mkdir(parents=True)
    tag = f"race-{secrets.token_hex(3)}"
    async with StandinProcess(vault, smart="off") as standin:
        # Scenario 3: processes 0, 2, ... have the folder (and use it for memory), the
        # others reach the vault through the stand-in only.
        with_folder = [number == 3 and i % 2 == 0 for i in range(sizes.processes)]
        writers = [
            Writer(
                name=f"p{i}",
                env=process_env(
                    root,
                    f"p{i}",
                    standin=None if folder else standin,
                    vault=vault if folder else None,
                ),
                count=sizes.per_process,
                forgets=number >= 2,
            )
            for i, folder in enumerate(with_folder)
        ]
        group_size, groups = groups_for(writers)
        seconds = await write_all(writers, tag, group_size, sizes)
        check = (
            process_env(root, "check", vault=vault)
            if number == 3
            else process_env(root, "check", standin=standin)
        )
        recalled = await recall_ids(check, tag, groups)
    return judge(SCENARIOS[number], writers, [("vault", vault, recalled)], seconds)


async def two_devices(number: int, root: Path, sizes: Sizes) -> Outcome:
    """Scenarios 4-5: two vault folders kept in step by the sync tool."""
    vaults = [root / device / "vault" for device in ("A", "B")]
    for vault in vaults:
        vault.mkdir(parents=True)
    tag = f"race-{secrets.token_hex(3)}"
    per_process = -(-sizes.per_device // sizes.device_processes)
    writers = [
        Writer(
            name=f"{device}{i}",
            env=process_env(root, f"{device}{i}", vault=vault),
            count=per_process,
            forgets=device == "A",
            pause=sizes.device_pause,
        )
        for device, vault in zip(("A", "B"), vaults, strict=True)
        for i in range(sizes.device_processes)
    ]
    group_size, groups = groups_for(writers)
    sync = SyncTool(*vaults, conflict_copies=number == 5, rng=random.Random(tag))
    sync.start()
    try:
        seconds = await write_all(writers, tag, group_size, sizes)
    finally:
        sync.stop()
    sync.settle()
    checks: list[tuple[str, Path, set[str]]] = []
    for device, vault in zip(("A", "B"), vaults, strict=True):
        env = process_env(root, f"check{device}", vault=vault)
        checks.append((f"device {device}", vault, await recall_ids(env, tag, groups)))
    outcome = judge(SCENARIOS[number], writers, checks, seconds)
    outcome.notes.append(sync.describe())
    return outcome


async def run_scenario(number: int, root: Path, sizes: Sizes) -> Outcome:
    run: Callable[[int, Path, Sizes], Awaitable[Outcome]] = (
        one_vault if number <= 3 else two_devices
    )
    return await run(number, root / f"scenario{number}", sizes)


def table(outcomes: Sequence[Outcome]) -> str:
    headers = (
        "scenario",
        "writers",
        "remembers acknowledged",
        "forgets acknowledged",
        "errors",
        "lost",
        "forgotten back",
        "recall: missing",
        "recall: forgotten back",
        "seconds",
    )
    rows = [
        (
            o.scenario,
            o.writers,
            o.acknowledged,
            o.forgets,
            o.errors,
            len(o.lost),
            len(o.back),
            len(o.recall_missing),
            len(o.recall_back),
            o.seconds,
        )
        for o in outcomes
    ]
    notes = [f"- {o.scenario}: {note}" for o in outcomes for note in o.notes]
    return "\n".join([markdown_table(headers, rows), "", *notes])


def section(outcomes: Sequence[Outcome]) -> str:
    """The races' section of REPORT.md."""
    return "\n".join([
        "## Memory races",
        "",
        "Acknowledged memories lost, and forgotten ones back, with several writers: server "
        "processes through the stand-in Local REST API (whose append reads, yields and writes "
        "the whole file back, as the plugin's does) and through the folder, and two devices "
        "kept in step by a sync that copies whole files (newest wins), with conflict copies. "
        "`python -m bench --races` (or `python -m bench.robustness.memory_races`); short versions "
        "run in `tests/test_memory_races.py`.",
        "",
        table(outcomes),
    ])


async def run_all(numbers: Sequence[int], root: Path, sizes: Sizes) -> list[Outcome]:
    return [await run_scenario(number, root, sizes) for number in numbers]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.robustness.memory_races",
        description="Acknowledged memories lost, and forgotten ones back, under races.",
    )
    parser.add_argument("--processes", type=int, default=3, help="writers of scenarios 1-3")
    parser.add_argument("--per-process", type=int, default=200, help="remembers each, 1-3")
    parser.add_argument("--per-device", type=int, default=150, help="remembers each, 4-5")
    parser.add_argument("--device-processes", type=int, default=1, help="writers a device")
    parser.add_argument("--forget-every", type=int, default=4, help="remembers per forget")
    parser.add_argument(
        "--device-pause", type=float, default=0.05, help="seconds after a remember, 4-5"
    )
    parser.add_argument("--scenarios", default="1,2,3,4,5", help="comma-separated numbers")
    parser.add_argument("--keep", type=Path, default=None, help="keep the vaults in DIR")
    args = parser.parse_args(argv)
    numbers = [int(n) for n in args.scenarios.split(",")]
    if unknown := [n for n in numbers if n not in SCENARIOS]:
        parser.error(f"unknown scenario(s): {unknown}")
    sizes = Sizes(
        processes=args.processes,
        per_process=args.per_process,
        per_device=args.per_device,
        device_processes=args.device_processes,
        forget_every=args.forget_every,
        device_pause=args.device_pause,
    )
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        outcomes = anyio.run(run_all, numbers, args.keep, sizes)
    else:
        with tempfile.TemporaryDirectory(prefix="memory-races-") as work:
            outcomes = anyio.run(run_all, numbers, Path(work), sizes)
    sys.stdout.write(table(outcomes) + "\n")


if __name__ == "__main__":
    main()
