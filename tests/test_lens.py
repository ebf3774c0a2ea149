"""Read and edit agree (issue 34): a target is a lens.

The laws (`bench.editing.lens`: GetPut, the one-word round trip, PutGet up to docs/editing.md's
normalisation list, one span for every reference form) on notes hypothesis draws from the
shapes Obsidian users write; `python -m bench.editing.lens` runs 10,000 of them. Then the same
workflow as an agent runs it, through a real MCP client over the vault folder and the
stand-in Local REST API: read a section or a block, send it back unchanged, change one
word, and read a long section in windows and change one window.
"""

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from bench.editing.lens import PIECES, NoteSpec, Outcome, build_note, check_laws
from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

specs = st.builds(
    NoteSpec,
    pieces=st.lists(
        st.tuples(st.sampled_from(PIECES), st.integers(0, 2**30)), min_size=1, max_size=8
    ).map(tuple),
    crlf=st.booleans(),
    bom=st.booleans(),
    frontmatter=st.booleans(),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs)
def test_every_target_of_a_generated_note_is_a_lens(spec: NoteSpec) -> None:
    text, ids = build_note(spec)
    outcome = Outcome()
    check_laws(text, ids, outcome)
    assert outcome.failures == []


def test_the_laws_see_the_defects_issue_34_names() -> None:
    """The checks fail where the engine before this issue failed: each note's target
    broke a law there."""
    from bench.editing.lens import read, replace

    doubled = {
        "- a\n- b ^b\n  - b1\n- c\n": "^b",
        "| a |\n|---|\n| 1 |\n^tbl\n": "^tbl",
        "## Log\n- a\n\n## Next\n": "Log",
        "Log\n===\n\n- a\n": "Log",
        "para\n^id\n": "^id",
        "> [!note] Title\n> para1 ^p1\n>\n> para2\n": "^p1",
        "see ![[img.png]]^im\n": "^im",
    }
    for note, target in doubled.items():
        assert replace(note, target, read(note, target)) == note, target
    # A body sent back without its heading line keeps the blank line under the heading.
    assert replace("## H\n\nbody\n\n## I\n", "H", "\nbody\n") == "## H\n\nbody\n\n## I\n"
    # The callout's header is not the paragraph's: replacing the paragraph keeps it.
    assert (
        replace("> [!note] Title\n> para1 ^p1\n>\n> para2\n", "^p1", "new para")
        == "> [!note] Title\n> new para ^p1\n>\n> para2\n"
    )
    # A quote's text without '>' keeps the quote's frame and the callout's header.
    assert replace("> [!tip] Title\n> only para ^p1\n", "^p1", "new para") == (
        "> [!tip] Title\n> new para ^p1\n"
    )
    # An item stays an item, in its list; emptied, it keeps its id.
    assert replace("- one\n- two ^ib\n- three\n", "^ib", "two updated") == (
        "- one\n- two updated ^ib\n- three\n"
    )
    assert replace("- one\n- two ^ib\n- three\n", "^ib", "") == "- one\n- ^ib\n- three\n"
    # Heading paths with skipped levels and the read's looser separators, for both.
    note = "# Characters\n## Alice\n### Backstory\n#### Childhood\ntext\n"
    for form in ("Alice > Childhood", "Alice::Childhood", "Alice#Childhood"):
        assert read(note, form) == "#### Childhood\ntext"
        assert replace(note, form, "#### Childhood\nTEXT") == note.replace("text", "TEXT")


def test_a_reference_two_headings_share_is_refused_by_both_with_the_candidates() -> None:
    from bench.editing.lens import read, replace
    from obsidian_mcp.editing.targets import EditRefused, TargetUnresolved

    note = "## Day\n### Notes\na\n## Night\n### Notes\nb\n"
    with pytest.raises(TargetUnresolved, match=r"Day > Notes \(line 2\); Night > Notes"):
        read(note, "Notes")
    with pytest.raises(EditRefused, match=r"Day > Notes \(line 2\); Night > Notes"):
        replace(note, "Notes", "x")
    # Two headings of one full path: the label as listed picks one, for both.
    twins = "## Log\na\n## Log\nb\n"
    assert read(twins, "Log (line 3)") == "## Log\nb"
    assert replace(twins, "Log (line 3)", "## Log\nB") == "## Log\na\n## Log\nB\n"


# -- through the tools, as an agent works ------------------------------------------------

