"""PATCH /vault/{path} and GET /active/ on the Local REST API stand-in (tests/standin).

Every request goes over HTTPS to a ``python -m tests.standin`` process; one process per
plugin version is shared by the module, each test writing notes of its own into the
shared vault folder. The expected bytes are what upstream produces (markdown-patch 0.2.2
and 0.4.0 were checked against their npm builds, 0.4.4 and 2.0 against their own tests,
see ``tests/standin/patch.py``); the last tests pin the pure engines directly.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.standin.patch import InstructionV1, apply_v1, apply_v2, engine_for
from tests.standin.process import StandinProcess
from tests.standin.yamljs import load, stringify

V3, V4, V5, V6 = "3.2.0", "4.1.7", "5.1.0", "6.0.0"
MD = {"Content-Type": "text/markdown"}
NESTED = "# Title\nintro\n\n## Section\nbody\n\n## Other\nx\n"

Launch = Callable[[str], StandinProcess]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("patch") / "vault"
    root.mkdir()
    return root


@pytest.fixture(scope="module")
def launch(vault: Path) -> Iterator[Launch]:
    """``launch(version)``: the module's stand-in for that plugin version."""
    running: dict[str, StandinProcess] = {}

    def get(version: str) -> StandinProcess:
        if version not in running:
            running[version] = StandinProcess(vault, plugin_version=version, smart="off").start()
        return running[version]

    yield get
    for proc in running.values():
        proc.stop()
        assert proc.returncode == 0


_names = itertools.count()


def _note(vault: Path, text: str, name: str = "note") -> str:
    """A fresh note in the shared vault; returns its vault path."""
    path = f"{name}-{next(_names)}.md"
    (vault / path).write_text(text, encoding="utf-8")
    return path


def _v1(target: str, operation: str = "append", **extra: str) -> dict[str, str]:
    """1.x headers (``Target-Type: heading`` unless given)."""
    return {"Operation": operation, "Target-Type": "heading", "Target": target, **MD, **extra}


def _patch_v1(lra: StandinProcess, path: str, body: str, headers: dict[str, str]) -> httpx.Response:
    """A 1.x-format PATCH, opted in with ``Markdown-Patch-Version: 1`` on 5.x."""
    if lra.plugin_version.startswith("5."):
        headers = {**headers, "Markdown-Patch-Version": "1"}
    with lra.client(timeout=10) as http:
        return http.patch(f"/vault/{path}", content=body, headers=headers)


def _patch_json(lra: StandinProcess, path: str, instruction: dict[str, Any]) -> httpx.Response:
    with lra.client(timeout=10) as http:
        return http.patch(f"/vault/{path}", json=instruction)


def _error(response: httpx.Response, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["errorCode"] == code
    message: str = body["message"]
    return message


# --- the 1.x header format (3.x, 4.x, 5.x with Markdown-Patch-Version: 1) ----------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # markdown-patch 0.2.2 splices verbatim: the separator stays above the new text.
        (V3, "# Title\nintro\n\n## Section\nbody\n\nadded\n## Other\nx\n"),
        # 1.x moves the section's trailing blank line below the appended text.
        (V4, "# Title\nintro\n\n## Section\nbody\n\nadded\n\n## Other\nx\n"),
        (V5, "# Title\nintro\n\n## Section\nbody\n\nadded\n\n## Other\nx\n"),
    ],
)
def test_append_to_nested_heading_needs_the_full_path(
    launch: Launch, vault: Path, version: str, expected: str
) -> None:
    lra = launch(version)
    path = _note(vault, NESTED)
    response = _patch_v1(lra, path, "added\n", _v1("Title::Section"))
    assert response.status_code == 200, response.text
    assert response.text == expected  # the whole patched document comes back
    assert (vault / path).read_text() == expected
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"  # res.send(string)
    deprecation = response.headers.get("Deprecation")
    assert deprecation == ('true; sunset-version="6.0"' if version == V5 else None)
    # The bare name is no address: the map keys are full ancestor paths.
    bare = _patch_v1(lra, path, "more\n", _v1("Section"))
    message = _error(bare, 400, 40080)
    assert message == (
        "The patch you provided could not be applied to the target content.\ninvalid-target"
    )
    assert (vault / path).read_text() == expected
    # Target is percent-decoded, then split on Target-Delimiter (default "::").
    encoded = _patch_v1(lra, path, "third\n", _v1("Title%7CSection"))
    _error(encoded, 400, 40080)  # one element, "Title|Section"
    piped = _patch_v1(lra, path, "third\n", _v1("Title%7CSection", **{"Target-Delimiter": "|"}))
    assert piped.status_code == 200 and "third\n" in piped.text


