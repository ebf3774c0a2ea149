"""Configuring several vaults: the TOML file, `--vault NAME=PATH`, and every mistake a user
can make in them refused with what to change (issue 28)."""

import json
import logging
from pathlib import Path

import pytest
from mcp import Client

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.vault_set import VaultConfigError, configured_vaults
from tests.test_read_tools import text_of

PIN = "ab:" * 31 + "ab"


def _file(tmp_path: Path, text: str) -> Settings:
    config = tmp_path / "vaults.toml"
    config.write_text(text, "utf-8")
    return Settings.model_validate({"config": config, "config_dir": tmp_path / "c"})


def test_a_file_names_each_vault_with_its_own_sources(tmp_path: Path) -> None:
    settings = _file(
        tmp_path,
        f"""
[vaults.lore]
path = "Lore"

[vaults.journal]
url = "https://host.docker.internal"
api_key = "journal-key"
cert_sha256 = "{PIN}"
default = true
""",
    )
    vaults = configured_vaults(settings)
    assert vaults.names == ["lore", "journal"] and vaults.default == "journal"
    lore, journal = (vault.settings for vault in vaults.vaults)
    assert lore.vault_path == tmp_path / "Lore"  # beside the file, wherever the server starts
    assert lore.api_key is None and lore.url is None
    assert journal.base_url == "https://host.docker.internal:27124"  # the plugin's port
    assert journal.vault_path is None
    assert journal.cert_sha256 == "AB:" * 31 + "AB"
    assert journal.max_tokens == settings.max_tokens  # global settings stay global


def test_the_first_vault_is_the_default_and_arguments_add_vaults(tmp_path: Path) -> None:
    settings = _file(tmp_path, '[vaults.work]\npath = "/srv/work"\n')
    vaults = configured_vaults(settings, [f"home={tmp_path / 'Home'}", str(tmp_path / "Diary")])
    assert vaults.names == ["work", "home", "Diary"] and vaults.default == "work"
    assert vaults.find("DIARY") is vaults.vaults[2]


def test_a_vaults_key_never_goes_to_another_vaults_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OBSIDIAN_API_KEY", "the-single-vault-key")
    monkeypatch.setenv("OBSIDIAN_URL", "https://elsewhere:27124")
    settings = Settings(config=None)
    with caplog.at_level(logging.WARNING):
        vaults = configured_vaults(settings, [f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}"])
    assert all(v.settings.api_key is None and v.settings.url is None for v in vaults.vaults)
    assert "OBSIDIAN_API_KEY, OBSIDIAN_URL configure a single vault" in caplog.text
    # One folder on the command line is today's single vault: the environment's API too.
    single = configured_vaults(settings, [str(tmp_path)])
    assert not single.several and single.vaults[0].settings.api_key is not None
    assert single.names == [tmp_path.name]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '[vaults.a]\npath = "x"\ndefault = true\n[vaults.b]\npath = "y"\ndefault = true\n',
            "a and b both say default = true",
        ),
        ('[vaults.a]\npath = "x"\n[vaults.A]\npath = "y"\n', "two vaults are named 'A'"),
        ('[vaults.a]\npath = "x"\n[vaults.b]\npath = "x/"\n', "a and b are the same vault ("),
        (
            '[vaults.a]\napi_key = "k"\nurl = "https://h"\n'
            '[vaults.b]\napi_key = "j"\nurl = "https://h:27124/"\n',
            "a and b are the same vault (h:27124)",
        ),
        ('[vaults."a:b"]\npath = "x"\n', "cannot hold a colon"),
        (
            '[vaults.outer]\npath = "N"\n[vaults.inner]\npath = "N/Characters"\n',
            "is inside the vault outer",
        ),
        ('max_tokens = 5\n[vaults.a]\npath = "x"\n', "has 'max_tokens' beside [vaults.NAME]"),
        ("[vaults]\n", "names no vault; add a [vaults.NAME] table"),
        ("[vaults.a\n", "is not valid TOML"),
        ('[vaults.a]\npath = "x"\ndefault = yes\n', "Invalid value (at line 3, column 11)"),
        ('[vault.a]\npath = "x"\n', "has 'vault' (did you mean 'vaults'?) beside"),
        ("vaults = 3\n", "names no vault"),
    ],
)
def test_a_mistake_in_the_file_says_what_to_change(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(VaultConfigError) as refused:
        configured_vaults(_file(tmp_path, text))
    assert problem in str(refused.value)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        (
            'pth = "x"\n',
            "[vaults.a] there is no setting 'pth' for a vault (did you mean 'path'?); it takes "
            "path, url, api_key, cert, cert_sha256, default",
        ),
        ("default = true\n", "[vaults.a] names no source: give it path"),
        ('url = "https://h:1"\n', "[vaults.a] has a url but no api_key"),
        ('url = "https://h:1"\napi_key = " \t "\n', "[vaults.a] has a url but no api_key"),
        ('api_key = "k"\nurl = "ftp://h"\n', "url: 'ftp://h' is not an http(s) URL"),
        ('path = "x"\ncert_sha256 = "12:34"\n', "cert_sha256: a SHA-256 fingerprint is 64 hex"),
        ('path = "x"\napi-key = "k"\n', "'api-key' for a vault (did you mean 'api_"),
        ('api_key = "ab\\ncd"\nurl = "https://h:1"\n', "api_key in [vaults.a] of "),
    ],
)
def test_a_mistake_in_one_vaults_table_leaves_the_others_served(
    tmp_path: Path, table: str, problem: str
) -> None:
    settings = _file(tmp_path, f'[vaults.a]\n{table}[vaults.b]\npath = "y"\n')
    vaults = configured_vaults(settings)
    broken, healthy = vaults.vaults
    assert broken.problem is not None and problem in broken.problem
    assert healthy.problem is None and healthy.settings.vault_path == tmp_path / "y"
    # Whatever it got wrong, the broken vault is given no source to send a request to.
    assert broken.settings.api_key is None or broken.problem.startswith("api_key in")


