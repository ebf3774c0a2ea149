"""The usage log (issue 29) through a real MCP client: what a line holds, what it never
holds, the follow-up signals `stats` finds in a scripted conversation, the log's rotation,
and every call still answering when the log cannot be written."""

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from bench.economy import usage_check
from bench.economy.definitions import measure_definitions
from bench.shared.harness import CallResult
from obsidian_mcp.config import Settings
from obsidian_mcp.retrieval.keyword import terms
from obsidian_mcp.server import build_server
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.usage.log import KEY_FILE, LOG_FILE, ROTATED_FILE, LogFiles
from obsidian_mcp.usage.record import Redactor
from obsidian_mcp.usage.report import (
    CALLS_COLOUR,
    DAY_COLOUR,
    ERRORS_COLOUR,
    MEDIAN_COLOUR,
    P90_COLOUR,
    html_report,
    terminal_report,
)
from obsidian_mcp.usage.stats import read_log, usage_stats
from obsidian_mcp.vault_set import configured_vaults
from tests.conftest import folder_settings
from tests.fixture_vault import REPO_ROOT, copy_fixture_vault
from tests.test_cli import run_cli
from tests.test_unreadable_file import WITHOUT_OVERRIDE

pytestmark = pytest.mark.anyio

COMPASS = "Where does Mira keep the compass?"
MARKET = "What did Rook buy at Saltwick Market?"
UNRETURNED = "Characters/Hobb Marrow.md"
MEMORY = "Quillon prefers the harbour door at dusk"
SCRATCH = "Zanthor ledger entry about barnacles"


def usage_settings(vault: Path, root: Path, mode: str = "on", **overrides: object) -> Settings:
    return folder_settings(
        vault,
        root / "config",
        cache_dir=root / "cache",
        usage_log=mode,
        index_embeddings=False,
        **overrides,
    )


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def log_lines(settings: Settings) -> list[dict[str, Any]]:
    path = settings.usage_log_dir / LOG_FILE
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


# The scripted conversation: (tool, arguments); None arguments are filled in by `converse`.
CONVERSATION: list[tuple[str, dict[str, Any]]] = [
    ("vault_semantic_query", {"query": COMPASS, "limit": 2}),
    ("vault_read_note", {}),  # a note the first search returned: no miss
    ("vault_semantic_query", {"query": MARKET, "limit": 2}),
    ("vault_smart_search", {"query": "Saltwick Market"}),  # similar words: searched again
    ("vault_peek_file", {"path": UNRETURNED}),  # not returned by that search: read elsewhere
    ("vault_search_map", {"query": "zzqxv nothing"}),  # returns nothing
    ("vault_quick_context", {"topic": "Hobb Marrow"}),
    ("vault_remember", {"content": MEMORY, "tags": ["quillon"]}),
    ("vault_recall", {"tags": ["quillon"]}),
    ("vault_scratch_append", {"text": SCRATCH}),
    ("vault_read_note", {"path": "Characters/Nobody Here.md"}),  # NoteNotFound
    ("vault_tree", {"depth": "deep"}),  # invalid_arguments
]


async def converse(settings: Settings) -> list[tuple[str, dict[str, Any], CallToolResult]]:
    """The conversation through an in-process MCP client; every reply is kept."""
    done: list[tuple[str, dict[str, Any], CallToolResult]] = []
    async with Client(build_server(settings)) as client:
        for tool, arguments in CONVERSATION:
            if tool == "vault_read_note" and not arguments:
                first = text_of(done[0][2])
                path = re.search(r"^## (\S.*?\.md)", first, re.MULTILINE)
                assert path is not None, first
                arguments = {"path": path.group(1)}
            result = await client.call_tool(tool, arguments)
            done.append((tool, arguments, result))
    smart = text_of(done[3][2])
    assert UNRETURNED not in smart, "the conversation needs a note the search did not return"
    return done


Conversation = list[tuple[str, dict[str, Any], CallToolResult]]


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Settings, Conversation]]:
    """The conversation logged with `on` and with `full`, once for the module."""
    runs: dict[str, tuple[Settings, Conversation]] = {}
    for mode in ("on", "full"):
        root = tmp_path_factory.mktemp(f"usage-{mode}")
        settings = usage_settings(copy_fixture_vault(root / "vault"), root, mode)
        runs[mode] = settings, anyio.run(converse, settings)
    return runs