def test_3x_content_preexists_check_blocks_replace(launch: Launch, vault: Path) -> None:
    """3.x (markdown-patch < 1.0) refuses a body already found in the section, before
    looking at the operation, unless ``Apply-If-Content-Preexists: true``; 4.x replaced
    the flag with ``Reject-If-Content-Preexists`` (default off, never for replace)."""
    v3, v4 = launch(V3), launch(V4)
    text = "# Log\nshort\nlonger line\n"
    path = _note(vault, text)
    refused = _patch_v1(v3, path, "short", _v1("Log", "replace"))
    assert _error(refused, 400, 40080).endswith("\ncontent-already-preexists-in-target")
    empty = _patch_v1(v3, path, "", _v1("Log", "replace"))  # "" is in every section
    _error(empty, 400, 40080)
    assert (vault / path).read_text() == text
    applied = _patch_v1(
        v3, path, "short\n", _v1("Log", "replace", **{"Apply-If-Content-Preexists": "true"})
    )
    assert applied.status_code == 200 and applied.text == "# Log\nshort\n"
    other = _note(vault, text)
    replaced = _patch_v1(v4, other, "short\n", _v1("Log", "replace"))
    assert replaced.status_code == 200 and replaced.text == "# Log\nshort\n"
    rejected = _patch_v1(
        v4, other, "short", _v1("Log", "append", **{"Reject-If-Content-Preexists": "true"})
    )
    assert _error(rejected, 400, 40080).endswith("\ncontent-already-preexists-in-target")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (V3, "# Log\nfirst\n\n# Log\nsecond\nnew"),
        (V4, "# Log\nfirst\n\n# Log\nsecond\nnew"),
        (V5, "# Log\nfirst\n\n# Log\nsecond\nnew"),
    ],
)
def test_duplicate_heading_paths_the_last_one_wins(
    launch: Launch, vault: Path, version: str, expected: str
) -> None:
    path = _note(vault, "# Log\nfirst\n\n# Log\nsecond\n")
    response = _patch_v1(launch(version), path, "new", _v1("Log"))
    assert response.status_code == 200, response.text
    assert response.text == expected


@pytest.mark.parametrize("version", [V3, V4, V5])
def test_create_if_missing_with_a_bare_nested_name_adds_a_top_level_heading(
    launch: Launch, vault: Path, version: str
) -> None:
    """``Section`` is not an address (``Title::Section`` is), so nothing matches and a new
    top-level ``# Section`` goes to the end of the note, with success reported."""
    path = _note(vault, "# Title\n## Section\nbody\n")
    response = _patch_v1(
        launch(version),
        path,
        "added\n",
        _v1("Section", **{"Create-Target-If-Missing": "true"}),
    )
    assert response.status_code == 200, response.text
    assert response.text == "# Title\n## Section\nbody\n# Section\nadded\n"
    # A missing child of an existing heading is created one level per matched element.
    child = _patch_v1(
        launch(version),
        path,
        "x\n",
        _v1("Title::Fresh", **{"Create-Target-If-Missing": "true"}),
    )
    assert child.status_code == 200
    assert child.text == "# Title\n## Section\nbody\n## Fresh\nx\n# Section\nadded\n"


FRONTMATTER = '---\n# owner: me\ntitle: "Quoted"\ncount: 5\ntags: [a, b]\n---\nbody\n'


