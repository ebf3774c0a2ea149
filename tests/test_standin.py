"""Tests of the Local REST API stand-in (tests/standin) against real child processes.

Every test talks HTTPS to a ``python -m tests.standin`` process over a small vault built
here (not the project fixtures). Processes are started once per (vault, version, smart
mode) and shared by the module.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.standin.process import StandinError, StandinProcess

MODEL = "test-model-8d"
NOTE_JSON = "application/vnd.olrapi.note+json"
JSONLOGIC = "application/vnd.olrapi.jsonlogic+json"

NOTE_MD = """---
title: Note
tags: [project, work/tasks]
---
# Note
Alpha beta. See [[Other]] and [[Missing note]] and [deep](Folder/Deep.md).
#inline-tag `#notatag` alpha
"""
DEEP_MD = """# Deep
deep alpha content #work/tasks
## Sub
The sub section text.
"""


def _unit(i: int, scale: float = 1.0) -> list[float]:
    return [scale if j == i else 0.0 for j in range(8)]


def _build_main_vault(root: Path) -> Path:
    vault = root / "vault"
    files = {
        "Note.md": NOTE_MD,
        "Folder/Deep.md": DEEP_MD,
        "Folder/Other.md": "other [[Note]]\n",
        "Folder/Sub/x.txt": "plain text",
        "alpha.md": "alpha alpha alpha 😀 alpha",
        "Bad yaml.md": "---\n: [unclosed\n---\nbody\n",
        ".obsidian/app.json": "{}",
    }
    for rel, text in files.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    (vault / "Folder/img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (vault / "Empty").mkdir()
    env = vault / ".smart-env"
    (env / "multi").mkdir(parents=True)
    (env / "smart_env.json").write_text(
        json.dumps(
            {
                "smart_sources": {
                    "embed_model": {"adapter": "transformers", "transformers": {"model_key": MODEL}}
                }
            }
        )
    )

    def emb(vec: list[float]) -> dict[str, Any]:
        return {MODEL: {"vec": vec}, "other-model": {"vec": [1.0, 0.0]}}

    deep_source = {"path": "Folder/Deep.md", "embeddings": emb(_unit(1))}
    deep_lines = [
        '"smart_sources:Folder/Deep.md": ' + json.dumps(deep_source) + ",",
        '"smart_blocks:Folder/Deep.md#Deep##Sub": null,',
        '"smart_blocks:Folder/Deep.md#Deep##Sub": '
        + json.dumps({"embeddings": emb([0.0, 0.6, 0.0, 0.0, 0.8, 0, 0, 0]), "lines": [3, 4]})
        + ",",
    ]
    (env / "multi/Folder_Deep_md.ajson").write_text("\n".join(deep_lines) + "\n")
    note_lines = [
        '"smart_sources:Note.md": ' + json.dumps({"embeddings": emb(_unit(0))}) + ",",
        '"smart_sources:alpha.md": ' + json.dumps({"embeddings": emb(_unit(2))}) + ",",
        '"smart_sources:Gone.md": ' + json.dumps({"embeddings": emb(_unit(4))}) + ",",
        '"smart_sources:Gone.md": null,',
    ]
    (env / "multi/Note_md.ajson").write_text("\n".join(note_lines) + "\n")
    (root / "query_vectors.jsonl").write_text(
        json.dumps({"query": "sub section", "model": MODEL, "vec": _unit(4)}) + "\n"
    )
    (root / "secret.md").write_text("outside the vault")
    return vault


@pytest.fixture(scope="module")
def vaults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    main = _build_main_vault(tmp_path_factory.mktemp("main"))
    writable = tmp_path_factory.mktemp("writable") / "vault"
    writable.mkdir()
    (writable / "keep.md").write_text("keep")
    empty = tmp_path_factory.mktemp("empty") / "vault"
    empty.mkdir()
    return {"main": main, "writable": writable, "empty": empty}


Launch = Callable[..., StandinProcess]


@pytest.fixture(scope="module")
def launch(vaults: dict[str, Path]) -> Iterator[Launch]:
    """``launch(vault_name, version, **options)``: a started, shared stand-in."""
    running: dict[tuple[Any, ...], StandinProcess] = {}

    def get(name: str = "main", version: str = "5.1.0", **options: Any) -> StandinProcess:
        key = (name, version, tuple(sorted(options.items())))
        if key not in running:
            running[key] = StandinProcess(vaults[name], plugin_version=version, **options).start()
        return running[key]

    yield get
    for proc in running.values():
        proc.stop()
        assert proc.returncode == 0


def _get(lra: StandinProcess, path: str, **kwargs: Any) -> httpx.Response:
    with lra.client(timeout=5) as http:
        return http.get(path, **kwargs)


def _post(lra: StandinProcess, path: str, **kwargs: Any) -> httpx.Response:
    with lra.client(timeout=5) as http:
        return http.post(path, **kwargs)


def _error(response: httpx.Response, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["errorCode"] == code
    assert response.text.startswith('{\n  "message": ')  # JSON spaces 2
    assert response.headers["X-Response-Time"].endswith("ms")
    return body["message"]


# --- process, TLS, auth, root -----------------------------------------------------------


def test_ready_line_certificate_and_hostname(launch: Launch) -> None:
    lra = launch()
    assert lra.url == f"https://127.0.0.1:{lra.port}"
    assert len(lra.api_key) == 64 and int(lra.api_key, 16) >= 0
    assert lra.plugin_version == "5.1.0"
    cert = x509.load_pem_x509_certificate(Path(lra.cert).read_bytes())
    cn = "Obsidian Local REST API"
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == cn
    assert cert.issuer == cert.subject
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == []

    crt = _get(lra, "/obsidian-local-rest-api.crt", headers={"Authorization": ""})
    assert crt.status_code == 200
    assert crt.content == Path(lra.cert).read_bytes()
    assert crt.headers["Content-Type"].startswith("application/octet-stream")
    with httpx.Client(verify=lra.ssl_context(), timeout=5) as http:
        assert http.get(f"https://127.0.0.1:{lra.port}/").status_code == 200
        with pytest.raises(httpx.ConnectError):
            http.get(f"https://localhost:{lra.port}/")


def test_root_and_auth_per_version(launch: Launch) -> None:
    v5, v4, v3 = launch(), launch(version="4.0.0"), launch(version="3.2.0", smart="off")
    with v5.client(authenticated=False, timeout=5) as anon:
        root = anon.get("/").json()
        assert root["authenticated"] is False
        assert "certificateInfo" not in root and "apiExtensions" not in root
        assert root["versions"]["self"] == "5.1.0" and root["service"] == "Obsidian Local REST API"
        message = _error(anon.get("/vault/"), 401, 40101)
        assert "'Local REST API with MCP'" in message
        bad = anon.get("/vault/", headers={"Authorization": f"Bearer {v5.api_key}x"})
        _error(bad, 401, 40101)
        _error(anon.get("/no/such/route"), 401, 40101)  # auth runs before routing
    full = _get(v5, "/").json()
    assert full["authenticated"] is True
    assert full["certificateInfo"]["validityDays"] in (364, 365)
    [ext] = full["apiExtensions"]
    assert {"path": "/search/smart", "authenticated": True} in ext["routes"]
    assert _get(v4, "/").json()["manifest"]["name"] == "Local REST API & MCP Server"
    old = _get(v3, "/").json()
    assert old["apiExtensions"] == [] and old["manifest"]["name"] == "Local REST API"
    message = _error(_get(v3, "/vault/", headers={"Authorization": "Bearer nope"}), 401, 40101)
    assert message == (
        "Authorization required.  Find your API Key in the 'Local REST API' "
        "section of your Obsidian settings."
    )
    assert _error(_get(v5, "/no/such/route"), 404, 40400) == "Not Found"
    _error(_post(v3, "/search/smart", content="{}"), 404, 40400)  # extension not installed


# --- listing and paths --------------------------------------------------------------------


def test_listing_rules_3x_vs_5x(launch: Launch) -> None:
    v5, v3 = launch(), launch(version="3.2.0", smart="off")
    root = ["Bad yaml.md", "Folder/", "Note.md", "alpha.md"]  # code-unit order, no dot/empty
    for lra in (v5, v3):
        assert _get(lra, "/vault/").json() == {"files": root}
        assert _get(lra, "/vault/Folder/").json() == {
            "files": ["Deep.md", "Other.md", "Sub/", "img.png"]
        }
        _error(_get(lra, "/vault/Empty/"), 404, 40400)
        _error(_get(lra, "/vault/Nope/"), 404, 40400)
        _error(_get(lra, "/vault"), 404, 40400)
    assert _get(v5, "/vault/Folder").json()["files"][0] == "Deep.md"
    _error(_get(v3, "/vault/Folder"), 404, 40400)  # 3.x (<3.6): the slash is required
    # 5.x decodes per segment: %2F is not a separator; 3.x decodes the whole path.
    _error(_get(v5, "/vault/Folder%2FDeep.md"), 404, 40400)
    assert _get(v3, "/vault/Folder%2FDeep.md").text == DEEP_MD


def test_empty_vault_listing(launch: Launch) -> None:
    _error(_get(launch("empty", "3.2.0"), "/vault/"), 404, 40400)
    assert _get(launch("empty", "5.1.0"), "/vault/").json() == {"files": []}


def test_path_traversal_refused(launch: Launch) -> None:
    v5, v3 = launch(), launch(version="3.2.0", smart="off")
    for path in ("/vault/%2E%2E/secret.md", "/vault/..%2Fsecret.md", "/vault/%2Fetc%2Fpasswd"):
        _error(_get(v5, path), 400, 40021)
        _error(_get(v3, path), 404, 40400)
        _error(_get(v3, path.replace("/vault/", "/vault/Folder/%2E%2E/")), 404, 40400)


# --- reading notes ------------------------------------------------------------------------


def test_raw_reads(launch: Launch) -> None:
    lra = launch()
    note = _get(lra, "/vault/Note.md")
    assert note.text == NOTE_MD
    assert note.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert note.headers["Content-Disposition"] == 'attachment; filename="Note.md"'
    img = _get(lra, "/vault/Folder/img.png")
    assert img.content == b"\x89PNG\r\n\x1a\n\x00\xff"
    assert img.headers["Content-Type"] == "image/png"
    spaced = _get(lra, "/vault/Bad%20yaml.md")
    assert spaced.headers["Content-Disposition"] == 'attachment; filename="Bad%20yaml.md"'
    # The Accept match is exact: a list falls back to the raw file.
    assert _get(lra, "/vault/Note.md", headers={"Accept": f"{NOTE_JSON}, */*"}).text == NOTE_MD
    _error(_get(lra, "/vault/Missing.md"), 404, 40400)


def test_note_json_fields_per_version(launch: Launch) -> None:
    base = {"tags", "frontmatter", "stat", "path", "content"}
    expected = {
        "3.2.0": base,
        "4.0.0": base | {"links", "backlinks"},
        "5.1.0": base | {"links", "backlinks", "unresolvedLinks"},
    }
    for version, keys in expected.items():
        lra = (
            launch(version=version) if version != "3.2.0" else launch(version=version, smart="off")
        )
        response = _get(lra, "/vault/Note.md", headers={"Accept": NOTE_JSON})
        assert response.headers["Content-Type"].startswith(NOTE_JSON)
        note = response.json()
        assert set(note) == keys, version
        assert note["tags"] == ["project", "work/tasks", "inline-tag"]
        assert note["frontmatter"] == {"title": "Note", "tags": ["project", "work/tasks"]}
        assert note["stat"]["size"] == len(NOTE_MD.encode())
        assert note["stat"]["mtime"] > 1_600_000_000_000  # milliseconds
        assert note["path"] == "Note.md" and note["content"] == NOTE_MD
        if "links" in keys:
            assert note["links"] == ["Folder/Other.md", "Folder/Deep.md"]
            assert note["backlinks"] == ["Folder/Other.md"]
        if "unresolvedLinks" in keys:
            assert note["unresolvedLinks"] == ["Missing note"]
    bad = _get(launch(), "/vault/Bad%20yaml.md", headers={"Accept": NOTE_JSON}).json()
    assert bad["frontmatter"] == {} and bad["tags"] == []


# --- writing --------------------------------------------------------------------------------


def test_put_post_delete_and_append_rule(launch: Launch, vaults: dict[str, Path]) -> None:
    lra, root = launch("writable"), vaults["writable"]
    text = {"Content-Type": "text/markdown"}
    with lra.client(timeout=5) as http:
        assert (
            http.put("/vault/New/Deep/a.md", content="no newline", headers=text).status_code == 204
        )
        assert http.post("/vault/New/Deep/a.md", content="second", headers=text).status_code == 204
        assert (
            http.post("/vault/New/Deep/a.md", content="\nthird\n", headers=text).status_code == 204
        )
        assert http.post("/vault/New/Deep/a.md", content="fourth", headers=text).status_code == 204
        assert http.get("/vault/New/Deep/a.md").text == "no newline\nsecond\n\nthird\nfourth"
        assert http.post("/vault/created.md", content="body", headers=text).status_code == 204
        assert (root / "created.md").read_text() == "body"
        _error(
            http.post(
                "/vault/created.md",
                content=b"x",
                headers={"Content-Type": "application/octet-stream"},
            ),
            400,
            40010,
        )
        for method in ("PUT", "POST", "DELETE"):
            _error(http.request(method, "/vault/New/", content="x", headers=text), 405, 40510)
        assert http.delete("/vault/created.md").status_code == 204  # 5.x: to .trash/
        assert (root / ".trash/created.md").exists() and not (root / "created.md").exists()
        assert http.delete("/vault/New/Deep/a.md?permanent=true").status_code == 204
        assert not (root / ".trash/New").exists()
        _error(http.delete("/vault/created.md"), 404, 40400)
        assert http.get("/vault/").json() == {"files": ["keep.md"]}
    v3 = launch("writable", "3.2.0")
    with v3.client(timeout=5) as http:
        http.put("/vault/gone.md", content="x", headers=text)
        assert http.delete("/vault/gone.md").status_code == 204
        assert not (root / ".trash/gone.md").exists()  # 3.x deletes for good


def test_overlapping_appends_keep_only_one(tmp_path: Path) -> None:
    """The plugin's append reads the file, awaits, and writes the whole file back
    (``appendFileContent``): two appends that overlap keep one text, not both."""
    target = tmp_path / "race.md"
    target.write_text("start\n")
    # Same length, so the later write-back covers the earlier one exactly.
    texts = ["alpha\n", "omega\n"]
    ready = threading.Barrier(len(texts))
    statuses: list[int] = []

    def append(lra: StandinProcess, text: str) -> None:
        with lra.client(timeout=10) as http:
            http.get("/")  # the TLS handshake, before the race
            ready.wait()
            response = http.post(
                "/vault/race.md", content=text, headers={"Content-Type": "text/markdown"}
            )
            statuses.append(response.status_code)

    with StandinProcess(tmp_path, smart="off") as lra:
        lra.set_faults(write_yield_ms=400)
        threads = [threading.Thread(target=append, args=(lra, text)) for text in texts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == [204, 204]
    assert target.read_text() in ("start\nalpha\n", "start\nomega\n")


def test_read_during_put_sees_a_truncated_file(tmp_path: Path) -> None:
    """A PUT is Node's ``fs.promises.writeFile``: the file is truncated when opened and
    written after an await, so a GET in between answers 200 with an empty body."""
    old, new = "old text\n" * 50, "new text\n" * 60
    (tmp_path / "put.md").write_text(old)
    done = threading.Event()
    statuses: list[int] = []

    def put(lra: StandinProcess) -> None:
        try:
            with lra.client(timeout=10) as http:
                response = http.put(
                    "/vault/put.md", content=new, headers={"Content-Type": "text/markdown"}
                )
                statuses.append(response.status_code)
        finally:
            done.set()

    bodies: list[str] = []
    with StandinProcess(tmp_path, smart="off") as lra, lra.client(timeout=10) as http:
        lra.set_faults(write_yield_ms=400)
        http.get("/")  # the TLS handshake, so reads start as soon as the PUT does
        writer = threading.Thread(target=put, args=(lra,))
        writer.start()
        while not done.is_set():
            response = http.get("/vault/put.md")
            assert response.status_code == 200
            bodies.append(response.text)
        writer.join()
    assert statuses == [204]
    assert "" in bodies
    assert set(bodies) <= {old, "", new}
    assert (tmp_path / "put.md").read_text() == new


# --- search ---------------------------------------------------------------------------------


def test_simple_search_offsets_and_versions(launch: Launch) -> None:
    v5, v4, v3 = launch(), launch(version="4.0.0"), launch(version="3.2.0", smart="off")
    results = _post(v5, "/search/simple/", params={"query": "ALPHA", "contextLength": 7}).json()
    assert {r["filename"] for r in results} == {"Note.md", "Folder/Deep.md", "alpha.md"}
    for result in results:
        content = _get(v5, "/vault/" + result["filename"]).text
        units = content.encode("utf-16-le")  # offsets count UTF-16 code units

        def cut(a: int, b: int, units: bytes = units) -> str:
            return units[2 * a : 2 * b].decode("utf-16-le", "surrogatepass")

        for m in result["matches"]:
            start, end = m["match"]["start"], m["match"]["end"]
            if m["match"]["source"] == "filename":
                assert m["context"] == "alpha"
                continue
            assert cut(start, end).lower() == "alpha"
            assert m["context"] == cut(max(start - 7, 0), end + 7)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)  # 4.0+: descending

    both = _post(v5, "/search/simple/", params={"query": "alpha beta", "contextLength": 5})
    assert [r["filename"] for r in both.json()] == ["Note.md"]  # every word must occur
    deep = _post(v5, "/search/simple/", params={"query": "deep"}).json()
    sources = {m["match"]["source"] for r in deep for m in r["matches"]}
    assert sources == {"filename", "content"}
    assert any(m["context"] == "Deep" for r in deep for m in r["matches"])
    _error(_post(v5, "/search/simple/"), 400, 40090)

    old = _post(v3, "/search/simple/", params={"query": "alpha"}).json()
    assert old and all(m["context"] == "" for r in old for m in r["matches"])  # NaN bug
    assert all(set(m["match"]) == {"start", "end"} for r in old for m in r["matches"])
    assert [r["score"] for r in old] == sorted(r["score"] for r in old)  # 3.x: ascending
    fixed = _post(v3, "/search/simple/", params={"query": "alpha", "contextLength": 3}).json()
    assert all(m["context"] for r in fixed for m in r["matches"])
    v4_order = [
        r["filename"] for r in _post(v4, "/search/simple/", params={"query": "alpha"}).json()
    ]
    assert v4_order == [r["filename"] for r in results]
    # 3.2: an exception in a handler leaves the request hanging.
    with v3.client(timeout=httpx.Timeout(5, read=0.5)) as http, pytest.raises(httpx.ReadTimeout):
        http.post("/search/simple/")


def test_jsonlogic_search(launch: Launch) -> None:
    v5, v3 = launch(), launch(version="3.2.0", smart="off")

    def search(
        lra: StandinProcess, logic: Any, content_type: str | None = JSONLOGIC
    ) -> httpx.Response:
        headers = {"Content-Type": content_type} if content_type else {}
        body = logic if isinstance(logic, str) else json.dumps(logic)
        return _post(lra, "/search/", content=body, headers=headers)

    stat = search(v5, {"var": "stat"}).json()
    assert sorted(r["filename"] for r in stat) == [
        "Bad yaml.md",
        "Folder/Deep.md",
        "Folder/Other.md",
        "Note.md",
        "alpha.md",
    ]
    assert all(set(r["result"]) == {"ctime", "mtime", "size"} for r in stat)
    by_tag = search(v5, {"in": ["project", {"var": "tags"}]}).json()
    assert by_tag == [{"filename": "Note.md", "result": True}]
    globbed = search(v5, {"glob": ["Folder/*", {"var": "path"}]}).json()
    assert [r["filename"] for r in globbed] == ["Folder/Deep.md", "Folder/Other.md"]
    regexp = search(
        v5, {"and": [{"regexp": ["^al", {"var": "path"}]}, {"cat": [{"var": "path"}, "!"]}]}
    ).json()
    assert regexp == [{"filename": "alpha.md", "result": "alpha.md!"}]
    linked = search(v5, {"in": ["Missing note", {"var": "unresolvedLinks"}]}).json()
    assert [r["filename"] for r in linked] == ["Note.md"]
    content = search(
        v5,
        {
            "if": [
                {"in": ["sub section", {"var": "content"}]},
                {"var": "frontmatter"},
                {"var": "path"},
            ]
        },
    ).json()
    assert [r["filename"] for r in content] == [  # Deep.md's {} frontmatter is dropped
        "Bad yaml.md",
        "Folder/Other.md",
        "Note.md",
        "alpha.md",
    ]
    # From 4.0.3 content is only read when the query text mentions "content".
    hidden = {"!!": {"var": {"cat": ["cont", "ent"]}}}
    assert search(v5, hidden).json() == []
    assert len(search(v3, hidden).json()) == 5
    _error(search(v5, {"var": "x"}, content_type=None), 400, 40011)
    _error(search(v5, {"var": "x"}, content_type="application/json"), 400, 40012)
    _error(search(v3, {"var": "x"}, content_type="application/json"), 400, 40011)
    _error(search(v5, "{not json", content_type=JSONLOGIC), 400, 40015)
    message = _error(search(v5, {"nope": [1]}), 400, 40070)
    assert "Unrecognized operation nope" in message


def test_tags(launch: Launch) -> None:
    tags = _get(launch(), "/tags/").json()["tags"]
    assert {t["name"]: t["count"] for t in tags} == {
        "project": 1,
        "work/tasks": 2,
        "work": 2,
        "inline-tag": 1,
    }
    _error(_get(launch(version="3.2.0", smart="off"), "/tags/"), 404, 40400)


# --- smart search ---------------------------------------------------------------------------


def test_smart_search_body_quirk_and_blocks(launch: Launch) -> None:
    upstream, fork = launch(), launch(smart="fork")
    request = {"query": "sub section"}
    as_text = {"content": json.dumps(request), "headers": {"Content-Type": "text/plain"}}
    rejected = _post(upstream, "/search/smart", json=request)
    assert rejected.status_code == 400
    assert rejected.json() == {
        "error": "Invalid request body",
        "summary": "must be a string (was an object)",
    }
    for lra in (upstream, fork):
        for kwargs in [as_text, {"json": request}] if lra is fork else [as_text]:
            response = _post(lra, "/search/smart", **kwargs)
            assert response.status_code == 200, response.text
            results = response.json()["results"]
            top = results[0]
            assert top["path"] == "Folder/Deep.md#Deep##Sub"
            assert top["breadcrumbs"] == "Folder > Deep.md > Deep > Sub"
            assert top["text"] == "## Sub\nThe sub section text."
            assert top["score"] == pytest.approx(0.8)
            assert [r["score"] for r in results] == sorted(
                (r["score"] for r in results), reverse=True
            )
            assert "Gone.md" not in {r["path"] for r in results}  # null deleted it

    def smart(body: dict[str, Any]) -> httpx.Response:
        return _post(
            upstream,
            "/search/smart",
            content=json.dumps(body),
            headers={"Content-Type": "text/markdown"},
        )

    # Unknown query: mean vector of the notes containing the most query words (Deep.md).
    approx = smart({"query": "deep content", "filter": {"limit": 2}}).json()["results"]
    assert approx == [
        {
            "path": "Folder/Deep.md",
            "text": DEEP_MD,
            "score": pytest.approx(1.0),
            "breadcrumbs": "Folder/Deep.md",
        },
        {
            "path": "Folder/Deep.md#Deep##Sub",
            "text": "## Sub\nThe sub section text.",
            "score": pytest.approx(0.6),
            "breadcrumbs": "Folder > Deep.md > Deep > Sub",
        },
    ]
    only = smart(
        {
            "query": "deep content",
            "filter": {"folders": ["Folder/"], "excludeFolders": ["Folder/Deep.md#"]},
        }
    )
    assert [r["path"] for r in only.json()["results"]] == ["Folder/Deep.md"]
    invalid = smart({"query": ""})
    assert invalid.status_code == 400 and invalid.json()["error"] == "Invalid request body"
    unavailable = _post(
        launch("empty"), "/search/smart", content="{}", headers={"Content-Type": "text/plain"}
    )
    assert unavailable.status_code == 503
    assert unavailable.json() == {"error": "Smart Connections plugin is not available"}


# --- faults ---------------------------------------------------------------------------------


def test_faults_from_cli_and_at_runtime(launch: Launch) -> None:
    lra = launch(fail_every=1)
    with lra.client(timeout=5) as http:
        message = _error(http.get("/vault/"), 500, 50000)
        assert message.startswith("Internal Server Error")
        assert lra.clear_faults() == {
            "latency_ms": None,
            "fail_every": None,
            "hang_pattern": None,
            "drop_every": None,
            "link_index_pending": None,
            "write_yield_ms": None,
        }
        with pytest.raises(StandinError, match="write_yield_ms must be a non-negative"):
            lra.set_faults(write_yield_ms=-1)
        assert http.get("/vault/").status_code == 200
        lra.reset_stats()

        lra.set_faults(latency_ms=300)
        started = time.perf_counter()
        assert http.get("/").status_code == 200
        assert time.perf_counter() - started >= 0.3
        lra.set_faults(latency_ms=None, fail_every=2)
        statuses = [http.get("/vault/Note.md").status_code for _ in range(4)]
        assert statuses == [200, 500, 200, 500]

        lra.set_faults(fail_every=None, hang_pattern=r"^/vault/Note")
        with pytest.raises(httpx.ReadTimeout):
            http.get("/vault/Note.md", timeout=httpx.Timeout(5, read=0.5))
        assert http.get("/vault/alpha.md").status_code == 200

        lra.set_faults(hang_pattern=None, drop_every=2)
        assert http.get("/").status_code == 200
        with pytest.raises(httpx.TransportError):
            http.get("/")
        lra.clear_faults()
        assert http.get("/vault/Note.md").text == NOTE_MD

    stats = lra.stats()
    assert stats["by_path"]["GET /vault/Note.md"] == 6
    assert stats["by_route"]["GET /vault/"] == 7
    assert stats["by_route"]["GET /"] == 3
    assert stats["total"] == 10
    assert stats["injected"] == {"latency": 1, "fail": 2, "hang": 1, "drop": 1}


@pytest.mark.anyio
async def test_async_usage(vaults: dict[str, Path]) -> None:
    async with StandinProcess(vaults["empty"], plugin_version="3.6.1", smart="off") as lra:
        async with lra.async_client(timeout=5) as http:
            assert (await http.get("/vault/")).json() == {"files": []}  # 3.6.1+
            assert (await http.get("/tags/")).json() == {"tags": []}
        assert lra.stats()["by_route"] == {"GET /vault/": 1, "GET /tags/": 1}
    assert lra.returncode == 0


# --- caching: fast encoder and freshness ---------------------------------------------------


def test_fast_json_encoder_matches_reference() -> None:
    import math
    import random

    from tests.standin.jsstring import dumps, dumps_reference

    rng = random.Random(7)
    leaves: list[Any] = [
        "",
        'q"b\\',
        "x\ny\t\x00",
        "é😀",
        "\ud83d",
        "\u2028",
        -(2**70),
        0,
        0.1,
        -0.0,
        1e21,
        math.nan,
        math.inf,
        True,
        False,
        None,
        [],
        {},
        (1, math.nan),
        {1: "int key"},
    ]

    def value(depth: int) -> Any:
        roll = rng.randrange(10 if depth < 4 else 5)
        if roll < 5:
            return rng.choice(leaves)
        if roll < 8:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        keys = ["k", "é", "😀", "\ud800", 'a"']
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randrange(4))}

    for _ in range(3000):
        v = value(0)
        assert dumps(v) == dumps_reference(v), v


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "restat"])
def test_external_edits_are_seen_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inotify: bool
) -> None:
    """Caches never serve a stale answer: edits made behind the stand-in's back (not via
    the API) show up in the very next request, with and without the inotify signal."""
    if not inotify:
        monkeypatch.setenv("STANDIN_NO_INOTIFY", "1")
    vault = tmp_path / "vault"
    (vault / "F").mkdir(parents=True)
    (vault / "a.md").write_text("see [[b]]\n")
    (vault / "F/b.md").write_text("bee\n")

    def search(http: httpx.Client, var: str) -> dict[str, Any]:
        body = json.dumps({"var": var})
        r = http.post("/search/", content=body, headers={"Content-Type": JSONLOGIC})
        assert r.status_code == 200, r.text
        return {row["filename"]: row["result"] for row in r.json()}

    with StandinProcess(vault) as lra, lra.client(timeout=10) as http:
        assert search(http, "backlinks") == {"F/b.md": ["a.md"]}
        (vault / "c.md").write_text("also [[b]] zebra\n")  # a new note
        assert search(http, "backlinks") == {"F/b.md": ["a.md", "c.md"]}
        assert [m["filename"] for m in http.post("/search/simple/?query=zebra").json()] == ["c.md"]
        (vault / "New/Deeper").mkdir(parents=True)  # a new folder, then a note in it
        (vault / "New/Deeper/d.md").write_text("[[b]]")
        assert http.get("/vault/New/").json() == {"files": ["Deeper/"]}
        assert search(http, "backlinks")["F/b.md"] == ["New/Deeper/d.md", "a.md", "c.md"]
        (vault / "New").rename(vault / "Old")  # a folder moved
        assert http.get("/vault/New/").status_code == 404
        assert search(http, "backlinks")["F/b.md"] == ["Old/Deeper/d.md", "a.md", "c.md"]
        with (vault / "a.md").open("a") as fh:  # an append changes size, links and stat
            fh.write("and [[c]] too\n")
        size = (vault / "a.md").stat().st_size
        assert search(http, "stat")["a.md"]["size"] == size
        assert search(http, "links")["a.md"] == ["F/b.md", "c.md"]
        note = http.get("/vault/c.md", headers={"Accept": NOTE_JSON}).json()
        assert note["backlinks"] == ["a.md"]
        (vault / "c.md").unlink()  # a deleted note: its link target is unresolved now
        assert search(http, "backlinks") == {"F/b.md": ["Old/Deeper/d.md", "a.md"]}
        assert search(http, "unresolvedLinks")["a.md"] == ["c"]
        (vault / "F/c.md").write_text("x")  # a new file that an unresolved link now finds
        assert search(http, "links")["a.md"] == ["F/b.md", "F/c.md"]
        if inotify:  # same size, same clock tick: only the event tells the caches
            (vault / "Old/Deeper/d.md").write_text("[[a]]")
            assert search(http, "links")["Old/Deeper/d.md"] == ["a.md"]