def test_a_line_per_call_with_the_reply_tokens_options_and_error_kinds(
    logged: dict[str, tuple[Settings, Conversation]],
) -> None:
    settings, calls = logged["on"]
    lines = log_lines(settings)
    assert [line["tool"] for line in lines] == [tool for tool, _, _ in calls]
    for line, (_, arguments, result) in zip(lines, calls, strict=True):
        assert line["tokens"] == estimate_tokens(text_of(result))
        assert line["args"] == list(arguments)
        assert (line["error"] is not None) == bool(result.is_error)
        assert line["ms"] > 0 and line["mode"] == "on"
    assert lines[0]["options"] == {"limit": 2}
    assert lines[0]["sources"] and lines[0]["items"] == len(lines[0]["notes"]) >= 1
    assert lines[7]["sizes"] == {"content": len(MEMORY)} and lines[8]["items"] == 1
    assert [lines[10]["error"], lines[11]["error"]] == ["NoteNotFound", "invalid_arguments"]
    assert lines[11]["options"] == {"depth": "(invalid)"}
    assert len({line["session"] for line in lines}) == 1


async def test_sessions_and_the_definitions_cost_match_what_a_client_sees(
    vault_copy: Path, tmp_path: Path
) -> None:
    settings = usage_settings(vault_copy, tmp_path, tools="search,memory")
    for _ in range(2):
        async with Client(build_server(settings)) as client:
            definitions = await measure_definitions(client)
            await client.call_tool("vault_recall", {"query": "anything"})
            await client.call_tool("vault_nope", {"secret name": "private text"})
    lines = log_lines(settings)
    assert len({line["session"] for line in lines}) == 2
    assert {line["defs"] for line in lines} == {definitions.tokens}
    assert lines[1]["tool"] == "(unknown tool)" and lines[1]["error"] == "unknown_tool"
    assert lines[1]["args"] == [] and lines[1]["unknown_args"] == 1
    assert "private" not in (settings.usage_log_dir / LOG_FILE).read_text("utf-8")


def test_stats_finds_the_follow_ups_of_the_conversation_in_both_modes(
    logged: dict[str, tuple[Settings, Conversation]],
) -> None:
    figures = {
        mode: usage_stats(read_log(LogFiles(settings.usage_log_dir)))
        for mode, (settings, _) in logged.items()
    }
    for stats in figures.values():
        total = stats.follow_ups.total
        assert (total.searches, total.searched_again, total.read_elsewhere) == (5, 1, 1)
        assert (total.missed, total.empty) == (2, 1)
        assert stats.calls == len(CONVERSATION) and stats.sessions == 1
        assert stats.definitions.requests == len(CONVERSATION) + 1
        assert {e.kind: e.count for e in stats.errors} == {
            "NoteNotFound": 1,
            "invalid_arguments": 1,
        }
    assert figures["on"].follow_ups.misses == []
    again, elsewhere = figures["full"].follow_ups.misses
    assert (again.question, again.searched_again) == (MARKET, "Saltwick Market")
    assert (elsewhere.question, elsewhere.read_elsewhere) == ("Saltwick Market", (UNRETURNED,))


def test_on_keeps_no_question_path_or_note_text(
    logged: dict[str, tuple[Settings, Conversation]],
) -> None:
    full, calls = logged["full"]
    settings, _ = logged["on"]
    written = (settings.usage_log_dir / LOG_FILE).read_text("utf-8")
    # What `full` kept (questions, paths and headings returned) is exactly what `on` hides.
    kept = [text for line in log_lines(full) for text in line["text"].values() if text]
    kept += [part for line in log_lines(full) for note in line["notes"] for part in note if part]
    assert COMPASS in kept and UNRETURNED in kept
    secrets = {str(text) for text in kept} | {MEMORY, SCRATCH, "quillon", "Saltwick", "Mira"}
    secrets |= {"Characters", "compass", "barnacles", "Hobb"}
    read_reply = text_of(calls[1][2]).splitlines()[3:]  # the note's text, after its header
    secrets |= {line for line in read_reply if len(line) > 12}
    found = sorted(s for s in secrets if s.lower() in written.lower())
    assert found == []
    # Only names, numbers, hashes and the tools' own vocabulary are left.
    words = {w for w in re.findall(r"[A-Za-z_]{3,}", written) if not re.fullmatch("[a-f]+", w)}
    assert words <= {*json.loads(written.splitlines()[0]), *_ALLOWED_WORDS}, sorted(words)
    # `full` never keeps what the agent writes into the vault either.
    full_log = (full.usage_log_dir / LOG_FILE).read_text("utf-8")
    assert MEMORY not in full_log and SCRATCH not in full_log and COMPASS in full_log