@pytest.mark.parametrize("version", [V3, V4, V5])
def test_frontmatter_patch_regenerates_the_whole_block(
    launch: Launch, vault: Path, version: str
) -> None:
    """Any frontmatter operation rewrites the block with ``yaml.stringify``: the comment
    and the quoting go, the flow list turns block style, and a ``text/markdown`` body is
    a string (``"7"``)."""
    path = _note(vault, FRONTMATTER)
    response = _patch_v1(
        launch(version), path, "7", {**_v1("count", "replace"), "Target-Type": "frontmatter"}
    )
    assert response.status_code == 200, response.text
    assert response.text == '---\ntitle: Quoted\ncount: "7"\ntags:\n  - a\n  - b\n---\nbody\n'
    assert "# owner" not in (vault / path).read_text()
    typed = _patch_v1(
        launch(version),
        path,
        '["c"]',
        {
            **_v1("tags", "append"),
            "Target-Type": "frontmatter",
            "Content-Type": "application/json",
        },
    )
    assert typed.status_code == 200
    assert "tags:\n  - a\n  - b\n  - c\n" in typed.text


def test_1x_errors_and_the_legacy_heading_header(launch: Launch, vault: Path) -> None:
    v3, v4 = launch(V3), launch(V4)
    path = _note(vault, "# Title\n## Section\nbody\n")
    with v4.client(timeout=10) as http:
        _error(http.patch("/vault/nothing-here.md", content="x", headers=_v1("A")), 404, 40400)
        _error(http.patch("/vault/folder/", content="x", headers=_v1("A")), 405, 40510)
        missing_type = {"Operation": "append", "Target": "A", **MD}
        _error(http.patch(f"/vault/{path}", content="x", headers=missing_type), 400, 40053)
        bad_op = _v1("Title", "obliterate")
        _error(http.patch(f"/vault/{path}", content="x", headers=bad_op), 400, 40057)
        plain = _v1("Title") | {"Content-Type": "text/plain"}
        _error(http.patch(f"/vault/{path}", content="x", headers=plain), 400, 40012)
        scope = _v1("Title") | {"Target-Scope": "everything"}
        _error(http.patch(f"/vault/{path}", content="x", headers=scope), 400, 40059)
        marker = _v1("Title") | {"Target-Scope": "marker"}
        _error(http.patch(f"/vault/{path}", content="x", headers=marker), 501, 50100)
    # The pre-3.0 format: the body is spliced in as one more line of the note, at the
    # section's end (after the file's final empty "line") unless told to skip blanks.
    legacy = {"Heading": "Title::Section", "Content-Insertion-Position": "end", **MD}
    skip = legacy | {"Content-Insertion-Ignore-Newline": "true"}
    with v3.client(timeout=10) as http:
        response = http.patch(f"/vault/{path}", content="tail", headers=legacy)
        assert response.status_code == 200, response.text
        assert response.text == "# Title\n## Section\nbody\n\ntail"
        assert response.headers["Deprecation"] == 'true; sunset-version="4.0"'
        other = _note(vault, "# Title\n## Section\nbody\n")
        tucked = http.patch(f"/vault/{other}", content="tail", headers=skip)
        assert tucked.text == "# Title\n## Section\nbody\ntail\n"
        _error(
            http.patch(f"/vault/{other}", content="x", headers={"Heading": "Nope", **MD}),
            400,
            40052,
        )
    with v4.client(timeout=10) as http:  # 4.0.1 dropped the Heading header: no Target-Type
        _error(http.patch(f"/vault/{other}", content="tail", headers=legacy), 400, 40053)


# --- 5.x and 6.x: the JSON instruction (markdown-patch 2.0) -------------------------------


def _version_token(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:6]