def test_a_missing_file_and_a_bad_name_on_the_command_line(tmp_path: Path) -> None:
    settings = Settings.model_validate({"config": tmp_path / "nope.toml"})
    with pytest.raises(VaultConfigError, match=r"cannot be read .* check --config"):
        configured_vaults(settings)
    with pytest.raises(VaultConfigError, match="cannot hold a colon"):
        configured_vaults(Settings(), ["x:y=/tmp", "b=/tmp"])
    # Two folders of one name, given bare: named after their folders, so named alike.
    notes = [str(tmp_path / "a" / "Notes"), str(tmp_path / "b" / "Notes")]
    with pytest.raises(VaultConfigError, match=r"named 'Notes' .* --vault NAME=PATH"):
        configured_vaults(Settings(), notes)
    named = configured_vaults(Settings(), [f"work={notes[0]}", f"home={notes[1]}"])
    assert named.names == ["work", "home"]


@pytest.mark.anyio
async def test_the_server_answers_every_call_with_the_files_problem(tmp_path: Path) -> None:
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "Note.md").write_text("# Note\n", "utf-8")
    settings = _file(tmp_path, '[vaults.a]\npath = "x"\nsecret = 1\n[vaults.b]\npath = "y"\n')
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("vault_tree", {"vault": "a"})
        other = await client.call_tool("vault_tree", {"vault": "b"})
    assert result.is_error
    assert "vaults.toml: [vaults.a] there is no setting 'secret'" in text_of(result)
    assert not other.is_error and "Note" in text_of(other)


def test_the_file_switches_the_usage_log_on_for_the_whole_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    text = 'usage_log = true\nusage_log_max_bytes = 5000\n[vaults.a]\npath = "a"\n'
    vaults = configured_vaults(_file(tmp_path, text))
    assert vaults.settings.usage_log == "on" and vaults.settings.usage_log_max_bytes == 5000
    assert vaults.vaults[0].settings.usage_log == "on"
    full = 'usage_log = "FULL"\n[vaults.a]\npath = "a"\n'
    assert configured_vaults(_file(tmp_path, full)).settings.usage_log == "full"
    # The environment's variable, when set, wins over the file, and says so.
    monkeypatch.setenv("OBSIDIAN_USAGE_LOG", "off")
    with caplog.at_level(logging.WARNING):
        settings = Settings(config=tmp_path / "vaults.toml")
        configured_vaults(settings.model_copy(update={"config_dir": tmp_path / "c"}))
    assert configured_vaults(settings).settings.usage_log == "off"
    assert "OBSIDIAN_USAGE_LOG is set in the environment and overrides usage_log" in caplog.text


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('usage_log = "maybe"', "usage_log = 'maybe' is refused: Input should be 'off', 'on'"),
        ("usage_log_max_bytes = 10", "usage_log_max_bytes = 10 is refused: Input should be"),
        ("usage_log = [1]", "usage_log = [1] is refused"),
    ],
)
def test_a_wrong_server_setting_in_the_file_names_it(
    tmp_path: Path, line: str, problem: str
) -> None:
    with pytest.raises(VaultConfigError) as refused:
        configured_vaults(_file(tmp_path, f'{line}\n[vaults.a]\npath = "a"\n'))
    assert problem in str(refused.value) and "OBSIDIAN_USAGE_LOG" in str(refused.value)


@pytest.mark.anyio
async def test_the_usage_log_says_which_vault_each_call_used(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Note.md").write_text(f"# Note\n\nThe lighthouse of {name}.\n")
    vaults = '[vaults.a]\npath = "a"\n[vaults.b]\npath = "b"\n'
    settings = _file(tmp_path, 'usage_log = "full"\n' + vaults)
    settings = settings.model_copy(update={"cache_dir": tmp_path / "cache"})
    async with Client(build_server(settings)) as client:
        assert not (await client.call_tool("vault_read_note", {"path": "b:Note.md"})).is_error
        assert not (await client.call_tool("vault_search_map", {"query": "lighthouse"})).is_error
        assert (await client.call_tool("vault_tree", {"vault": "nope"})).is_error
    lines = (tmp_path / "cache" / "usage" / "usage.jsonl").read_text("utf-8").splitlines()
    logged = [json.loads(line) for line in lines]
    assert [(line["tool"], line["vaults"]) for line in logged] == [
        ("vault_read_note", ["b"]),
        ("vault_search_map", ["a", "b"]),  # searched every vault
        ("vault_tree", []),  # refused: no vault was used
    ]
    assert logged[0]["notes"] == [["b:Note.md", ""]]  # the path as the reply shows it


def test_vault_names_match_in_any_case_and_unicode_form(tmp_path: Path) -> None:
    """Issue 35, item 17: a name typed on macOS (NFD) is the vault of the same name."""
    settings = _file(tmp_path, '[vaults."Cafe\u0301"]\npath = "x"\n[vaults.b]\npath = "y"\n')
    vaults = configured_vaults(settings)
    assert vaults.find("CAF\u00c9") is vaults.vaults[0]