def test_a_log_shared_without_its_key_gives_nothing_back(
    logged: dict[str, tuple[Settings, Conversation]],
) -> None:
    """Issue 35, item 5: every word and path of the vault, hashed every way one can without
    the key, matches none of an `on` log's hashes; the key is not in the log's folder (it is
    in the configuration folder). With the key, the same attack recovers the questions'
    words: what the README says the key protects."""
    settings, _ = logged["on"]
    assert sorted(p.name for p in settings.usage_log_dir.iterdir()) == [LOG_FILE]
    key_file = settings.config_dir / KEY_FILE
    assert key_file.is_file()
    lines = log_lines(settings)
    hashes = {h for line in lines for h in line["words"]}
    hashes |= {t for line in lines for t in line["text"].values() if isinstance(t, str)}
    hashes |= {part for line in lines for note in line["notes"] for part in note if part}
    vault = settings.vault_path
    assert vault is not None
    guesses = {p.relative_to(vault).as_posix() for p in vault.rglob("*.md")}
    for note in vault.rglob("*.md"):
        guesses |= set(terms(note.read_text("utf-8")))
    guesses |= {COMPASS, MARKET, UNRETURNED}

    def recovered(key: bytes) -> set[str]:
        redactor = Redactor("on", key)
        return {guess for guess in guesses if redactor.text(guess) in hashes}

    plain = {g for g in guesses if hashlib.sha256(g.encode()).hexdigest()[:16] in hashes}
    assert plain == set() and recovered(b"") == set() and recovered(b"\0" * 32) == set()
    with_key = recovered(bytes.fromhex(key_file.read_text("ascii").strip()))
    assert {"compass", "saltwick", UNRETURNED} <= with_key  # the attack itself works


_ALLOWED_WORDS = {
    *(tool for tool, _ in CONVERSATION),
    "query", "limit", "path", "topic", "content", "tags", "text", "depth", "invalid",
    "true", "false", "null", "NoteNotFound", "invalid_arguments", "exact", "smart",
    "env", "prf", "lexical", "fallback", "local", "index", "link", "links", "backlinks",
}  # fmt: skip


async def test_with_the_log_off_nothing_is_written(vault_copy: Path, tmp_path: Path) -> None:
    settings = folder_settings(vault_copy, tmp_path / "config", cache_dir=tmp_path / "cache")
    assert settings.usage_log == "off"
    async with Client(build_server(settings)) as client:
        answer = await client.call_tool("vault_search_map", {"query": "compass"})
    assert not answer.is_error
    assert not settings.usage_log_dir.exists()


def test_the_setting_takes_switch_words_and_refuses_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for word, mode in (("TRUE", "on"), ("off", "off"), ("Full", "full"), ("no", "off")):
        monkeypatch.setenv("OBSIDIAN_USAGE_LOG", word)
        assert Settings().usage_log == mode
    # The configuration file's `usage_log = true` arrives as a boolean.
    assert Settings.model_validate({"usage_log": True}).usage_log == "on"
    monkeypatch.setenv("OBSIDIAN_USAGE_LOG", "verbose")
    with pytest.raises(ValueError, match="'off', 'on' or 'full'"):
        Settings()


async def test_the_log_rotates_at_its_size_and_keeps_two_files(
    vault_copy: Path, tmp_path: Path
) -> None:
    settings = usage_settings(vault_copy, tmp_path, usage_log_max_bytes=3000)
    # Two servers, one log, their calls taking turns: the rotated file and the new one
    # hold both sessions' latest calls.
    async with Client(build_server(settings)) as one, Client(build_server(settings)) as two:
        for n in range(15):
            for client in (one, two):
                await client.call_tool("vault_search_map", {"query": f"compass harbour {n}"})
    logs = sorted(p.name for p in settings.usage_log_dir.iterdir() if "jsonl" in p.name)
    assert logs == [ROTATED_FILE, LOG_FILE]
    for name in logs:
        assert (settings.usage_log_dir / name).stat().st_size < 3000 + 1000
    log = read_log(LogFiles(settings.usage_log_dir))
    assert log.skipped == 0 and 3 <= len(log.calls) < 30
    assert len({call.session for call in log.calls}) == 2