@pytest.mark.parametrize("version", [V5, V6])
def test_json_instruction_owns_the_whitespace(launch: Launch, vault: Path, version: str) -> None:
    lra = launch(version)
    path = _note(vault, NESTED)
    response = _patch_json(
        lra,
        path,
        {
            "targetType": "heading",
            "target": ["Title", "Section"],
            "operation": "append",
            "content": "\n\nadded\n\n",
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert response.text == "# Title\nintro\n\n## Section\nbody\n\nadded\n\n## Other\nx\n"
    assert "Deprecation" not in response.headers
    bare = _patch_json(
        lra,
        path,
        {"targetType": "heading", "target": ["Section"], "operation": "append", "content": "x"},
    )
    assert _error(bare, 404, 40400) == 'Not Found\ncould not resolve heading target ["Section"]'
    # Duplicate sibling headings: the plain address is the first one (later ones carry
    # a marker suffix), unlike the 1.x map where the last wins.
    dup = _note(vault, "# Log\nfirst\n\n# Log\nsecond\n")
    first = _patch_json(
        lra,
        dup,
        {"targetType": "heading", "target": ["Log"], "operation": "append", "content": "new"},
    )
    assert first.text == "# Log\nfirst\n\nnew\n\n# Log\nsecond\n"
    # A leading "#" in content becomes a child heading of the target.
    child = _patch_json(
        lra,
        dup,
        {"targetType": "heading", "target": ["Log"], "operation": "replace", "content": "# Sub\nz"},
    )
    assert child.text == "# Log\n## Sub\nz\n\n# Log\nsecond\n"
    fm = _note(vault, FRONTMATTER)
    value = _patch_json(
        lra,
        fm,
        {"targetType": "frontmatter", "target": "count", "operation": "replace", "value": 7},
    )
    assert value.status_code == 200
    assert value.text == "---\ntitle: Quoted\ncount: 7\ntags:\n  - a\n  - b\n---\nbody\n"


@pytest.mark.parametrize("version", [V5, V6])
def test_if_match_is_checked_before_the_target(launch: Launch, vault: Path, version: str) -> None:
    lra = launch(version)
    text = "# A\nbody\n"
    path = _note(vault, text)
    stale = {"targetType": "heading", "target": ["Nope"], "operation": "append", "content": "x"}
    message = _error(_patch_json(lra, path, {**stale, "ifMatch": "abc123"}), 412, 41200)
    assert message == (
        "Precondition Failed\nifMatch precondition failed: expected version abc123, "
        f"document is at {_version_token(text)}"
    )
    _error(_patch_json(lra, path, stale), 404, 40400)  # the same target without ifMatch
    good = {"targetType": "heading", "target": ["A"], "operation": "append", "content": "x"}
    response = _patch_json(lra, path, {**good, "ifMatch": _version_token(text)})
    assert response.status_code == 200 and response.text == "# A\nbody\n\nx\n"
    again = _patch_json(lra, path, {**good, "ifMatch": _version_token(text)})
    _error(again, 412, 41200)  # the token changed with the write
    assert (vault / path).read_text() == "# A\nbody\n\nx\n"


def test_5x_header_targeting_needs_an_explicit_version(launch: Launch, vault: Path) -> None:
    lra = launch(V5)
    path = _note(vault, NESTED)
    with lra.client(timeout=10) as http:
        no_version = http.patch(f"/vault/{path}", content="x", headers=_v1("Title"))
        assert _error(no_version, 400, 40084).startswith("Header-based PATCH targeting")
        bad = _v1("Title") | {"Markdown-Patch-Version": "3"}
        _error(http.patch(f"/vault/{path}", content="x", headers=bad), 400, 40082)
        not_json = http.patch(f"/vault/{path}", content="just text", headers=MD)
        _error(not_json, 400, 40081)
        invalid = http.patch(
            f"/vault/{path}", json={"targetType": "chapter", "operation": "append"}
        )
        assert _error(invalid, 400, 40081).endswith(
            "targetType: Invalid enum value. Expected 'heading' | 'block' | 'frontmatter', "
            "received 'chapter'; target: Invalid input"
        )
        error_with_deprecation = http.patch(
            f"/vault/{path}", content="x", headers=_v1("Nope") | {"Markdown-Patch-Version": "1"}
        )
        _error(error_with_deprecation, 400, 40080)
        assert error_with_deprecation.headers["Deprecation"] == 'true; sunset-version="6.0"'
    assert (vault / path).read_text() == NESTED


def test_6x_refuses_the_header_format(launch: Launch, vault: Path) -> None:
    lra = launch(V6)
    path = _note(vault, NESTED)
    with lra.client(timeout=10) as http:
        opted_in = http.patch(
            f"/vault/{path}", content="x", headers=_v1("Title") | {"Markdown-Patch-Version": "1"}
        )
        assert "removed in 6.0" in _error(opted_in, 400, 40082)
        _error(http.patch(f"/vault/{path}", content="x", headers=_v1("Title")), 400, 40084)
    assert (vault / path).read_text() == NESTED


@pytest.mark.parametrize("version", [V3, V4, V5, V6])
def test_overlapping_patches_to_different_headings_lose_one(
    launch: Launch, vault: Path, version: str
) -> None:
    """Every version reads the note, awaits, and writes the whole note back (LRA #286):
    two PATCHes that overlap each write their own change over the original."""
    lra = launch(version)
    path = _note(vault, "# A\na\n\n# B\nb\n")
    ready = threading.Barrier(2)
    results: dict[str, httpx.Response] = {}

    def send(heading: str) -> None:
        with lra.client(timeout=15) as http:
            http.get("/")  # the TLS handshake, before the race
            ready.wait()
            if version in (V5, V6):
                instruction = {
                    "targetType": "heading",
                    "target": [heading],
                    "operation": "append",
                    "content": f"from-{heading}",
                }
                results[heading] = http.patch(f"/vault/{path}", json=instruction)
            else:
                results[heading] = http.patch(
                    f"/vault/{path}", content=f"from-{heading}\n", headers=_v1(heading)
                )

    lra.set_faults(write_yield_ms=300)
    try:
        threads = [threading.Thread(target=send, args=(h,)) for h in ("A", "B")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        lra.set_faults(write_yield_ms=None)
    assert [results[h].status_code for h in ("A", "B")] == [200, 200]
    final = (vault / path).read_text()
    a, b = results["A"].text, results["B"].text
    # The last writer's document, or (Node's fs.writeFile: both truncate, then write from
    # the start) the last writer's document over the tail of a longer one written first.
    assert any(
        final == last or (final.startswith(last) and first.endswith(final[len(last) :]))
        for last, first in ((a, b), (b, a))
    ), final
    assert ("from-A" in final) != ("from-B" in final)  # exactly one change survived


# --- GET /active/ -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [V4, V5, V6])
def test_active_file(launch: Launch, vault: Path, version: str) -> None:
    lra = launch(version)
    (vault / "Open folder").mkdir(exist_ok=True)
    (vault / "Open folder/My note.md").write_text("---\ntags: [x]\n---\nopen #inline\n")
    lra.set_active(None)
    with lra.client(timeout=10) as http:
        missing = http.get("/active/")
        assert _error(missing, 404, 40400) == "Not Found"
        assert "Content-Location" not in missing.headers
        assert lra.set_active("Open folder/My note.md") == {"path": "Open folder/My note.md"}
        assert lra.active() == "Open folder/My note.md"
        raw = http.get("/active/")
        assert raw.status_code == 200
        assert raw.text == "---\ntags: [x]\n---\nopen #inline\n"
        assert raw.headers["Content-Location"] == "Open%20folder/My%20note.md"
        assert raw.headers["Content-Type"] == "text/markdown; charset=utf-8"
        note = http.get("/active/", headers={"Accept": "application/vnd.olrapi.note+json"})
        assert note.status_code == 200
        assert note.headers["Content-Location"] == "Open%20folder/My%20note.md"
        body = note.json()
        assert body["path"] == "Open folder/My note.md"
        assert body["tags"] == ["x", "inline"]
        mtime = (vault / "Open folder/My note.md").stat().st_mtime_ns // 1_000_000
        assert body["stat"]["mtime"] == mtime
        assert (
            body
            == http.get(
                "/vault/Open%20folder/My%20note.md",
                headers={"Accept": "application/vnd.olrapi.note+json"},
            ).json()
        )
        _error(http.put("/active/", content="x", headers=MD), 501, 50100)
        _error(http.get("/active/heading/Nope"), 501, 50100)
        _error(http.get("/active"), 404, 40400)  # the route is /active/*
        lra.set_active(None)
        _error(http.get("/active/"), 404, 40400)


def test_active_file_before_3_4_3_hangs_when_none_is_open(launch: Launch, vault: Path) -> None:
    """Before 3.4.3 ``getActiveFile()`` null reached ``file.path`` inside the async
    handler: the promise rejected, nothing answered (LRA ``7274276``)."""
    lra = launch(V3)
    (vault / "Active3.md").write_text("three\n")
    lra.set_active(None)
    with lra.client(timeout=0.5) as http, pytest.raises(httpx.ReadTimeout):
        http.get("/active/")
    lra.set_active("Active3.md")
    with lra.client(timeout=10) as http:
        response = http.get("/active")  # express non-strict: /active/ answers /active too
        assert response.status_code == 200 and response.text == "three\n"
        assert response.headers["Content-Location"] == "Active3.md"
    lra.set_active(None)


# --- the engines without a process ------------------------------------------------------------

SPACED, FLUSH = "# One\n\nbody of one\n", "# One\nbody of one\n"


@pytest.mark.parametrize(
    ("document", "operation", "content", "expected"),
    [
        # markdown-patch 2.0 src/tests/docs.whitespace.test.ts
        (SPACED, "append", "\n\nX\n\n", "# One\n\nbody of one\n\nX\n"),
        (SPACED, "prepend", "X\n", "# One\n\nX\n\nbody of one\n"),
        (SPACED, "replace", "X", "# One\n\nX\n"),
        (FLUSH, "prepend", "X", "# One\nX\n\nbody of one\n"),
        (FLUSH, "replace", "X", "# One\nX\n"),
        (SPACED, "replace", "body of one", SPACED),
        ("# One\n\n# F\nf\n", "append", "X", "# One\nX\n\n# F\nf\n"),
    ],
)
def test_2x_engine_whitespace(document: str, operation: str, content: str, expected: str) -> None:
    instruction = {"targetType": "heading", "target": ["One"], "operation": operation}
    assert apply_v2(document, {**instruction, "content": content}).document == expected


@pytest.mark.parametrize(
    ("version", "document", "content", "expected"),
    [
        # markdown-patch 0.4.4 src/tests/patch.test.ts, issues #7 and #231
        ((3, 6, 2), "## A\n\nContent A.\n", "- new item", "## A\n\nContent A.\n- new item"),
        ((3, 6, 2), "## A\n\nContent A.\n\n", "- new item", "## A\n\nContent A.\n- new item"),
        ((3, 5, 0), "## A\n\nContent A.\n\n", "- item", "## A\n\nContent A.\n\n- item"),
        ((3, 2, 0), "## A\nx\n\n## B\n", "y\n", "## A\nx\n\ny\n## B\n"),
        ((3, 6, 2), "## A\nx\n\n## B\n", "y\n", "## A\nx\n\ny\n\n## B\n"),
    ],
)
def test_1x_engine_whitespace_per_version(
    version: tuple[int, int, int], document: str, content: str, expected: str
) -> None:
    instruction = InstructionV1("append", "heading", ["A"], "text/markdown", content)
    assert apply_v1(document, instruction, engine_for(version)) == expected


def test_frontmatter_yaml_round_trip() -> None:
    """``yaml`` v2 (YAML 1.2 core): dates and ``yes`` stay strings, ``012`` is twelve;
    ``stringify`` quotes what would read back as another type, and index-like keys
    come first as in any JavaScript object."""
    assert load("d: 2026-05-01\ny: yes\no: 012\nn: ~\n") == {
        "d": "2026-05-01",
        "y": "yes",
        "o": 12,
        "n": None,
    }
    assert stringify({"a": "5", "b": "true", "c": "x: y", "2026": 1, "e": []}) == (
        '"2026": 1\na: "5"\nb: "true"\nc: "x: y"\ne: []\n'
    )
