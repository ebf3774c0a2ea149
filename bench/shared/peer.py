"""The real peer: ``mcp-obsidian`` from PyPI (MarkusPfundstein's), in its own environment.

It is installed once into ``<out>/peer-venv`` with the interpreter running the benchmark
(``python -m venv`` then ``pip install``), and a marker file remembers what was installed
so later runs start at once. It runs as a stdio MCP server, configured the way its
README says, by environment variables: ``OBSIDIAN_API_KEY``, ``OBSIDIAN_HOST`` and
``OBSIDIAN_PORT``. It builds ``https://HOST:PORT`` itself and never verifies the
certificate (``verify_ssl=False`` is hard-coded), so it talks to the stand-in's
self-signed HTTPS without a CA file. Its stderr goes to a log file beside the results.

The strategy an agent follows with it, with the same keywords as the drill-down:
``obsidian_simple_search(query, context_length=100)``, then
``obsidian_get_file_contents(filepath)`` of the best-scored file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.shared.harness import KeywordPicker, Question, Session
from tests.standin.process import StandinProcess

PEER_PACKAGE = "mcp-obsidian"
PEER_REQUIREMENT = f"{PEER_PACKAGE}==0.2.3"
SEARCH_TOOL = "obsidian_simple_search"
READ_TOOL = "obsidian_get_file_contents"
CONTEXT_LENGTH = 100


@dataclass(frozen=True)
class PeerInstall:
    venv: Path
    version: str

    @property
    def command(self) -> Path:
        return self.venv / "bin" / PEER_PACKAGE


def _installed_version(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({PEER_PACKAGE!r}))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def ensure_peer(venv: Path) -> PeerInstall:
    """Install the peer into ``venv`` unless the marker says this requirement is there."""
    marker = venv / "bench-peer-installed"
    python = venv / "bin" / "python"
    if marker.exists() and marker.read_text("utf-8").strip() == PEER_REQUIREMENT:
        return PeerInstall(venv, _installed_version(python))
    print(f"installing the peer {PEER_REQUIREMENT} into {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            PEER_REQUIREMENT,
        ],
        check=True,
    )
    marker.write_text(PEER_REQUIREMENT + "\n", "utf-8")
    return PeerInstall(venv, _installed_version(python))


def peer_params(peer: PeerInstall, standin: StandinProcess) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(peer.command),
        env={
            "OBSIDIAN_API_KEY": standin.api_key,
            "OBSIDIAN_HOST": "127.0.0.1",
            "OBSIDIAN_PORT": str(standin.port),
        },
    )


@asynccontextmanager
async def peer_session(
    peer: PeerInstall, standin: StandinProcess, log: Path
) -> AsyncIterator[Session]:
    """The peer as a stdio subprocess, driven by the same SDK client as our server."""
    with log.open("a", encoding="utf-8") as errlog:
        transport = stdio_client(peer_params(peer, standin), errlog=errlog)
        async with Client(transport, read_timeout_seconds=300) as client:
            yield Session(client)


def top_file(search_text: str) -> str | None:
    """The best-scored filename of the peer's search answer (a JSON list)."""
    try:
        hits = json.loads(search_text)
    except ValueError:
        return None
    if not isinstance(hits, list) or not hits:
        return None
    return str(max(hits, key=lambda hit: hit.get("score") or 0)["filename"])


async def peer_calls(session: Session, picker: KeywordPicker, question: Question) -> None:
    """The peer's strategy for one question; the caller records the calls."""
    search = await session.call(
        SEARCH_TOOL,
        {"query": picker.pick(question.question), "context_length": CONTEXT_LENGTH},
    )
    top = None if search.is_error else top_file(search.text)
    if top is not None:
        await session.call(READ_TOOL, {"filepath": top})
