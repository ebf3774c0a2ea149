"""The in-place write of `sources/swap.py` against other processes writing the note: a
save that opens the note during the write waits for it and then wins; without a lease a
change between the compare and the write is still seen; a write the disk cannot take
leaves the note as it was; lines appended right after the write leave the edit standing."""

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from obsidian_mcp.sources import swap
from obsidian_mcp.sources.swap import NoteChanged, replace_if_unchanged
from tests.fixture_vault import REPO_ROOT

OLD = "# Note\n\n## Log\n- one\n"
NEW = "# Note\n\n## Log\n- one\n- agent\n"
USER = "# Note\n\n## Log\n- one\n- user\n"

# A save as Node's fs.writeFile makes it: open with truncation, then write. It prints the
# moment its open returned.
SAVE = """
import os, sys, time
descriptor = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
print(time.monotonic(), flush=True)
os.write(descriptor, sys.argv[2].encode())
os.close(descriptor)
"""


@pytest.mark.skipif(not swap._LEASES, reason="write leases are Linux's")  # pyright: ignore[reportPrivateUsage]
def test_a_save_during_the_write_waits_for_it_then_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "n.md"
    note.write_text(OLD, "utf-8")
    saves: list[subprocess.Popen[str]] = []
    released: list[float] = []
    write = swap._write_in_place  # pyright: ignore[reportPrivateUsage]

    def write_while_a_save_opens(*args: object) -> None:
        # The user's save starts while the edit holds the note: its open must wait.
        saves.append(
            subprocess.Popen(
                [sys.executable, "-c", SAVE, str(note), USER], stdout=subprocess.PIPE, text=True
            )
        )
        # The kernel asks the lease's holder to let go once the save is waiting in open().
        descriptor = args[0]
        assert isinstance(descriptor, int)
        deadline = time.monotonic() + 60
        while fcntl.fcntl(descriptor, fcntl.F_GETLEASE) == fcntl.F_WRLCK:
            assert time.monotonic() < deadline, "the save never tried to open the note"
            time.sleep(0.005)
        write(*args)  # type: ignore[arg-type]
        released.append(time.monotonic())

    monkeypatch.setattr(swap, "_write_in_place", write_while_a_save_opens)
    with pytest.raises(NoteChanged) as changed:
        replace_if_unchanged(note, "n.md", OLD, NEW)
    [save] = saves
    assert save.stdout is not None
    opened = float(save.stdout.readline())
    save.wait()
    save.stdout.close()
    assert opened >= released[0]  # the save's open waited for the edit's write
    # The save's whole text is the note, and the edit says it was not made.
    assert note.read_text("utf-8") == USER
    assert changed.value.current == USER


def test_without_a_lease_a_change_before_the_write_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "n.md"
    note.write_text(OLD, "utf-8")
    monkeypatch.setattr(swap, "_LEASES", False)
    begin = swap._begin  # pyright: ignore[reportPrivateUsage]

    def begin_then_someone_appends(*args: object) -> Path | None:
        record = begin(*args)  # type: ignore[arg-type]
        with note.open("a", encoding="utf-8") as other:
            other.write("- user\n")
        return record

    monkeypatch.setattr(swap, "_begin", begin_then_someone_appends)
    with pytest.raises(NoteChanged) as changed:
        replace_if_unchanged(note, "n.md", OLD, NEW)
    assert note.read_text("utf-8") == USER
    assert changed.value.current == USER
    monkeypatch.setattr(swap, "_begin", begin)
    replace_if_unchanged(note, "n.md", USER, USER + "- agent\n")
    assert note.read_text("utf-8") == USER + "- agent\n"


def test_lines_appended_right_after_the_write_leave_the_edit_standing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program appending to the note (`echo >>`, a logger) just after the write: the edit
    stands. It was reported as a conflict, so the editor refused an edit it had written
    ("nothing was written") or made it a second time."""
    note = tmp_path / "n.md"
    note.write_text(OLD, "utf-8")
    check_after = swap._check_after  # pyright: ignore[reportPrivateUsage]

    def appended_meanwhile(descriptor: int, target: Path, *args: object) -> None:
        with target.open("a", encoding="utf-8") as other:
            other.write("- logged\n")
        check_after(descriptor, target, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(swap, "_check_after", appended_meanwhile)
    replace_if_unchanged(note, "n.md", OLD, NEW)
    assert note.read_text("utf-8") == NEW + "- logged\n"
    # An edit that cuts the note's end cannot tell lines appended after it from a save of
    # the old text with lines added: a conflict, as before.
    with pytest.raises(NoteChanged):
        replace_if_unchanged(note, "n.md", NEW + "- logged\n", OLD)


# The write, in a process whose files may not grow past the note's size (as a full disk).
LIMITED = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
note = Path(sys.argv[1])
size = note.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4, size + 4))
from obsidian_mcp.errors import OutOfSpace
from obsidian_mcp.sources.swap import replace_if_unchanged
try:
    replace_if_unchanged(note, "n.md", note.read_text(), note.read_text() + "x" * 100)
except OutOfSpace as exc:
    print(exc)
"""


def test_a_write_the_disk_cannot_take_leaves_the_note(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text(OLD, "utf-8")
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, str(note)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "EFBIG" in done.stdout and "as it was" in done.stdout, done.stdout + done.stderr
    assert note.read_text("utf-8") == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.md"]
    assert os.stat(note).st_size == len(OLD)
