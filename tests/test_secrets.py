"""A key goes only to a verified host and is never printed (issue 35, items 1-3 and 12).

A logging TLS listener with a certificate of its own stands in for a stranger at Obsidian's
address: every way the settings can point the key at it is refused before a request that
carries the key. Keys pasted wrong (line breaks, control characters, non-ASCII, white space)
are trimmed or refused naming the setting, and no tool error, warning, log line, `doctor`,
`stats` or `call` output holds them; the healthy vaults beside them still answer.
"""

import json
import logging
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.tls import fingerprint, store_pin
from tests.conftest import NO_MEANING_WAIT
from tests.fixture_vault import REPO_ROOT, copy_fixture_vault
from tests.listener import LoggingListener
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of
from tests.test_several_vaults import run_cli

pytestmark = pytest.mark.anyio

OTHER_PIN = "AB:" * 31 + "AB"
KEY = "5f" * 32  # shaped like the plugin's: 64 hexadecimal digits
# A host name that is not this machine's, answered (for these tests only) by the listener.
STRANGER = "obsidian.example.net"


@pytest.fixture
def stranger(tmp_path: Path) -> Any:
    with LoggingListener(tmp_path / "stranger-cert") as listener:
        yield listener


@pytest.fixture
def stranger_resolves(monkeypatch: pytest.MonkeyPatch, stranger: LoggingListener) -> None:
    """STRANGER resolves to the listener, as a name in a user's DNS or hosts file would:
    the client's own connection code runs, only the name's answer is the test's."""
    real = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        named = host.decode() if isinstance(host, bytes) else host  # anyio sends IDNA bytes
        return real("127.0.0.1" if named == STRANGER else host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


def _server_settings(tmp_path: Path, url: str, **overrides: object) -> Settings:
    return Settings.model_validate(
        {
            "url": url,
            "api_key": KEY,
            "config_dir": tmp_path / "config",
            "cache_dir": tmp_path / "cache",
            "connect_timeout": 2.0,
            "request_timeout": 2.0,
            "retry_budget": 3.0,
            **NO_MEANING_WAIT,
            **overrides,
        }
    )


async def _tool_text(settings: Settings, tool: str = "vault_tree") -> tuple[bool, str]:
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(tool, {})
    return result.is_error, text_of(result)


# -- must show 1: no request carrying a key reaches a host that was not verified -------------


async def test_trust_without_url_downloads_the_certificate_without_the_key(
    stranger: LoggingListener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {
        "OBSIDIAN_URL": f"https://127.0.0.1:{stranger.port}",
        "OBSIDIAN_API_KEY": KEY,
        "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
    }
    ran = await _in_thread(lambda: run_cli(monkeypatch, capsys, "trust", "--yes", env=env))
    assert ran.returncode == 0, ran.stderr
    assert fingerprint(stranger.pem) in ran.stdout  # shown to the user to compare
    assert [request.path for request in stranger.received] == ["/obsidian-local-rest-api.crt"]
    assert stranger.keyed == []


@pytest.mark.parametrize(
    ("case", "overrides", "refusal"),
    [
        (
            "a wrong pin with verification switched off",
            {"cert_sha256": OTHER_PIN, "verify_tls": False},
            "a pin is never switched off",
        ),
        (
            "a pin stored by trust --url with verification switched off",
            {"verify_tls": False, "stored_pin": OTHER_PIN},
            "a pin is never switched off",
        ),
        (
            "verification switched off with no pin, for another host",
            {"verify_tls": False},
            f"not for {STRANGER}",
        ),
        ("a wrong pin", {"cert_sha256": OTHER_PIN}, "is not the one pinned for it"),
        ("no pin", {}, "is not trusted. Run `obsidian-mcp trust --url"),
    ],
)
@pytest.mark.usefixtures("stranger_resolves")
async def test_no_request_carrying_the_key_reaches_a_stranger(
    stranger: LoggingListener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    overrides: dict[str, object],
    refusal: str,
) -> None:
    url = f"https://{STRANGER}:{stranger.port}"
    stored = overrides.pop("stored_pin", None)
    if isinstance(stored, str):
        store_pin(tmp_path / "config", url, stored)
    settings = _server_settings(tmp_path, url, **overrides)
    failed, text = await _tool_text(settings)
    assert failed and refusal in text, case
    env = {
        "OBSIDIAN_URL": url,
        "OBSIDIAN_API_KEY": KEY,
        "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
        "OBSIDIAN_CONNECT_TIMEOUT": "2",
        "OBSIDIAN_RETRY_BUDGET": "3",
        **{f"OBSIDIAN_{k.upper()}": str(v).lower() for k, v in overrides.items()},
    }
    doctor = await _in_thread(lambda: run_cli(monkeypatch, capsys, "doctor", env=env))
    assert refusal in doctor.stdout, case
    assert stranger.keyed == [], case
    assert KEY not in text + doctor.stdout + doctor.stderr


async def test_verification_off_on_this_machine_is_the_one_case_accepted(
    stranger: LoggingListener, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The control: switched off for a loopback address with nothing pinned, the key does
    reach whoever listens there, so the listener above would have seen it."""
    settings = _server_settings(tmp_path, f"https://127.0.0.1:{stranger.port}", verify_tls=False)
    with caplog.at_level(logging.WARNING):
        await _tool_text(settings, "vault_tree")
    assert stranger.keyed, "the listener saw no key where one is sent"
    assert "OFF" in caplog.text and "this machine only" in caplog.text
    assert KEY not in caplog.text


# -- must show 2: malformed keys are never printed, and the healthy vaults still answer --------


def _malformed(key: str) -> dict[str, str]:
    """Twenty keys as a paste goes wrong, by name."""
    return {
        "line feed inside": f"{key[:32]}\n{key[32:]}",
        "carriage return inside": f"{key[:32]}\r{key[32:]}",
        "tab inside": f"{key[:10]}\t{key[10:]}",
        "NUL at the end": f"{key}\x00",
        "escape sequence": f"{key[:5]}\x1b[31m{key[5:]}",
        "DEL": f"{key}\x7f",
        "C1 control": f"{key[:7]}\x85{key[7:]}",
        "accented letter": f"{key[:20]}\u00e9{key[20:]}",
        "zero-width space": f"{key}\u200b",
        "no-break space inside": f"{key[:8]}\u00a0{key[8:]}",
        "byte order mark": f"\ufeff{key}",
        "line separator inside": f"{key[:3]}\u2028{key[3:]}",
        "Cyrillic": f"ключ{key}",
        "emoji": f"{key}🔑",
        "line feed at the end": f"{key}\n",
        "CRLF at the end": f"{key}\r\n",
        "spaces around": f"  {key}  ",
        "tabs and newlines around": f"\t\n{key}\n\t",
        "empty": "",
        "white space only": " \n\t ",
    }


@pytest.fixture(scope="module")
def healthy_rest(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # Another vault than the folder vault beside it (a copy of one vault served through
    # both would be refused as one vault under two names).
    vault = tmp_path_factory.mktemp("rest") / "vault"
    shutil.copytree(REPO_ROOT / "fixtures" / "ledgerline" / "vault", vault)
    with StandinProcess(vault, plugin_version="6.0.0", smart="off") as process:
        yield process


async def test_malformed_keys_are_never_printed_and_the_healthy_vaults_answer(
    tmp_path: Path,
    healthy_rest: StandinProcess,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    real_key = healthy_rest.api_key
    keys = _malformed(real_key)
    lore = copy_fixture_vault(tmp_path / "Lore")
    pin = fingerprint(Path(healthy_rest.cert).read_text("ascii"))
    names = [f"k{number:02}" for number in range(1, len(keys) + 1)]
    lines = ['usage_log = "full"', "", "[vaults.lore]", f"path = {json.dumps(str(lore))}"]
    for name, key in zip(names, keys.values(), strict=True):
        # Each broken vault at its own address (a path), so none is another's twin; the
        # keys trimmed to the real one reach the stand-in's own path.
        lines += [
            f"[vaults.{name}]",
            f"url = {json.dumps(f'{healthy_rest.url}/{name}')}",
            f"api_key = {_toml_text(key)}",
            f"cert_sha256 = {json.dumps(pin)}",
        ]
    lines += [
        "[vaults.work]",
        f"url = {json.dumps(healthy_rest.url)}",
        f"api_key = {json.dumps(real_key + chr(10))}",  # a trailing line break: trimmed
        f"cert_sha256 = {json.dumps(pin)}",
    ]
    config = tmp_path / "vaults.toml"
    config.write_text("\n".join(lines) + "\n", "utf-8")
    env = {
        "OBSIDIAN_CONFIG": str(config),
        "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
        "OBSIDIAN_CACHE_DIR": str(tmp_path / "cache"),
        "OBSIDIAN_INDEX_EMBEDDINGS": "false",
        "OBSIDIAN_RETRY_BUDGET": "3",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    printed: list[str] = []
    with caplog.at_level(logging.DEBUG):
        async with Client(build_server(Settings())) as client:
            for name in ["lore", "work"]:
                result = await client.call_tool("vault_tree", {"vault": name, "depth": 1})
                printed.append(text_of(result))
                assert not result.is_error, text_of(result)
            for name, key in zip(names, keys.values(), strict=True):
                result = await client.call_tool("vault_tree", {"vault": name, "depth": 1})
                printed.append(text_of(result))
                # White space around a key is trimmed (that vault then lists the stand-in's
                # wrong path); every other malformed key keeps its vault from being served.
                if not key.strip() or key.strip() != real_key:
                    assert result.is_error, name
            everywhere = await client.call_tool("vault_smart_search", {"query": "lighthouse"})
            printed.append(text_of(everywhere))
            assert not everywhere.is_error and "lore:" in text_of(everywhere)
        for command in (["doctor"], ["stats"], ["stats", "--json"], ["call", "vault_tree"]):
            ran = await _in_thread(lambda c=command: run_cli(monkeypatch, capsys, *c, env=env))
            printed += [ran.stdout, ran.stderr]
    printed.append(caplog.text)
    everything = "\n".join(printed)
    for case, key in keys.items():
        shown = [piece for piece in (key, key.strip(), real_key[:16], real_key[-16:]) if piece]
        assert not any(piece in everything for piece in shown), case
    # What the user reads names the setting and the kind of fault, not the key.
    assert "api_key in [vaults.k01] of" in everything
    assert "holds a line break (character 33 of 65)" in everything
    assert "holds a non-ASCII character" in everything
    assert "holds a control character" in everything
    assert "[vaults.k19] has a url but no api_key" in everything  # empty: no key


async def test_a_malformed_key_in_the_environment_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBSIDIAN_API_KEY", f"{KEY[:30]}\r\n{KEY[30:]}")
    settings = Settings(config_dir=tmp_path / "config", vault_path=tmp_path)
    failed, text = await _tool_text(settings)
    assert failed and "OBSIDIAN_API_KEY holds a line break (character 31 of 66)" in text
    assert KEY[:30] not in text and KEY[30:] not in text
    monkeypatch.setenv("OBSIDIAN_API_KEY", "  \n")
    assert Settings().api_key is None  # an empty key is no key


def _toml_text(text: str) -> str:
    """A TOML basic string of exactly this text: control characters escaped as TOML wants
    (json.dumps would write the emoji as a surrogate pair, which TOML refuses)."""
    escaped = "".join(
        f"\\u{ord(char):04x}" if ord(char) < 0x20 or ord(char) == 0x7F else char
        for char in text.replace("\\", "\\\\").replace('"', '\\"')
    )
    return f'"{escaped}"'


async def _in_thread(run: Callable[[], Any]) -> Any:
    """A command line run (which starts its own event loop) beside this test's loop."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(run)


def test_a_key_over_plain_http_to_another_host_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from obsidian_mcp.sources.rest import build_http_client

    with caplog.at_level(logging.WARNING):
        build_http_client(_server_settings(tmp_path, "http://obsidian.example.net:27123"))
    assert "plain HTTP" in caplog.text and "trust --url https://obsidian.example.net" in caplog.text
    assert KEY not in caplog.text


def test_the_listener_outlasts_a_client_that_never_finishes_its_handshake(tmp_path: Path) -> None:
    """The stranger is a test's fixture: a client that connects and says nothing (a check
    cancelled half-way) must hold up neither the next client nor the fixture's teardown.
    With the handshake in its accept loop it held both, for ever."""
    import httpx

    with LoggingListener(tmp_path / "cert") as listener:
        silent = socket.create_connection(("127.0.0.1", listener.port))
        answer = httpx.get(f"https://127.0.0.1:{listener.port}/", verify=False, timeout=5)
        assert answer.status_code == 200 and len(listener.received) == 1
    silent.close()
