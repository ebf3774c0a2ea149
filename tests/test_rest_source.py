"""The REST client against the stand-in over real sockets: versions, TLS, auth, paths."""

import logging
from contextlib import aclosing
from pathlib import Path

import anyio
import anyio.abc
import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import (
    AuthRejected,
    CertificateUntrusted,
    IsAFolder,
    NoteNotFound,
    PathRefused,
    VaultError,
)
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.rest import RestSource, build_http_client
from obsidian_mcp.vault import Vault
from tests.conftest import rest_settings
from tests.standin.process import StandinProcess
from tests.test_paths import TRAVERSALS


@pytest.mark.anyio
async def test_reads_match_the_disk(
    standin: StandinProcess, shared_vault: Path, tmp_path: Path
) -> None:
    settings = rest_settings(standin, tmp_path)
    disk = FolderSource(shared_vault)
    async with build_http_client(settings) as http:
        rest = RestSource(http, settings)
        info = await rest.server_info()
        assert info.version_text == standin.plugin_version
        assert info.authenticated
        rest_stats = await rest.note_stats()
        disk_stats = await disk.note_stats()
        assert rest_stats.keys() == disk_stats.keys()
        for path in ("Characters/Æsa Þórdóttir.md", "Characters/Old Tomas (the ferryman).md"):
            assert (await rest.read_note(path)).content == (await disk.read_note(path)).content
        note = "Characters/Kettle.md"
        assert await rest.stat(note) == await disk.stat(note) == disk_stats[note]
        assert await rest.stat("Characters/Nobody.md") is None
        assert await disk.stat("Characters/Nobody.md") is None
        # The fixture vault has no empty folders (git keeps none), so both see the same tree.
        assert await rest.list_tree() == await disk.list_tree()


@pytest.mark.anyio
async def test_missing_notes_and_folders(standin: StandinProcess, tmp_path: Path) -> None:
    settings = rest_settings(standin, tmp_path)
    async with build_http_client(settings) as http:
        vault = Vault(RestSource(http, settings), None)
        with pytest.raises(NoteNotFound) as missing:
            await vault.read_note("Characters/Kettel.md")
        assert "Characters/Kettle.md" in str(missing.value)
        with pytest.raises(IsAFolder):
            await vault.read_note("Characters")
        with pytest.raises(IsAFolder):
            await vault.read_note("Characters/Companion")


@pytest.mark.anyio
async def test_wrong_key_is_named_without_leaking_it(
    standin: StandinProcess, tmp_path: Path
) -> None:
    settings = rest_settings(standin, tmp_path, api_key="wrong-key-123")
    async with build_http_client(settings) as http:
        with pytest.raises(AuthRejected) as rejected:
            await RestSource(http, settings).note_stats()
    assert "OBSIDIAN_API_KEY" in str(rejected.value)
    assert "wrong-key-123" not in str(rejected.value)


@pytest.mark.anyio
@pytest.mark.parametrize("overrides", [{"cert": None}, {"host": "localhost"}])
async def test_untrusted_certificate_says_run_trust(
    standin: StandinProcess, tmp_path: Path, overrides: dict[str, object]
) -> None:
    settings = rest_settings(standin, tmp_path, **overrides)
    async with build_http_client(settings) as http:
        with pytest.raises(CertificateUntrusted, match="obsidian-mcp trust"):
            await RestSource(http, settings).server_info()


@pytest.mark.anyio
async def test_verification_off_is_explicit_and_logged(
    standin: StandinProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = rest_settings(standin, tmp_path, cert=None, verify_tls=False)
    with caplog.at_level(logging.WARNING):
        async with build_http_client(settings) as http:
            assert (await RestSource(http, settings).server_info()).authenticated
    assert "verification" in caplog.text and "OFF" in caplog.text


@pytest.mark.anyio
async def test_traversal_never_reaches_the_plugin(standin: StandinProcess, tmp_path: Path) -> None:
    settings = rest_settings(standin, tmp_path)
    async with build_http_client(settings) as http:
        vault = Vault(RestSource(http, settings), None)
        before = standin.stats()["total"]
        for raw in TRAVERSALS:
            for operation in (vault.read_note(raw), vault.write(raw, "x"), vault.append(raw, "x")):
                with pytest.raises(PathRefused):
                    await operation
        assert standin.stats()["total"] == before


@pytest.mark.anyio
async def test_smart_search_unavailable_is_asked_once(tmp_path: Path) -> None:
    """The extension's 503 (Smart Connections not loaded) is final: no retries."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Note.md").write_text("# Note\n\nA vault without Smart Connections.\n", "utf-8")
    async with StandinProcess(vault, plugin_version="5.1.0", smart="upstream") as standin:
        settings = rest_settings(standin, tmp_path)
        async with build_http_client(settings) as http:
            rest = RestSource(http, settings)
            standin.reset_stats()
            with pytest.raises(VaultError):
                await rest.smart_search("anything", folders=None, limit=5)
            calls = {k: v for k, v in standin.stats()["by_route"].items() if "smart" in k}
    assert list(calls.values()) == [1], calls


@pytest.mark.anyio
async def test_a_request_cancelled_during_the_handshake_closes_its_socket(tmp_path: Path) -> None:
    """A listener that accepts and never answers the TLS handshake, as a hung Obsidian
    does: the request is cancelled (a call's deadline), and the listener must see its
    connection closed at once, not when the garbage collector finds the socket."""
    closed = anyio.Event()

    async def silent(peer: anyio.abc.SocketStream) -> None:
        async with peer:
            try:
                while await peer.receive():
                    pass  # the client's hello; never answered
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        closed.set()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    settings = Settings.model_validate(
        {"api_key": "k", "port": port, "config_dir": tmp_path, "request_timeout": 30}
    )
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, silent)
        async with build_http_client(settings, unverified=True) as http:
            with anyio.move_on_after(0.5):
                await http.get("/")
            with anyio.fail_after(5):
                await closed.wait()
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_search_for_each_word_asks_obsidian_only_for_the_words_taken(
    standin: StandinProcess, shared_vault: Path, tmp_path: Path
) -> None:
    """`Vault.search_each` through Obsidian: a request a word, made as the caller takes
    it, so a first build's read-ahead that reads for its rarest word asks nothing more;
    each word finds what the folder finds for it."""
    settings = rest_settings(standin, tmp_path)
    route = "POST /search/simple/"
    words = ["Kettle", "lighthouse"]
    async with build_http_client(settings) as http:
        vault = Vault(RestSource(http, settings), None)
        standin.reset_stats()
        async with aclosing(vault.search_each(words)) as searched:
            async for word, paths in searched:
                assert word == "Kettle" and paths
                break
        assert standin.stats()["by_route"].get(route) == 1
        both = [paths async for _, paths in vault.search_each(words)]
        assert standin.stats()["by_route"].get(route) == 3
    assert both == await FolderSource(shared_vault).search_each(words)
