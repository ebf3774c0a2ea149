"""Hostile inputs, short profile: every tool, generated arguments, through the folder and
the stand-in, with a real MCP client. Every answer must be a result or an actionable
error, and nothing outside the memory files and the scratch note may change
(`bench.fuzz.WRITABLE`, `WRITABLE_FOLDERS`).

`python -m bench --fuzz` runs the long profile (1,000+ calls per tool) for the report.
"""

from pathlib import Path

from bench.fuzz import WRITABLE, Guard, prepare_vault, run_fuzz
from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.fixture_vault import FIXTURE_VAULT
from tests.standin.process import StandinProcess

# Calls per tool and source: about half a minute for both sources on the 2-core CI box.
EXAMPLES_PER_TOOL = 12


def _check(tally_rows: list[dict[str, object]], examples: list[str], failures: int) -> None:
    assert failures == 0, "\n".join(examples)
    assert {row["tool"] for row in tally_rows} >= {"vault_read_note", "vault_remember"}


def test_hostile_arguments_through_the_folder(tmp_path: Path) -> None:
    vault, canary = prepare_vault(FIXTURE_VAULT, tmp_path)
    guard = Guard(vault, canary, WRITABLE)
    server = build_server(folder_settings(vault, tmp_path / "config"))
    tally = run_fuzz(server, guard, EXAMPLES_PER_TOOL)
    _check(tally.rows(), tally.examples, tally.failures())


def test_hostile_arguments_through_the_standin(tmp_path: Path) -> None:
    vault, canary = prepare_vault(FIXTURE_VAULT, tmp_path)
    guard = Guard(vault, canary, WRITABLE)
    with StandinProcess(vault, plugin_version="5.1.0") as standin:
        server = build_server(rest_settings(standin, tmp_path / "config"))
        tally = run_fuzz(server, guard, EXAMPLES_PER_TOOL)
    _check(tally.rows(), tally.examples, tally.failures())
