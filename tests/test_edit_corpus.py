"""Every corpus case gives its expected bytes through the engine and through the vault
folder; a refusal leaves the file as it was; undo restores the original bytes; undo is
refused once the edited text has changed, and goes ahead when only text near it did.
Through the stand-in Local REST API at plugin 3.2, 4.1, 5.1 and 6.0, the cases where the
bytes cross the wire differently (line endings, BOM, no final newline, non-ASCII, NUL,
created notes and headings), every case of the write path (500 on: names, links, bytes
that are not UTF-8) and a spread of the rest; `python -m bench.editing.corpus` runs every
case through every source."""

from pathlib import Path

import pytest

from obsidian_mcp.editing.operations import apply_edit, created_text
from obsidian_mcp.editing.targets import EditRefused
from tests.edit_cases import EditCase, corpus_editors, load_cases, run_cases

CASES = load_cases()


def test_the_corpus_covers_what_the_issues_list() -> None:
    """Issue 18's contract cases and issue 25's shapes of real notes."""
    assert len(CASES) >= 300
    names = " ".join(case.name for case in CASES)
    for topic in (
        "duplicate",
        "fence",
        "setext",
        "callout",
        "list",
        "table",
        "block",
        "crlf",
        "non-ascii",
        "no-frontmatter",
        "last-section",
        "empty",
        # issue 25
        "tab-nested",
        "space-nested",
        "ordered",
        "task",
        "multiline-item",
        "lazy",
        "indented-code",
        "math",
        "comment",
        "html",
        "rule",
        "anchor",
        "mixed-endings",
        "bom",
        "no-final-newline",
        "nul",
        "c-sharp",
        "quoted",
        # issue 25, the write path
        "nfd",
        "long-name",
        "symlinked",
        "invalid-utf8",
    ):
        assert topic in names, topic
    assert sum(1 for case in CASES if case.refused) >= 30
    assert all(case.spec.get("why") for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_engine_gives_the_expected_bytes(case: EditCase) -> None:
    if case.write_path_only:
        # The sources refuse it before the engine is asked (the sources' tests below).
        assert case.refused is not None
        if case.refused == "not valid utf-8":
            assert case.before is not None and not _utf8(case.before)
        return
    try:
        if case.before is None:
            result = created_text(case.request)
        else:
            result = apply_edit(case.spec["path"], case.before.decode("utf-8"), case.request).text
    except EditRefused as refused:
        assert case.refused is not None, str(refused)
        assert case.refused in str(refused).lower()
        return
    assert case.refused is None, "expected a refusal"
    assert case.after is not None
    assert result.encode("utf-8") == case.after


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# The REST slice: what the transport could change (CRLF, a BOM, a missing final newline,
# non-ASCII, NUL, notes and headings created), the write path's cases, and every 16th case
# for the rest: 108 of 333 cases a version, against the whole 130-case corpus before issue
# 25 (bench runs them all).
_WIRE_TOPICS = (
    "crlf",
    "bom",
    "mixed-endings",
    "eof",
    "no-final-newline",
    "non-ascii",
    "nul",
    "create-",
)
_SPREAD = 16
# Cases 500-699 pin what only the write path decides (tests/edit_corpus/README.md).
_WRITE_PATH_CASES = "500"
REST_CASES = [
    case
    for index, case in enumerate(CASES)
    if index % _SPREAD == 0
    or any(topic in case.name for topic in _WIRE_TOPICS)
    or case.name >= _WRITE_PATH_CASES
]


@pytest.mark.anyio
async def test_corpus_through_the_vault_folder(tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    async with corpus_editors(vault_dir, tmp_path, None) as editor_for:
        assert await run_cases(editor_for, vault_dir, CASES, undo_after_changes=True) == {}


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["3.2.0", "4.1.7", "5.1.0", "6.0.0"])
async def test_a_slice_of_the_corpus_through_the_rest_api(version: str, tmp_path: Path) -> None:
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    async with corpus_editors(vault_dir, tmp_path, version) as editor_for:
        # How undo finds the text is the same on every source: the folder run checks it.
        assert await run_cases(editor_for, vault_dir, REST_CASES, undo_after_changes=False) == {}
