"""The command line as a user runs it: call, doctor and trust, as real subprocesses."""

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from obsidian_mcp import __version__
from obsidian_mcp.cli import ProgressBar, main
from obsidian_mcp.sources.tls import fingerprint
from tests.fixture_vault import REPO_ROOT
from tests.standin.process import StandinProcess


def run_cli(
    *args: str, env: dict[str, str] | None = None, program: Sequence[str] = ("-m", "obsidian_mcp")
) -> subprocess.CompletedProcess[str]:
    """`python -m obsidian_mcp ARGS` (or `python PROGRAM ARGS`) in a process of its own,
    with no OBSIDIAN_* variable but those of `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    return subprocess.run(
        [sys.executable, *program, *args],
        cwd=REPO_ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def standin_env(process: StandinProcess, config_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "OBSIDIAN_API_KEY": process.api_key,
        "OBSIDIAN_PORT": str(process.port),
        "OBSIDIAN_CONFIG_DIR": str(config_dir),
        **extra,
    }


def test_call_prints_what_the_model_sees(shared_vault: Path) -> None:
    # --vault after the tool too, as every command takes it after its name.
    done = run_cli("call", "vault_tree", "--vault", str(shared_vault), "depth=1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("vault root: 95 notes")
    failed = run_cli("call", "--vault", str(shared_vault), "vault_read_note", "path=nope.md")
    assert failed.returncode == 1
    assert "No note at 'nope.md'" in failed.stdout
    malformed = run_cli("call", "--vault", str(shared_vault), "vault_tree", "depth")
    assert malformed.returncode != 0
    assert "expected key=value" in malformed.stderr


def test_trust_stores_the_certificate_and_doctor_then_passes(
    standin: StandinProcess, tmp_path: Path
) -> None:
    env = standin_env(standin, tmp_path)
    untrusted = run_cli("doctor", env=env)
    assert untrusted.returncode == 1
    assert "[FAIL] certificate trusted" in untrusted.stdout
    assert "obsidian-mcp trust" in untrusted.stdout

    expected = fingerprint(Path(standin.cert).read_text())
    unconfirmed = run_cli("trust", env=env)  # no terminal to confirm on, no --yes
    assert unconfirmed.returncode == 1
    assert f"SHA-256 fingerprint: {expected}" in unconfirmed.stdout
    assert "trust --yes" in unconfirmed.stderr
    stored = tmp_path / "certificates" / f"127.0.0.1_{standin.port}.pem"
    assert not stored.exists()
    assert "OFF" not in unconfirmed.stderr  # fetching the certificate is not an opt-out

    trusted = run_cli("trust", "--yes", env=env)
    assert trusted.returncode == 0, trusted.stderr
    fingerprint_at = trusted.stdout.index(f"SHA-256 fingerprint: {expected}")
    assert fingerprint_at < trusted.stdout.index("Stored in")
    assert stored.read_text("ascii") == Path(standin.cert).read_text()
    assert trusted.stderr == ""

    healthy = run_cli("doctor", env=env)
    assert healthy.returncode == 0, healthy.stdout
    for check in ("Obsidian reachable", "certificate trusted", "plugin version", "API key"):
        assert f"[ok  ] {check}" in healthy.stdout
    assert f"plugin version: {standin.plugin_version} ({standin.plugin_version[0]}.x: " in (
        healthy.stdout
    )
    assert "healthy: every check passed" in healthy.stdout
    assert "obsidian-mcp doctor" not in healthy.stdout
    assert standin.api_key not in healthy.stdout + healthy.stderr
    # Without the vault folder, links that leave the vault are Obsidian's to follow.
    assert "Obsidian decides what a symbolic link shows" in healthy.stdout


def test_trusting_a_second_plugin_keeps_the_first_ones_certificate(
    shared_vault: Path, tmp_path: Path
) -> None:
    """Issue 35, item 15: two vaults' plugins on two ports, each trusted in turn: both stay
    trusted (one file per address), where one file for all made the second replace the first."""
    # The one file earlier versions kept for every address, here a stale one: an address's
    # own file comes first.
    (tmp_path / "obsidian-local-rest-api.pem").write_text("not a certificate", "ascii")
    with (
        StandinProcess(shared_vault, plugin_version="5.1.0") as first,
        StandinProcess(shared_vault, plugin_version="5.1.0") as second,
    ):
        assert fingerprint(Path(first.cert).read_text()) != fingerprint(
            Path(second.cert).read_text()
        )
        for standin in (first, second):
            trusted = run_cli("trust", "--yes", env=standin_env(standin, tmp_path))
            assert trusted.returncode == 0, trusted.stderr
            assert f"127.0.0.1_{standin.port}.pem" in trusted.stdout
        for standin in (first, second):
            healthy = run_cli("doctor", env=standin_env(standin, tmp_path))
            assert "[ok  ] certificate trusted" in healthy.stdout, healthy.stdout


def test_doctor_names_a_rejected_key_and_its_fix(standin: StandinProcess, tmp_path: Path) -> None:
    env = standin_env(standin, tmp_path, OBSIDIAN_API_KEY="not-the-key", OBSIDIAN_CERT=standin.cert)
    done = run_cli("doctor", env=env)
    assert done.returncode == 1
    assert "[FAIL] API key accepted" in done.stdout
    assert "Settings > Local REST API" in done.stdout
    # Extensions are listed only to an accepted key: the semantic source is unknown, not absent.
    assert "semantic source: the local passage index" in done.stdout
    assert "unknown until Obsidian answers and accepts the key" in done.stdout
    assert "Smart Connections" not in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("broken:")
    assert "not-the-key" not in done.stdout + done.stderr


def test_doctor_tells_degraded_from_broken(shared_vault: Path, tmp_path: Path) -> None:
    closed = run_cli(
        "doctor",
        "--vault",
        str(shared_vault),
        env={"OBSIDIAN_API_KEY": "k", "OBSIDIAN_PORT": "9", "OBSIDIAN_CONFIG_DIR": str(tmp_path)},
    )
    assert closed.returncode == 2, closed.stdout  # Obsidian closed, the folder serves
    assert "[FAIL] Obsidian reachable: no answer at https://127.0.0.1:9" in closed.stdout
    assert "obsidian-mcp doctor" not in closed.stdout
    assert "degraded: the tools work through the vault folder" in closed.stdout
    nothing = run_cli("doctor", env={"OBSIDIAN_CONFIG_DIR": str(tmp_path)})
    assert nothing.returncode == 1
    assert "broken:" in nothing.stdout


def test_version_and_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    version = run_cli("--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"obsidian-mcp {__version__}")
    # argparse answers --help before anything starts: in process is the same as a shell.
    for command in ("serve", "call", "index", "doctor", "trust"):
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0, command
        assert capsys.readouterr().out.startswith(f"usage: obsidian-mcp {command}"), command


def test_the_command_imports_its_modules_out_of_the_collectors_way() -> None:
    """`obsidian-mcp` (and `python -m obsidian_mcp`) imports the CLI with the collector
    paused, freezes what the import built (`launch.py`), and runs with the collector on."""
    probe = (
        "import gc, sys\n"
        "from obsidian_mcp.launch import main\n"
        "sys.argv = ['obsidian-mcp', '--version']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "import obsidian_mcp.cli\n"
        "walked = {id(o) for o in gc.get_objects()}\n"
        "print(gc.isenabled(), id(obsidian_mcp.cli.__dict__) in walked)\n"
    )
    done = run_cli(program=("-c", probe))
    assert done.stdout.strip().splitlines()[-1] == "True False", (done.stdout, done.stderr)


def test_commands_without_a_server_start_without_the_mcp_sdk(tmp_path: Path) -> None:
    """The SDK takes over a second to import: doctor, memory, stats, trust, index and
    model fetch (a person at a shell, a script) do not wait for it; call and serve do."""
    probe = (
        "import sys\n"
        "from obsidian_mcp.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    env = {"OBSIDIAN_CONFIG_DIR": str(tmp_path), "OBSIDIAN_CACHE_DIR": str(tmp_path)}
    for command in (["doctor"], ["stats"], ["memory", "--vault", str(tmp_path), "list"]):
        done = run_cli(*command, env=env, program=("-c", probe))
        assert done.stdout.strip().splitlines()[-1] == "[]", (command, done.stdout, done.stderr)


def test_call_with_an_unknown_tool_lists_the_tools(shared_vault: Path) -> None:
    done = run_cli("call", "--vault", str(shared_vault), "vault_serch", "query=x")
    assert done.returncode == 2
    assert "no tool named 'vault_serch'" in done.stderr
    assert "vault_semantic_query" in done.stderr and "vault_remember" in done.stderr


def test_a_missing_vault_folder_is_named_as_given(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "folder"
    done = run_cli("call", "--vault", str(missing), "vault_tree")
    assert done.returncode != 0
    assert f"--vault {missing} is not a folder" in done.stderr
    assert "OBSIDIAN_VAULT_PATH" not in done.stderr


def test_call_answers_by_meaning_and_doctor_shows_the_index(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Ferry.md").write_text(
        "# The Ferry\n\nOld Tomas refuses to carry anyone across the river once the sun has set.\n"
    )
    (vault / "Garden.md").write_text(
        "# The Garden\n\nTomatoes grow against the south wall, where the bricks hold heat.\n"
    )
    env = {"OBSIDIAN_CONFIG_DIR": str(tmp_path)}
    before = run_cli("doctor", "--vault", str(vault), env=env)
    assert "passage index: not built yet" in before.stdout
    asked = run_cli(
        "call",
        "--vault",
        str(vault),
        "vault_semantic_query",
        "query=Which boatman won't take passengers over the water at night?",
        "limit=1",
        env=env,
    )
    assert asked.returncode == 0, asked.stderr
    assert "local passage index" in asked.stdout.splitlines()[0]
    assert "## Ferry.md" in asked.stdout
    assert "embedded 2 of 2 passage windows" in asked.stderr  # the build it ran first
    after = run_cli("doctor", "--vault", str(vault), env=env)
    assert "[ok  ] passage index:" in after.stdout
    assert "2 notes, 2 passages, 2 with vectors (all-MiniLM-L6-v2)" in after.stdout
    # Memories live in the writers' folder, not the legacy file the setting names.
    assert f"[ok  ] memory path writable: obsidian-mcp/memory/ in {vault}" in after.stdout
    # Two reports of one index say the same, its size included.
    indexed = run_cli("index", "--vault", str(vault), env=env)
    assert indexed.returncode == 0, indexed.stderr
    detail = indexed.stdout.strip().removeprefix("passage index ")
    assert f"[ok  ] passage index: {detail}" in after.stdout


@pytest.mark.anyio
async def test_the_progress_bar_in_a_log_shows_each_tenth_of_each_phase_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Notes are stored in batches after reading races ahead, so the end of reading is
    # reported many times over; a log file must not fill with copies of that line.
    bar = ProgressBar()  # stderr is captured, not a terminal: one line per tenth
    for done, total, message in [
        (0, 10, "indexing 10 notes"),
        (5, 10, "indexed 5 of 10 notes"),
        (10, 10, "indexed 10 of 10 notes"),
        (10, 10, "indexed 10 of 10 notes"),
        (10, 10, "indexed 10 of 10 notes"),
        (0, 4, "embedding 4 texts"),
        (4, 4, "embedded 4 of 4 texts"),
        (3, 3, "stored 3 of 3 vectors"),  # a phase whose first report is its end
        (3, 3, "stored 3 of 3 vectors"),
    ]:
        await bar(done, total, message)
    assert capsys.readouterr().err.splitlines() == [
        "indexing 10 notes",
        "indexed 5 of 10 notes",
        "indexed 10 of 10 notes",
        "embedding 4 texts",
        "embedded 4 of 4 texts",
        "stored 3 of 3 vectors",
    ]


def test_memory_list_forget_and_export_without_an_agent(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    env = {
        "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
        "OBSIDIAN_CACHE_DIR": str(tmp_path / "cache"),
        "OBSIDIAN_MEMORY_MEANING": "false",
    }
    for content, scope in (("Mira moved to Vastry", ""), ("The cellar hides wine", "tamsin")):
        stored = run_cli(
            "call",
            "--vault",
            str(vault),
            "vault_remember",
            f"content={content}",
            'tags=["story"]',
            *([f"scope={scope}"] if scope else []),
            env=env,
        )
        assert stored.returncode == 0, stored.stderr
    listed = run_cli("memory", "list", "--vault", str(vault), env=env)
    assert listed.returncode == 0, listed.stderr
    assert "Mira moved to Vastry" in listed.stdout and "scope tamsin" in listed.stdout
    wine = re.search(r"^- (\w+) .*scope tamsin", listed.stdout, re.MULTILINE)
    assert wine is not None
    forgot = run_cli("memory", "--vault", str(vault), "forget", wine[1], env=env)
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout.startswith(f"Forgot {wine[1]}: The cellar hides wine")
    page = (vault / "obsidian-mcp" / "memory.md").read_text("utf-8")
    assert "Mira moved to Vastry" in page and "cellar" not in page
    exported = run_cli("memory", "--vault", str(vault), "export", env=env)  # either order
    assert [json.loads(line)["content"] for line in exported.stdout.splitlines()] == [
        "Mira moved to Vastry"
    ]
    # Forgetting is idempotent; an id no memory ever had is named with the shell's fix.
    again = run_cli("memory", "forget", wine[1], "--vault", str(vault), env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{wine[1]} was already forgotten; nothing changed.\n"
    bogus = run_cli("memory", "forget", "bogus", "--vault", str(vault), env=env)
    assert bogus.returncode == 1
    assert "no memory has the id 'bogus'; `obsidian-mcp memory list` shows the ids" in (
        bogus.stderr
    )
    assert "vault_recall" not in bogus.stderr  # a shell user has no agent tools


def test_an_export_read_only_in_part_ends_quietly(tmp_path: Path) -> None:
    """`memory export | head -3`: the reader closes the pipe early; no traceback."""
    vault = tmp_path / "vault"
    (vault / "obsidian-mcp").mkdir(parents=True)
    lines = (
        f'{{"id": "0m{n:011d}", "ts": "2026-11-01T10:00:00.000Z", "content": "memory {n} '
        f'of a long export, enough to fill a pipe", "tags": ["t"], "context": ""}}\n'
        for n in range(3000)
    )
    (vault / "obsidian-mcp" / "memory.jsonl").write_text("".join(lines))
    base = {k: v for k, v in os.environ.items() if not k.startswith("OBSIDIAN_")}
    done = subprocess.run(
        f'"{sys.executable}" -m obsidian_mcp memory export --vault "{vault}" | head -3',
        shell=True,
        cwd=REPO_ROOT,
        env={
            **base,
            "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
            "OBSIDIAN_MEMORY_MEANING": "false",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert len(done.stdout.splitlines()) == 3
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