NOTE = "Lens/Round trip.md"
_LONG_AGO = time.time() - 3600
SECTION_BODY = "\n".join(f"Line {n} of the log, with words to keep." for n in range(1, 200))
LENS_NOTE = (
    "---\ntitle: Round trip\n---\n# Round trip\n\n## Log\n\n"
    + SECTION_BODY
    + "\n\n## Tasks\n\n- [ ] first\n\t- [x] second ^t2\n\t\t- [ ] third\n- [ ] last\n\n"
    "> [!note] Careful\n> the lamp is lit ^lamp\n>\n> every night\n\n"
    "| name | value |\n|---|---|\n| alpha | beta |\n^tbl\n"
)


def _text(result: object) -> str:
    return text_of(result)


async def _read(client: Client, heading: str, **extra: object) -> dict[str, object]:
    result = await client.call_tool(
        "vault_read_note", {"path": NOTE, "heading": heading, "format": "json", **extra}
    )
    assert not result.is_error, _text(result)
    return json.loads(_text(result))


async def _replace(client: Client, target: str, content: str, version: str) -> str:
    result = await client.call_tool(
        "vault_edit_note",
        {
            "path": NOTE,
            "operation": "replace",
            "target": target,
            "content": content,
            "version": version,
        },
    )
    assert not result.is_error, _text(result)
    return _text(result)


async def _agent_round_trips(client: Client, on_disk: Path) -> None:
    # Each target with a word found in it before anywhere else in the note.
    words = {"Log": "keep", "Tasks": "first", "^t2": "second", "^lamp": "lamp", "^tbl": "beta"}
    for target, word in words.items():
        before = on_disk.read_bytes()
        window = await _read(client, target, max_chars=100_000)
        reply = await _replace(client, target, str(window["text"]), str(window["version"]))
        assert reply.startswith("Nothing changed"), (target, reply)
        assert on_disk.read_bytes() == before, target
        # One word changed: the note differs by that word alone.
        window = await _read(client, target, max_chars=100_000)
        text = str(window["text"])
        await _replace(client, target, text.replace(word, "WORD", 1), str(window["version"]))
        assert on_disk.read_bytes() == before.replace(word.encode(), b"WORD", 1), target
    # A long section read in windows: replacing the second window changes it alone.
    first = await _read(client, "Log", max_chars=2000)
    assert first["next_offset"] is not None and "@" in str(first["version"])
    second = await _read(client, "Log", offset=first["next_offset"], max_chars=2000)
    before = on_disk.read_bytes().decode("utf-8")
    window_text = str(second["text"])
    changed = window_text.replace("Line", "LINE")
    await _replace(client, "Log", changed, str(second["version"]))
    assert on_disk.read_bytes().decode("utf-8") == before.replace(window_text, changed, 1)
    # The window sent back as the whole target, cut marker and all, is refused.
    cut = await client.call_tool(
        "vault_read_note", {"path": NOTE, "heading": "Log", "max_chars": 2000}
    )
    refused = await client.call_tool(
        "vault_edit_note",
        {
            "path": NOTE,
            "operation": "replace",
            "target": "Log",
            "content": _text(cut).split("\n\n", 1)[1],
        },
    )
    assert refused.is_error and "cut read" in _text(refused)


@pytest.mark.anyio
async def test_an_agents_round_trips_change_only_what_it_changed_through_the_folder(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    (vault / "Lens").mkdir(parents=True)
    on_disk = vault / NOTE
    on_disk.write_text(LENS_NOTE, "utf-8")
    os.utime(on_disk, (_LONG_AGO, _LONG_AGO))
    async with Client(build_server(folder_settings(vault, tmp_path / "config"))) as client:
        await _agent_round_trips(client, on_disk)


@pytest.mark.anyio
@pytest.mark.parametrize("plugin", ["3.2.0", "6.0.0"])
async def test_an_agents_round_trips_change_only_what_it_changed_through_the_plugin(
    tmp_path: Path, plugin: str
) -> None:
    vault = tmp_path / "vault"
    (vault / "Lens").mkdir(parents=True)
    on_disk = vault / NOTE
    on_disk.write_text(LENS_NOTE.replace("\n", "\r\n"), "utf-8", newline="")
    os.utime(on_disk, (_LONG_AGO, _LONG_AGO))
    with StandinProcess(vault, plugin_version=plugin, smart="off") as standin:
        settings = rest_settings(standin, tmp_path / "config", index_embeddings=False)
        async with Client(build_server(settings)) as client:
            await _agent_round_trips(client, on_disk)