# --- faults ----------------------------------------------------------------------------


async def _answers(settings: Settings, count: int) -> list[CallToolResult]:
    async with Client(build_server(settings)) as client:
        return [
            await client.call_tool("vault_search_map", {"query": f"compass {n}"})
            for n in range(count)
        ]


async def test_a_full_disk_fails_no_call_and_the_log_resumes(
    vault_copy: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = usage_settings(vault_copy, tmp_path)
    settings.usage_log_dir.mkdir(parents=True)
    log = settings.usage_log_dir / LOG_FILE
    log.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    server = build_server(settings)
    with caplog.at_level(logging.WARNING, logger="obsidian_mcp.usage"):
        async with Client(server) as client:
            for n in range(3):
                answer = await client.call_tool("vault_search_map", {"query": f"compass {n}"})
                assert not answer.is_error
            log.unlink()
            answer = await client.call_tool("vault_tree", {"depth": 1})
            assert not answer.is_error
    failures = [r.message for r in caplog.records if "cannot write" in r.message]
    assert len(failures) == 1 and "No space left on device" in failures[0]
    assert any("writing to" in r.message and "again" in r.message for r in caplog.records)
    assert [line["tool"] for line in log_lines(settings)] == ["vault_tree"]


def test_a_read_only_cache_folder_fails_no_call(vault_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    prefix = WITHOUT_OVERRIDE if os.geteuid() == 0 else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBSIDIAN_", "XDG_"))}
    env |= {
        "OBSIDIAN_CACHE_DIR": str(cache),
        "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
        "OBSIDIAN_USAGE_LOG": "on",
    }
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "obsidian_mcp", "call", "--vault", str(vault_copy),
         "vault_read_note", f"path={UNRETURNED}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Hobb" in done.stdout
    assert "usage log: cannot write" in done.stderr and "Permission denied" in done.stderr
    assert list(cache.iterdir()) == []


async def test_a_log_deleted_or_truncated_while_the_server_writes(
    vault_copy: Path, tmp_path: Path
) -> None:
    settings = usage_settings(vault_copy, tmp_path)
    log = settings.usage_log_dir / LOG_FILE
    async with Client(build_server(settings)) as client:

        async def ask(n: int) -> None:
            answer = await client.call_tool("vault_search_map", {"query": f"compass {n}"})
            assert not answer.is_error

        for n in range(3):
            await ask(n)
        log.unlink()
        await ask(3)
        await ask(4)
        assert len(log_lines(settings)) == 2
        data = log.read_bytes()
        log.write_bytes(data[:-20])  # cut inside the last line
        await ask(5)
        await ask(6)
        # Another process deleting and truncating the log the whole time.
        stop = threading.Event()

        def vandal() -> None:
            while not stop.is_set():
                try:
                    if log.exists():
                        os.truncate(log, max(0, log.stat().st_size // 2))
                    log.unlink(missing_ok=True)
                except OSError:
                    pass

        thread = threading.Thread(target=vandal)
        thread.start()
        try:
            for n in range(7, 27):
                await ask(n)
        finally:
            stop.set()
            thread.join()
    read = read_log(LogFiles(settings.usage_log_dir))
    assert read.lines == len(read.calls) + read.skipped


async def test_stats_skips_a_torn_line_and_reads_the_rest(vault_copy: Path, tmp_path: Path) -> None:
    settings = usage_settings(vault_copy, tmp_path)
    await _answers(settings, 3)
    log = settings.usage_log_dir / LOG_FILE
    log.write_bytes(log.read_bytes()[:-30])  # the last line torn, as by a crash
    read = read_log(LogFiles(settings.usage_log_dir))
    assert (len(read.calls), read.skipped) == (2, 1)
    await _answers(settings, 1)  # the next line starts a line of its own
    read = read_log(LogFiles(settings.usage_log_dir))
    assert (len(read.calls), read.skipped) == (3, 1)


async def test_a_lone_surrogate_and_markup_survive_the_log_and_the_html(
    vault_copy: Path, tmp_path: Path
) -> None:
    settings = usage_settings(vault_copy, tmp_path, "full")
    hostile = "<script>alert('x')</script> compass"
    async with Client(build_server(settings)) as client:
        refused = await client.call_tool("vault_semantic_query", {"query": "bad \ud800 text"})
        await client.call_tool("vault_semantic_query", {"query": hostile})
        await client.call_tool("vault_semantic_query", {"query": hostile + " again"})
    assert refused.is_error
    read = read_log(LogFiles(settings.usage_log_dir))
    assert read.skipped == 0 and read.calls[0].question == "bad \ud800 text"
    page = html_report(usage_stats(read))
    assert "<script>" not in page and "&lt;script&gt;" in page


# --- obsidian-mcp stats ----------------------------------------------------------------


def test_stats_prints_the_table_json_and_a_self_contained_page(
    logged: dict[str, tuple[Settings, Conversation]], tmp_path: Path
) -> None:
    settings, _ = logged["full"]
    cache = tmp_path / "cache"
    shutil.copytree(settings.usage_log_dir, cache / "usage")
    old = json.loads((cache / "usage" / LOG_FILE).read_text("utf-8").splitlines()[0])
    old |= {"at": "2020-01-01T10:00:00.000+00:00", "session": "old"}
    with (cache / "usage" / ROTATED_FILE).open("w", encoding="utf-8") as rotated:
        rotated.write(json.dumps(old) + "\n")
    env = {"OBSIDIAN_CACHE_DIR": str(cache)}

    everything = json.loads(run_cli("stats", "--json", env=env).stdout)
    recent = run_cli("stats", "--json", "--since", "7d", env=env)
    assert recent.returncode == 0, recent.stderr
    week = json.loads(recent.stdout)
    assert (everything["calls"], week["calls"]) == (len(CONVERSATION) + 1, len(CONVERSATION))
    assert (everything["sessions"], week["sessions"]) == (2, 1)
    expected = usage_stats(read_log(LogFiles(settings.usage_log_dir))).data()
    assert {k: v for k, v in week.items() if k not in ("since", "log")} == {
        k: v for k, v in expected.items() if k not in ("since", "log")
    }
    assert week["follow_ups"]["misses"][0]["question"] == MARKET

    page = tmp_path / "usage.html"
    table = run_cli("stats", "--html", str(page), env=env)
    assert table.returncode == 0, table.stderr
    assert "vault_semantic_query" in table.stdout and "Follow-ups of 6 searches" in table.stdout
    assert "Per vault" not in table.stdout and week["vaults"] == {}  # one vault: no vault named
    html = page.read_text("utf-8")
    assert html.count("<svg") == 4
    for colour in (CALLS_COLOUR, ERRORS_COLOUR, MEDIAN_COLOUR, P90_COLOUR, DAY_COLOUR):
        assert f'fill="{colour}"' in html
    # Nothing is fetched: no script, style sheet, image or font from anywhere.
    assert not re.search(r"<script|<link|<img|src=|url\(|@import", html)
    assert re.findall(r"https?://[^\s\"']+", html) == ["http://www.w3.org/2000/svg"] * 4
    assert "Saltwick Market" in html and "Misses" in html


async def test_with_several_vaults_stats_gives_each_vault_its_calls_and_misses(
    tmp_path: Path,
) -> None:
    lore = copy_fixture_vault(tmp_path / "lore")
    work = tmp_path / "work"
    (work / "Dev").mkdir(parents=True)
    (work / "Dev" / "Deploys.md").write_text("# Deploys\n\nWe deploy on Tuesdays.\n", "utf-8")
    settings = usage_settings(lore, tmp_path, "full")
    vaults = configured_vaults(settings, [f"lore={lore}", f"work={work}"])
    async with Client(build_server(settings, vaults=vaults)) as client:
        for tool, arguments in [
            ("vault_semantic_query", {"query": COMPASS, "limit": 2}),  # every vault
            ("vault_peek_file", {"path": UNRETURNED, "vault": "lore"}),  # read elsewhere
            ("vault_semantic_query", {"query": "When do we deploy?", "vault": "work"}),
            ("vault_read_note", {"path": "Dev/Deploys.md", "vault": "work"}),  # returned
            ("vault_read_note", {"path": "Nobody.md", "vault": "work"}),  # NoteNotFound
        ]:
            await client.call_tool(tool, arguments)
    assert [line["vaults"] for line in log_lines(settings)] == [
        ["lore", "work"], ["lore"], ["work"], ["work"], ["work"]
    ]  # fmt: skip

    stats = usage_stats(read_log(LogFiles(settings.usage_log_dir)))
    by_vault = {v.vault: v for v in stats.vaults}
    assert [v.vault for v in stats.vaults] == ["work", "lore"]  # most calls first
    assert (by_vault["lore"].calls, by_vault["lore"].errors) == (2, 0)
    assert (by_vault["work"].calls, by_vault["work"].errors) == (4, 1)
    lore_follow, work_follow = (stats.follow_ups.by_vault[name] for name in ("lore", "work"))
    # The search over both vaults was followed by a read of a note it had not returned
    # (before the next search): a miss for each vault it searched.
    assert (lore_follow.searches, lore_follow.missed) == (1, 1)
    assert (work_follow.searches, work_follow.missed) == (2, 1)
    data = stats.data()
    assert data["vaults"]["work"]["calls"] == 4
    assert data["vaults"]["work"]["follow_ups"]["missed"] == 1
    assert data["calls"] == 5  # a call over both vaults is one call

    table = terminal_report(stats)
    assert "Per vault (a search over every vault counts under each):" in table
    assert re.search(r"^work +4 +1 .* 2 +1 \(50\.0%\)$", table, re.MULTILINE), table
    assert "<h2>Per vault</h2>" in html_report(stats)
    # From the read on: lore was used but not searched.
    read_at = datetime.fromisoformat(log_lines(settings)[1]["at"])
    later = usage_stats(read_log(LogFiles(settings.usage_log_dir)), since=read_at)
    assert later.data()["vaults"]["lore"]["calls"] == 1
    assert later.data()["vaults"]["lore"]["follow_ups"]["searches"] == 0
    assert re.search(r"^lore +1 +0 .* 0 +0 \(-\)$", terminal_report(later), re.MULTILINE)

    # A hand-edited line whose vaults are not a list is skipped, not read letter by letter.
    odd = log_lines(settings)[0] | {"vaults": "lore"}
    with (settings.usage_log_dir / LOG_FILE).open("a", encoding="utf-8") as log:
        log.write(json.dumps(odd) + "\n")
    read = read_log(LogFiles(settings.usage_log_dir))
    assert (len(read.calls), read.skipped) == (5, 1)


def test_stats_says_what_to_do_without_a_log_or_with_a_bad_period(tmp_path: Path) -> None:
    env = {"OBSIDIAN_CACHE_DIR": str(tmp_path)}
    missing = run_cli("stats", env=env)
    assert missing.returncode == 1
    assert "no usage log in" in missing.stderr and "OBSIDIAN_USAGE_LOG=on" in missing.stderr
    bad = run_cli("stats", "--since", "last tuesday", env=env)
    assert bad.returncode == 2
    assert "--since='last tuesday' is not a date or time" in bad.stderr


def test_the_benchmark_counts_the_follow_ups_as_stats_does(
    logged: dict[str, tuple[Settings, Conversation]],
) -> None:
    """`bench.economy.usage_check` counts from what its client saw (reply texts, arguments sent);
    on this conversation both signals occur, so neither side can drift unseen."""
    settings, conversation = logged["on"]
    seen = [
        (tool, arguments, CallResult(text_of(r), estimate_tokens(text_of(r)), 0.0, r.is_error))
        for tool, arguments, r in conversation
    ]
    counted = usage_check.bench_figures([seen], definitions=0)
    stats = usage_stats(read_log(LogFiles(settings.usage_log_dir)))
    found = stats.data()
    assert counted["follow_ups"] == {key: found["follow_ups"][key] for key in counted["follow_ups"]}
    assert counted["follow_ups"]["read_elsewhere"] == 1
    assert counted["follow_ups"]["searched_again"] == 1
    for tool, figures in counted["tools"].items():
        assert figures["total"] == found["tools"][tool]["tokens"]["total"]


def test_a_key_kept_beside_the_log_moves_to_the_configuration_folder(tmp_path: Path) -> None:
    """The key an earlier version kept in the log's folder moves, so hashes stay the same."""
    from obsidian_mcp.usage.log import installation_key

    log_folder, config = tmp_path / "usage", tmp_path / "config"
    log_folder.mkdir()
    (log_folder / "key").write_text("ab" * 32, "ascii")
    assert installation_key(config, log_folder) == bytes.fromhex("ab" * 32)
    assert not (log_folder / "key").exists() and (config / KEY_FILE).is_file()
    assert installation_key(config, log_folder) == bytes.fromhex("ab" * 32)
